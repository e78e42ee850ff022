"""Pareto fronts (all objectives minimised), vectorized.

A row is dominated when another row is <= on every objective and < on at least one. Rows with
identical objective values do not dominate each other, so ties all stay on the front.
Two objectives: sort by (x, y) and keep rows whose y is below the running minimum of every row
with a strictly smaller x (O(n log n)). More objectives: pairwise check against the 2-D front
candidates in blocks (O(n·front)).
"""

from __future__ import annotations

import numpy as np


def pareto_mask(*objectives: np.ndarray) -> np.ndarray:
    """Boolean mask of the non-dominated rows; every objective is minimised (negate to maximise)."""
    objs = [np.asarray(o, dtype=np.float64) for o in objectives]
    n = len(objs[0])
    if n == 0:
        return np.zeros(0, dtype=bool)
    if len(objs) == 1:
        return objs[0] == objs[0].min()
    if len(objs) == 2:
        return _front_2d(objs[0], objs[1])
    return _front_nd(np.column_stack(objs))


def _front_2d(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    order = np.lexsort((y, x))
    xs, ys = x[order], y[order]
    # Best y among rows with strictly smaller x: running min up to the end of the previous x group.
    run_min = np.minimum.accumulate(ys)
    starts = np.flatnonzero(np.r_[True, xs[1:] != xs[:-1]])
    group_of = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, len(xs)]))
    prev_best = np.r_[np.inf, run_min[starts[1:] - 1]][group_of]
    group_min = ys[starts][group_of]  # min y of the row's own x group (sorted by y inside)
    keep_sorted = (ys < prev_best) & (ys == group_min)
    mask = np.zeros(len(x), dtype=bool)
    mask[order[keep_sorted]] = True
    return mask


def _front_nd(points: np.ndarray) -> np.ndarray:
    n = len(points)
    block = max(1, 2**24 // n)  # bounds the block x n comparison matrix
    keep = np.ones(n, dtype=bool)
    for lo in range(0, n, block):
        p = points[lo : lo + block]
        le = (points[None, :, :] <= p[:, None, :]).all(axis=2)
        lt = (points[None, :, :] < p[:, None, :]).any(axis=2)
        keep[lo : lo + block] = ~np.any(le & lt, axis=1)
    return keep


FRONTS = {
    # name: (workload kind, [(column, sense)], derived column needed)
    "gpus-time": ("train", [("ngpus", "min"), ("time_step_s", "min")]),
    "gpus-cost": ("train", [("ngpus", "min"), ("usd_per_step", "min")]),
    "time-cost": ("train", [("time_step_s", "min"), ("usd_per_step", "min")]),
    "latency-throughput": ("inference", [("tpot_ms", "min"), ("throughput_tokens_per_s_per_gpu", "max")]),
    "ttft-tpot": ("inference", [("ttft_ms", "min"), ("tpot_ms", "min")]),
}
