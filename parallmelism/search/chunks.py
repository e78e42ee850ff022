"""Evaluate partitions of one run as chunks of array columns (the cost model, chunk by chunk).

Small partitions are evaluated together: the layouts of consecutive partitions are gathered
until `chunk_rows` rows are waiting, then go through the cost model in one call (the model is
row-wise, so a row's numbers do not depend on its neighbours); each row keeps its partition and
position, so row numbers and output order are those of one partition at a time. The chunks of
consecutive tasks (search/driver.py) share cost-model calls as well, up to EVALUATE_ROWS rows,
and are cut back apart afterwards: the chunks, and so what a sink writes, stay the same.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, Sequence

import numpy as np

from ..grid import DROP_REASONS, add_drop_counts

DEFAULT_CHUNK_ROWS = 1 << 18  # 262,144 rows: ~130 MB of float64 temporaries in the cost model
# Rows of consecutive chunks evaluated in one cost-model call (`evaluated_tasks`; never more than
# chunk_rows): enough that the model's fixed cost per call (~5 ms) is a few percent of it, few
# enough that a call's temporaries (~800 bytes per row at their peak, ~50 MB) are reused by the
# allocator from call to call; a 200k-row call maps its memory in afresh (~35k page faults), which
# costs more than the batching saves. 80k rows: the 405B bench grid (~44k rows per call at 64k,
# its partitions pack poorly) goes through in 6 calls instead of 9 with no more page faults
# (measured: 405B ~9% faster, GPT-3 unchanged; 96k and 128k fault on GPT-3).
EVALUATE_ROWS = 5 << 14


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


def layout_grid(run, grid=None, memo=None):
    """The valid layouts of `run` (of `grid`, default the run's own), training or serving; memo:
    a dict kept across a run's partitions (`enumerate_training_layouts`)."""
    grid = run.grid if grid is None else grid
    if run.workload.kind == "train":
        from ..grid.layouts import enumerate_training_layouts

        return enumerate_training_layouts(run.model, run.hardware, run.workload, grid, run.stack, memo)
    from ..grid.inference import enumerate_inference_layouts

    return enumerate_inference_layouts(run.model, run.hardware, run.workload, grid)


def _enumerate(run, sub_grid, stats: RunStats, memo=None) -> dict:
    g = layout_grid(run, sub_grid, memo)
    stats.considered += g.considered
    add_drop_counts(stats.dropped, g.dropped)
    return g.columns


def check_finite(cols: dict, run) -> dict:
    """Every number the cost model wrote is finite: an input past any physical range (an overhead
    or a rate of 1e308, each allowed alone) that overflows a column is one sentence, never an
    inf or NaN in a table."""
    from ..errors import UserError

    for name, values in cols.items():
        if values.dtype.kind == "f" and not np.isfinite(values).all():
            bad = ~np.isfinite(values)
            what = "NaN" if np.isnan(values[bad]).all() else "infinite"
            raise UserError(
                f"{name} comes out {what} for {int(bad.sum()):,} of {len(values):,} layouts of "
                f"{run.model.name} on {run.hardware.name}: an input is beyond any physical range "
                "(a size, rate or overhead near 1e308?); nothing was written"
            )
    return cols


def _evaluate(run, chunk: dict, stats: RunStats, prune_unfit: bool, derive: bool):
    """Cost columns of layout rows, and the indices of the rows kept (all unless pruned); every
    number finite (check_finite)."""
    n = len(next(iter(chunk.values())))
    stats.evaluated += n
    # an overflow (an input near 1e308) is check_finite's one sentence, not numpy's warnings
    with np.errstate(over="ignore", invalid="ignore"):
        return _evaluate_unchecked(run, chunk, stats, prune_unfit, derive, n)


def _evaluate_unchecked(run, chunk: dict, stats: RunStats, prune_unfit: bool, derive: bool, n: int):
    if run.workload.kind != "train":
        from ..columns import evaluate_inference_columns

        stats.timed += n
        cols = check_finite(evaluate_inference_columns(chunk, run), run)
        return (derive_columns(cols, run) if derive else cols), None
    from ..columns import evaluate_training_columns

    keep = None
    mem = None
    if prune_unfit:
        # Memory first (cheap); every other term only for the layouts that fit. The full
        # evaluation of a fitting row is the same call as without pruning: same numbers.
        from ..cost.memory import memory_columns

        lazy = memory_columns(chunk, run.model, run.hardware, run.workload)
        keep = np.flatnonzero(lazy["fits"])
        if len(keep) == 0:
            return {}, keep
        chunk = {k: v[keep] for k, v in chunk.items()}
        mem = lazy.at(keep)  # row-wise: no need to evaluate it again
    cols = check_finite(evaluate_training_columns(chunk, run, memory=mem), run)
    stats.timed += len(cols["tp"])
    return (derive_columns(cols, run) if derive else cols), keep


def _in_pieces(fn, cols: dict, n: int) -> dict:
    """fn(columns) over calls of at most EVALUATE_ROWS rows, joined back (their temporaries stay
    bounded); one call when n is no more."""
    if n <= EVALUATE_ROWS:
        return fn(cols)
    pieces = [fn({k: v[lo : lo + EVALUATE_ROWS] for k, v in cols.items()}) for lo in range(0, n, EVALUATE_ROWS)]
    return {k: np.concatenate([p[k] for p in pieces]) for k in pieces[0]}


def _evaluate_bounded(
    run, layout: dict, numbers: np.ndarray, stats: RunStats, derive: bool, r: int, collectors, seeds=None
):
    """Training cost columns of the rows the collectors could still keep (search/bounded.py), and
    the indices of those rows: the memory model and the step-time lower bound on every row
    (cost/step_bound.py), the step-time model on the rows whose bound is in reach. A timed row's
    columns are those of an unbounded call (the model is row-wise); every number finite. seeds:
    steps kept elsewhere (`time_in_reach`)."""
    from ..columns import evaluate_training_columns
    from ..config.kernel_tables import kernel_model
    from ..cost.memory import memory_columns
    from ..cost.keys import gather
    from ..cost.layout import TrainingLayout
    from ..cost.step_bound import step_time_lower_bound_s
    from .bounded import time_in_reach

    n = len(numbers)
    stats.evaluated += n
    with np.errstate(over="ignore", invalid="ignore"):
        rows_of = TrainingLayout.of(layout)  # the memory model and the bound share its key codes
        # the memory columns gathered from its per-key tables are built only at the rows timed
        mem = memory_columns(rows_of, run.model, run.hardware, run.workload)
        check_finite(dict(mem.to_check()), run)
        hw = run.accelerator()

        tables: list = []  # the op sums the bound evaluates, which the step time of its rows gathers

        def lower_bound() -> np.ndarray:
            return step_time_lower_bound_s(rows_of, run.model, hw, run.training_workload(), kernel_model(hw), tables)

        runs = np.full(n, r, dtype=np.int32)

        def time_rows(rows: np.ndarray) -> dict:
            every = len(rows) == n  # rows is then every row, in order: no copy
            sub = layout if every else {k: gather(v, rows) for k, v in layout.items()}
            sub_mem = mem if every else mem.at(rows)
            out = _in_pieces(
                lambda c: evaluate_training_columns(
                    {k: c[k] for k in layout},
                    run,
                    memory={k: c[k] for k in mem},
                    ops_table=tables[0] if tables else None,
                ),  # the columns in the order of an unbounded call
                {**sub, **sub_mem},
                len(rows),
            )
            check_finite({k: v for k, v in out.items() if k not in mem}, run)  # memory's: checked above
            if derive:  # the columns the collectors hold already (`derive_columns`)
                derive_columns(out, run)
            stats.timed += len(rows)
            out["_run"], out["_row"] = runs[: len(rows)], numbers if every else numbers[rows]
            return out

        cols_mem = _WithMemory({**layout, "_run": runs, "_row": numbers}, mem)
        keep, cols = time_in_reach(cols_mem, lower_bound, collectors, time_rows, seeds)
    cols.pop("_run", None)  # the driver tags the chunks (its `_tag`), last, as without the bound
    cols.pop("_row", None)
    return cols, keep


class _WithMemory(dict):
    """Layout columns and the `_run`/`_row` tags, with the memory columns (cost/memory.py
    MemoryColumns) looked up when read: a column gathered from its per-key table is built only
    if a collector's `where` or groups read it."""

    def __init__(self, cols: dict, memory):
        super().__init__(cols)
        self.memory = memory

    def __missing__(self, name):
        return self.memory[name]

    def __contains__(self, name) -> bool:
        return dict.__contains__(self, name) or name in self.memory

    def get(self, name, default=None):
        return self[name] if name in self else default


def layout_chunks(
    run, partitions: Sequence[tuple[int, object]], chunk_rows: int, stats: RunStats, memo=None
) -> Iterator[tuple[dict, np.ndarray]]:
    """Yield (layout columns, row numbers) for the partitions [(index, sub-grid), ...] of one run,
    in order, in chunks of at most `chunk_rows` rows (not evaluated yet). memo: a dict kept across
    the run's partitions (`layout_grid`).

    Row number = (partition index << 32) + position in the partition (search/partitions.py).
    """
    waiting: list[tuple[dict, np.ndarray]] = []  # layout columns and row numbers not in a chunk yet
    rows = 0
    for index, sub_grid in partitions:
        cols = _enumerate(run, sub_grid, stats, memo)
        n = len(next(iter(cols.values()))) if cols else 0
        if n == 0:
            continue
        waiting.append((cols, (np.int64(index) << 32) + np.arange(n, dtype=np.int64)))
        rows += n
        while rows >= chunk_rows:
            chunk, numbers, waiting, rows = _take_first(waiting, chunk_rows)
            yield chunk, numbers
    if rows:
        chunk, numbers, waiting, rows = _take_first(waiting, rows)
        yield chunk, numbers


def evaluate_chunks(run, chunks: list, stats: RunStats, prune_unfit: bool, derive: bool, bounded=None) -> list:
    """The layout chunks [(columns, row numbers), ...] of one run through the cost model in one
    call, cut back into the same chunks: (columns, row numbers) per chunk, None for a chunk that
    pruning left with no row. The model is row-wise, so each chunk's numbers are those of a call
    of its own; the call's fixed cost (a few ms of per-call work in the cost terms) is paid once.
    bounded: (run index, collectors, seeds) to time only the training rows the collectors could
    still keep (`_evaluate_bounded`), or None."""
    if len(chunks) == 1:
        layout = chunks[0][0]
    else:
        layout = {c: np.concatenate([cols[c] for cols, _ in chunks]) for c in chunks[0][0]}
    rows = sum(len(numbers) for _, numbers in chunks)
    if bounded is not None:  # training runs only (the driver's `_Job.evaluate`)
        numbers = chunks[0][1] if len(chunks) == 1 else np.concatenate([n for _, n in chunks])
        cols, keep = _evaluate_bounded(run, layout, numbers, stats, derive, *bounded)
    elif rows > EVALUATE_ROWS and not prune_unfit:
        # One chunk of more rows than a call should hold (a sink's 262k-row chunk): the model in
        # calls of EVALUATE_ROWS rows, joined back; its temporaries (~2 KB a row for an MoE
        # model: grok-1's sweeps peaked at 550 MiB) stay bounded by EVALUATE_ROWS.
        cols, keep = _in_pieces(lambda piece: _evaluate(run, piece, stats, False, derive)[0], layout, rows), None
    else:
        cols, keep = _evaluate(run, layout, stats, prune_unfit, derive)
    starts = np.cumsum([0] + [len(numbers) for _, numbers in chunks])
    ends = starts if keep is None else np.searchsorted(keep, starts)  # the chunks' bounds in the kept rows
    out: list[tuple[dict, np.ndarray] | None] = []
    for i, (_, numbers) in enumerate(chunks):
        lo, hi = int(ends[i]), int(ends[i + 1])
        if hi == lo:
            out.append(None)
            continue
        part = cols if len(chunks) == 1 else {k: v[lo:hi] for k, v in cols.items()}
        out.append((part, numbers if keep is None else numbers[keep[lo:hi] - starts[i]]))
    return out


def evaluated_tasks(
    run,
    tasks: Sequence[Sequence[tuple[int, object]]],
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
    stats: RunStats | None = None,
    prune_unfit: bool = False,
    derive: bool = True,
    bounded=None,
) -> Iterator[tuple[int, tuple[dict, np.ndarray] | None]]:
    """Evaluate consecutive tasks of one run (each a list of partitions [(index, sub-grid), ...]):
    yield (task position, (columns, row numbers)) for each evaluated chunk, in order, and
    (task position, None) once all of a task's chunks are yielded.

    A task's chunks are those of `layout_chunks` on its partitions. The chunks of consecutive
    tasks go through the cost model together (`evaluate_chunks`) while they add up to at most
    EVALUATE_ROWS rows (and chunk_rows), so small partitions share the model's fixed cost.
    prune_unfit: evaluate the memory model on every row, the full cost model only on rows that
    fit (for searches that keep fitting rows only). derive: add `derive_columns`. bounded: (run
    index, collectors, seeds) to time only the rows the collectors could still keep (`_evaluate_bounded`);
    its calls hold up to chunk_rows rows (the step-time model still sees at most EVALUATE_ROWS).
    """
    stats = stats if stats is not None else RunStats()
    pending: list[tuple[int, tuple]] = []  # (task position, layout chunk), not evaluated yet
    pending_rows = 0  # rows in `pending`
    batch_rows = chunk_rows if bounded is not None else min(chunk_rows, EVALUATE_ROWS)
    finished = 0  # tasks reported finished
    memo: dict = {}  # the run's partitions share their layouts before the micro-batch axis

    def evaluated():
        chunks = evaluate_chunks(run, [c for _, c in pending], stats, prune_unfit, derive, bounded)
        return [(t, c) for (t, _), c in zip(pending, chunks) if c is not None]

    for t, partitions in enumerate(tasks):
        for chunk in layout_chunks(run, partitions, chunk_rows, stats, memo):
            if pending and pending_rows + len(chunk[1]) > batch_rows:
                yield from evaluated()
                pending, pending_rows = [], 0
                yield from ((u, None) for u in range(finished, t))  # their chunks are all out
                finished = t
            pending.append((t, chunk))
            pending_rows += len(chunk[1])
    if pending:
        yield from evaluated()
    yield from ((u, None) for u in range(finished, len(tasks)))


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
