"""benchmarks/sglang_prefill_decomposition.py's synchronized wave (issue 33, the held-out SGLang Qwen3-235B rows):
passes, stalls and TTFTs against hand-computed values."""

from __future__ import annotations

import pytest

from conftest import benchmark_module


def _module():
    return benchmark_module("sglang_prefill_decomposition")


def test_wave_of_six_4000_token_prompts_in_8192_token_passes():
    # 24000 tokens: passes of 8192, 8192, 7616 tokens, 204.8 / 204.8 / 190.4 ms at 100 ms per 4000;
    # prompts 0-1 end in pass 0, 2-3 in pass 1, 4-5 in pass 2
    passes, stall, ttft = _module().wave_ms(6, 4000, 8192, 100.0, 101)
    assert passes == 3
    # stalls over 100 gaps: 2 x (204.8 + 190.4) / 100, 2 x 190.4 / 100, 2 x 0, over 6 requests
    assert stall == pytest.approx((2 * 3.952 + 2 * 1.904) / 6)
    # first tokens at 204.8 (x2), 409.6 (x2), 600.0 (x2)
    assert ttft == pytest.approx((2 * 204.8 + 2 * 409.6 + 2 * 600.0) / 6)


def test_a_wave_in_one_pass_never_stalls_the_decodes():
    passes, stall, ttft = _module().wave_ms(2, 4000, 8192, 184.0, 100)
    assert (passes, stall) == (1, 0.0)
    assert ttft == pytest.approx(2 * 184.0)
