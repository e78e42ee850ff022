"""Evaluate partitions of one run as chunks of array columns (the cost model, chunk by chunk).

Small partitions are evaluated together: the layouts of consecutive partitions are gathered
until `chunk_rows` rows are waiting, then go through the cost model in one call (the model is
row-wise, so a row's numbers do not depend on its neighbours); each row keeps its partition and
position, so row numbers and output order are those of one partition at a time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, Sequence

import numpy as np

from ..grid import DROP_REASONS, add_drop_counts

DEFAULT_CHUNK_ROWS = 1 << 18  # 262,144 rows: ~130 MB of float64 temporaries in the cost model


@dataclass
class RunStats:
    """What the driver walked through for one run."""

    considered: int = 0  # every axis combination (valid or not)
    evaluated: int = 0  # valid layouts evaluated (memory model at least)
    timed: int = 0  # layouts through the whole cost model (fewer when unfit rows are pruned)
    dropped: dict = field(default_factory=lambda: {r: 0 for r in DROP_REASONS})

    def add(self, other: "RunStats") -> None:
        self.considered += other.considered
        self.evaluated += other.evaluated
        self.timed += other.timed
        add_drop_counts(self.dropped, other.dropped)


def derive_columns(cols: dict, run) -> dict:
    """Columns the searches rank on that the cost model leaves implicit.

    usd_per_step = ngpus · time_step_s · cost_per_gpu_hour_usd / 3600 (training, when timed).
    """
    if cols and "time_step_s" in cols and "usd_per_step" not in cols:
        cols["usd_per_step"] = cols["ngpus"] * cols["time_step_s"] * (run.hardware.cost_per_gpu_hour_usd / 3600.0)
    return cols


def _enumerate(run, sub_grid, stats: RunStats) -> dict:
    if run.workload.kind == "train":
        from ..grid.layouts import enumerate_training_layouts

        g = enumerate_training_layouts(run.model, run.hardware, run.workload, sub_grid)
    else:
        from ..grid.inference import enumerate_inference_layouts

        g = enumerate_inference_layouts(run.model, run.hardware, run.workload, sub_grid)
    stats.considered += g.considered
    add_drop_counts(stats.dropped, g.dropped)
    return g.columns


def _evaluate(run, chunk: dict, stats: RunStats, prune_unfit: bool, derive: bool):
    """Cost columns of layout rows, and the indices of the rows kept (all unless pruned)."""
    n = len(next(iter(chunk.values())))
    stats.evaluated += n
    if run.workload.kind != "train":
        from ..engine import evaluate_inference_columns

        stats.timed += n
        cols = evaluate_inference_columns(chunk, run)
        return (derive_columns(cols, run) if derive else cols), None
    from ..engine import evaluate_training_columns

    keep = None
    mem = None
    if prune_unfit:
        # Memory first (cheap); every other term only for the layouts that fit. The full
        # evaluation of a fitting row is the same call as without pruning: same numbers.
        from ..cost.memory import training_memory

        mem = training_memory(chunk, run.model, run.hardware, run.workload)
        keep = np.flatnonzero(mem["fits"])
        if len(keep) == 0:
            return {}, keep
        chunk = {k: v[keep] for k, v in chunk.items()}
        mem = {k: v[keep] for k, v in mem.items()}  # row-wise: no need to evaluate it again
    cols = evaluate_training_columns(chunk, run, memory=mem)
    stats.timed += len(cols["tp"])
    return (derive_columns(cols, run) if derive else cols), keep


def iter_chunks(
    run,
    partitions: Sequence[tuple[int, object]],
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
    stats: RunStats | None = None,
    prune_unfit: bool = False,
    derive: bool = True,
) -> Iterator[tuple[dict, np.ndarray]]:
    """Yield (columns, row numbers) for the partitions [(index, sub-grid), ...] of one run, in order.

    Row number = (partition index << 32) + position in the partition (search/partitions.py).
    prune_unfit: evaluate the memory model on every row, the full cost model only on rows that
    fit (for searches that keep fitting rows only). derive: add `derive_columns`.
    """
    stats = stats if stats is not None else RunStats()
    waiting: list[tuple[dict, np.ndarray]] = []  # layout columns and row numbers not evaluated yet
    rows = 0
    for index, sub_grid in partitions:
        cols = _enumerate(run, sub_grid, stats)
        n = len(next(iter(cols.values()))) if cols else 0
        if n == 0:
            continue
        waiting.append((cols, (np.int64(index) << 32) + np.arange(n, dtype=np.int64)))
        rows += n
        while rows >= chunk_rows:
            chunk, numbers, waiting, rows = _take_first(waiting, chunk_rows)
            yield from _evaluated(run, chunk, numbers, stats, prune_unfit, derive)
    if rows:
        chunk, numbers, waiting, rows = _take_first(waiting, rows)
        yield from _evaluated(run, chunk, numbers, stats, prune_unfit, derive)


def _take_first(waiting: list, count: int):
    """The first `count` waiting rows as one chunk, and what is left."""
    parts, numbers, left, taken = [], [], [], 0
    for cols, nums in waiting:
        n = len(nums)
        if taken >= count:
            left.append((cols, nums))
            continue
        k = min(n, count - taken)
        if k == n:
            parts.append(cols)
            numbers.append(nums)
        else:
            parts.append({c: v[:k] for c, v in cols.items()})
            numbers.append(nums[:k])
            left.append(({c: v[k:] for c, v in cols.items()}, nums[k:]))
        taken += k
    chunk = parts[0] if len(parts) == 1 else {c: np.concatenate([p[c] for p in parts]) for c in parts[0]}
    nums = numbers[0] if len(numbers) == 1 else np.concatenate(numbers)
    return chunk, nums, left, sum(len(n) for _, n in left)


def _evaluated(run, chunk, numbers, stats, prune_unfit, derive):
    cols, keep = _evaluate(run, chunk, stats, prune_unfit, derive)
    if cols:
        yield cols, (numbers if keep is None else numbers[keep])
