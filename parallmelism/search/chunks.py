"""Evaluate one partition of one run as chunks of array columns (the cost model, chunk by chunk)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

import numpy as np

from ..grid import DROP_REASONS, add_drop_counts
from ..grid.layouts import enumerate_training_layouts

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


def iter_partition_chunks(
    run,
    sub_grid,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
    stats: RunStats | None = None,
    prune_unfit: bool = False,
    derive: bool = True,
) -> Iterator[tuple[dict, np.ndarray]]:
    """Yield (columns, row positions in the partition) for the partition `sub_grid` of one run.

    prune_unfit: evaluate the memory model on every row, the full cost model only on rows that
    fit (for searches that keep fitting rows only). derive: add `derive_columns`.
    """
    stats = stats if stats is not None else RunStats()
    if run.workload.kind != "train":
        yield from _inference_chunks(run, sub_grid, chunk_rows, stats, derive)
        return
    from ..engine import evaluate_training_columns

    g = enumerate_training_layouts(run.model, run.hardware, run.workload, sub_grid)
    stats.considered += g.considered
    add_drop_counts(stats.dropped, g.dropped)
    n = len(g)
    for lo in range(0, n, chunk_rows):
        chunk = {k: v[lo : lo + chunk_rows] for k, v in g.columns.items()} if n > chunk_rows else g.columns
        rows = len(chunk["tp"])
        pos = np.arange(lo, lo + rows, dtype=np.int64)
        stats.evaluated += rows
        mem = None
        if prune_unfit:
            # Memory first (cheap); every other term only for the layouts that fit. The full
            # evaluation of a fitting row is the same call as without pruning: same numbers.
            from ..cost.memory import training_memory

            mem = training_memory(chunk, run.model, run.hardware, run.workload)
            keep = np.flatnonzero(mem["fits"])
            if len(keep) == 0:
                continue
            chunk, pos = {k: v[keep] for k, v in chunk.items()}, pos[keep]
            mem = {k: v[keep] for k, v in mem.items()}  # row-wise: no need to evaluate it again
        cols = evaluate_training_columns(chunk, run, memory=mem)
        stats.timed += len(cols["tp"])
        yield (derive_columns(cols, run) if derive else cols), pos


def _inference_chunks(run, sub_grid, chunk_rows, stats, derive):
    from ..engine import evaluate_inference_columns
    from ..grid.inference import enumerate_inference_layouts

    g = enumerate_inference_layouts(run.model, run.hardware, run.workload, sub_grid)
    stats.considered += g.considered
    add_drop_counts(stats.dropped, g.dropped)
    n = len(g)
    for lo in range(0, n, chunk_rows):
        chunk = {k: v[lo : lo + chunk_rows] for k, v in g.columns.items()} if n > chunk_rows else g.columns
        rows = len(next(iter(chunk.values())))
        stats.evaluated += rows
        stats.timed += rows
        cols = evaluate_inference_columns(chunk, run)
        yield (derive_columns(cols, run) if derive else cols), np.arange(lo, lo + rows, dtype=np.int64)
