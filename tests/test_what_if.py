"""What-if overrides move what they govern (issue 32 item 5, and the co-design points of a study):
a measured kernel table keeps its measured/physics ratios, taken against the part it was measured on
(specs Kernels.measured_*), so doubling an accelerator's peak FLOP/s halves a compute-bound kernel,
doubling its HBM bandwidth halves a memory-bound one, and doubling its scale-up link bandwidth halves a
bandwidth-bound collective. Before, the table's residuals were taken against the overridden spec and
divided the override out again: 2x bf16 peak on the H100 moved a step by 0.4 %."""

from __future__ import annotations

import pytest

from parallmelism.config import option_files, user_config_dirs
from parallmelism.config.compose import load_option
from parallmelism.config.kernel_tables import kernel_model
from parallmelism.cost.collectives import group_collective_time_s

ACCELERATORS = sorted(option_files("hardware", user_config_dirs()))
BIG = 16384.0  # a GEMM this size is compute-bound on every shipped part (its launch < 0.5 % of it)


def _scaled(hw, **update):
    return hw.model_copy(update=update)


@pytest.mark.parametrize("name", ACCELERATORS)
def test_twice_the_peak_halves_compute_bound_kernels(name):
    hw = load_option("hardware", name)
    fast = _scaled(hw, peak_tflops={k: 2 * v for k, v in hw.peak_tflops.items()})
    base, what_if = kernel_model(hw), kernel_model(fast)
    t1, t2 = float(base.gemm_s(BIG, BIG, BIG)), float(what_if.gemm_s(BIG, BIG, BIG))
    assert 0.5 <= t2 / t1 <= 0.505, (name, t1, t2)
    flops = 4.0 * 16384**2 * 128 * 32 / 2  # causal forward, 16k tokens, 32 heads of 128
    a1, a2 = float(base.attention_s(flops, 16384, 32)), float(what_if.attention_s(flops, 16384, 32))
    assert 0.5 <= a2 / a1 <= 0.505, (name, a1, a2)


@pytest.mark.parametrize("name", ACCELERATORS)
def test_twice_the_hbm_bandwidth_halves_memory_bound_kernels(name):
    hw = load_option("hardware", name)
    fast = _scaled(hw, hbm_bandwidth_gbps=2 * hw.hbm_bandwidth_gbps)
    nbytes = 2.0**30
    t1, t2 = float(kernel_model(hw).memory_s(nbytes)), float(kernel_model(fast).memory_s(nbytes))
    assert t2 / t1 == pytest.approx(0.5, rel=1e-12), (name, t1, t2)


@pytest.mark.parametrize("name", ACCELERATORS)
def test_twice_the_scale_up_bandwidth_halves_a_large_all_reduce(name):
    hw = load_option("hardware", name)
    fast = _scaled(hw, scale_up=hw.scale_up.model_copy(update={"bandwidth_gbps": 2 * hw.scale_up.bandwidth_gbps}))
    group = min(8, hw.scale_up.domain_size)  # within the scale-up domain (an H100 NVL bridge joins 2)
    # 4 GiB: NCCL's Simple protocol pays 56 us at 8 ranks, 2 % of a 1 GiB all-reduce at B200's 720 GB/s
    t1 = float(group_collective_time_s(hw, "all_reduce", 2.0**32, group, 1))
    t2 = float(group_collective_time_s(fast, "all_reduce", 2.0**32, group, 1))
    assert 0.5 <= t2 / t1 <= 0.51, (name, t1, t2)


@pytest.mark.parametrize("name", ACCELERATORS)
@pytest.mark.parametrize("kind", ["all_reduce", "all_gather", "reduce_scatter"])
def test_twice_the_scale_up_bandwidth_halves_the_bandwidth_part_at_mid_size(name, kind):
    """At 8 MiB, where NCCL's protocols trade latency for bandwidth (cost/collectives.py
    `protocol_ring_time_s`), twice the link bandwidth halves every protocol's bandwidth term and leaves
    its latency: the call costs what half the bytes cost on the base link, the fastest protocol
    re-chosen at that size."""
    hw = load_option("hardware", name)
    fast = _scaled(hw, scale_up=hw.scale_up.model_copy(update={"bandwidth_gbps": 2 * hw.scale_up.bandwidth_gbps}))
    group = min(8, hw.scale_up.domain_size)
    S = 8.0 * 2**20
    t_fast = float(group_collective_time_s(fast, kind, S, group, 1))
    assert t_fast == pytest.approx(float(group_collective_time_s(hw, kind, S / 2, group, 1)), rel=1e-12)
    assert t_fast < float(group_collective_time_s(hw, kind, S, group, 1))


def test_a_peak_override_moves_the_step_through_hydra_and_study_fields():
    """The whole path a user takes: `hardware.peak_tflops.bf16=` on the command line (Hydra) and a
    study's field-set point give the same, faster compute; the table's own part is unchanged."""
    from parallmelism.config import load_run_configs
    from parallmelism.config.compose import run_with_fields
    from parallmelism.validate.cases import evaluate_one

    pinned = ["model=llama3.1-8b", "grid.ngpus=[8]", "grid.tp=1", "grid.pp=1", "grid.cp=1", "grid.vpp=1"]
    pinned += [
        "grid.micro_batch=1",
        "grid.dp_sharding=FULLY_SHARD",
        "grid.recompute=none",
        "grid.sequence_parallel=false",
    ]
    (_, run), *_ = load_run_configs(pinned)
    (_, fast), *_ = load_run_configs([*pinned, "hardware.peak_tflops.bf16=1978"])
    field_set = run_with_fields(run, {"hardware.peak_tflops.bf16": 1978})
    assert fast.hardware.kernels.measured_peak_tflops == run.hardware.peak_tflops  # the part measured
    c1 = float(evaluate_one(run)["time_compute_s"])
    c2 = float(evaluate_one(fast)["time_compute_s"])
    assert c2 == pytest.approx(float(evaluate_one(field_set)["time_compute_s"]), rel=1e-12)
    # GEMMs and attention halve; norms, SwiGLU, the optimizer step (HBM-bound) do not: 0.5 < ratio < 0.6
    assert 0.5 < c2 / c1 < 0.6, (c1, c2)
