"""MLA serving ops (cost/inference_mla.py) against closed forms from the DeepSeek-V2/V3 papers.

DeepSeek-V2 §2.1 (and V3 §2.1.1): the cache holds c_KV (d_c = kv_lora_rank) and the shared RoPE key
(d_h^R = qk_rope_head_dim) per token and layer, (d_c + d_h^R)·l elements = 4.5·d_h·l with d_c = 4·d_h,
d_h^R = d_h/2 (V2: d_h = 128 -> 576); §2.1.2: W_UK is absorbed into W_Q and W_UV into W_O for
inference, so decode attends over the latent (a 576-wide key, 512-wide value shared by all heads).
Written out here term by term from those definitions (h, a, r_q, r_kv, n, p, v), never from our code.
"""

from __future__ import annotations

import numpy as np
import pytest

from parallmelism.config.kernel_tables import kernel_model
from parallmelism.config import load_option
from parallmelism.cost.inference import breakdown_for_row, decode_terms, prefill_terms
from parallmelism.cost.layout import ServingLayout
from parallmelism.engine import evaluate
from parallmelism.specs import GridSpec, InferenceWorkload, RunConfig
from tests.conftest import invoke

ENGINE = load_option("engine", "trtllm")

H, A, RQ, RKV, N, P, V = 7168, 128, 1536, 512, 128, 64, 128
ATTN_OPS = {
    "q_a_proj",
    "q_a_norm",
    "q_b_proj",
    "kv_a_proj",
    "kv_a_norm",
    "kv_b_proj",
    "attention_qk",
    "attention_pv",
    "q_absorb",
    "attention_latent_qk",
    "attention_latent_pv",
    "v_up",
    "output_proj",
}


def cols_of(tp=1, ep=1, dp=1, batch=1, ngpus=1):
    """One serving layout row (ngpus = dp·tp, as grid/inference.py counts it)."""
    assert ngpus == dp * tp
    return ServingLayout.of(
        {k: np.array([v]) for k, v in dict(tp=tp, pp=1, sp=1, ep=ep, dp=dp, batch=batch, layers_per_stage=61).items()}
    )


def per_layer(terms, field):
    return sum(float(getattr(op, field)[0]) for op in terms["ops"] if op.name in ATTN_OPS)


@pytest.mark.parametrize("tp", [1, 8])
def test_absorbed_decode_flops_and_latent_cache_bytes(tp):
    m, hw = load_option("model", "deepseek-v3"), load_option("hardware", "h100-sxm-80gb")
    wl = InferenceWorkload(
        input_len=4000, output_len=2000, batch=16, kv_dtype="fp8", weight_dtype="fp8", precision="fp8"
    )
    b, ctx, a = 16, 4000 + 2000 / 2, A / tp
    d = decode_terms(m, hw, wl, cols_of(tp=tp, batch=b, ngpus=tp), km=kernel_model(hw))
    proj = h_rq = H * RQ + RQ * a * (N + P) + H * (RKV + P) + a * N * RKV + a * RKV * V + a * V * H
    assert h_rq == proj
    attn = a * ctx * (RKV + P) + a * ctx * RKV  # latent scores (576-wide) and latent values (512-wide)
    assert per_layer(d, "flops") == pytest.approx(2 * b * (proj + attn), rel=1e-12)
    latent = next(op for op in d["ops"] if op.name == "attention_latent_qk")
    # the cache is read once per position as the latent: (d_c + d_h^R) = 576 fp8 bytes, shared by the heads
    assert RKV + P == 4.5 * N == 576
    assert float(latent.other_bytes[0]) == pytest.approx(b * ctx * 576 * 1 + b * a * 576 * 2, rel=1e-12)
    # nothing is decompressed in decode
    assert all(
        float(op.flops[0]) == 0 and float(op.bytes[0]) == 0
        for op in d["ops"]
        if op.name in ("kv_b_proj", "attention_qk", "attention_pv")
    )


def test_prefill_runs_the_naive_form():
    m, hw = load_option("model", "deepseek-v3"), load_option("hardware", "h100-sxm-80gb")
    S = 2048
    wl = InferenceWorkload(input_len=S, output_len=16)
    pre = prefill_terms(m, hw, wl, cols_of(), np.array([1]), km=kernel_model(hw))
    pairs = S * (S + 1) / 2
    proj = S * (H * RQ + RQ * A * (N + P) + H * (RKV + P) + RKV * A * (N + V) + A * V * H)
    attn = pairs * A * (N + P) + pairs * A * V  # causal QKᵀ with d_qk = 192, ·V with d_v = 128
    assert per_layer(pre, "flops") == pytest.approx(2 * (proj + attn), rel=1e-12)
    assert all(float(op.flops[0]) == 0 for op in pre["ops"] if op.name in ("q_absorb", "attention_latent_qk", "v_up"))


def test_decode_reads_far_fewer_kv_bytes_than_the_mha_shape():
    """Per cached token and layer: absorbed 576 values vs a·(n+p+v) = 40960 decompressed (71x)."""
    m, hw = load_option("model", "deepseek-v3"), load_option("hardware", "h100-sxm-80gb")
    wl = InferenceWorkload(input_len=32000, output_len=2, batch=64)
    d = decode_terms(m, hw, wl, cols_of(batch=64), km=kernel_model(hw))
    kv = sum(float(op.other_bytes[0]) for op in d["ops"] if op.name.startswith("attention_latent"))
    ctx = 32001
    assert kv / (64 * ctx * A * (N + P + V) * 2) == pytest.approx(576 / 40960, rel=0.01)


def test_dp_attention_with_expert_parallel_all_to_all_across_nodes():
    """SGLang/vLLM DP attention: tp=1 replicas, experts over ep=16 ranks of two 8-GPU nodes; the
    dispatch + combine all-to-all per MoE layer crosses the scale-out link."""
    m, hw = load_option("model", "deepseek-v3"), load_option("hardware", "h100-sxm-80gb")
    wl = InferenceWorkload(
        input_len=1000, output_len=1000, batch=64, weight_dtype="fp8", precision="fp8", kv_dtype="fp8"
    )
    run = RunConfig(
        model=m, hardware=hw, workload=wl, grid=GridSpec(ngpus=[16], tp=[1], pp=[1], sp=[1], ep=[16]), engine=ENGINE
    )
    df, _ = evaluate(run)
    r = df.iloc[0]
    assert (r["tp"], r["dp"], r["ep"]) == (1, 16, 16) and np.isfinite(r["tpot_ms"])
    rec = {(x["phase"], x["op"]): x for x in breakdown_for_row(r.to_dict(), m, hw, wl, kernel_model(hw), ENGINE)}
    a2a = rec[("decode", "ep_all_to_all")]["time_ms"]
    # 2 x 58 MoE layers, each GPU sends 64 tokens · 8 experts · 7168 · 2 bytes · 15/16 off-rank,
    # at no more than the NIC's 50 GB/s: the all-to-all cannot be faster than that
    bound_ms = 2 * 58 * 64 * 8 * H * 2 * 15 / 16 / 50e9 * 1e3
    assert a2a >= bound_ms
    # every GPU holds all attention weights (replicated, fp8) and 16 of 256 experts per MoE layer;
    # norms, router, embedding and head in 16 bits
    attn = H * RQ + RQ * A * (N + P) + H * (RKV + P) + RKV * A * (N + V) + A * V * H
    linear = 61 * attn + 3 * 3 * H * 18432 + 58 * (16 * 3 * H * 2048 + 3 * H * 2048)
    half = 61 * (2 * H + RKV + RQ) + 58 * H * 256 + 2 * 129280 * H + H
    assert r["mem_weights_gib"] * 2**30 == pytest.approx(linear * 1 + half * 2, rel=1e-9)


def test_sweep_deepseek_v3_serving_runs(tmp_path):
    out = tmp_path / "ds.csv"
    code, text = invoke(
        "sweep",
        "workload=inference",
        "model=deepseek-v3",
        "grid.ngpus=[16]",
        "workload.weight_dtype=fp8",
        "workload.precision=fp8",
        "workload.kv_dtype=fp8",
        f"output.path={out}",
        "--quiet",
    )
    assert code == 0, text
    import pandas as pd

    df = pd.read_csv(out)
    fit = df[df["fits"]]
    assert len(fit) > 0 and (fit["tpot_ms"] > 0).all() and np.isfinite(fit["ttft_ms"]).all()
