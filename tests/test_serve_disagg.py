"""Disaggregated prefill/decode pools (search/serve_disagg.py): KV transfer and pool sizing by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from parallmelism.config import load_option
from parallmelism.search.serve_disagg import disaggregated_plan, kv_transfer_ms
from parallmelism.specs import InferenceWorkload
from parallmelism.specs.plan import PlanSpec
from tests.conftest import invoke

HW = load_option("hardware", "h100-sxm-80gb")
ENGINE = load_option("engine", "trtllm")


def test_kv_transfer_is_the_prompt_cache_over_the_nics():
    m = load_option("model", "llama3.1-70b")
    wl = InferenceWorkload(input_len=2048)
    cache = 2 * 80 * 8 * 128 * 2 * 2048  # 2·L·g·d·bf16 bytes per token · prompt tokens
    got = kv_transfer_ms(m, HW, wl, np.array([8]), np.array([1]), np.array([1]))[0]
    assert got == pytest.approx((cache / 8 / (50e9 * 0.94) + 5e-6) * 1e3, rel=1e-12)
    mla = load_option("model", "deepseek-v3")  # latent: 61·576 values per token
    got = kv_transfer_ms(
        mla, HW, InferenceWorkload(input_len=1000, kv_dtype="fp8"), np.array([1]), np.array([1]), np.array([1])
    )[0]
    assert got == pytest.approx((61 * 576 * 1000 / (50e9 * 0.94) + 5e-6) * 1e3, rel=1e-12)


def test_pools_sized_by_hand():
    class WL:
        input_len, output_len, prefix_cache_hit, kv_dtype = 1000, 101, 0.0, "bf16"

    m = load_option("model", "llama3.1-8b")
    rows = pd.DataFrame(
        {
            "ngpus": [1, 1],
            "dp": [1, 1],
            "tp": [1, 1],
            "pp": [1, 1],
            "sp": [1, 1],
            "ep": [1, 1],
            "batch": [1, 32],
            "prefill_ms": [100.0, 300.0],
            "decode_step_ms": [5.0, 10.0],
            "spec_tokens_per_step": [1.0, 1.0],
            "fits": [True, True],
        }
    )
    plan = PlanSpec(qps=16, load=0.8, tpot_ms=12)
    dis = disaggregated_plan(rows, m, HW, WL, ENGINE, plan, 16.0)
    # prefill: 16 req/s x 0.1 s / 0.8 = 2 replicas; rho = 0.8, wait = 0.8·0.1/(2·0.2) = 0.2 s
    p = dis["prefill"]
    assert p["replicas"] == 2
    assert p["ttft_ms"] == pytest.approx(ENGINE.request_overhead_ms + 300.0 + p["kv_transfer_ms"])
    # decode: batch 32 at 10 ms -> 32 / (100 x 0.01) = 32 req/s; 16 / (32 x 0.8) -> 1 replica;
    # batch 1 at 5 ms -> 2 req/s -> 10 replicas
    d = dis["decode"]
    assert d["batch"] == 32 and d["replicas"] == 1
    # capacity at 100 % busy: 2 replicas / 0.1 s = 20 prompts/s; 1 replica x 32 req/s
    assert p["pool_rps"] == pytest.approx(20.0) and d["pool_rps"] == pytest.approx(32.0)
    assert dis["total_gpus"] == 3


def test_plan_serve_compares_disaggregated_with_colocated(tmp_path):
    out = tmp_path / "p.csv"
    code, text = invoke(
        "plan", "serve", "model=llama3.1-8b", "qps=20", "ttft_ms=500", "itl_ms=20", "grid.ngpus=[1,2]", "--out", out
    )
    assert code == 0, text
    summary = (tmp_path / "p.summary.md").read_text()
    assert "disaggregated prefill/decode" in summary and "P:D = " in summary
    assert "disaggregated vs colocated" in summary


@pytest.mark.parametrize(
    "args,text",
    [
        (["prefill_gpus=1", "decode_gpus=16"], "prefill pool of 1 GPU holds no serving layout"),
        (
            ["workload.weight_dtype=fp8", "workload.precision=fp8", "prefill_gpus=8", "decode_gpus=2"],
            "decode pool of 2 GPUs cannot serve 20 requests/s",
        ),
        (["prefill_gpus=8"], "needs both prefill_gpus= and decode_gpus="),
    ],
)
def test_fixed_pd_split_that_does_not_work_is_one_sentence(args, text):
    code, out = invoke(
        "plan", "serve", "model=llama3.1-70b", "qps=20", "ttft_ms=500", "itl_ms=25", "grid.ngpus=[2,4,8]", *args
    )
    assert code == 2 and text in out and "Traceback" not in out and out.strip().count("\n") == 0


def test_fixed_pd_split_uses_exactly_the_given_pools(tmp_path):
    out = tmp_path / "p.csv"
    code, text = invoke(
        "plan",
        "serve",
        "model=llama3.1-70b",
        "qps=20",
        "ttft_ms=500",
        "itl_ms=25",
        "grid.ngpus=[2,4,8]",
        "workload.weight_dtype=fp8",
        "workload.precision=fp8",
        "prefill_gpus=8",
        "decode_gpus=16",
        "--out",
        out,
    )
    assert code == 0, text
    assert "P:D = 8:16" in (tmp_path / "p.summary.md").read_text()
