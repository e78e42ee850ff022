"""Speculative decoding and prefix caching (cost/inference_spec.py, prefill terms) against closed forms.

Leviathan et al. 2023 (eq. 1): with acceptance rate a and k drafted tokens a verify step yields
(1 − a^(k+1))/(1 − a) tokens on average. FLOP counts are written out from Llama 3.1 8B's shapes
(h 4096, 32 layers, 32 query / 8 KV heads of 128, FFN 14336, vocab 128256).
"""

from __future__ import annotations

import pytest

from parallmelism.config import load_option
from parallmelism.cost.inference_spec import expected_tokens_per_step
from parallmelism.engine import evaluate
from parallmelism.specs import GridSpec, InferenceWorkload, RunConfig
from tests.conftest import invoke

H, L, A, G, D, I, V = 4096, 32, 32, 8, 128, 14336, 128256


@pytest.mark.parametrize("a,k,e", [(0.0, 3, 1.0), (1.0, 3, 4.0), (0.5, 3, 1.875), (0.8, 1, 1.8)])
def test_expected_tokens_per_step(a, k, e):
    assert expected_tokens_per_step(a, k) == pytest.approx(e)


def row(model="llama3.1-8b", **wl):
    spec = load_option("model", model)
    if wl.get("spec_method") == "mtp":  # the verify-pass arithmetic on an 8B model given one MTP module
        spec = spec.model_copy(update={"mtp_layers": 1})
    run = RunConfig(
        model=spec,
        hardware=load_option("hardware", "h100-sxm-80gb"),
        workload=InferenceWorkload(**wl),
        grid=GridSpec(ngpus=[1], tp=[1], pp=[1], sp=[1]),
        engine=load_option("engine", "trtllm"),
    )
    return evaluate(run)[0].iloc[0]


def test_verify_pass_is_k_plus_one_positions_per_sequence():
    base = row(batch=8, batching="static")
    spec = row(batch=8, batching="static", spec_method="mtp", spec_tokens=3, spec_acceptance=0.6)
    # every GEMM row and every query-key pair x (k+1); the head too
    assert spec["flops_decode_per_gpu"] == pytest.approx(4 * base["flops_decode_per_gpu"], rel=1e-12)
    assert spec["spec_tokens_per_step"] == pytest.approx((1 - 0.6**4) / 0.4)
    # tpot = step / E: more work per step, fewer steps per token
    assert spec["tpot_ms"] == pytest.approx(spec["decode_step_ms"] / spec["spec_tokens_per_step"])
    # weights are read once per verify step, so at batch 8 speculation pays off at a = 0.6
    assert spec["tpot_ms"] < base["tpot_ms"]


def test_zero_acceptance_only_costs():
    """a = 0: one token per step, plus the draft's k steps and the wider verify pass."""
    fp8 = dict(batch=4, weight_dtype="fp8", precision="fp8")
    spec = row("llama3.1-70b", spec_method="draft", draft_model="llama3.1-8b", spec_acceptance=0.0, **fp8)
    plain = row("llama3.1-70b", **fp8)
    assert spec["spec_tokens_per_step"] == 1 and spec["tpot_ms"] > plain["tpot_ms"]


def test_prefix_cache_hit_shortens_prefill_by_the_closed_form():
    S, hit = 4096, 0.75
    pairs = lambda s: s * (s + 1) / 2  # noqa: E731
    lin = 2 * (H * (A * D + 2 * G * D) + A * D * H + 3 * H * I)  # FLOPs per token per layer, linear layers
    attn = 4 * A * D  # QKᵀ and ·V per kept pair per layer

    def flops(h):
        new = S * (1 - h)
        return L * (lin * new + attn * (pairs(S) - pairs(S * h))) + 2 * H * V

    for h in (0.0, hit):
        r = row(input_len=S, output_len=8, prefix_cache_hit=h, batching="static")
        assert r["flops_prefill_per_gpu"] == pytest.approx(flops(h), rel=1e-12)
    fresh, cached = row(input_len=S, output_len=8), row(input_len=S, output_len=8, prefix_cache_hit=hit)
    assert cached["ttft_ms"] < fresh["ttft_ms"]


@pytest.mark.parametrize(
    "args,text",
    [
        (["workload.spec_method=mtp", "workload.spec_acceptance=1.5"], "spec_acceptance"),
        (["workload.spec_method=draft", "workload.draft_model=llama3.1-405b"], "not smaller"),
        (["workload.spec_method=draft"], "needs draft_model"),
        (["workload.prefix_cache_hit=1"], "prefix_cache_hit"),
        (["workload.spec_method=mtp"], "model llama3.1-70b has none (model.mtp_layers=0)"),
    ],
)
def test_bad_speculation_input_is_one_sentence(args, text):
    code, out = invoke("sweep", "workload=inference", "model=llama3.1-70b", "grid.ngpus=[8]", *args, "--quiet")
    assert code == 2 and text in out and "Traceback" not in out and out.strip().count("\n") == 0
