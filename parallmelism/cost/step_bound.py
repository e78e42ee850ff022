"""An admissible lower bound on a training layout's step time, far cheaper than the step time.

A search that keeps the k fastest layouts per group (search/collectors.py TopKCollector) has no use
for the step time of a layout whose lower bound already exceeds the k-th fastest step it has kept:
the driver (search/chunks.py) runs the step-time model (cost/steptime.py) only on the other rows.
The bound reads the op times the step time sums (the kernel model, once per distinct op shape and
recompute mode) and drops every other term, each of which is >= 0:

  step           = max over stages s of  (B_s + E_s)                          [steptime._training_time]
  B_s            = total_s + bubble + pp_exposed + DP contention, raised to the busiest link
                >= m·T_mb,s + bubble      (links.bind_rows; DP exposed and contention, optimizer, offload, P2P >= 0)
  E_s            = f + x·d·(B_s + f)                        (overheads.step_overhead_s; f the per-step
                                                              host time, x·d the straggler fraction)
  T_mb,s         = compute_s + exposed TP/CP/EP + launch/MoE overheads + offload
                >= C_s = compute_s + n_s·host                (_micro_batch_terms; n_s layers on s)
  compute_s      = Σ_sets count_s,set · (fwd + bwd + recompute fwd) [+ weight casts >= 0]
  bubble         = rate·m·T_mb(typical) + fill/drain hops >= rate·m·typical(C)   (pipeline.py)
so that
  step >= LB = (1 + x·d) · (m · max_s C_s + rate · m · typical(C_first, C_mid, C_last) + f)
with the middle stage in the max only when pp > 2 (as in the step) and `typical` the pipeline's
fill/drain pace (pipeline.fill_drain_stage_s, monotone in each stage). Where fp8/fp4 GEMMs may be
chosen for a weight cast in backward too (steptime.recasts_in_backward), a set's compute is the
smaller of its two variants. The computed LB is scaled by (1 − ROUNDING_SLACK) so that sums taken
in another order than the step time's never put it above the step by a rounding error.

tests/test_step_bound.py checks LB <= step on random grids, models and stacks.
"""

from __future__ import annotations

import numpy as np

from .keys import gather, per_key
from .layout import TrainingLayout
from .overheads import _overheads, layer_host_us, straggler_doublings
from .pipeline import bubble_rate, fill_drain_stage_s
from .roofline import Rates
from .steptime import (
    RECAST,
    ShapeOpSums,
    _ops_sums,
    _stage_layout,
    bf16_edge_layers,
    per_key_at_rows,
    shape_key,
    stage_op_counts,
)

# relative slack below the bound's computed value: float sums in another order than the step's
# differ by a few ulps (1e-16 each), far less than this; the rows it keeps timed are ties at most
ROUNDING_SLACK = 1e-9


# Shape keys per kernel-model call: the unbounded step time sees a few hundred per call (EVALUATE_ROWS
# rows), and the kernel model hashes its queries with pandas above 16k rows (kernels.first_of_each:
# up to ~24 query rows per key, fp8 MoE), an import of ~0.4 CPU-s a small question must not pay.
SHAPE_KEYS_PER_CALL = 512


def _keyed(v, k: int):
    """An `_ops_sums` value with its key axis (the last) k long: scalars as they are."""
    return v if np.ndim(v) == 0 else np.broadcast_to(v, np.shape(v)[:-1] + (k,))


def _compute_per_key(cols: TrainingLayout, model, hw, wl, rates, edge: int, tables=None) -> dict[str, np.ndarray]:
    """Per op set, one micro-batch's compute seconds fwd + bwd + recompute fwd of each shape key:
    (recompute mode, key) for the layer sets, (key,) for the head and embedding (`_ops_sums`, on
    at most SHAPE_KEYS_PER_CALL keys at a time); the smaller of a set and its RECAST variant.
    tables: a list to append the op sums to, as a steptime.ShapeOpSums, or None."""
    K = len(cols)
    parts: list[dict] = []
    for lo in range(0, K, SHAPE_KEYS_PER_CALL):
        rows = cols if K <= SHAPE_KEYS_PER_CALL else cols.take(slice(lo, lo + SHAPE_KEYS_PER_CALL))
        k = min(K, lo + SHAPE_KEYS_PER_CALL) - lo
        sums = _ops_sums(rows, model, hw, wl, rates, edge)
        parts.append({name: {f: _keyed(v, k) for f, v in acc.items()} for name, acc in sums.items()})
    if len(parts) == 1:
        sums = parts[0]
    else:
        sums = {
            name: {
                f: v if np.ndim(v) == 0 else np.concatenate([p[name][f] for p in parts], axis=-1)
                for f, v in acc.items()
            }
            for name, acc in parts[0].items()
        }
    if tables is not None:
        tables.append(ShapeOpSums.of(cols, model, sums, edge))
    out: dict[str, np.ndarray] = {}
    for name, acc in sums.items():
        c = _keyed(np.asarray(acc["fwd"] + acc["bwd"] + acc["rc"], dtype=np.float64), K)
        base = name.removesuffix(RECAST)
        out[base] = c if base not in out else np.minimum(out[base], c)
    return out


def _stage_compute(
    cols: TrainingLayout, model, hw, wl, rates, edge: int, host_s: float, tables=None
) -> dict[str, np.ndarray]:
    """Per row (one per distinct BOUND_KEY), one micro-batch's C_s = compute_s + n_s·host on the
    slowest stage and at the fill/drain pace (module docstring), seconds."""
    by_key, K, at = per_key(_compute_per_key, shape_key(model), cols, model, hw, wl, rates, edge, tables)
    at_rows = per_key_at_rows(cols, K, at)
    per_row = {name: at_rows(c) for name, c in by_key.items()}
    layers = _stage_layout(cols, model.layers)
    C = {}
    for stage, set_counts in stage_op_counts(cols, model, edge).items():
        c = np.asarray(layers[stage][0], dtype=np.float64) * host_s
        for name, count in set_counts:
            c = c + count * per_row[name]
        C[stage] = c
    pp = np.asarray(cols.pp)
    slowest = np.maximum(np.maximum(C["first"], C["last"]), np.where(pp > 2, C["middle"], 0.0))
    return {"slowest": slowest, "typical": fill_drain_stage_s(pp, C["first"], C["middle"], C["last"])}


def bound_key(model) -> tuple:
    """The columns a stage's compute per micro-batch depends on: the op shapes (steptime.shape_key),
    the recompute mode and the stage split (a function of pp)."""
    return shape_key(model) + ("recompute", "pp")


def step_time_lower_bound_s(cols, model, hw, wl, kernels, tables: list | None = None) -> np.ndarray:
    """A lower bound, in seconds, on each row's `time_step_s` (module docstring: LB <= step).
    cols: training layout columns or a TrainingLayout; hw: the run's accelerator with its stack's
    overheads (RunConfig.accelerator()); kernels: its kernel model (config.kernel_tables).
    tables: a list to append the op sums of the rows' shapes to (steptime.ShapeOpSums: the step
    time of these rows can gather them), or None."""
    layout = TrainingLayout.of(cols)
    rates = Rates(hw, wl.precision, kernels, wl.fp8_scaling)
    oh = _overheads(hw)
    host_s = layer_host_us(oh, bool(getattr(wl, "compile", False))) * 1e-6
    edge = bf16_edge_layers(wl)
    per, _, at = per_key(_stage_compute, bound_key(model), layout, model, hw, wl, rates, edge, host_s, tables)
    m = np.asarray(layout.num_micro_batches, dtype=np.float64)
    bubble_per_mb = bubble_rate(layout.pp, layout.vpp, m, wl.schedule) * m  # rate·m
    stragglers = 1.0 + oh.straggler_per_doubling * straggler_doublings(hw, layout.ngpus)
    lb = m * gather(per["slowest"], at) + bubble_per_mb * gather(per["typical"], at) + oh.step_fixed_ms * 1e-3
    return lb * stragglers * (1.0 - ROUNDING_SLACK)
