"""The H100 kernel model against a real H100 profile it was not built from.

Two measurement files shipped with the project, taken on 2026-11-25 on one H100 SXM 80GB
(PyTorch 2.11.0+cu130, CUDA 13.0, cuDNN 9.19.0; headers and rows say so):
- hardware/kernels/h100-sxm-80gb-profiled.csv: `parallmelism profile` on that GPU (210 GEMMs:
  fwd, dgrad and wgrad in bf16 and fp8; 60 causal attention kernels and 60 non-causal ring
  blocks, cuDNN and FlashAttention-2; 6 HBM transfers), with its accelerator file
  hardware/h100-sxm-80gb-profiled.yaml;
- hardware/kernels/h100-sxm-80gb-profiled.layers.csv: one Llama 3.1 layer shard (8B/70B/405B, TP 1-8,
  2k-32k tokens), forward and forward+backward, eager and torch.compile'd
  (benchmarks/gpu_layer.py).
The reference H100 model (hardware/kernels/h100-sxm-80gb.csv, built from ../shared/reference)
never saw either file, so these are out-of-sample checks of kernel times and of whole layers.
"""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from parallmelism.config.compose import load_option
from parallmelism.config.paths import option_files
from parallmelism.cost.flops import layer_ops
from parallmelism.config.kernel_tables import kernel_model
from parallmelism.cost.kernels import block_attention_flops, causal_attention_flops
from parallmelism.cost.roofline import Rates, ops_times

ROOT = Path(__file__).resolve().parents[1]
PROFILE = ROOT / "hardware" / "kernels" / "h100-sxm-80gb-profiled.csv"
LAYERS = ROOT / "hardware" / "kernels" / "h100-sxm-80gb-profiled.layers.csv"
REFERENCE = load_option("hardware", "h100-sxm-80gb")
PROFILED = load_option("hardware", "h100-sxm-80gb-profiled")


def _profile_errors() -> pd.DataFrame:
    """Every profiled kernel with the reference model's relative error (model / measured - 1)."""
    km = kernel_model(REFERENCE)
    df = pd.read_csv(PROFILE, comment="#")
    df["err"] = np.array([km.table_row_s(r) for r in df.itertuples()]) / df.measured_s - 1
    return df


def test_the_profile_is_a_real_h100_run_with_its_versions():
    head = PROFILE.read_text().splitlines()[0]
    for fact in ("NVIDIA H100 80GB HBM3", "PyTorch 2.11.0+cu130", "CUDA 13.0", "cuDNN 9.19.0", "2026-11-25"):
        assert fact in head
    df = pd.read_csv(PROFILE, comment="#")
    assert df.family.value_counts().to_dict() == {"gemm": 210, "attention": 120, "hbm": 6}
    assert set(df[df.family == "attention"].part) == {"fwd", "bwd", "fwd_block", "bwd_block"}
    assert set(df[df.family == "gemm"].part) == {"fwd", "dgrad", "wgrad"}
    assert set(df[df.family == "attention"].backend) == {"cudnn", "flash2"}
    assert PROFILED.kernels.table.endswith("hardware/kernels/h100-sxm-80gb-profiled.csv")
    assert kernel_model(PROFILED).own_table
    # the peaks `profile` estimated from its fastest kernels land within 5 % of the datasheet
    for dtype in ("bf16", "fp8"):
        assert PROFILED.peak_tflops[dtype] == pytest.approx(REFERENCE.peak_tflops[dtype], rel=0.05)


def test_reference_model_predicts_the_profiled_training_kernels():
    """Training shapes (m >= 4096 tokens per micro-batch; k, n >= 4096; attention at 4k-16k tokens,
    cuDNN as Transformer Engine runs it; transfers >= 32 MiB): the reference model, built from other
    measurements, predicts the new ones. Measured on 2026-11-25: GEMMs (bf16 and fp8, fwd, dgrad,
    wgrad) median 4.6 %, max 12.1 %; cuDNN causal attention median 2.7 %, max 9.9 %; HBM max 2.2 %;
    the ring blocks (MHA here, GQA 8:1 in the grid the model's blocks come from) at 4k-16k tokens
    max 7.0 %, all of them median 2.0 %, max 15.0 %. Not in this bound: fp8 wgrad at 1,024 tokens
    runs 15-29 % slower than the model says on five of its seven shapes (the reference files have
    no fp8 dgrad/wgrad rows), which matters for fp8 with small micro-batches."""
    df = _profile_errors()
    e = df.err.abs()
    gemm = (df.family == "gemm") & (df.m >= 4096) & (df.k >= 4096) & (df.n >= 4096)
    block = df.part.str.endswith("_block")
    att = (df.family == "attention") & (df.backend == "cudnn") & (df.seq >= 4096) & ~block
    hbm = (df.family == "hbm") & (df.bytes >= 2**25)
    assert gemm.sum() == 60 and att.sum() == 18 and hbm.sum() == 4 and block.sum() == 60
    assert e[gemm].median() <= 0.05 and e[gemm].max() <= 0.20
    assert e[att].median() <= 0.03 and e[att].max() <= 0.13
    assert e[hbm].max() <= 0.03
    assert e[block & (df.seq >= 4096)].max() <= 0.10
    assert e[block].median() <= 0.05 and e[block].max() <= 0.20


def test_reference_model_over_the_whole_profile():
    """All 336 kernels, small and odd shapes too: median |error| within 6 % (measured 4.6 %). The
    19 misses over 30 % are wgrad/dgrad of decode-sized or skinny GEMMs (m = 16-256 tokens, or
    n = 1280) and attention backward at 1-2k tokens, where the reference file's cuDNN times carry
    launch gaps that `profile` hides (1k tokens, 8 heads: 91 µs there, 58 µs here); none is a shape
    of a shipped training run."""
    df = _profile_errors()
    assert df.err.abs().median() <= 0.06
    big = df[df.err.abs() > 0.30]
    skinny = (big.family == "gemm") & ((big.m <= 256) | (big.n <= 1280))
    short_attention = (big.family == "attention") & (big.seq <= 2048)
    assert len(big) <= 20 and (skinny | short_attention).all(), big


def _layer_s(hw, r) -> tuple[float, float]:
    """The model's (forward, backward) seconds of one layer shard (no SP, bf16, flash attention)."""
    model = load_option("model", r.model)
    one = np.array([1.0])
    ops = layer_ops(model, r.seq, one * r.micro_batch, one * r.tp, one, np.array([False]), True)
    times = ops_times(ops, Rates(hw, "bf16", kernel_model(hw)))
    fwd = sum(float(np.ravel(t[0])[0]) for t in times)
    bwd = sum(float(np.ravel(t[1])[0]) for t in times)
    return fwd, bwd


@pytest.mark.parametrize("hw", [REFERENCE, PROFILED], ids=["reference-table", "profiled-table"])
def test_summed_per_op_times_match_measured_layers(hw):
    """A whole layer, forward + backward, is the sum of the per-op kernel times `show` prints: within
    8 % of the torch.compile'd layer (fused norms, RoPE and SwiGLU, as Transformer Engine fuses them),
    and up to 10 % below the eager one (which runs them unfused), never above it by more than 2 %.
    Measured: reference table -6.6 … +4.7 % of compiled, -7.3 … -1.2 % of eager; profiled table
    -5.6 … +4.4 % of compiled, -7.7 … -2.2 % of eager. No overhead term is in these sums."""
    df = pd.read_csv(LAYERS)
    assert len(df) == 18 and set(df["mode"]) == {"eager", "compiled"}
    for r in df.itertuples():
        fwd, bwd = _layer_s(hw, r)
        ratio = (fwd + bwd) * 1e3 / r.fwd_bwd_ms
        case = (r.model, r.tp, r.seq, r.mode, round(ratio, 3))
        if r.mode == "compiled":
            assert abs(ratio - 1) <= 0.08, case
            assert fwd * 1e3 == pytest.approx(r.fwd_ms, rel=0.15), case
        else:
            assert 0.90 <= ratio <= 1.02, case


CP_BLOCKS = ROOT / "hardware" / "kernels" / "h100-sxm-80gb-profiled.cp-attention.csv"


def _cp_rank_attention(cp: int) -> tuple[tuple[float, float], tuple[float, float]]:
    """(model, measured) (forward, backward) seconds of one layer's attention on the busiest rank of
    Llama 3.1 405B at tp 8, cp `cp`, s = 8192·cp (chunks of 4096 tokens; benchmarks/gpu_cp_attention.py
    says which kernels Transformer Engine's ring runs): measured = the causal 8192 kernel + (cp − 1)
    non-causal blocks, the slower of 8192×4096 and 4096×8192."""
    from parallmelism.cost.roofline import op_kernel_times

    s, one = 8192 * cp, np.array([1.0])
    ops = layer_ops(load_option("model", "llama3.1-405b"), s, one, one * 8, one * cp, np.array([True]), True)
    (att,) = [op for op in ops if op.name == "attention_core"]
    fwd, bwd = (float(np.ravel(t)[0]) for t in op_kernel_times(att, Rates(REFERENCE, "bf16", kernel_model(REFERENCE))))
    k = pd.read_csv(CP_BLOCKS, comment="#").query("backend == 'cudnn'").set_index(["q_len", "kv_len", "causal"])
    diag = k.loc[(8192, 8192, True)]
    block = k.loc[[(8192, 4096, False), (4096, 8192, False)]].max()
    return (fwd, bwd), (diag.fwd_s + (cp - 1) * block.fwd_s, diag.bwd_s + (cp - 1) * block.bwd_s)


def test_attention_without_context_parallelism_is_the_measured_causal_kernel():
    (fwd, bwd), (m_fwd, m_bwd) = _cp_rank_attention(1)
    assert fwd == pytest.approx(m_fwd, rel=0.05) and bwd == pytest.approx(m_bwd, rel=0.05)


@pytest.mark.parametrize("cp", [2, 4, 8, 16])
def test_context_parallel_attention_is_the_sum_of_the_ring_kernels(cp):
    """A CP rank's attention is one causal kernel of s/cp tokens plus cp-1 non-causal blocks
    (cost.roofline.op_kernel_times): within 3 % of the sum of those kernels measured on their own
    (measured: -0.9 … -0.2 %). The blocks' residuals come from the attention grid (same shapes,
    2 KV heads instead of 1), so this checks the decomposition, not the interpolation. Before the
    blocks were modelled, every kernel ran at the causal efficiency of s/(2cp) tokens and the
    per-rank attention came out 23-28 % too long forward and 31-36 % backward."""
    (fwd, bwd), (m_fwd, m_bwd) = _cp_rank_attention(cp)
    assert fwd == pytest.approx(m_fwd, rel=0.03) and bwd == pytest.approx(m_bwd, rel=0.03)


@pytest.mark.parametrize("name", sorted(option_files("hardware", [])))
def test_a_ring_block_runs_near_or_above_the_causal_rate(name):
    """Per FLOP, a non-causal block (s/c queries against s/(2c) or s/c keys) runs at least 0.85x the
    rate of the causal kernel of the same query length, at 4k-8k tokens and 8-32 heads, on every
    shipped accelerator. On the H100 grid blocks run 1.3-2x faster at 1-4k tokens and within 10 % at
    16k (both saturate); a table without block rows (the A100s', an older profile) takes its own
    causal residual plus the H100's block-minus-causal one. Laying the H100's block residual on the
    A100's own causal times made blocks 0.70x as fast, which this catches."""
    km = kernel_model(load_option("hardware", name))
    for bwd in (False, True):
        for seq in (4096, 8192):
            for heads in (8, 16, 32):
                causal = causal_attention_flops(seq, heads, 128, bwd)
                rate_causal = causal / float(km.attention_s(causal, seq, heads, bwd))
                for kv in (seq // 2, seq):
                    block = block_attention_flops(seq, kv, heads, 128, bwd)
                    rate_block = block / float(km.attention_block_s(block, seq, kv, heads, bwd))
                    assert rate_block >= 0.85 * rate_causal, (name, bwd, seq, heads, kv)


def test_the_profiled_file_carries_the_h100_fabric_whole():
    """The profile measures kernels, not links: its scale_up, scale_out and efficiency are h100-sxm-80gb's,
    copied whole (the file's header; `profile` copies scale_up), so a collective costs the same on both
    (was: the copy lacked all_to_all and nvls, added to h100-sxm-80gb after it was written)."""
    assert PROFILED.scale_up == REFERENCE.scale_up.model_copy(update={"name": PROFILED.scale_up.name})
    assert PROFILED.scale_out == REFERENCE.scale_out.model_copy(update={"name": PROFILED.scale_out.name})
    assert PROFILED.efficiency == REFERENCE.efficiency
