"""Activation offload to host memory (cost/offload.py; issue 32 item 4).

References, not the model against itself:
  - bytes one Llama-3-70B layer saves (and an offloaded layer moves each way), written out by hand
    from Korthikanti et al. 2022's per-tensor inventory (cost/activations.py's docstring) for
    s = 8192, b = 2, t = 1, no SP, flash attention, no recompute;
  - the rule from Megatron-Core / Transformer Engine: N of a stage's layers leave HBM but for the
    one in flight, never the last layer;
  - the published recipe: NVIDIA Megatron-Bridge 26.04.01, Llama-3 70B on 64 GB200, FP8,
    Megatron-FSDP, micro-batch 2, global batch 256, 40 of 80 layers offloaded, no recompute,
    4,224 tokens/s/GPU (its prediction is printed, nothing is fitted to it).
"""

from __future__ import annotations

import numpy as np
import pytest

from conftest import run_cli
from parallmelism.config.compose import load_run_configs
from parallmelism.config.kernel_tables import kernel_model
from parallmelism.cost.activations import layer_activation_bytes
from parallmelism.cost.breakdown import training_breakdown
from parallmelism.cost.offload import offload_exposed_s, offloaded_layers, resident_offloaded_layers
from parallmelism.engine import evaluate
from parallmelism.units import GIB

RECIPE = [
    "model=llama3.1-70b",
    "hardware=gb200-nvl72",
    "grid.ngpus=[64]",
    "grid.tp=[1]",
    "grid.pp=[1]",
    "grid.cp=[1]",
    "grid.micro_batch=[2]",
    "grid.dp_sharding=[FULLY_SHARD]",
    "grid.recompute=[none]",
    "grid.sequence_parallel=[false]",
    "workload.seq_len=8192",
    "workload.global_batch=256",
    "workload.precision=fp8",
    "workload.low_precision_gemms=all",
    "workload.grad_reduce_dtype=bf16",
]
PUBLISHED_TOKENS_PER_S_PER_GPU = 4224  # Megatron-Bridge 26.04.01 performance table (stack_cases.csv)

# Korthikanti 2022 inventory for Llama-3-70B (h 8192, q 8192, 8 KV heads of 128, I 28672 SwiGLU,
# 64 heads, no dropout), tok = s·b = 16384 tokens on the rank, t = r = 1:
#   norm + QKV inputs 4h, norm + fc1 inputs 4h, Q 2q, K+V 4·128·8, projection input 2q,
#   flash log-sum-exp 4·64 (fp32 per head), SwiGLU 6I
LAYER_BYTES_BF16 = 16384 * (4 * 8192 + 4 * 8192 + 2 * 8192 + 4 * 128 * 8 + 2 * 8192 + 4 * 64 + 6 * 28672)
# The recipe is fp8 under Transformer Engine (low_precision_gemms=all): the QKV, fc1 and fc2 GEMMs
# save their inputs in fp8 (1 B: 3h, 3h, SwiGLU 4I + I) and out_proj keeps an fp8 copy (q) of the
# attention output beside the bf16 one (cost/activations.py FP8_SAVED_INPUTS)
LAYER_BYTES = 16384 * (3 * 8192 + 3 * 8192 + 2 * 8192 + 4 * 128 * 8 + 3 * 8192 + 4 * 64 + 5 * 28672)


def _row(overrides):
    run = load_run_configs(overrides)[0][1]
    df, _ = evaluate(run)
    assert len(df) == 1
    return run, df.iloc[0]


@pytest.fixture(scope="module")
def recipe():
    return {k: _row(RECIPE + [f"workload.activation_offload_layers={k}"]) for k in (0, 40)}


def test_layer_bytes_reference():
    assert LAYER_BYTES_BF16 == 4_500_488_192  # 4.19 GiB per layer per micro-batch
    assert LAYER_BYTES == 3_896_508_416  # 3.63 GiB in fp8
    kw = dict(s=8192, b=2, t=1, cp=1, sp=False, recompute=0, flash=True)
    model = load_run_configs(RECIPE)[0][1].model
    assert layer_activation_bytes(model, **kw) == LAYER_BYTES_BF16
    assert layer_activation_bytes(model, fp8_inputs=True, **kw) == LAYER_BYTES


def test_rule_from_the_source():
    # a stage offloads min(N, n - 1) layers; one offloaded layer's buffers stay resident
    assert list(offloaded_layers(40, np.array([80, 41, 40, 1]))) == [40, 40, 39, 0]
    assert list(resident_offloaded_layers(np.array([0.0, 1.0, 40.0]))) == [0, 1, 1]
    # a copy hides under a layer's forward (out) and backward (back): only the excess shows
    x = 1e9 / 100e9  # 10 ms per direction
    assert offload_exposed_s(1e9, 100.0, 0.004, 0.02, 3) == pytest.approx(3 * 0.006)
    assert offload_exposed_s(1e9, 100.0, 0.02, 0.02, 3) == 0.0
    assert offload_exposed_s(1e9, 100.0, 0.0, 0.0, 1) == pytest.approx(2 * x)


def test_memory_moves_the_offloaded_layers_to_host(recipe):
    (_, off0), (run, off40) = recipe[0], recipe[40]
    # 40 layers leave HBM, one of them stays resident in flight: 39 layers' bytes fewer
    assert off0["mem_activations_gib"] - off40["mem_activations_gib"] == pytest.approx(39 * LAYER_BYTES / GIB)
    assert off40["mem_host_offload_gib"] == pytest.approx(40 * LAYER_BYTES / GIB)
    assert off40["mem_host_offload_gib"] <= run.hardware.host_memory_gib
    assert "mem_host_offload_gib" not in off0 and "time_offload_exposed_s" not in off0
    # the states do not move
    assert off0["mem_states_gib"] == off40["mem_states_gib"]


def test_recipe_fits_with_fp8_saved_inputs(recipe):
    """Issue 32's done-when: the GB200 Llama-70B FSDP recipe with 40 layers offloaded builds, fits
    and times. Counted with bf16 GEMM inputs it needed 201.7 GiB of 185; Transformer Engine keeps
    fp8 inputs: 41 layers' buffers in HBM (40 kept, 1 offloaded in flight) x (LAYER_BYTES_BF16 -
    LAYER_BYTES) = 23.1 GiB fewer."""
    run, off40 = recipe[40]
    assert off40["fits"] and off40["mem_total_gib"] <= run.hardware.hbm_usable_gib
    bf16 = _row(RECIPE + ["workload.activation_offload_layers=40", "workload.low_precision_gemms=where_faster"])[1]
    # torchao-style fp8 (where_faster) saves high-precision inputs: the bf16 inventory
    assert bf16["mem_activations_gib"] - off40["mem_activations_gib"] == pytest.approx(
        41 * (LAYER_BYTES_BF16 - LAYER_BYTES) / GIB
    )


def test_bf16_edge_layers_save_bf16_inputs():
    """--first-last-layers-bf16 1: layer 0 (offloaded, on the host) and layer 79 (in HBM) save the
    bf16 inventory; the resident offloaded buffer is layer 0's."""
    extra = (LAYER_BYTES_BF16 - LAYER_BYTES) / GIB
    _, base = _row(RECIPE + ["workload.activation_offload_layers=40"])
    _, edge = _row(RECIPE + ["workload.activation_offload_layers=40", "workload.fp8_bf16_edge_layers=1"])
    assert edge["mem_activations_gib"] - base["mem_activations_gib"] == pytest.approx(2 * extra)
    assert edge["mem_host_offload_gib"] - base["mem_host_offload_gib"] == pytest.approx(extra)


def test_recipe_times_with_the_copies_hidden(recipe):
    """NVLink-C2C moves a layer's 4.5 GB in 10 ms, under one fp8 layer's forward on a GB200: the
    offload costs no step time here, so the step equals the no-offload step."""
    (_, off0), (_, off40) = recipe[0], recipe[40]
    assert off40["time_offload_exposed_s"] == 0.0
    assert off40["time_step_s"] == pytest.approx(off0["time_step_s"], rel=1e-12)
    assert np.isfinite(off40["tokens_per_s_per_gpu"]) and off40["tokens_per_s_per_gpu"] > 0
    print(
        f"\nLlama-3 70B GB200 FSDP offload 40: predicted {off40['tokens_per_s_per_gpu']:.0f} tokens/s/GPU, "
        f"published {PUBLISHED_TOKENS_PER_S_PER_GPU}; HBM {off40['mem_total_gib']:.1f} GiB "
        f"(no offload {off0['mem_total_gib']:.1f}), host {off40['mem_host_offload_gib']:.1f} GiB"
    )


def test_slow_host_link_exposes_the_excess_and_show_names_it():
    """At 10 GB/s a layer's copy (0.45 s) outlasts a layer's forward and backward: the exposed term
    is, per micro-batch, N·(2x − forward − backward) with the layer times of `show`'s per-op table."""
    overrides = RECIPE + ["workload.activation_offload_layers=40", "hardware.host_link_gbps=10"]
    run = load_run_configs(overrides)[0][1]
    df, grid = evaluate(run)
    row = df.iloc[0]
    hw = run.accelerator()
    bd = training_breakdown(grid.columns, run.model, hw, run.workload, kernel_model(hw))
    layer_ops = [r for r in bd["ops"] if r["count"] == 80]
    fwd = sum(r["time_fwd_ms"] for r in layer_ops) / 1e3
    bwd = sum(r["time_bwd_ms"] + r["time_recompute_ms"] for r in layer_ops) / 1e3
    x = LAYER_BYTES / 10e9
    m = row["num_micro_batches"]
    assert x > fwd and x > bwd
    assert row["time_offload_exposed_s"] == pytest.approx(m * 40 * (2 * x - fwd - bwd), rel=1e-9)
    parts = {k: v for k, (v, _) in bd["summary"]["where_time_goes"].items()}
    assert parts["exposed activation offload (host link; cost/offload.py)"] == pytest.approx(
        row["time_offload_exposed_s"], rel=1e-12
    )
    assert sum(parts.values()) == pytest.approx(row["time_step_s"], rel=1e-9)


@pytest.mark.parametrize(
    "args, words",
    [
        (["hardware=h100-grand-teton-96gb", "workload.activation_offload_layers=4"], "has no host_link_gbps"),
        (["workload.activation_offload_layers=80"], "must be below"),
        (["model=mixtral-8x7b", "workload.activation_offload_layers=4"], "dense layers only"),
    ],
)
def test_refusals(args, words):
    r = run_cli("show", "grid.ngpus=[8]", *args)
    assert r.returncode == 2, r.stderr
    assert words in r.stderr + r.stdout
    assert "Traceback" not in r.stderr


def test_host_memory_bounds_the_fit():
    """Where the host memory cannot hold the offloaded activations the row does not fit, and `show`
    says so in one line naming the host memory (not the HBM, which holds its share)."""
    overrides = RECIPE + ["workload.activation_offload_layers=40", "grid.micro_batch=[1]"]
    _, row = _row(overrides + ["hardware.host_memory_gib=50"])
    assert row["mem_host_offload_gib"] == pytest.approx(40 * LAYER_BYTES / 2 / GIB)  # 83.8 GiB > 50
    assert row["mem_headroom_gib"] >= 0 and not row["fits"]
    r = run_cli("show", *overrides, "hardware.host_memory_gib=50")
    assert r.returncode == 0, r.stderr
    assert "GiB of host memory per GPU" in r.stdout + r.stderr


def test_show_builds_fits_and_times_the_recipe():
    r = run_cli("show", *RECIPE, "workload.activation_offload_layers=40")
    assert r.returncode == 0, r.stderr
    assert "fits: " in r.stdout and "GiB usable on gb200-nvl72" in r.stdout
    assert "tokens_per_s_per_gpu" in r.stdout
