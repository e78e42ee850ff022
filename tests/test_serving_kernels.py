"""Serving ops are timed by the kernel model, as training's are (issue 27 "one timing per op kind",
issue 33 item 0): a decode GEMM, a grouped MoE expert GEMM and a one-query attention read get the
time measured for them on the H100 (`tests/data/reference/h100_decode_kernels.csv`, brought into
hardware/kernels/h100-sxm-80gb.csv by `python -m parallmelism.validate.kernel_table`), and the same
GEMM costs the same in a training forward and in a serving pass."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from conftest import shared_reference
from parallmelism.config.compose import load_option
from parallmelism.config.kernel_tables import kernel_model
from parallmelism.cost import inference
from parallmelism.cost.layout import ServingLayout
from parallmelism.cost.flops import layer_ops
from parallmelism.cost.kernels import GROUPED_EXPERT_MATRICES
from parallmelism.cost.roofline import Rates, ops_times
from parallmelism.specs import InferenceWorkload

H100 = load_option("hardware", "h100-sxm-80gb")
KM = kernel_model(H100)
DECODE = pd.read_csv(shared_reference("h100_decode_kernels.csv"), comment="#")


def decode_pass(model_name, batch, tp=1, ep=1, **wl):
    """`inference.decode_terms` of one decode pass of `batch` sequences on one GPU, as {op: seconds per call}."""
    model = load_option("model", model_name)
    cols = {k: np.array([v]) for k, v in dict(tp=tp, pp=1, sp=1, ep=ep, dp=1, batch=batch).items()}
    cols["layers_per_stage"] = np.array([model.layers])
    terms = inference.decode_terms(model, H100, InferenceWorkload(batch=batch, **wl), ServingLayout.of(cols), km=KM)
    return {op.name: float(t[0]) for op, (t, _) in zip(terms["ops"], terms["times"])}


CURVES = pd.read_csv(shared_reference("h100_kernel_curves.csv"), comment="#")
MOE = pd.read_csv(shared_reference("h100_moe_experts.csv"), comment="#")


def measured(kind, shape, tokens, column="s"):
    row = DECODE[(DECODE.kind == kind) & (DECODE["shape"] == shape) & (DECODE.tokens_or_batch == tokens)]
    assert len(row) == 1
    return float(row[column].iloc[0])


def measured_gemm(shape, tokens):
    """A decode GEMM row's time; where the size curves measured the same bf16 shape too, the kernel
    model returns both measurements' geometric mean (duplicates are averaged in log residual)."""
    row = DECODE[(DECODE.kind == "gemm") & (DECODE["shape"] == shape) & (DECODE.tokens_or_batch == tokens)]
    k, n = int(row.k.iloc[0]), int(row.n.iloc[0])
    c = CURVES[(CURVES.family == "gemm") & (CURVES.dtype == "bf16") & (CURVES.m == tokens)]
    times = list(row.s) + list(c[(c.k == k) & (c.n == n)].measured_s)
    return float(np.exp(np.mean(np.log(times))))


@pytest.mark.parametrize("tokens", [1, 8, 32, 64, 128, 256])
def test_a_decode_gemm_takes_the_measured_skinny_gemm_time(tokens):
    """Llama-3.1-8B at TP1: qkv, gate_up and down at `tokens` decode tokens are the measured shapes."""
    t = decode_pass("llama3.1-8b", tokens)
    for op, shape in (("qkv_proj", "8b-tp1-qkv"), ("gate_up_proj", "8b-tp1-gate_up"), ("down_proj", "8b-tp1-down")):
        assert t[op] == pytest.approx(measured_gemm(shape, tokens), rel=1e-6)


def test_a_decode_gemm_at_tp8_takes_the_measured_time():
    """Llama-3.1-70B at TP8, 32 tokens: its qkv shard (8192 → 1280) and down shard (3584 → 8192)."""
    t = decode_pass("llama3.1-70b", 32, tp=8)
    assert t["qkv_proj"] == pytest.approx(measured_gemm("70b-tp8-qkv", 32), rel=1e-6)
    assert t["down_proj"] == pytest.approx(measured_gemm("70b-tp8-down", 32), rel=1e-6)


@pytest.mark.parametrize(
    "tokens, touched, rows",
    [(1, 2, 1.0), (32, 8, 8.0), (256, 8, 64.0)],  # Mixtral-8x7B: tokens·top_k copies over the experts touched
)
def test_the_grouped_expert_kernel_takes_the_measured_grouped_mm_time(tokens, touched, rows):
    """The kernel model's grouped GEMM at a measured MoE row (gate+up and down of `touched` experts in
    one torch._grouped_mm) returns that row's time."""
    t = KM.grouped_gemm_s(rows, 4096, GROUPED_EXPERT_MATRICES * 14336, touched)
    times = [measured("moe", "mixtral-8x7b", tokens, "grouped_mm_s")]
    # the same layer measured again at 64 tokens per expert by h100_moe_experts.csv (1.8 % apart):
    # duplicates are averaged in log residual, so the model returns the two times' geometric mean
    e = MOE[(MOE.model == "mixtral-8x7b") & (MOE.tokens_per_expert == rows) & (MOE.experts == touched)]
    times += list(e.grouped_mm_s)
    assert float(t) == pytest.approx(float(np.exp(np.mean(np.log(times)))), rel=1e-6)


@pytest.mark.parametrize("tokens", [32, 64, 128, 256])
def test_serving_moe_experts_take_about_the_measured_grouped_time(tokens):
    """A Mixtral decode pass's two expert ops (gate+up, down: one grouped kernel each) add up to the
    measured grouped time of the layer within 5 % (each op is its own launch and shape; the
    measured rows time both GEMMs together)."""
    t = decode_pass("mixtral-8x7b", tokens)
    both = t["experts_gate_up"] + t["experts_down"]
    assert both == pytest.approx(measured("moe", "mixtral-8x7b", tokens, "grouped_mm_s"), rel=0.05)


@pytest.mark.parametrize("batch", [1, 16, 64])
@pytest.mark.parametrize("context", [1024, 4096, 16384])
def test_decode_attention_takes_the_measured_one_query_time(batch, context):
    """Llama-3.1-8B at TP1 (32 query, 8 KV heads), bf16 cache, mean context `context`: the layer's two
    attention ops together take the measured SDPA time of that batch and context."""
    out = 64
    t = decode_pass("llama3.1-8b", batch, input_len=context - out // 2, output_len=out)
    got = t["attention_qk"] + t["attention_pv"]
    row = DECODE[(DECODE.kind == "attention") & (DECODE["shape"] == "8b-tp1")]
    want = row[(row.tokens_or_batch == batch) & (row.context == context)].s
    assert got == pytest.approx(float(want.iloc[0]), rel=1e-6)


@pytest.mark.parametrize("seq", [256, 4096])
def test_the_same_gemm_costs_the_same_in_a_training_forward_and_a_serving_pass(seq):
    """Llama-3.1-8B, TP1, bf16: the training forward of qkv at `seq` tokens (micro-batch 1) and a
    serving prefill of one `seq`-token prompt run the same (m, k, n) GEMM: the same seconds."""
    model = load_option("model", "llama3.1-8b")
    train = {op.name: op for op in layer_ops(model, seq, 1, 1, 1, False, True)}
    fwd = float(np.asarray(ops_times([train["qkv"]], Rates(H100, "bf16", KM))[0][0]))
    cols = {k: np.array([v]) for k, v in dict(tp=1, pp=1, sp=1, ep=1, dp=1, batch=1).items()}
    cols["layers_per_stage"] = np.array([model.layers])
    wl = InferenceWorkload(batch=1, input_len=seq, output_len=2)
    pre = inference.prefill_terms(model, H100, wl, ServingLayout.of(cols), np.array([1]), km=KM)
    serving = {op.name: (op, float(t[0])) for op, (t, _) in zip(pre["ops"], pre["times"])}
    op, t = serving["qkv_proj"]
    assert tuple(float(np.asarray(x).reshape(-1)[0]) for x in op.mkn) == tuple(float(x) for x in train["qkv"].mkn)
    assert t == pytest.approx(fwd, rel=1e-12)
