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

from ..cost.keys import unique_rows
from .collectors import Collector, where_mask

# Rows per GPU count in the first timed batch of a call (the smallest bounds), then FIRST_BATCH·GROWTH,
# ...: small enough that a first batch costs little more than the step-time model's fixed cost per
# call, large enough that its steps give a limit near the final k-th step (bench_sweep: GPT-3 175B
# and the 405B multi-count grid time ~10-15 % of their rows).
FIRST_BATCH = 1024
GROWTH = 8


def bounds_steps(collectors: Sequence[Collector]) -> bool:
    """Whether every collector keeps rows by their step time alone (`Collector.bounds_step`), so
    the bound may skip rows: not with a sink or any collector that keeps every row."""
    return bool(collectors) and all(c.bounds_step for c in collectors)


class _Limit:
    """One collector's k-th kept step per group, over the rows of one call: the collector's kept
    rows and the rows timed since (its own rows are not changed)."""

    def __init__(self, collector: Collector, cols: dict):
        self.k = collector.k
        first, self.group = unique_rows(*(np.asarray(cols[g]) for g in collector.group_by))
        self.keeps = np.zeros(len(self.group), dtype=bool)
        self.keeps[where_mask(cols, collector.where)] = True  # KeyError: `where` reads the time model
        kept = collector.kept_steps()
        keys = zip(*(np.asarray(cols[g])[first].tolist() for g in collector.group_by))
        self.steps = [kept.get(key, np.zeros(0))[: self.k] for key in keys]  # k smallest per group
        self.kth = np.array([s[self.k - 1] if len(s) >= self.k else np.inf for s in self.steps])

    def at(self, rows: np.ndarray) -> np.ndarray:
        """The largest step the collector could keep on each of `rows` (-inf where `where` does
        not keep it)."""
        return np.where(self.keeps[rows], self.kth[self.group[rows]], -np.inf)

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
    cols: dict, lb: np.ndarray, collectors: Sequence[Collector], time_rows: Callable[[np.ndarray], dict]
) -> tuple[np.ndarray, dict]:
    """(rows timed in ascending order, their step-time columns) of the rows of `cols` (layout and
    memory columns, `_run` and `_row`) whose bound `lb` is not above what a collector could keep.
    time_rows(rows): the step-time model's columns of those rows. The collectors are not changed."""
    n = len(lb)
    try:
        limits = [_Limit(c, cols) for c in collectors]
    except KeyError:  # a `where` that reads the time model's columns: every row is timed
        rows = np.arange(n)
        return rows, time_rows(rows)
    _, group = unique_rows(np.asarray(cols["ngpus"]))  # batches are taken per GPU count
    candidates = np.arange(n)
    timed: list[tuple[np.ndarray, dict]] = []
    size = FIRST_BATCH
    while True:
        limit = limits[0].at(candidates)
        for lim in limits[1:]:
            limit = np.maximum(limit, lim.at(candidates))
        # strictly above: a row that could tie the k-th is timed; a NaN bound is timed (check_finite)
        candidates = candidates[~(lb[candidates] > limit)]
        if len(candidates) == 0:
            break
        rows = _batch(candidates, lb, group, size)
        out = time_rows(rows)
        timed.append((rows, out))
        for lim in limits:
            lim.add(rows, np.asarray(out["time_step_s"], dtype=np.float64))
        candidates = np.setdiff1d(candidates, rows, assume_unique=True)  # both ascending
        size *= GROWTH
    if not timed:
        return np.zeros(0, dtype=np.int64), {}
    if len(timed) == 1:
        return timed[0]
    rows = np.concatenate([r for r, _ in timed])
    order = np.argsort(rows, kind="stable")
    return rows[order], {k: np.concatenate([o[k] for _, o in timed])[order] for k in timed[0][1]}
