"""Offload to host memory: activations (Megatron-Core --cpu-offloading --cpu-offloading-num-layers N,
Transformer Engine's layer-level CPU offload): which layers leave HBM, what stays, what it costs;
and the optimizer (workload.optimizer_offload, ZeRO-Offload; below `optimizer_offload_s`).

Rule implemented, from the sources:
  - Megatron-Core (megatron/core/transformer/transformer_config.py: cpu_offloading,
    cpu_offloading_num_layers "the number of transformer layers for which activations has to be
    offloaded", cpu_offloading_activations; it refuses cpu_offloading_num_layers >= num_layers)
    builds one offload context per TransformerBlock, i.e. per pipeline stage, over the block's
    first N layers: a stage of n layers offloads min(N, n - 1) (its last layer never).
  - Transformer Engine (transformer_engine/pytorch/cpu_offload.py, the asynchronous double-buffer
    group handler): layer i's saved tensors are copied device->host on a side stream once its
    forward ends, overlapping layer i+1's forward, which waits for that copy at its own end; in
    backward layer i's tensors are reloaded host->device while layer i+1's backward runs. So
    one offloaded layer's buffers are resident at a time (`RESIDENT_OFFLOADED_LAYERS`).
Bytes moved per offloaded layer and micro-batch, each way: the layer's saved activations
(cost/activations.py, Korthikanti et al. 2022). Time: the copy hides under the next layer's
forward (device->host) and the neighbouring layer's backward (host->device); only the excess is
exposed, once per offloaded layer per micro-batch in each direction.
"""

from __future__ import annotations

import numpy as np

from .flops import optimizer_bytes_per_param
from .states import HOST_GRAD_BYTES

RESIDENT_OFFLOADED_LAYERS = 1  # TE: one group in flight (offloading in forward, prefetched in backward)


def offloaded_layers(requested: int, stage_layers) -> np.ndarray:
    """Layers of a stage of `stage_layers` layers whose activations go to host: min(N, n - 1)."""
    n = np.asarray(stage_layers, dtype=np.float64)
    return np.minimum(float(requested), np.maximum(n - 1.0, 0.0))


def resident_offloaded_layers(offloaded) -> np.ndarray:
    """Offloaded layers whose activation buffers are in HBM at the peak: the one in flight."""
    return np.minimum(np.asarray(offloaded, dtype=np.float64), RESIDENT_OFFLOADED_LAYERS)


def transfer_s(layer_bytes, host_link_gbps: float) -> np.ndarray:
    """Seconds one offloaded layer's saved activations take over the host link, one direction."""
    return np.asarray(layer_bytes, dtype=np.float64) / (host_link_gbps * 1e9)


def offload_exposed_s(layer_bytes, host_link_gbps: float, fwd_layer_s, bwd_layer_s, offloaded) -> np.ndarray:
    """Exposed seconds per micro-batch of a stage's offloaded layers: each copy out hides under one
    layer's forward, each copy back under one layer's backward (with its recompute); the excess
    of either is on the critical path."""
    x = transfer_s(layer_bytes, host_link_gbps)
    per_layer = np.maximum(0.0, x - fwd_layer_s) + np.maximum(0.0, x - bwd_layer_s)
    return np.asarray(offloaded, dtype=np.float64) * per_layer


# Optimizer offload (workload.optimizer_offload): DeepSpeed ZeRO-Offload (Ren et al. 2021,
# "ZeRO-Offload: Democratizing Billion-Scale Model Training", §4: fp32 master weights, Adam's
# moments and the step on the CPU; 16-bit gradients go to the host and 16-bit parameters come back,
# 4M bytes a step for M parameters) and Megatron-Core's --optimizer-cpu-offload (HybridDeviceOptimizer:
# the same copies, gradients D2H, updated parameters H2D). Per GPU, for the P parameters of its
# optimizer shard, over hardware.host_link_gbps each way:
#   gradients out   grad_bytes · P per gradient reduction (each micro-batch's where gradients are
#                   reduced per micro-batch: DeepSpeed accumulates them on the host), issued as the
#                   reduction's buckets finish: hidden under that micro-batch's backward, the excess
#                   exposed
#   CPU Adam        flops.optimizer_bytes_per_param · P / hardware.host_memory_gbps (fp32 gradient): a streaming
#                   kernel (DeepSpeedCPUAdam's AVX loop: ~10 flops per parameter against ~30 bytes),
#                   bound by the host memory; after the last backward, exposed. The rate is the host's
#                   datasheet DRAM peak (an efficiency of 1): no hardware file's host has a measured CPU
#                   Adam step. The one measurement with a stated host, ZeRO-Offload's Table 4 (a DGX-2's 2
#                   Xeon 8168, 255.9 GB/s), ran at 0.39-0.53 of that peak: 2.57 s for 10 B parameters
#                   where this formula gives 1.17 s (benchmarks/cpu_adam_rate.py). Another machine's
#                   efficiency, not carried to these hosts. Where the stack states its CPU optimizer
#                   path as it runs (its overheads' cpu_optimizer_s_per_gparam, `cpu_optimizer_s`), the
#                   step takes that much per 1e9 parameters of the host's ranks together, never less
#                   than the bandwidth formula
#   parameters back param_bytes · P (16-bit, or the fp8 copies with fp8 parameters), exposed: the
#                   next forward's first gather needs them (ZeRO-Offload's delayed parameter update,
#                   which overlaps them with the next step, is an option this model does not take)
def cpu_adam_s(params, moment_bytes: float, param_bytes: float, host_memory_gbps: float) -> np.ndarray:
    """Seconds of the CPU optimizer step over `params` parameters at the host memory bandwidth."""
    per_param = optimizer_bytes_per_param(param_bytes, HOST_GRAD_BYTES, moment_bytes)  # the GPU step's bytes
    return np.asarray(params, dtype=np.float64) * per_param / (host_memory_gbps * 1e9)


# A stack's CPU optimizer path as it runs (its overheads' cpu_optimizer_s_per_gparam, fitted per stack): the
# seconds a host takes per 1e9 parameters of the optimizer shards of its ranks, which run their steps at once
# after the last backward on the host's cores. DeepSpeed's launcher sets OMP_NUM_THREADS only under
# --bind_cores_to_rank (deepspeed/launcher/launch.py: `if args.bind_cores_to_rank: ... current_env
# ["OMP_NUM_THREADS"] = f"{cores_per_rank}"`), so without it each rank's DeepSpeedCPUAdam runs an OpenMP pool
# over all the host's cores, a node's eight pools on the same cores; DeepSpeed PR #7474 (docs/_tutorials/
# zero-offload.md "CPU Adam perf tuning", blogs/zenflow-corebinding: 2887 -> 2497 ms a step binding cores on
# 2 A100s) names the CPU optimizer as where ZeRO-Offload spends its time. Per host, not per rank: ALST's 32k
# baselines (8 and 32 H100s, 1.0 and 0.25 G parameters a rank, 8 and 2 G a node) leave ~1 s per 1 G a node,
# and its 1-GPU baseline (8 G on one rank, 26 s a step in all) rules out a per-rank rate.
def host_ranks(hw, ngpus) -> np.ndarray:
    """Ranks whose optimizer steps share one host: the run's GPUs up to the host's (hw.host_gpus; 1 where
    the accelerator does not describe its host)."""
    per_host = float(hw.host_gpus or 1)
    return np.minimum(np.asarray(ngpus, dtype=np.float64), per_host)


def cpu_optimizer_s(params, ranks_on_host, s_per_gparam: float) -> np.ndarray:
    """Seconds of a rank's offloaded optimizer step at its stack's host rate: `s_per_gparam` seconds per 1e9
    parameters of the `ranks_on_host` ranks' shards of `params` parameters each, which share the host."""
    node = np.asarray(params, dtype=np.float64) * np.asarray(ranks_on_host, dtype=np.float64)
    return node * s_per_gparam * 1e-9


def optimizer_offload_s(
    params,
    grad_bytes,
    param_bytes,
    moment_bytes,
    hw,
    reductions,
    bwd_window_s,
    params_on_host: bool = False,
    ranks_on_host=1.0,
):
    """(exposed seconds per step, host-link seconds per step) of optimizer offload for a GPU whose
    optimizer shard holds `params` parameters (module comment above): the gradient copies hide
    under the backward of the micro-batch whose reduction issues them (`bwd_window_s`), the CPU step
    and the parameter upload are exposed; with the parameters kept on the host
    (`params_on_host`, parameter offload) nothing is uploaded: the gathers fetch them
    (`param_fetch_s`). The CPU step streams at the host memory's bandwidth, or where the stack states
    its path's rate (hw.overheads.cpu_optimizer_s_per_gparam), takes that for the `ranks_on_host` ranks on
    the host, whichever is longer."""
    P = np.asarray(params, dtype=np.float64)
    grads_out = transfer_s(grad_bytes * P, hw.host_link_gbps)
    params_back = 0.0 * P if params_on_host else transfer_s(param_bytes * P, hw.host_link_gbps)
    step = cpu_adam_s(P, moment_bytes, param_bytes, hw.host_memory_gbps)
    s_per_gparam = 0.0 if hw.overheads is None else hw.overheads.cpu_optimizer_s_per_gparam
    if s_per_gparam:
        step = np.maximum(step, cpu_optimizer_s(P, ranks_on_host, s_per_gparam))
    exposed = reductions * np.maximum(0.0, grads_out - bwd_window_s) + step + params_back
    return exposed, reductions * grads_out + params_back


# Parameter offload (workload.param_offload; ZeRO-Infinity, Rajbhandari et al. 2021 §5-6,
# offload_param device=cpu): FULLY_SHARD's 16-bit parameter shards live on the host; before each
# FSDP all-gather of a unit the rank copies its shard host -> device. The fetches are prefetched
# ahead of use (ZeRO-Infinity's overlap-centric design, stage3_prefetch_bucket_size), so they hide
# under the stage's compute timeline on the host link (not the NIC the gathers use): exposed only
# where one step's fetches outlast it.


def param_fetch_s(shard_params, param_bytes, gathers_per_step, host_link_gbps: float, timeline_s):
    """(exposed, link) seconds per step of parameter offload: `gathers_per_step` fetches of the
    stage's parameter shard (param_bytes each; one per FSDP gather pass) over the host link,
    hidden under `timeline_s`."""
    link = np.asarray(gathers_per_step, dtype=np.float64) * transfer_s(param_bytes * shard_params, host_link_gbps)
    return np.maximum(0.0, link - timeline_s), link
