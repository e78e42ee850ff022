"""Named overheads: what an end-to-end training step takes beyond its kernels and exposed links.

Kernel times come from kernel measurements (cost.kernels); these terms carry the rest, each with
units, set once per (software stack, accelerator) in the `overheads` block of conf/stack/NAME.yaml
(specs/stack.py; the accelerator reaches here with them resolved, specs.run.under_stack) and fitted
on that stack's end-to-end step times by `python -m parallmelism.validate.calibrate` (never per case):

  layer_launch_us       framework + launch time per transformer layer per micro-batch pass
                        (forward + backward: ~20 kernel launches, the Python of the module
                        hooks, the host-device syncs of the schedule), µs, added to every
                        micro-batch of a stage as n_layers · layer_launch_us.
  comm_contention       fraction of the communication hidden under compute (TP, CP, EP per
                        micro-batch; DP per step) that still lengthens compute: NCCL kernels
                        take SMs and HBM bandwidth from the GEMMs they overlap with. Dimensionless.
  step_fixed_ms         host/framework time per optimizer step outside the micro-batches (the
                        optimizer's multi-tensor launches, gradient-norm and clipping reductions,
                        loss/metrics syncs, the next batch's host work), ms, added once per step.
  straggler_per_doubling  fraction of the step lost per doubling of the GPU count beyond one
                        scale-up domain (synchronisation waits on the slowest rank, jitter):
                        step · (1 + x·log2(ngpus / domain_size)) when ngpus > domain_size.
The optimizer step is not here: it is HBM traffic (cost.flops.optimizer_bytes_per_param) at the
measured bandwidth (cost.kernels).
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


def micro_batch_overhead_s(hw, n_layers, hidden_comm_s):
    """Seconds added to one micro-batch of a stage: launch/framework + SM contention of hidden comm."""
    oh = _overheads(hw)
    return np.asarray(n_layers, dtype=np.float64) * oh.layer_launch_us * 1e-6 + oh.comm_contention * np.asarray(
        hidden_comm_s, dtype=np.float64
    )


def straggler_doublings(hw, ngpus):
    """Doublings of the GPU count beyond one scale-up domain: log2(ngpus / domain_size), at least 0."""
    return np.log2(np.maximum(np.asarray(ngpus, dtype=np.float64) / hw.scale_up.domain_size, 1.0))


def step_overhead_s(hw, step_s, ngpus, hidden_dp_s, doublings=None):
    """Seconds added to a whole step: contention of the hidden DP traffic, the fixed per-step host
    time and stragglers at scale. doublings: `straggler_doublings(hw, ngpus)` when the caller
    has it (a log2 per row costs as much as a dozen additions)."""
    oh = _overheads(hw)
    doublings = straggler_doublings(hw, ngpus) if doublings is None else doublings
    fixed = oh.comm_contention * np.asarray(hidden_dp_s, dtype=np.float64) + oh.step_fixed_ms * 1e-3
    return fixed + oh.straggler_per_doubling * doublings * (np.asarray(step_s) + fixed)
