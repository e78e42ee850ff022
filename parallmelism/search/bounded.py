"""Branch and bound: the step-time model only on the layouts a top-k search could still keep.

`best` keeps the k fastest layouts per GPU count (search/collectors.py TopKCollector): a layout
whose admissible lower bound on the step time (cost/step_bound.py, LB <= time_step_s) exceeds the
k-th fastest step its group has kept cannot enter, so its step time is never needed. Per evaluated
call (search/chunks.py) every row goes through the memory model (it decides `fits`, which the
collectors' `where` reads) and the bound; then the rows still in reach are timed in ascending order
of their bound, a small batch per GPU count first: the steps of the rows with the smallest bounds
tighten each group's limit (a copy of the collectors is fed each timed batch), so most of the rest
never reach the step-time model. A row is skipped only when its bound is strictly above the limit
(a row whose step could tie the k-th is timed, so ties break as before); the rows timed are returned
in their original order, their numbers the step-time model's own (it is row-wise), so the rows the
collectors keep are the same rows, in the same order, with the same bytes, as without the bound.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from ..cost.keys import gather, unique_rows
from .collectors import Collector, where_mask

# Rows per GPU count in the first timed batch of a call (the smallest bounds), then FIRST_BATCH·GROWTH,
# ...: small enough that a first batch costs little more than the step-time model's fixed cost per
# call, large enough that its steps give a limit near the final k-th step. GROWTH 4, not 8: the
# second batch of 8192 per GPU count was most of the rows still in reach after the first (405B grid:
# 24,576 of 39,416), timed before its own steps could tighten the limits; at 4096 the rest is then
# ruled out (bench_sweep, timed rows: 405B 46,080 -> 27,055, 70B fp8 43,042 -> 27,870, GPT-3 24,012 ->
# 17,558 with BATCH_MIN_ROWS below).
FIRST_BATCH = 1024
GROWTH = 4
# Candidates at most this many are timed in one call, not in batches: a batch pays for itself only
# where the rows its limits rule out cost more than a call's fixed cost (~5-7 ms, ~6-8k rows of the
# step-time model at ~0.8 us a row; measured on the bench grids' timed calls).
BATCH_MIN_ROWS = 12288
# A call with no limit from the collectors yet computes the bound (to time its rows in batches) only
# when it has more rows than this: in a smaller call (a worker's task of a few partitions, a small
# question) the bound and a first batch cost more than the rows they rule out (measured: the 405B
# grid at -j 2, tasks of 9-47k rows, took 1.15x the CPU with the probe from 32k rows, 1.0x without).
PROBE_MIN_ROWS = 65536


def bounds_steps(collectors: Sequence[Collector]) -> bool:
    """Whether every collector keeps rows by their step time alone (`Collector.bounds_step`), so
    the bound may skip rows: not with a sink or any collector that keeps every row."""
    return bool(collectors) and all(c.bounds_step for c in collectors)


class _Limit:
    """One collector's k-th kept step per group, over the rows of one call: the collector's kept
    rows and the rows timed since (its own rows are not changed)."""

    def __init__(self, collector: Collector, cols: dict, seed: dict | None = None, groups: dict | None = None):
        self.k = collector.k
        first, self.group = _groups(cols, collector.group_by, {} if groups is None else groups)
        self.keeps = np.zeros(len(self.group), dtype=bool)
        self.keeps[where_mask(cols, collector.where)] = True  # KeyError: `where` reads the time model
        kept, seed = collector.kept_steps(), seed or {}
        keys = zip(*(np.asarray(cols[g])[first].tolist() for g in collector.group_by))
        none = np.zeros(0)
        self.steps = [  # the k smallest per group
            np.sort(np.concatenate([kept.get(key, none), seed.get(key, none)]))[: self.k] for key in keys
        ]
        self.kth = np.array([s[self.k - 1] if len(s) >= self.k else np.inf for s in self.steps])

    def at(self, rows: np.ndarray | None) -> np.ndarray:
        """The largest step the collector could keep on each of `rows` (None: every row; -inf where
        `where` does not keep it)."""
        if rows is None:
            return np.where(self.keeps, gather(self.kth, self.group), -np.inf)
        return np.where(gather(self.keeps, rows), gather(self.kth, gather(self.group, rows)), -np.inf)

    def add(self, rows: np.ndarray, steps: np.ndarray) -> None:
        """Rows just timed, with their step times."""
        mine = self.keeps[rows]
        rows, steps = rows[mine], steps[mine]
        groups = self.group[rows]
        for g in np.unique(groups):
            merged = np.sort(np.concatenate([self.steps[g], steps[groups == g]]))[: self.k]
            self.steps[g] = merged
            if len(merged) >= self.k:
                self.kth[g] = merged[self.k - 1]


def _groups(cols: dict, names, known: dict) -> tuple[np.ndarray, np.ndarray]:
    """`unique_rows` of the columns `names` of `cols` (one row per group, group of each row), from
    `known` ({names: result}, of the same `cols`) when it holds them: the collectors group by the
    same columns (the run and the GPU count), and one call's rows are grouped once."""
    key = tuple(names)
    if key not in known:
        known[key] = unique_rows(*(np.asarray(cols[g]) for g in key))
    return known[key]


def _batch(candidates: np.ndarray, lb: np.ndarray, group: np.ndarray, size: int) -> np.ndarray:
    """The `size` candidates with the smallest bounds in each group (`group`: a code per row; all
    of a smaller group), in ascending row order."""
    if len(candidates) <= size:
        return candidates
    of = group[candidates]
    parts = []
    for g in range(int(of.max()) + 1):
        rows = candidates[of == g] if of.max() > 0 else candidates
        if len(rows) > size:
            rows = rows[np.argpartition(lb[rows], size - 1)[:size]]
        parts.append(rows)
    return np.sort(np.concatenate(parts)) if len(parts) > 1 else np.sort(parts[0])


def time_in_reach(
    cols: dict,
    lower_bound: Callable[[], np.ndarray],
    collectors: Sequence[Collector],
    time_rows: Callable[[np.ndarray], dict],
    seeds: Sequence[dict] | None = None,
) -> tuple[np.ndarray, dict]:
    """(rows timed in ascending order, their step-time columns) of the rows of `cols` (layout and
    memory columns, `_run` and `_row`) a collector could keep: where some collector's `where` holds
    and the row's lower bound on the step (`lower_bound()`, computed when it can rule rows out) is
    not above what that collector keeps. time_rows(rows): the step-time model's columns of those
    rows. seeds: per collector, steps per group that the same search keeps elsewhere (`kept_steps`
    of the driver's collectors, for a worker's spawned copies): they tighten the limits as rows the
    copy itself kept would. The collectors are not changed."""
    n = len(cols["_run"])
    groups: dict = {}  # the rows' groups by the columns the collectors (and the batches) group by
    try:
        limits = [_Limit(c, cols, s, groups) for c, s in zip(collectors, seeds or [{}] * len(collectors))]
    except KeyError:  # a `where` that reads the time model's columns: every row is timed
        rows = np.arange(n)
        return rows, time_rows(rows)
    group: np.ndarray | None = None  # batches are taken per GPU count (one run: `_run` is the same on every row)
    lb: np.ndarray | None = None
    candidates: np.ndarray | None = None  # every row, at first
    timed: list[tuple[np.ndarray, dict]] = []
    done = np.zeros(n, dtype=bool)
    size = FIRST_BATCH
    while True:
        limit = limits[0].at(candidates)
        for lim in limits[1:]:
            np.maximum(limit, lim.at(candidates), out=limit)
        if lb is None and (n > PROBE_MIN_ROWS or np.isfinite(limit).any()):
            lb = lower_bound()
        # strictly above: a row that could tie the k-th is timed; a NaN bound is timed (check_finite);
        # without the bound, the rows no collector's `where` keeps (limit -inf) are left out: the
        # lowest float stands for the bound, above -inf and below every step
        bound = np.full(1, -np.finfo(np.float64).max) if lb is None else lb if candidates is None else lb[candidates]
        within = ~(bound > limit)
        candidates = np.flatnonzero(within) if candidates is None else candidates[within]
        if len(candidates) == 0:
            break
        if lb is None or len(candidates) <= BATCH_MIN_ROWS:
            rows = candidates
        else:
            if group is None:
                group = _groups(cols, ("_run", "ngpus"), groups)[1]
            rows = _batch(candidates, lb, group, size)
        out = time_rows(rows)
        timed.append((rows, out))
        if len(rows) == len(candidates):
            break
        for lim in limits:
            lim.add(rows, np.asarray(out["time_step_s"], dtype=np.float64))
        done[rows] = True
        candidates = candidates[~done[candidates]]
        size *= GROWTH
    if not timed:
        return np.zeros(0, dtype=np.int64), {}
    if len(timed) == 1:
        return timed[0]
    rows = np.sort(np.concatenate([r for r, _ in timed]))
    at = [np.searchsorted(rows, r) for r, _ in timed]  # each batch's places among the rows (both ascending)
    out = {}
    for k, first in timed[0][1].items():
        column = np.empty((len(rows),) + np.shape(first)[1:], dtype=np.asarray(first).dtype)
        for places, (_, o) in zip(at, timed):
            column[places] = o[k]
        out[k] = column
    return rows, out
