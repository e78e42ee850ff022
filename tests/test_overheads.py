"""Named overheads (cost/overheads.py): each term adds what its units say, and show prints them."""

import pytest

from conftest import invoke
from parallmelism.config import load_option
from parallmelism.engine import evaluate
from parallmelism.specs import GridSpec, Overheads, RunConfig, TrainWorkload

H100 = load_option("hardware", "h100-sxm-80gb")
MODEL = load_option("model", "llama3.1-8b")


def _with(**terms):
    zero = dict(layer_launch_us=0.0, comm_contention=0.0, step_fixed_ms=0.0, straggler_per_doubling=0.0)
    return H100.model_copy(update={"overheads": Overheads(**{**zero, **terms})})  # the machine's own block


def one(hw, ngpus=8, tp=1, compile=None):
    grid = GridSpec(
        ngpus=[ngpus],
        tp=[tp],
        pp=[1],
        cp=[1],
        ep=[1],
        vpp=[1],
        micro_batch=[1],
        dp_sharding=["OPTIMIZER_STATES"],
        recompute=["none"],
        sequence_parallel=[tp > 1],
    )
    wl = TrainWorkload(seq_len=4096, global_batch=64, compile=compile)
    df, _ = evaluate(
        RunConfig(stack=load_option("stack", "megatron-te"), model=MODEL, hardware=hw, workload=wl, grid=grid)
    )
    assert len(df) == 1
    return df.iloc[0]


def test_zero_overheads_leave_the_kernel_step():
    r = one(_with())
    assert r["time_overhead_s"] == 0.0


def test_layer_launch_and_fixed_step_terms_add_their_units():
    """8 GPUs, dp 8, 64 sequences: m = 8 micro-batches of 32 layers; 100 us per layer pass adds
    8·32·100 us = 25.6 ms; 50 ms per step adds 50 ms (one scale-up domain: no stragglers)."""
    base = one(_with())
    launch = one(_with(layer_launch_us=100.0))
    fixed = one(_with(step_fixed_ms=50.0))
    assert base["num_micro_batches"] == 8
    assert launch["time_step_s"] - base["time_step_s"] == pytest.approx(8 * 32 * 100e-6, rel=1e-9)
    assert launch["time_overhead_s"] == pytest.approx(8 * 32 * 100e-6, rel=1e-9)
    assert fixed["time_step_s"] - base["time_step_s"] == pytest.approx(0.05, rel=1e-9)


def test_layer_kernels_launches_and_fsdp_unit_sync_add_their_units_by_compile():
    """FSDP1's per-layer host time (cost/overheads.py layer_host_us): 8 micro-batches of 32 layers, each
    layer pass 108 kernels eager or 33 compiled at 10 us a launch, plus 425 us per FSDP unit:
    8·32·(1080 + 425) us = 385.28 ms eager, 8·32·(330 + 425) us = 193.28 ms compiled."""
    terms = dict(layer_kernels_eager=108.0, layer_kernels_compiled=33.0, kernel_launch_us=10.0, unit_sync_us=425.0)
    eager = one(_with(**terms), compile=False)
    compiled = one(_with(**terms), compile=True)
    assert eager["time_overhead_s"] == pytest.approx(0.38528, rel=1e-9)
    assert compiled["time_overhead_s"] == pytest.approx(0.19328, rel=1e-9)
    counts_only = one(_with(layer_kernels_eager=108.0, layer_kernels_compiled=33.0), compile=False)
    assert counts_only["time_overhead_s"] == 0.0  # counts are not time without a launch cost


def test_stragglers_scale_per_doubling_beyond_the_domain():
    """64 GPUs = 8 domains of 8: three doublings; 2 % each lengthens the step by 6 %."""
    base = one(_with(), ngpus=64)
    slow = one(_with(straggler_per_doubling=0.02), ngpus=64)
    assert slow["time_step_s"] == pytest.approx(base["time_step_s"] * (1 + 3 * 0.02), rel=1e-9)


def test_contention_charges_hidden_comm_only():
    """TP 2, DP 8: the step grows by the stated fraction of the TP and DP time hidden under compute
    (link minus exposed; exposed time is already on the critical path) and by nothing else."""
    base = one(_with(), ngpus=16, tp=2)
    cont = one(_with(comm_contention=0.5), ngpus=16, tp=2)
    hidden = sum(base[f"time_comm_{ax}_s"] - base[f"time_comm_{ax}_exposed_s"] for ax in ("tp", "cp", "ep", "dp"))
    assert hidden > 0
    assert cont["time_step_s"] - base["time_step_s"] == pytest.approx(0.5 * hidden, rel=1e-6)


def test_show_prints_the_overheads_separately():
    code, out = invoke(
        "show",
        "model=llama3.1-8b",
        "hardware=h100-sxm-80gb",
        "workload.global_batch=64",
        "workload.seq_len=4096",
        "grid.ngpus=[64]",
        "grid.tp=[1]",
        "grid.pp=[1]",
    )
    assert code == 0, out
    assert "named overheads" in out
