"""Optimizer offload (workload.optimizer_offload; cost/offload.py, cost/states.py; issue 32 item 4).

References written out by hand, not the model against itself:
  - ZeRO-Offload (Ren et al. 2021, §4.1): fp32 master weights and Adam's moments on the host, the
    step on the CPU; the GPU sends its 16-bit gradients and receives the 16-bit parameters, "4M"
    bytes a step for M parameters;
  - Llama-3.1-8B (8,030,261,248 parameters) under FULLY_SHARD over 8 H100s: each GPU's optimizer
    updates 1/8 of them; host bytes per parameter fp32 master 4 + Adam m, v 8 + fp32 gradient 4;
  - the DGX H100 host: 2 Xeon 8480C x 307.2 GB/s of DDR5 over 8 GPUs = 76.8 GB/s per GPU, PCIe
    Gen5 x16 63 GB/s per direction; the CPU step streams 30 bytes per parameter (flops.
    optimizer_bytes_per_param with an fp32 gradient).
"""

from __future__ import annotations

import pytest

from conftest import run_cli
from parallmelism.config.compose import load_run_configs
from parallmelism.config.kernel_tables import kernel_model
from parallmelism.cost.breakdown import training_breakdown
from parallmelism.cost.offload import optimizer_offload_s
from parallmelism.engine import evaluate
from parallmelism.units import GIB

RUN = [
    "model=llama3.1-8b",
    "hardware=h100-sxm-80gb",
    "grid.ngpus=[8]",
    "grid.tp=[1]",
    "grid.pp=[1]",
    "grid.cp=[1]",
    "grid.micro_batch=[1]",
    "grid.dp_sharding=[FULLY_SHARD]",
    "grid.recompute=[full]",
    "grid.sequence_parallel=[false]",
    "workload.seq_len=8192",
    "workload.global_batch=16",
]
OFFLOAD = RUN + ["workload.optimizer_offload=true"]
P = 8_030_261_248
SHARD = P / 8


def _row(overrides):
    run = load_run_configs(overrides)[0][1]
    df, grid = evaluate(run)
    assert len(df) == 1
    return run, df.iloc[0], grid


def test_zero_offload_moves_4m_bytes_a_step():
    """16-bit gradients out and 16-bit parameters back: 4 bytes per parameter over the host link
    (one gradient reduction a step), as ZeRO-Offload counts it."""
    hw = load_run_configs(RUN)[0][1].hardware
    _, link_s = optimizer_offload_s(1e9, 2.0, 2.0, 8.0, hw, 1.0, 0.0)
    assert link_s == pytest.approx(4e9 / 63e9)


def test_states_move_to_the_host_by_hand():
    _, base, _ = _row(RUN)
    _, off, _ = _row(OFFLOAD)
    assert off["mem_host_optimizer_gib"] == pytest.approx(SHARD * (4 + 8 + 4) / GIB)
    assert off["mem_optimizer_gib"] == 0.0
    assert off["mem_weights_gib"] == pytest.approx(SHARD * 2 / GIB)  # the bf16 shard; fp32 master on the host
    assert off["mem_grads_gib"] == base["mem_grads_gib"]
    assert base["mem_total_gib"] - off["mem_total_gib"] == pytest.approx(SHARD * (2 + 8) / GIB)
    assert "mem_host_optimizer_gib" not in base and "time_optimizer_offload_s" not in base


def test_step_time_by_hand():
    """CPU Adam 30 B per parameter at 76.8 GB/s, bf16 parameters back at 63 GB/s; the fp32
    gradient copies (2 micro-batch reductions of 4 B per parameter) hide under backward."""
    run, off, grid = _row(OFFLOAD)
    cpu = SHARD * 30 / 76.8e9
    up = SHARD * 2 / 63e9
    assert off["time_optimizer_offload_s"] == pytest.approx(cpu + up, rel=1e-9)
    hw = run.accelerator()
    bd = training_breakdown(grid.columns, run.model, hw, run.workload, kernel_model(hw))
    parts = {k: v for k, (v, _) in bd["summary"]["where_time_goes"].items()}
    assert parts["optimizer offload (CPU Adam, exposed host copies; cost/offload.py)"] == pytest.approx(
        off["time_optimizer_offload_s"], rel=1e-12
    )
    assert parts.get("optimizer step", 0.0) == 0.0  # nothing on the GPU
    assert sum(parts.values()) == pytest.approx(off["time_step_s"], rel=1e-9)


def test_host_memory_bounds_the_fit():
    _, off, _ = _row(OFFLOAD + ["hardware.host_memory_gib=10"])
    assert off["mem_headroom_gib"] >= 0 and not off["fits"]  # 15.0 GiB of optimizer states > 10
    r = run_cli("show", *OFFLOAD, "hardware.host_memory_gib=10")
    assert r.returncode == 0, r.stderr
    assert "offloaded optimizer states need 15.0 GiB of host memory per GPU" in r.stdout + r.stderr


def test_refusal_without_host_memory_bandwidth():
    r = run_cli("show", *OFFLOAD[1:], "hardware=b200-180gb")
    assert r.returncode == 2, r.stderr
    assert "has no host_memory_gbps" in r.stderr + r.stdout
    assert "Traceback" not in r.stderr


def test_show_lists_it():
    r = run_cli("show", *OFFLOAD)
    assert r.returncode == 0, r.stderr
    assert "optimizer offload (CPU Adam" in r.stdout and "mem_host_optimizer_gib" in r.stdout


PARAMS = OFFLOAD + ["workload.param_offload=true"]


def test_parameter_offload_by_hand():
    """ZeRO-Infinity offload_param: the bf16 shard (2 B per parameter) joins the host states, the GPU
    keeps no parameter shard and uploads nothing after the CPU step; with full recompute each FSDP
    unit is gathered 3 times per micro-batch (forward, recompute, backward), each gather fetching
    the shard first: 2 micro-batches x 3 x shard x 2 B over 63 GB/s, hidden under the compute."""
    _, off, _ = _row(PARAMS)
    assert off["mem_host_optimizer_gib"] == pytest.approx(SHARD * (4 + 8 + 4 + 2) / GIB)
    assert off["mem_weights_gib"] == 0.0
    assert off["time_optimizer_offload_s"] == pytest.approx(SHARD * 30 / 76.8e9, rel=1e-9)  # no upload
    assert off["time_param_offload_s"] == 0.0  # 0.19 s of fetches under a 2 s step


def test_slow_host_link_exposes_the_fetches():
    from parallmelism.cost.offload import param_fetch_s

    exposed, link = param_fetch_s(1e9, 2.0, 6.0, 1.0, 5.0)
    assert link == pytest.approx(12.0) and exposed == pytest.approx(7.0)
    run, row, grid = _row(PARAMS + ["hardware.host_link_gbps=1"])
    assert 0.0 < row["time_param_offload_s"] < 6 * SHARD * 2 / 1e9
    hw = run.accelerator()
    bd = training_breakdown(grid.columns, run.model, hw, run.workload, kernel_model(hw))
    parts = {k: v for k, (v, _) in bd["summary"]["where_time_goes"].items()}
    assert sum(parts.values()) == pytest.approx(row["time_step_s"], rel=1e-9)


@pytest.mark.parametrize(
    "args, words",
    [
        (RUN + ["workload.param_offload=true"], "needs workload.optimizer_offload=true"),
        ([a for a in PARAMS if "dp_sharding" not in a] + ["grid.dp_sharding=[OPTIMIZER_STATES]"], "FULLY_SHARD"),
    ],
)
def test_parameter_offload_refusals(args, words):
    r = run_cli("show", *args)
    assert r.returncode == 2, r.stderr
    assert words in r.stderr + r.stdout and "Traceback" not in r.stderr


def test_export_writes_the_offload():
    """DeepSpeed's offload_optimizer / offload_param (device cpu) and Megatron's
    --optimizer-cpu-offload (with the precision-aware optimizer its arguments.py requires) are
    written and read back; Megatron has no parameter offload and refuses it."""
    import json

    from parallmelism.cli.export_cmd import _planned
    from parallmelism.errors import UserError
    from parallmelism.export import target_module

    ds = target_module("deepspeed")
    planned, _ = _planned(PARAMS, None)
    zero = json.loads(ds.render(planned))["zero_optimization"]
    assert zero["stage"] == 3 and zero["offload_optimizer"] == {"device": "cpu"} == zero["offload_param"]
    back = ds.parse(ds.render(planned), 8, planned.layers)
    assert back["workload.optimizer_offload"] is True and back["workload.param_offload"] is True
    with pytest.raises(UserError, match="parameter offload"):
        target_module("megatron").render(planned)
    planned, _ = _planned(OFFLOAD, None)
    text = target_module("megatron").render(planned)
    assert "--optimizer-cpu-offload" in text and "--use-precision-aware-optimizer" in text
    assert target_module("megatron").parse(text, None, planned.layers)["workload.optimizer_offload"] is True


# DeepSpeed's CPU optimizer path as it runs (stack overheads cpu_optimizer_s_per_gparam; cost/offload.py
# cpu_optimizer_s): seconds per 1e9 parameters of a host's ranks' shards together, never less than the bandwidth
# formula; ALST's 8-GPU 32k baseline (8.03 G parameters on one DGX H100 host) is the row it was fitted on.
DEEPSPEED = OFFLOAD + ["stack=deepspeed"]


def _deepspeed_rate():
    from parallmelism.config.compose import load_option

    spec = load_option("stack", "deepspeed")
    return spec.overheads_for("h100-sxm-80gb")[0].cpu_optimizer_s_per_gparam


def test_cpu_optimizer_runs_per_host_under_deepspeed():
    """8 ranks of one host: the whole model's 8.03 G parameters at the stack's seconds per 1e9 (0.91 s fitted:
    7.31 s, against 0.39 s of a shard streamed at 76.8 GB/s), plus the bf16 shard back at 63 GB/s."""
    s = _deepspeed_rate()
    assert s >= 0.22  # ZeRO-Offload Table 4's fastest CPU Adam: 1 G parameters in 0.22 s on a DGX-2
    _, off, _ = _row(DEEPSPEED)
    assert off["time_optimizer_offload_s"] == pytest.approx(P * s * 1e-9 + SHARD * 2 / 63e9, rel=1e-9)
    assert P * s * 1e-9 > SHARD * 30 / 76.8e9  # the per-host path, not the bandwidth formula


def test_cpu_optimizer_counts_the_ranks_on_a_host():
    """16 GPUs over two 8-GPU hosts: each host's 8 ranks hold half the model; 4 GPUs on one host hold it all."""
    s = _deepspeed_rate()
    for ngpus, host_params in ((16, P / 2), (4, P)):
        args = [a for a in DEEPSPEED if not a.startswith(("grid.ngpus", "workload.global_batch"))]
        _, off, _ = _row(args + [f"grid.ngpus=[{ngpus}]", f"workload.global_batch={2 * ngpus}"])
        shard = P / ngpus
        assert off["time_optimizer_offload_s"] == pytest.approx(host_params * s * 1e-9 + shard * 2 / 63e9, rel=1e-9)


def test_cpu_optimizer_never_faster_than_the_host_memory():
    """A host memory slower than the stated path (1 GB/s a GPU: 30 s for a 1.0 G shard) takes over."""
    _, off, _ = _row(DEEPSPEED + ["hardware.host_memory_gbps=1"])
    assert off["time_optimizer_offload_s"] == pytest.approx(SHARD * 30 / 1e9 + SHARD * 2 / 63e9, rel=1e-9)


def test_cpu_optimizer_rate_is_bounded_by_the_kernel():
    from pydantic import ValidationError

    from parallmelism.specs import Overheads

    assert Overheads(cpu_optimizer_s_per_gparam=0.22).cpu_optimizer_s_per_gparam == 0.22
    with pytest.raises(ValidationError, match="faster than the CPU Adam kernel"):
        Overheads(cpu_optimizer_s_per_gparam=0.1)


def test_cpu_optimizer_refusals():
    r = run_cli("show", *DEEPSPEED, "hardware.host_gpus=null")
    assert r.returncode == 2, r.stderr
    assert "set hardware.host_gpus=N" in r.stderr + r.stdout and "Traceback" not in r.stderr
    r = run_cli("show", *DEEPSPEED, "stack.overheads.a100-sxm-80gb.cpu_optimizer_s_per_gparam=0.1")
    assert r.returncode == 2, r.stderr
    assert "faster than the CPU Adam kernel" in r.stderr + r.stdout and "Traceback" not in r.stderr
