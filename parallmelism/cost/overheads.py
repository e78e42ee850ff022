"""Named overheads: what an end-to-end training step takes beyond its kernels and exposed links.

Kernel times come from kernel measurements (cost.kernels); these terms carry the rest, each with
units, set once per (software stack, accelerator) in the `overheads` block of conf/stack/NAME.yaml
(specs/stack.py; the accelerator reaches here with them resolved, specs.run.under_stack) and fitted
on that stack's end-to-end step times by `python -m parallmelism.validate.calibrate` (never per case):

  layer_launch_us       framework + launch time per transformer layer per micro-batch pass
                        (forward + backward: ~20 kernel launches, the Python of the module
                        hooks, the host-device syncs of the schedule), µs, added to every
                        micro-batch of a stage as n_layers · layer_launch_us.
  kernel_launch_us      host time per kernel launch, µs (Python, the ATen dispatcher, cudaLaunchKernel
                        of one eager op: a few to tens of µs), times the layer's kernels per
                        micro-batch pass as the stack counts them (layer_kernels_eager, compile
                        off; layer_kernels_compiled, on), added per layer per micro-batch. Exposed
                        only where the host cannot run ahead of the GPU (FSDP1's CPU syncs).
  unit_sync_us          per wrapped FSDP unit (one layer) per micro-batch pass, µs: FSDP1 issues each
                        FlatParameter all-gather from the CPU behind a wait on the computation
                        stream and, with limit_all_gathers, blocks the CPU on the event of the
                        all-gather two units back (torch 2.2 distributed/fsdp/_runtime_utils.py
                        _unshard; _limiter_utils.py _FreeEventQueue: at most 2 in flight); the
                        unit's pre/post hooks and reduce-scatter launch.
  comm_contention       fraction of the communication hidden under compute (TP, CP, EP per
                        micro-batch; DP per step) that still lengthens compute: NCCL kernels
                        take SMs and HBM bandwidth from the GEMMs they overlap with. Dimensionless.
  step_fixed_ms         host/framework time per optimizer step outside the micro-batches (the
                        optimizer's multi-tensor launches, gradient-norm and clipping reductions,
                        loss/metrics syncs, the next batch's host work), ms, added once per step.
  straggler_per_doubling  fraction of the step lost per doubling of the GPU count beyond one
                        scale-up domain (synchronisation waits on the slowest rank, jitter):
                        step · (1 + x·log2(ngpus / domain_size)) when ngpus > domain_size.
  moe_expert_launch_us  host time per kernel launch of a MoE layer's per-expert kernels, µs: the
                        grouped expert GEMMs are one cuBLAS launch per local expert, and in fp8
                        each expert's input and output gradient is quantized on its own
                        (`moe_expert_launches`). Megatron-Core syncs device to host for the tokens
                        per expert in every MoE layer's forward (d98e8a64 moe/token_dispatcher.py
                        _HybridEPManager: "HybridEP sizes buffers dynamically (CPU sync in
                        dispatch)"; moe/experts.py TEGroupedMLP: tokens_per_expert.tolist() for
                        GroupedLinear's m_splits), so the launch queue is empty there. Added to
                        every micro-batch as MoE layers x launches x µs: it assumes none of that
                        host time hides under the kernels. Stated, not fitted: megatron-te 10 µs
                        (an eager op's host time, h100_moe_experts.csv's per-expert loop);
                        0 where a stack's expert GEMMs are one call (automodel's ops.gmm).
The optimizer step is not here: it is HBM traffic (cost.flops.optimizer_bytes_per_param) at the
measured bandwidth (cost.kernels). Under optimizer offload it runs on the host (cost/offload.py), where
  cpu_optimizer_s_per_gparam  a stack's CPU optimizer path as it runs, s per 1e9 parameters of the
                        optimizer shards of a host's ranks together (`cpu_optimizer_s`); 0: the
                        host memory's bandwidth alone.
"""

from __future__ import annotations

import numpy as np


def _overheads(hw):
    """The accelerator's resolved overheads (specs.run.under_stack sets them from the training stack)."""
    if hw.overheads is None:
        raise ValueError(
            f"accelerator {hw.name} reaches the cost model without its training overheads: pass "
            "RunConfig.accelerator() (specs.run.under_stack), which takes them from the stack"
        )
    return hw.overheads


def layer_host_us(oh, compiled: bool) -> float:
    """Host time per layer per micro-batch pass, µs: layer_launch_us, plus the layer's kernels (counted
    with compile off or on) times kernel_launch_us, plus unit_sync_us per wrapped FSDP unit."""
    kernels = oh.layer_kernels_compiled if compiled else oh.layer_kernels_eager
    return oh.layer_launch_us + kernels * oh.kernel_launch_us + oh.unit_sync_us


def micro_batch_overhead_s(hw, n_layers, hidden_comm_s, compiled: bool = False):
    """Seconds added to one micro-batch of a stage: launch/framework + SM contention of hidden comm."""
    oh = _overheads(hw)
    per_layer_us = layer_host_us(oh, compiled)
    hidden = np.asarray(hidden_comm_s, dtype=np.float64)
    return np.asarray(n_layers, dtype=np.float64) * per_layer_us * 1e-6 + oh.comm_contention * hidden


# Kernel launches per local expert per MoE layer per micro-batch, Transformer Engine v2.8
# (40c69e75) transformer_engine/pytorch/module/grouped_linear.py, the expert MLP's two
# GroupedLinear modules (fc1, fc2; Megatron-Core d98e8a64 moe/experts.py TEGroupedMLP):
#   GEMMs  general_grouped_gemm runs one cuBLAS GEMM per expert (num_gemms = len(m_splits)): each
#          module's forward (line 171), and its dgrad (346) and wgrad (396) in backward
#   fp8    tex.split_quantize quantizes each expert's split on its own (the forward input, line 127;
#          the backward output gradient, line 306), and a current-scaling quantize is three kernels
#          (csrc/quantizer.cpp Float8CurrentScalingQuantizer::quantize: nvte_compute_amax, the scale
#          from the amax, the cast). The weights' casts run in the first micro-batch only (cached).
MOE_EXPERT_LAUNCHES = {  # (forward, backward) per local expert, both modules
    "gemm": (2.0, 4.0),
    "fp8_quantize": (2.0 * 3.0, 2.0 * 3.0),
}


def moe_expert_launches(local_experts, low_precision, full_recompute=False):
    """Kernel launches of one MoE layer's local experts per micro-batch, forward + backward (+ the
    forward again under full recompute): the grouped GEMMs' per-expert launches and, where the
    expert GEMMs run in fp8/fp4 (`low_precision`, a bool or one per row: with
    `workload.low_precision_gemms=where_faster` they may stay in bf16), the per-expert quantizes
    (MOE_EXPERT_LAUNCHES)."""
    low = np.asarray(low_precision, dtype=np.float64)
    gemm, quantize = MOE_EXPERT_LAUNCHES["gemm"], MOE_EXPERT_LAUNCHES["fp8_quantize"]
    fwd = gemm[0] + quantize[0] * low
    bwd = gemm[1] + quantize[1] * low
    per_expert = fwd * (1.0 + np.asarray(full_recompute, dtype=np.float64)) + bwd
    return per_expert * np.asarray(local_experts, dtype=np.float64)


def expert_quantize_host_s(hw, local_experts) -> tuple:
    """(forward, backward) host seconds of ONE expert module's per-expert fp8/fp4 quantize launches
    in a micro-batch (half of MOE_EXPERT_LAUNCHES["fp8_quantize"], which counts both modules), at
    the stack's moe_expert_launch_us: what running that module's grouped GEMM in low precision adds
    beside its kernels (cost.roofline's where_faster choice weighs it). 0 where the accelerator
    carries no training overheads (serving)."""
    us = 0.0 if hw.overheads is None else hw.overheads.moe_expert_launch_us
    per_module = np.asarray(local_experts, dtype=np.float64) * us * 1e-6 / 2.0
    fwd, bwd = MOE_EXPERT_LAUNCHES["fp8_quantize"]
    return fwd * per_module, bwd * per_module


def moe_layer_overhead_s(hw, n_moe_layers, local_experts, low_precision, full_recompute=False):
    """Seconds added to one micro-batch of a stage by its MoE layers' per-expert launches, exposed
    behind the dispatcher's device-to-host sync (module docstring, moe_expert_launch_us)."""
    us = _overheads(hw).moe_expert_launch_us
    n = np.asarray(n_moe_layers, dtype=np.float64)
    if not us:
        return np.zeros(np.shape(n))
    return n * moe_expert_launches(local_experts, low_precision, full_recompute) * us * 1e-6


def straggler_doublings(hw, ngpus):
    """Doublings of the GPU count beyond one scale-up domain: log2(ngpus / domain_size), at least 0."""
    return np.log2(np.maximum(np.asarray(ngpus, dtype=np.float64) / hw.scale_up.domain_size, 1.0))


def dp_contention_s(hw, hidden_dp_s):
    """Seconds the DP traffic hidden under a stage's compute adds to it (comm_contention): part of the
    compute side of the step, which the link bound then applies to (cost/steptime.py)."""
    return _overheads(hw).comm_contention * np.asarray(hidden_dp_s, dtype=np.float64)


def step_overhead_s(hw, step_s, ngpus, doublings=None):
    """Seconds added to a whole step: the fixed per-step host time and stragglers at scale,
    f + x·d·(step + f). doublings: `straggler_doublings(hw, ngpus)` when the caller has it (a log2
    per row costs as much as a dozen additions)."""
    oh = _overheads(hw)
    doublings = straggler_doublings(hw, ngpus) if doublings is None else doublings
    fixed = oh.step_fixed_ms * 1e-3
    return fixed + oh.straggler_per_doubling * doublings * (np.asarray(step_s) + fixed)
