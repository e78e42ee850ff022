"""Issue 32 item 2: the kernels the tables lacked, against their H100 measurements
(tests/data/reference/h100_attention_long.csv and h100_moe_experts.csv, brought into
hardware/kernels/h100-sxm-80gb.csv by `python -m parallmelism.validate.kernel_table`):
long-context attention per context-parallel variant, and fine-grained MoE (grouped expert GEMMs by
tokens per expert, token permute/unpermute)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from conftest import REPO, shared_reference
from parallmelism.config.compose import load_option
from parallmelism.config.kernel_tables import kernel_model
from parallmelism.cost.collective_ops import cp_chunk_bytes
from parallmelism.cost.comm import cp_layer_times_s, torch_cp_layer_ops
from parallmelism.cost.flops import layer_ops
from parallmelism.cost.kernels import GROUPED_EXPERT_MATRICES, block_attention_flops, causal_attention_flops
from parallmelism.cost.roofline import Rates, attention_kernels_s, ops_times

H100 = load_option("hardware", "h100-sxm-80gb")
KM = kernel_model(H100)
LONG = pd.read_csv(shared_reference("h100_attention_long.csv"), comment="#")
MOE = pd.read_csv(shared_reference("h100_moe_experts.csv"), comment="#")
TABLE = pd.read_csv(REPO / "hardware" / "kernels" / "h100-sxm-80gb.csv", comment="#")


def _same_point(family, part, backend, seq, heads, kv_seq=None):
    """Every measurement of the table at one attention point (a shape two files measured is averaged
    in log residual: the model returns the geometric mean)."""
    t = TABLE[(TABLE.family == family) & (TABLE.part == part) & (TABLE.backend == backend)]
    t = t[(t.seq == seq) & (t.heads == heads)]
    if kv_seq is not None:
        t = t[t.kv_seq == kv_seq]
    return float(np.exp(np.mean(np.log(t.measured_s))))


@pytest.mark.parametrize("i", range(len(LONG)))
def test_long_attention_kernels_take_their_measured_times(i):
    """Every row of h100_attention_long.csv, forward and backward: a causal kernel (attention_s) or
    an all-gather CP block of s/4 queries against s keys (attention_block_s) gets the measured time,
    or, where the curves timed the same causal kernel, the curves' time (up to 17 % apart)."""
    r = LONG.iloc[i]
    for bwd, measured in ((False, r.fwd_s), (True, r.bwd_s)):
        part = ("bwd" if bwd else "fwd") + ("" if r["mask"] == "causal" else "_block")
        if r["mask"] == "causal":
            got = KM.attention_s(causal_attention_flops(r.q_len, r.heads, 128, bwd), r.q_len, r.heads, bwd, r.backend)
            want = _same_point("attention", part, r.backend, r.q_len, r.heads)
        else:
            fl = block_attention_flops(r.q_len, r.kv_len, r.heads, 128, bwd)
            got = KM.attention_block_s(fl, r.q_len, r.kv_len, r.heads, bwd, r.backend)
            want = _same_point("attention", part, r.backend, r.q_len, r.heads, r.kv_len)
        assert float(got) == pytest.approx(want, rel=1e-6)
        assert float(got) == pytest.approx(measured, rel=0.2)


def test_the_table_takes_every_long_attention_measurement_once():
    """Every timing of h100_attention_long.csv is a table row, except a causal kernel the curves
    already timed (cuDNN at 32k, 64k and 128k with 8 heads, 32k with 32: the table keeps one run of
    a kernel; the two differ by up to 17 % in backward at 32k)."""
    t = TABLE[TABLE.source == "h100_attention_long.csv"]
    curves = TABLE[(TABLE.source == "h100_kernel_curves.csv") & (TABLE.family == "attention")]
    timed = {(r.backend, r.seq, r.heads) for r in curves.itertuples()}
    kept = LONG[~LONG.apply(lambda r: r["mask"] == "causal" and (r.backend, r.q_len, r.heads) in timed, axis=1)]
    assert len(kept) == len(LONG) - 4
    assert sorted(t.measured_s) == sorted(list(kept.fwd_s) + list(kept.bwd_s))


def test_grid_causal_kernels_fill_the_other_files_gaps():
    """The attention grid's causal kernels (hardware/kernels/h100-sxm-80gb-profiled.attention-grid.csv,
    benchmarks/gpu_cp_attention.py --grid) are table rows where they fill a gap of the other files: a length
    no other file timed for that backend, between two they did. That is FlashAttention-2 at 16k tokens (the
    short table stops at 8k, the long one starts at 32k), not its 1k and 2k (below every other file's) nor
    any cuDNN kernel (the curves time 1k-128k). The model returns them: at 16k it had interpolated
    FlashAttention-2 6 % slower forward and 17 % backward at 16 heads."""
    grid = pd.read_csv(REPO / "hardware" / "kernels" / "h100-sxm-80gb-profiled.attention-grid.csv", comment="#")
    causal = grid[grid.causal.astype(str).str.lower() == "true"]
    others = TABLE[(TABLE.family == "attention") & TABLE.part.isin(["fwd", "bwd"])]
    others = others[others.source != "h100-sxm-80gb-profiled.attention-grid.csv"]
    lengths = {b: set(g.seq) for b, g in others.groupby("backend")}

    def fills(r) -> bool:
        timed = lengths.get(r.backend, set())
        return r.q_len not in timed and min(timed) < r.q_len < max(timed)

    taken = causal[causal.apply(fills, axis=1)]
    assert set(taken.backend) == {"flash2"} and set(taken.q_len) == {16384}
    rows = TABLE[(TABLE.source == "h100-sxm-80gb-profiled.attention-grid.csv") & TABLE.part.isin(["fwd", "bwd"])]
    assert sorted(rows.measured_s) == sorted(list(taken.fwd_s) + list(taken.bwd_s))
    for r in taken.itertuples():
        for bwd, measured in ((False, r.fwd_s), (True, r.bwd_s)):
            fl = causal_attention_flops(r.q_len, r.heads, 128, bwd)
            assert float(KM.attention_s(fl, r.q_len, r.heads, bwd, "flash2")) == pytest.approx(measured, rel=1e-6)


# ---- the context-parallel variants' kernels around the measured ones --------------------------


def _attention_op(cp, comm, seq=131072, heads=8):
    model = load_option("model", "llama3.1-8b")
    ops = layer_ops(model, seq, 1, 4, cp, True, True, cp_comm_type=comm)
    op = next(o for o in ops if o.name == "attention_core")
    return op, heads


@pytest.mark.parametrize("bwd", [False, True])
def test_p2p_ring_is_a_causal_kernel_and_c_minus_1_blocks_at_their_slower_orientation(bwd):
    """Transformer Engine's load-balanced ring (cp_comm_type p2p) at 128k, CP 4, 8 heads on the
    rank: one causal kernel over the rank's s/c = 32k tokens, then c-1 = 3 unmasked blocks, each
    1/c of the FLOPs, each as slow as the slower of s/c queries × s/(2c) keys and the transpose."""
    op, h = _attention_op(4, "p2p")
    flops = np.asarray(op.flops) * (op.bwd_flops if bwd else 1.0)
    got = float(attention_kernels_s(KM, flops, op, bwd))
    each = float(flops) / 4
    block = max(
        float(KM.attention_block_s(each, 32768, 16384, h, bwd)), float(KM.attention_block_s(each, 16384, 32768, h, bwd))
    )
    assert got == pytest.approx(float(KM.attention_s(each, 32768, h, bwd)) + 3 * block, rel=1e-9)
    assert float(op.seq) == 32768 and float(op.heads) == h


def test_p2p_ring_merges_each_later_step_into_the_output():
    """The ring's per-step merge (cp_merge op): c-1 merges of the rank's output (3 × T·q/t bf16
    elements read or written each); the all-gather variant computes each chunk at once and merges
    nothing."""
    model = load_option("model", "llama3.1-8b")
    p2p = {o.name: o for o in layer_ops(model, 131072, 1, 4, 4, True, True, cp_comm_type="p2p")}
    ag = {o.name: o for o in layer_ops(model, 131072, 1, 4, 4, True, True, cp_comm_type="all_gather")}
    T = 131072 / 4
    assert float(p2p["cp_merge"].other_bytes) == pytest.approx(3 * 3 * 2 * T * model.q_dim / 4)
    assert "cp_merge" not in ag


@pytest.mark.parametrize("comm", ["all_gather", "p2p"])
def test_torch_ring_runs_a_kernel_per_step_and_merges_in_fp32(comm):
    """torch's context_parallel (torch 2.5-2.6 _templated_ring_attention, torchtitan's stack) runs the
    ring's kernels for either rotate method: step 0 causal over the rank's two chunks, then c-1 blocks
    (not Llama 3's two-kernel all-gather); its _SDPAMerger merges each later step in fp32 and its
    backward accumulates dQ,dK,dV in fp32, counted from the source per element of the rank's output
    (K,V repeated to every query head by torchtitan's repeat_kv): forward 46 B per later step + 6 B
    once, backward 60 B per step + 18 B once."""
    model = load_option("model", "llama3.1-8b")
    c, t, s = 4, 1, 131072
    torch_ops = {
        o.name: o for o in layer_ops(model, s, 1, t, c, False, True, cp_comm_type=comm, cp_implementation="torch")
    }
    te_ops = {o.name: o for o in layer_ops(model, s, 1, t, c, False, True, cp_comm_type="p2p")}
    core = torch_ops["attention_core"]
    assert not core.cp_all_gather
    for bwd in (False, True):  # the same kernels as Transformer Engine's p2p ring
        flops = float(core.flops) * (core.bwd_flops if bwd else 1.0)
        assert float(attention_kernels_s(KM, flops, core, bwd)) == pytest.approx(
            float(attention_kernels_s(KM, flops, te_ops["attention_core"], bwd)), rel=1e-12
        )
    o_elements = s / c * model.q_dim / t
    merge = torch_ops["cp_merge"]
    assert float(merge.other_bytes) == pytest.approx(((c - 1) * 46 + 6) * o_elements)
    assert float(merge.backward_bytes()) == pytest.approx((c * 60 + 18) * o_elements)
    # seven times Transformer Engine's bf16 merge forward and more: the fp32 passes are what differ
    assert float(merge.other_bytes) > 7 * float(te_ops["cp_merge"].other_bytes)
    # no ring, no merge; Ulysses (a2a) has no ring either
    assert "cp_merge" not in {o.name for o in layer_ops(model, s, 1, t, 1, False, True, cp_implementation="torch")}
    a2a = layer_ops(model, s, 1, 4, c, True, True, cp_comm_type="a2a", cp_implementation="torch")
    assert "cp_merge" not in {o.name for o in a2a}


@pytest.mark.parametrize("bwd", [False, True])
def test_all_gather_cp_is_the_first_chunks_causal_kernel_and_the_last_chunks_unmasked_block(bwd):
    """Megatron/Llama 3's all-gather variant at 128k, CP 2: K,V gathered, the rank's first chunk of
    s/(2c) = 32k tokens as a causal kernel (1/(4c) of its FLOPs) and its last chunk's 32k queries
    against the whole 128k sequence as one block: the measured block_q_quarter shape."""
    op, h = _attention_op(2, "all_gather")
    flops = float(np.asarray(op.flops) * (op.bwd_flops if bwd else 1.0))
    got = float(attention_kernels_s(KM, flops, op, bwd))
    first = flops / 8
    want = float(KM.attention_s(first, 32768, h, bwd)) + float(
        KM.attention_block_s(flops - first, 32768, 131072, h, bwd)
    )
    assert got == pytest.approx(want, rel=1e-9)
    # the block is the measured one (cuDNN, 8 heads, 32768 queries × 131072 keys) at its FLOPs
    r = LONG[
        (LONG.backend == "cudnn") & (LONG["mask"] == "block_q_quarter") & (LONG.heads == 8) & (LONG.kv_len == 131072)
    ]
    measured = float(r.bwd_s.iloc[0] if bwd else r.fwd_s.iloc[0])
    at_measured = float(KM.attention_block_s(block_attention_flops(32768, 131072, 8, 128, bwd), 32768, 131072, 8, bwd))
    assert at_measured == pytest.approx(measured, rel=1e-6)


# ---- fine-grained MoE ---------------------------------------------------------------------------


@pytest.mark.parametrize("i", range(len(MOE)))
def test_grouped_expert_gemm_takes_the_measured_grouped_mm_time(i):
    """torch._grouped_mm of one MoE layer (gate+up and down of every expert) at 64-4096 tokens per
    expert; Mixtral at 64 was measured by the decode file too (the geometric mean of the two)."""
    r = MOE.iloc[i]
    got = float(KM.grouped_gemm_s(r.tokens_per_expert, r.hidden, GROUPED_EXPERT_MATRICES * r.ffn, r.experts))
    same = TABLE[
        (TABLE.family == "moe_grouped")
        & (TABLE.part == "grouped")
        & (TABLE.m == r.tokens_per_expert)
        & (TABLE.k == r.hidden)
        & (TABLE.n == r.ffn)
        & (TABLE.experts == r.experts)
    ]
    assert float(np.exp(np.mean(np.log(same.measured_s)))) == pytest.approx(got, rel=1e-6)
    assert got == pytest.approx(r.grouped_mm_s, rel=0.02)


@pytest.mark.parametrize("i", range(len(MOE)))
def test_grouped_over_dense_ratio_is_the_measured_one(i):
    """What training multiplies its dense expert kernels by: grouped_mm over one dense GEMM pair of
    the same FLOPs, both timed in one run (3.5x at 64 tokens per expert for Qwen3-30B-A3B, ~1 at
    4096 for DeepSeek-V3's large experts); the same for the gate+up op (2 matrices) and the down op."""
    r = MOE.iloc[i]
    rows = r.tokens_per_expert * r.experts
    want = r.grouped_mm_s / r.dense_same_flops_s
    up = KM.grouped_ratio(rows, r.hidden, 2 * r.ffn, r.experts, 2.0)
    down = KM.grouped_ratio(rows, r.ffn, r.hidden, r.experts, 1.0)
    assert float(up) == pytest.approx(want, rel=1e-6) and float(down) == pytest.approx(want, rel=1e-6)


def test_grouped_ratio_beyond_the_measured_rows_falls_to_one_over_a_doubling_and_one_expert_is_dense():
    """Extrapolation rule (kernels.GROUPED_RATIO_TAPER_DOUBLINGS): at 4096 rows per expert the
    measured ratio, at 8192 and beyond 1 (the large-GEMM assumption), geometrically in between."""
    r = MOE[(MOE.model == "qwen3-30b-a3b") & (MOE.tokens_per_expert == 4096)].iloc[0]
    at_4096 = float(KM.grouped_ratio(4096 * 8, 2048, 2 * 768, 8, 2.0))
    assert at_4096 == pytest.approx(r.grouped_mm_s / r.dense_same_flops_s, rel=1e-6)
    between = float(KM.grouped_ratio(int(4096 * 2**0.5) * 8, 2048, 2 * 768, 8, 2.0))
    assert between == pytest.approx(at_4096**0.5, rel=1e-3)
    assert float(KM.grouped_ratio(8192 * 8, 2048, 2 * 768, 8, 2.0)) == 1.0
    assert float(KM.grouped_ratio(65536 * 8, 2048, 2 * 768, 8, 2.0)) == 1.0
    assert float(KM.grouped_ratio(4096, 4096, 14336, 1, 2.0)) == 1.0


@pytest.mark.parametrize("i", range(len(MOE)))
def test_one_token_gather_is_half_the_measured_permute_unpermute_pair(i):
    """One gather (index_select or index_add_) of the layer's token copies: half the measured pair;
    where two layers moved the same tokens × hidden (Qwen3-235B at 64 and Mixtral at 1024 tokens per
    expert: 8192 × 4096, up to 13 % apart), the geometric mean of the two."""
    r = MOE.iloc[i]
    rows = r.tokens_per_expert * r.experts
    same = MOE[(MOE.tokens_per_expert * MOE.experts == rows) & (MOE.hidden == r.hidden)].permute_unpermute_s / 2.0
    got = float(KM.permute_s(rows, r.hidden))
    assert got == pytest.approx(float(np.exp(np.mean(np.log(same)))), rel=1e-6)
    assert got == pytest.approx(r.permute_unpermute_s / 2.0, rel=0.15)


def _moe_layer(ep, b=1, fusion=True, precision="bf16"):
    model = load_option("model", "qwen3-30b-a3b")
    ops = layer_ops(model, 4096, b, 1, 1, False, True, moe_layer=True, ep=ep, permute_fusion=fusion)
    times = ops_times(ops, Rates(H100, precision, KM))
    return model, {op.name: (op, t) for op, t in zip(ops, times)}


@pytest.mark.parametrize("ep, tokens_per_expert", [(2, 512), (16, 4096), (128, 32768)])
def test_training_experts_are_the_dense_kernel_times_the_measured_grouped_ratio(ep, tokens_per_expert):
    """A Qwen3-30B-A3B MoE layer on one rank (4096 tokens, top-8): the expert GEMMs are no longer one
    large dense GEMM of all routed rows but that GEMM times the grouped ratio at the rank's tokens per
    expert (forward, dgrad, wgrad alike); with one expert on the rank (EP 128) it is the dense GEMM."""
    model, ops = _moe_layer(ep)
    local = 128 // ep
    for name, k, n, mats in (("experts_up", 2048, 2 * 768, 2.0), ("experts_down", 768, 2048, 1.0)):
        op, (f, b, *_) = ops[name]
        routed = float(op.mkn[0])
        assert routed / float(op.rank_experts) == tokens_per_expert and float(op.rank_experts) == local
        dense_f = float(KM.gemm_s(routed, k, n, "bf16", "fwd"))
        dense_b = float(KM.gemm_s(routed, k, n, "bf16", "dgrad") + KM.gemm_s(routed, k, n, "bf16", "wgrad"))
        ratio = float(KM.grouped_ratio(routed, k, n, local, mats))
        if local == 1:
            assert ratio == 1.0
        assert float(f) == pytest.approx(max(dense_f * ratio, float(KM.memory_s(op.bytes))), rel=1e-9)
        assert float(b) == pytest.approx(max(dense_b * ratio, float(KM.memory_s(op.backward_bytes()))), rel=1e-9)


def test_training_forward_of_a_measured_grouped_layer_is_about_its_measured_time():
    """EP 1 (all 128 experts on the rank, 256 tokens per expert from 4096 tokens × top-8): the
    training ops' bf16 forward of gate+up, the SwiGLU product (its own op) and down, what one
    measured grouped layer times, land within 10 % of the measured torch._grouped_mm time (the dense
    GEMMs the ratio multiplies come from another measurement run, ~10 % faster at this shape), well
    above the dense GEMM pair of the same FLOPs (the large-GEMM assumption)."""
    _, ops = _moe_layer(1)
    layer = sum(float(ops[n][1][0]) for n in ("experts_up", "activation", "experts_down"))
    r = MOE[(MOE.model == "qwen3-30b-a3b") & (MOE.tokens_per_expert == 256)].iloc[0]
    assert layer == pytest.approx(r.grouped_mm_s, rel=0.10)
    assert layer > 1.2 * r.dense_same_flops_s


def test_unfused_permute_takes_the_measured_gathers_and_fused_the_hbm_copy_rate():
    """workload.moe_permute_fusion=false: the permute and unpermute ops (forward and backward: the
    pair's two kernels swapped) add up to twice the measured index_select + index_add_ pair of the
    rank's routed tokens; fused (the default): their bytes at the HBM copy rate."""
    _, unfused = _moe_layer(16, fusion=False)
    _, fused = _moe_layer(16, fusion=True)
    op = unfused["permute"][0]
    assert op.gather == (4096 * 8, 2048) and fused["permute"][0].gather is None
    routed = 4096 * 8  # tokens × top-8 land on the rank's 8 experts (balanced)
    r = MOE[(MOE.model == "qwen3-30b-a3b") & (MOE.tokens_per_expert == 256)].iloc[0]  # 256 × 128 = 32768 rows
    assert routed == r.tokens_per_expert * r.experts
    total = sum(float(unfused[n][1][0]) + float(unfused[n][1][1]) for n in ("permute", "unpermute"))
    assert total == pytest.approx(2 * r.permute_unpermute_s, rel=1e-6)
    f_op, (f, b, *_) = fused["permute"]
    assert float(f) == pytest.approx(float(KM.memory_s(f_op.bytes)), rel=1e-9)
    assert float(b) == pytest.approx(float(KM.memory_s(f_op.backward_bytes())), rel=1e-9)
    assert total > 2.0 * sum(float(fused[n][1][0]) + float(fused[n][1][1]) for n in ("permute", "unpermute"))


@pytest.mark.parametrize("bwd", [False, True])
def test_a2a_cp_is_one_causal_kernel_over_the_whole_sequence_with_heads_over_cp(bwd):
    """DeepSpeed-Ulysses (cp_comm_type a2a) at 128k, TP 4, CP 4: after the all-to-all a rank holds
    all 128k tokens of 8/4 = 2 heads and runs one causal kernel over them (the same FLOPs as the
    ring's share: 1/(t·c) of the heads × the full causal square); no ring steps, no merges."""
    op, _ = _attention_op(4, "a2a")
    flops = float(np.asarray(op.flops) * (op.bwd_flops if bwd else 1.0))
    assert float(op.seq) == 131072 and float(op.heads) == 2 and float(op.cp) == 1
    assert flops == pytest.approx(causal_attention_flops(131072, 2, 128, bwd), rel=1e-9)
    got = float(attention_kernels_s(KM, flops, op, bwd))
    assert got == pytest.approx(float(KM.attention_s(flops, 131072, 2, bwd)), rel=1e-12)
    model = load_option("model", "llama3.1-8b")
    assert "cp_merge" not in {o.name for o in layer_ops(model, 131072, 1, 4, 4, True, True, cp_comm_type="a2a")}


def passes_of(rerun):
    return 3.0 if rerun else 2.0


@pytest.mark.parametrize("rerun", [False, True])
def test_a2a_cp_communication_is_four_exposed_all_to_alls_a_layer(rerun):
    """Q,K,V in and the output back forward (again when the attention forward reruns), the output
    gradient in and dQ,dK,dV back backward; each rank's buffers: its s/c tokens' Q,K,V (K,V at its
    TP rank's KV heads) and output; the attention waits on them (exposed = link)."""
    from parallmelism.cost.comm import cp_layer_ops, cp_layer_times_s

    model = load_option("model", "llama3.1-8b")
    s, b, t, c = 131072, 1.0, 4.0, 4.0
    qkv_op, out_op = cp_layer_ops(H100, model, s, b, t, c, rerun, "a2a")
    T = s * b / c
    assert qkv_op.kind == out_op.kind == "all_to_all"
    assert float(out_op.nbytes) == pytest.approx(2 * T * model.q_dim / t)
    assert float(qkv_op.nbytes) == pytest.approx(2 * T * (model.q_dim / t + 2 * model.d * model.g / t))
    assert float(qkv_op.calls) == float(out_op.calls) == passes_of(rerun)
    link, exposed = cp_layer_times_s(H100, model, s, b, t, c, (0.0, 0.0), (0.0, 0.0), rerun, "a2a")
    passes = passes_of(rerun)
    assert float(link) == pytest.approx(passes * float(qkv_op.time_s + out_op.time_s), rel=1e-12)
    assert float(exposed) == float(link)


def test_a2a_cp_refuses_layouts_that_split_a_head():
    """Ulysses splits each TP rank's heads over the CP group: Llama-3.1-8B (32 heads) at TP 8 has 4
    heads a rank, which CP 8 cannot split; the layout is dropped with the reason."""
    from conftest import invoke

    code, out = invoke(
        "show",
        "model=llama3.1-8b",
        "workload.seq_len=131072",
        "workload.global_batch=8",
        "workload.cp_comm_type=a2a",
        "grid.ngpus=[64]",
        "grid.tp=[8]",
        "grid.cp=[8]",
        "grid.pp=[1]",
    )
    assert code == 2 and "heads per TP rank must be a multiple of cp" in " ".join(out.split())


@pytest.mark.parametrize("comm", ["all_gather", "p2p"])
def test_torch_ring_transfers_repeated_kv_and_fp32_gradients(comm):
    """torch's ring under torchtitan (cost/comm.py torch_cp_layer_ops): K,V as SDPA sees them,
    repeated to every query head (Llama 3.1 405B at tp 8: 16 query heads, 1 KV head per rank, so 16x
    the GQA chunk), bf16; the all-gather rotater gathers the whole sequence's K,V per attention forward
    (again under recompute) and again in backward; dK,dV go round in fp32 (2x the bytes), c hops.
    Overlap: under long kernels only the last dK,dV hop (home, after the loop) is exposed; with no
    kernels to hide under every transfer is."""
    model = load_option("model", "llama3.1-405b")
    s, b, t, c = 131072, 1, 8, 4
    T = s / c
    kv, dkv = torch_cp_layer_ops(H100, model, s, b, t, c, True, comm)
    chunk = T * 2 * (model.q_dim / t) * 2
    assert chunk == pytest.approx(
        16 * float(cp_chunk_bytes(model, s, b, t, c))
    )  # repeat_kv: 16 query heads per KV head
    if comm == "all_gather":
        assert (kv.kind, float(kv.nbytes), float(kv.calls)) == ("all_gather", pytest.approx(c * chunk), 3.0)
    else:
        assert (kv.kind, float(kv.nbytes), float(kv.calls)) == ("send_recv", pytest.approx(chunk), 3.0 * (c - 1))
    assert (dkv.kind, float(dkv.nbytes), float(dkv.calls)) == ("send_recv", pytest.approx(2 * chunk), float(c))
    link_total = float(kv.calls) * float(kv.time_s) + float(dkv.calls) * float(dkv.time_s)
    hidden = cp_layer_times_s(H100, model, s, b, t, c, (1e3, 1e2), (1e3, 1e2), True, comm, "torch")
    assert float(hidden[0]) == pytest.approx(link_total)
    assert float(hidden[1]) == pytest.approx(float(dkv.time_s))  # the last dK,dV hop
    bare = cp_layer_times_s(H100, model, s, b, t, c, (0.0, 0.0), (0.0, 0.0), True, comm, "torch")
    assert float(bare[1]) == pytest.approx(link_total)
