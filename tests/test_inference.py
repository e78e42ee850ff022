"""Serving cost model (cost/inference*.py, grid/inference.py) against closed forms and references.

Reference values: exact parameter counts from shared/reference/model_architectures.csv, the
KV-cache closed form of formulas.md (2·L·g·d·bytes·context·batch ÷ min(t, g) ÷ p), HBM bandwidth
from the accelerator datasheet (hardware YAML), the seed's GQA replication argument (Llama-3-70B:
64 query heads, 8 KV heads; TP16 keeps one whole KV head per rank).
"""

from __future__ import annotations

import csv

import numpy as np
import pandas as pd
import pytest

from conftest import shared_reference
from parallmelism.config.kernel_tables import kernel_model
from parallmelism.config import load_option
from parallmelism.cost.inference import breakdown_for_row
from parallmelism.cost.inference_ops import weight_elements_per_gpu
from parallmelism.engine import evaluate
from parallmelism.specs import GridSpec, InferenceWorkload, RunConfig
from parallmelism.units import GIB

MODELS = {}
TRTLLM = load_option("engine", "trtllm")


def model(name):
    if name not in MODELS:
        MODELS[name] = load_option("model", name)
    return MODELS[name]


def run_of(model_name="llama3.1-70b", hardware="h100-sxm-80gb", grid=None, **wl):
    grid = {"ngpus": [8], "tp": [8], "pp": [1], "sp": [1], **(grid or {})}
    return RunConfig(
        model=model(model_name),
        hardware=load_option("hardware", hardware),
        workload=InferenceWorkload(**wl),
        grid=GridSpec(**grid),
        engine=TRTLLM,
    )


def one(run):
    df, _ = evaluate(run)
    assert len(df) == 1, df
    return df.iloc[0]


def rows(run):
    df, _ = evaluate(run)
    return df


def reference_params():
    with open(shared_reference("model_architectures.csv")) as f:
        return {r["model"]: int(r["total_params"]) for r in csv.DictReader(f) if r.get("total_params")}


# ---------------------------------------------------------------- memory


@pytest.mark.parametrize("name", ["llama3.1-8b", "llama3.1-70b", "llama3.1-405b", "mixtral-8x7b"])
def test_weight_elements_sum_to_the_exact_parameter_count(name):
    ref = reference_params()
    if name not in ref:
        pytest.skip(f"{name} has no params_total in model_architectures.csv")
    linear, half = weight_elements_per_gpu(model(name), 1, 1, model(name).layers, 1)
    assert linear + half == ref[name]


def test_kv_cache_closed_form_llama31_70b():
    # 2 (K and V) · 80 layers · 8 KV heads · 128 head dim · 2 bytes = 327,680 B per token
    per_token = 2 * 80 * 8 * 128 * 2
    assert per_token == 327_680
    ctx, b = 4096 + 1024, 16
    for tp, kv_gpus in [(1, 1), (2, 2), (4, 4), (8, 8)]:
        r = one(run_of(grid={"ngpus": [tp], "tp": [tp]}, input_len=4096, output_len=1024, batch=b))
        assert r["mem_kv_cache_gib"] * GIB == pytest.approx(per_token * ctx * b / kv_gpus, rel=1e-12)
    # pp splits layers (80/4 = 20 per stage); sp splits the context
    r = one(run_of(grid={"ngpus": [32], "tp": [8], "pp": [4], "sp": [1]}, input_len=4096, output_len=1024, batch=b))
    assert r["mem_kv_cache_gib"] * GIB == pytest.approx(per_token * ctx * b / 8 / 4, rel=1e-12)
    r = one(run_of(grid={"ngpus": [16], "tp": [8], "sp": [2]}, input_len=4096, output_len=1024, batch=b))
    assert r["mem_kv_cache_gib"] * GIB == pytest.approx(per_token * ctx * b / 8 / 2, rel=1e-12)


def test_kv_replication_appears_exactly_when_tp_exceeds_kv_heads():
    # GB200 NVL72: a 72-GPU NVLink domain, so tp up to 64 is a valid layout for 64 query heads
    df = rows(
        run_of(
            hardware="gb200-nvl72",
            grid={"ngpus": [64], "tp": [1, 2, 4, 8, 16, 32, 64], "pp": [1]},
            input_len=2048,
            output_len=256,
            batch=8,
        )
    )
    df = df[df["sp"] == 1].set_index("tp")
    g = 8
    for tp, r in df.iterrows():
        assert r["kv_replication"] == (tp // g if tp > g else 1)
    # per GPU KV: falls as 1/tp up to tp = g, then stays at one whole KV head per rank
    kv = df["mem_kv_cache_gib"]
    assert kv[8] == pytest.approx(kv[1] / 8, rel=1e-12)
    assert kv[16] == pytest.approx(kv[8], rel=1e-12) and kv[64] == pytest.approx(kv[8], rel=1e-12)


def test_fp8_weights_halve_the_linear_weight_bytes():
    bf16 = one(run_of(weight_dtype="bf16"))
    fp8 = one(run_of(weight_dtype="fp8", precision="fp8"))
    m = model("llama3.1-70b")
    linear, half = weight_elements_per_gpu(m, 8, 1, 80, 1)
    # linear layers go from 2 to 1 byte per weight; norms, embedding and head stay 16-bit
    assert bf16["mem_weights_gib"] * GIB == pytest.approx(2 * linear + 2 * half, rel=1e-12)
    assert fp8["mem_weights_gib"] * GIB == pytest.approx(1 * linear + 2 * half, rel=1e-12)
    # decode reads: every decoder linear op's weight bytes halve exactly
    KM = kernel_model(load_option("hardware", "h100-sxm-80gb"))
    rec16 = {(r["phase"], r["op"]): r for r in breakdown_for_row(bf16.to_dict(), m, *_hw_wl(bf16=True), KM, TRTLLM)}
    rec8 = {(r["phase"], r["op"]): r for r in breakdown_for_row(fp8.to_dict(), m, *_hw_wl(bf16=False), KM, TRTLLM)}
    for op in ("qkv_proj", "output_proj", "gate_up_proj", "down_proj"):
        assert rec8[("decode", op)]["weight_bytes"] == pytest.approx(rec16[("decode", op)]["weight_bytes"] / 2)


def _hw_wl(bf16: bool):
    hw = load_option("hardware", "h100-sxm-80gb")
    wl = InferenceWorkload() if bf16 else InferenceWorkload(weight_dtype="fp8", precision="fp8")
    return hw, wl


def test_max_batch_is_the_largest_batch_that_fits():
    r = one(run_of(input_len=2048, output_len=2048, batch=1))
    mb = int(r["max_batch"])
    assert mb > 1
    assert one(run_of(input_len=2048, output_len=2048, batch=mb))["fits"]
    assert not one(run_of(input_len=2048, output_len=2048, batch=mb + 1))["fits"]


# ---------------------------------------------------------------- time


@pytest.mark.parametrize(
    "name,tp,batch,ctx",
    [
        ("llama3.1-8b", 1, 1, 1024),
        ("llama3.1-8b", 1, 64, 4096),
        ("llama3.1-70b", 4, 8, 8192),
        ("llama3.1-70b", 8, 32, 2048),
    ],
)
def test_decode_latency_bounded_below_by_bytes_over_hbm_bandwidth(name, tp, batch, ctx):
    m = model(name)
    hw = load_option("hardware", "h100-sxm-80gb")
    out = 256
    r = one(run_of(name, grid={"ngpus": [tp], "tp": [tp]}, input_len=ctx, output_len=out, batch=batch))
    # weights read once per step: every parameter except the input embedding table (rows are gathered)
    n_read = reference_params()[name] - m.vocab * m.hidden
    kv = 2 * m.layers * m.g * m.d * 2 * (ctx + out / 2) * batch  # mean context of the decode steps
    bound_s = (n_read * 2 / tp + kv / min(tp, m.g)) / (hw.hbm_bandwidth_gbps * 1e9)
    assert r["decode_step_ms"] * 1e-3 >= bound_s
    assert r["tpot_ms"] >= r["decode_step_ms"]  # prefills of new requests only add to it
    # and the kernels stream no slower than the slowest measured decode GEMM (h100_decode_kernels.csv:
    # 975 GB/s, 29 % of HBM, a 70B TP8 qkv shard at 256 tokens), +5 % for activation and norm traffic,
    # plus the collectives and the named per-iteration overhead
    decode = pd.read_csv(shared_reference("h100_decode_kernels.csv"), comment="#")
    slowest = decode[decode.kind == "gemm"].gbps.min() / hw.hbm_bandwidth_gbps
    assert r["decode_step_ms"] <= (
        bound_s * 1e3 / slowest * 1.05 + r["time_comm_decode_ms"] + TRTLLM.iteration_overhead_ms
    )


def test_doubling_tp_halves_weight_reads_until_communication_dominates():
    m = model("llama3.1-70b")
    hw, wl = _hw_wl(bf16=True)
    reads, tpot, comm_share = {}, {}, {}
    for tp in (1, 2, 4, 8):
        r = one(run_of(grid={"ngpus": [tp], "tp": [tp]}))
        rec = [x for x in breakdown_for_row(r.to_dict(), m, hw, wl, kernel_model(hw), TRTLLM) if x["phase"] == "decode"]
        reads[tp] = sum(x["weight_bytes"] * x["calls"] for x in rec if x["bound"] != "communication")
        tpot[tp] = r["tpot_ms"]
        comm_share[tp] = r["time_comm_decode_ms"] / r["tpot_ms"]
    for tp in (2, 4, 8):
        assert reads[tp] / reads[tp // 2] == pytest.approx(0.5, rel=2e-3)  # norms are replicated
        # time follows the reads, plus all-reduces: 160 per step, each a launch plus 2(t−1) ring
        # latency steps (NCCL inside NVLink, 13 us at t = 8), and smaller shards stream slower (measured decode GEMMs:
        # 70B qkv at TP8, 21 MB, 1.3 TB/s; 8B gate_up, 235 MB, 2.5 TB/s): 0.69 from tp 4 to 8
        assert 0.5 < tpot[tp] / tpot[tp // 2] < 0.72
        assert comm_share[tp] > comm_share[tp // 2]
    # a small model on 8 GPUs: the all-reduces are a large share of the step (diminishing returns)
    s1 = one(run_of("llama3.1-8b", grid={"ngpus": [1], "tp": [1]}))["tpot_ms"]
    s8 = one(run_of("llama3.1-8b", grid={"ngpus": [8], "tp": [8]}))
    assert s8["tpot_ms"] > s1 / 8 * 1.3
    assert s8["time_comm_decode_ms"] / s8["tpot_ms"] > comm_share[8]


def test_decode_memory_bound_and_prefill_compute_bound_for_a_long_prompt():
    r = one(run_of(input_len=8192, output_len=256, batch=1))
    assert r["bound_prefill"] == "compute" and r["bound_decode"] == "memory"
    assert r["arithmetic_intensity"] < 10  # decode at batch 1: ~1 FLOP per byte


def test_prefill_flops_match_2N_tokens_plus_causal_attention():
    """formulas.md: prefill ≈ 2·N·tokens + attention; causal attention 4·L·q·S(S+1)/2 per sequence."""
    m = model("llama3.1-8b")
    S = 4096
    r = one(run_of("llama3.1-8b", grid={"ngpus": [1], "tp": [1]}, input_len=S, output_len=2, batch=1))
    n_layers = reference_params()["llama3.1-8b"] - 2 * m.vocab * m.hidden - (2 * m.layers + 1) * m.hidden
    expected = 2 * n_layers * S + 4 * m.layers * m.q_dim * S * (S + 1) / 2 + 2 * m.hidden * m.vocab  # head: last token
    assert r["flops_prefill_per_gpu"] == pytest.approx(expected, rel=1e-12)


def test_pipeline_decode_needs_pp_micro_batches_or_idles():
    one_seq = one(run_of(grid={"ngpus": [16], "tp": [8], "pp": [2]}, batch=1))
    assert one_seq["decode_micro_batches"] == 1 and one_seq["decode_pp_idle"] == 0.5
    # PP does not cut latency: one sequence on 2 stages is no faster than on 1 (weights per GPU halve
    # but the token crosses both stages in turn)
    no_pp = one(run_of(grid={"ngpus": [8], "tp": [8], "pp": [1]}, batch=1))
    assert one_seq["tpot_ms"] >= no_pp["tpot_ms"]
    full = one(run_of(grid={"ngpus": [16], "tp": [8], "pp": [2]}, batch=2))
    assert full["decode_pp_idle"] == 0.0


def test_sequence_pipeline_and_prompt_sharding_cut_ttft():
    base = one(run_of(grid={"ngpus": [8], "tp": [8]}, input_len=32768, output_len=16))
    spp = one(run_of(grid={"ngpus": [16], "tp": [8], "pp": [2]}, input_len=32768, output_len=16))
    sp = one(run_of(grid={"ngpus": [16], "tp": [8], "sp": [2]}, input_len=32768, output_len=16))
    assert spp["prefill_chunks"] > 1
    assert spp["ttft_ms"] < base["ttft_ms"]  # chunks overlap across the stages
    assert sp["ttft_ms"] < 0.6 * base["ttft_ms"]  # prompt split in two, K/V gather hidden by attention


def test_moe_decode_reads_only_the_experts_it_routes_to():
    m = model("mixtral-8x7b")
    hw, wl = load_option("hardware", "h100-sxm-80gb"), InferenceWorkload(batch=1)
    r = one(run_of("mixtral-8x7b", grid={"ngpus": [1], "tp": [1], "ep": [1]}, batch=1))
    rec = {(x["phase"], x["op"]): x for x in breakdown_for_row(r.to_dict(), m, hw, wl, kernel_model(hw), TRTLLM)}
    one_expert = 2 * m.hidden * m.moe.ffn_hidden * 2  # gate + up, bf16
    # batch 1, top-2 of 8: exactly two experts' weights are read in a decode step, all eight in prefill
    assert rec[("decode", "experts_gate_up")]["weight_bytes"] == pytest.approx(2 * one_expert)
    assert rec[("prefill", "experts_gate_up")]["weight_bytes"] == pytest.approx(8 * one_expert, rel=1e-6)


def test_expert_parallel_all_to_all_grows_with_imbalance():
    g = {"ngpus": [8], "tp": [1], "pp": [1], "sp": [1], "ep": [8]}
    even = one(run_of("mixtral-8x7b", grid=g, batch=8, moe_imbalance=1.0))
    skew = one(run_of("mixtral-8x7b", grid=g, batch=8, moe_imbalance=2.0))
    assert skew["time_comm_decode_ms"] > even["time_comm_decode_ms"]
    assert skew["tpot_ms"] > even["tpot_ms"]


def test_grid_rules_for_serving_layouts():
    from parallmelism.grid.inference import enumerate_inference_layouts

    m = model("llama3.1-70b")
    hw = load_option("hardware", "h100-sxm-80gb")
    grid = enumerate_inference_layouts(
        m, hw, InferenceWorkload(input_len=1002), GridSpec(ngpus=[16], tp=[16, 8], sp=[1, 2], ep=[1, 2])
    )
    c = grid.columns
    assert grid.dropped["tp_exceeds_scale_up_domain"] > 0
    assert grid.dropped["prompt_not_divisible_by_sp"] > 0  # 1002 % (2·2) != 0
    assert grid.dropped["ep_on_dense_model"] > 0
    assert np.all(c["tp"] <= 8) and np.all(c["ep"] == 1)
    assert np.all(c["ngpus"] == c["tp"] * c["pp"] * c["sp"] * c["dp"])
    assert sum(grid.dropped.values()) + len(c["tp"]) == grid.considered


def test_throughput_and_cost_follow_from_latency():
    r = one(run_of(grid={"ngpus": [16], "tp": [8]}, batch=4, input_len=1000, output_len=500))
    assert r["dp"] == 2
    # TensorRT-LLM schedules with overlap: the first token is sent one mean iteration (one ITL without
    # speculative decoding) after it is computed, and the request ends when its last token is computed
    assert r["e2e_latency_ms"] == pytest.approx(r["ttft_ms"] - r["tpot_ms"] + 499 * r["tpot_ms"])
    assert r["throughput_tokens_per_s"] == pytest.approx(2 * 4 * 500 / (r["e2e_latency_ms"] * 1e-3))
    hw = load_option("hardware", "h100-sxm-80gb")
    assert r["cost_per_million_tokens"] == pytest.approx(
        16 * hw.cost_per_gpu_hour_usd / 3600 / r["throughput_tokens_per_s"] * 1e6
    )


def test_without_flash_attention_the_score_matrix_goes_through_hbm():
    m = model("llama3.1-8b")
    hw = load_option("hardware", "h100-sxm-80gb")
    S = 8192
    recs = {}
    for flash in (True, False):
        wl = InferenceWorkload(input_len=S, output_len=2, flash_attention=flash)
        r = one(run_of("llama3.1-8b", grid={"ngpus": [1], "tp": [1]}, input_len=S, output_len=2, flash_attention=flash))
        recs[flash] = {
            (x["phase"], x["op"]): x for x in breakdown_for_row(r.to_dict(), m, hw, wl, kernel_model(hw), TRTLLM)
        }
    extra = (
        recs[False][("prefill", "attention_qk")]["other_bytes"] - recs[True][("prefill", "attention_qk")]["other_bytes"]
    )
    assert extra == pytest.approx(S * (S + 1) / 2 * m.heads * 2)  # causal pairs x heads x 2 bytes


def test_static_batching_has_no_prefill_interference():
    r = one(run_of(batch=16, batching="static"))
    assert r["serving_load"] == 0 and r["tpot_ms"] == pytest.approx(r["decode_step_ms"])
    c = one(run_of(batch=16))
    assert 0 < c["serving_load"] < 1 and c["tpot_ms"] > c["decode_step_ms"]


def test_expert_parallel_inside_the_tp_group_has_no_all_to_all():
    """Seed's EP: tp=8, ep=8 on Mixtral puts one whole expert per GPU; expert memory equals plain
    TP (E·3·h·I/8 per GPU) and the combine is the TP all-reduce, so no all-to-all is added."""
    m = model("mixtral-8x7b")
    tp_only = one(run_of("mixtral-8x7b", grid={"ngpus": [8], "tp": [8], "ep": [1]}, batch=16))
    ep_tp = one(run_of("mixtral-8x7b", grid={"ngpus": [8], "tp": [8], "ep": [8]}, batch=16))
    assert ep_tp["mem_weights_gib"] == pytest.approx(tp_only["mem_weights_gib"], rel=1e-12)
    hw, wl = load_option("hardware", "h100-sxm-80gb"), InferenceWorkload(batch=16)
    rec = breakdown_for_row(ep_tp.to_dict(), m, hw, wl, kernel_model(hw), TRTLLM)
    assert not any(r["op"] == "ep_all_to_all" for r in rec)
    # one whole expert per GPU: its gate/up weights are 2·h·I elements when touched
    up = next(r for r in rec if r["phase"] == "prefill" and r["op"] == "experts_gate_up")
    assert up["weight_bytes"] == pytest.approx(2 * m.hidden * m.moe.ffn_hidden * 2, rel=1e-6)
