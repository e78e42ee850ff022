"""Streaming sweep driver: evaluate a grid in bounded chunks and keep only what was asked.

A sweep of 100M layouts cannot live in memory as a table (the cost model makes ~60 float64
columns per row). The driver walks each run's grid in partitions (one GPU count x one micro-batch
size at a time, so enumeration stays bounded), cuts each partition into chunks of at most
`chunk_rows` rows, evaluates a chunk as numpy columns, and hands it to collectors:

  TopKCollector     k best rows per group by one column (e.g. fastest fitting layout per ngpus)
  ParetoCollector   non-dominated rows on two or more objectives (per group or global)
  FitsCollector     every row that fits in memory (bounded only by what fits)
  ParquetSink       every row, streamed to a partitioned Parquet dataset (full output)

Every kept row carries `_run` (index of the run in the sweep) and `_row` (position in that run's
enumeration order), so chunked results are the same rows, in the same tie order, as a one-shot
evaluation followed by a stable pandas sort (tests check exactly that).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Sequence

import numpy as np

from ..errors import UserError
from ..report.writer import honour_umask, write_error_reason
from ..grid import DROP_REASONS, add_drop_counts
from ..grid.layouts import divisors, enumerate_training_layouts

DEFAULT_CHUNK_ROWS = 1 << 18  # 262,144 rows: ~130 MB of float64 temporaries in the cost model


# ----------------------------------------------------------------------------- chunks of one run

_PARTITIONS: dict = {}


def _training_partitions(run) -> list:
    """Sub-grids (one GPU count, one micro-batch value) whose union is the run's grid (cached per run)."""
    key = id(run)
    hit = _PARTITIONS.get(key)
    if hit is not None and hit[0] is run:
        return hit[1]
    parts = _make_partitions(run)
    if len(_PARTITIONS) > 64:
        _PARTITIONS.clear()
    _PARTITIONS[key] = (run, parts)
    return parts


def _make_partitions(run) -> list:
    grid, B = run.grid, run.workload.global_batch
    if grid.micro_batch is not None:
        mbs = [list(grid.micro_batch)]
    else:
        mb = divisors(B)
        if grid.max_micro_batch:
            mb = mb[mb <= grid.max_micro_batch]
        mbs = [[int(v)] for v in mb]
    return [grid.model_copy(update={"ngpus": [int(n)], "micro_batch": m}) for n in grid.ngpus for m in mbs]


def partitions_of(run) -> int:
    """How many partitions `iter_run_chunks` walks (the progress bar's total for this run)."""
    return len(_training_partitions(run)) if run.workload.kind == "train" else 1


@dataclass
class RunStats:
    considered: int = 0  # every axis combination (valid or not)
    evaluated: int = 0  # valid layouts evaluated (memory model at least)
    timed: int = 0  # layouts through the whole cost model (fewer when unfit rows are pruned)
    dropped: dict = field(default_factory=lambda: {r: 0 for r in DROP_REASONS})


def derive_columns(cols: dict, run) -> dict:
    """Columns every search may rank on that the cost model leaves implicit.

    usd_per_step = ngpus · time_step_s · cost_per_gpu_hour_usd / 3600 (training, when timed).
    """
    if cols and "time_step_s" in cols and "usd_per_step" not in cols:
        cols["usd_per_step"] = cols["ngpus"] * cols["time_step_s"] * (run.hardware.cost_per_gpu_hour_usd / 3600.0)
    return cols


def iter_partition_chunks(
    run, part: int, chunk_rows: int = DEFAULT_CHUNK_ROWS, stats: RunStats | None = None, prune_unfit: bool = False
) -> Iterator[tuple[dict, np.ndarray]]:
    """Yield (columns, row positions in the partition) for partition `part` of one run.

    prune_unfit: evaluate the memory model on every row, the full cost model only on rows that
    fit (for searches that keep fitting rows only).
    """
    from .. import engine

    stats = stats if stats is not None else RunStats()
    if run.workload.kind != "train":
        # Inference (or any kind without a chunked enumerator yet): one-shot, as a column dict.
        df, grid = engine.evaluate(run)
        stats.considered += getattr(grid, "considered", len(df))
        add_drop_counts(stats.dropped, getattr(grid, "dropped", None) or {})
        stats.evaluated += len(df)
        stats.timed += len(df)
        if len(df):
            yield derive_columns({c: df[c].to_numpy() for c in df.columns}, run), np.arange(len(df))
        return
    sub = _training_partitions(run)[part]
    g = enumerate_training_layouts(run.model, run.hardware, run.workload, sub)
    stats.considered += g.considered
    add_drop_counts(stats.dropped, g.dropped)
    n = len(g)
    for lo in range(0, n, chunk_rows):
        chunk = {k: v[lo : lo + chunk_rows] for k, v in g.columns.items()} if n > chunk_rows else g.columns
        rows = len(chunk["tp"])
        pos = np.arange(lo, lo + rows, dtype=np.int64)
        stats.evaluated += rows
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
        else:
            mem = None
        cols = engine.evaluate_training_columns(chunk, run, memory=mem)
        stats.timed += len(cols["tp"])
        yield derive_columns(cols, run), pos


def iter_run_chunks(
    run, chunk_rows: int = DEFAULT_CHUNK_ROWS, stats: RunStats | None = None
) -> Iterator[tuple[dict, bool]]:
    """Yield (columns, partition_done) for one run, partition by partition."""
    for part in range(partitions_of(run)):
        for cols, _ in iter_partition_chunks(run, part, chunk_rows, stats):
            yield cols, False
        yield {}, True


# ----------------------------------------------------------------------------- collectors


def _concat(a: dict | None, b: dict) -> dict:
    if not a:
        return b
    return {k: np.concatenate([a[k], b[k]]) for k in a}


def _take(cols: dict, idx) -> dict:
    return {k: v[idx] for k, v in cols.items()}


def _require(cols: dict, names: Sequence[str], why: str) -> None:
    missing = [c for c in names if c not in cols]
    if missing:
        raise UserError(
            f"{why} needs the column {missing[0]!r}, which this workload's cost model does not "
            f"produce yet"
            + (" (needs the time model)" if missing[0].startswith(("time_", "tokens_", "mfu", "cost_")) else "")
        )


class Collector:
    """Receives evaluated chunks (with `_run`, `_row`), keeps a bounded subset.

    A collector whose `spawn()` returns an empty copy is *mergeable*: worker processes fill
    their own copies and the driver feeds the copies' results back through `update`, which
    gives the same rows as a serial run (top-k and Pareto fronts of a union are the top-k and
    fronts of the parts' top-k and fronts).
    """

    def spawn(self):
        return None

    def update(self, cols: dict) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def result(self) -> dict:
        raise NotImplementedError


class TopKCollector(Collector):
    """k rows per group with the smallest `by` (largest when descending), ties in enumeration order.

    Equals `df[where].sort_values(group + [by], kind="stable").groupby(group).head(k)` on the full
    table; `where` is a boolean column name (e.g. "fits") or None for every row.
    """

    def __init__(
        self, k: int, by: str, group_by: Sequence[str] = ("ngpus",), where: str | None = None, descending: bool = False
    ):
        self.k, self.by, self.group_by, self.where, self.descending = k, by, list(group_by), where, descending
        self.kept: dict | None = None

    def spawn(self):
        return TopKCollector(self.k, self.by, self.group_by, self.where, self.descending)

    def update(self, cols: dict) -> None:
        if not cols:
            return
        _require(cols, [self.by, *self.group_by] + ([self.where] if self.where else []), "this search")
        # Select on the key columns first, copy whole rows only for the few survivors.
        keys = ["_run", "_row", self.by, *self.group_by]
        idx = np.flatnonzero(cols[self.where]) if self.where is not None else np.arange(len(cols["_row"]))
        if len(idx) == 0:
            return
        idx = idx[self._select({k: cols[k][idx] for k in keys})]
        both = _concat(self.kept, _take(cols, idx))
        self.kept = _take(both, self._select(both))

    def _select(self, cols: dict) -> np.ndarray:
        key = np.asarray(cols[self.by], dtype=np.float64)
        if self.descending:
            key = -key
        groups = ["_run", *self.group_by]
        order = np.lexsort((cols["_row"], key, *[cols[g] for g in reversed(groups)]))
        n = len(order)
        change = np.zeros(n, dtype=bool)
        change[0] = True
        for g in groups:
            s = cols[g][order]
            change[1:] |= s[1:] != s[:-1]
        starts = np.flatnonzero(change)
        rank = np.arange(n) - np.repeat(starts, np.diff(np.r_[starts, n]))
        return order[rank < self.k]

    def result(self) -> dict:
        return self.kept or {}


class ParetoCollector(Collector):
    """Non-dominated rows on `objectives` [(column, "min"|"max"), ...], per group (or global)."""

    def __init__(
        self, objectives: Sequence[tuple[str, str]], group_by: Sequence[str] = ("_run",), where: str | None = "fits"
    ):
        from .pareto import pareto_mask

        self._mask = pareto_mask
        self.objectives, self.group_by, self.where = list(objectives), list(group_by), where
        self.kept: dict | None = None

    def spawn(self):
        return ParetoCollector(self.objectives, self.group_by, self.where)

    def _front(self, cols: dict) -> dict:
        objs = [np.asarray(cols[c], dtype=np.float64) * (1.0 if s == "min" else -1.0) for c, s in self.objectives]
        if not self.group_by:
            return _take(cols, np.flatnonzero(self._mask(*objs)))
        key = np.zeros(len(objs[0]), dtype=np.int64)
        for g in self.group_by:
            _, inv = np.unique(cols[g], return_inverse=True)
            key = key * (inv.max() + 1) + inv
        keep = np.zeros(len(key), dtype=bool)
        for k in np.unique(key):
            idx = np.flatnonzero(key == k)
            keep[idx[self._mask(*[o[idx] for o in objs])]] = True
        return _take(cols, np.flatnonzero(keep))

    def update(self, cols: dict) -> None:
        if not cols:
            return
        _require(cols, [c for c, _ in self.objectives] + ([self.where] if self.where else []), "a Pareto front")
        keys = ["_run", "_row", *[c for c, _ in self.objectives], *self.group_by]
        idx = np.flatnonzero(cols[self.where]) if self.where is not None else np.arange(len(cols["_row"]))
        if len(idx) == 0:
            return
        small = {k: cols[k][idx] for k in dict.fromkeys(keys)}
        small["_i"] = idx
        idx = self._front(small)["_i"]
        self.kept = self._front(_concat(self.kept, _take(cols, idx)))

    def result(self) -> dict:
        if not self.kept:
            return {}
        order = np.lexsort((self.kept["_row"], self.kept["_run"]))
        return _take(self.kept, order)


class FitsCollector(Collector):
    """Every row where `where` holds (default: the layout fits in memory)."""

    def __init__(self, where: str | None = "fits"):
        self.where, self.parts = where, []

    def update(self, cols: dict) -> None:
        if cols:
            self.parts.append(_take(cols, np.flatnonzero(cols[self.where])) if self.where else cols)

    def result(self) -> dict:
        parts = [p for p in self.parts if len(p.get("_row", ()))]
        return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]} if parts else {}


class ParquetSink(Collector):
    """Full output: every chunk becomes one file of a hive-partitioned Parquet dataset.

    Layout: PATH/model=NAME/hardware=NAME/workload=KIND/part-RRR-CCCCC.parquet (read it back with
    `pandas.read_parquet(PATH)` or `parallmelism merge PATH --out FILE`). Files are written into a
    temporary folder beside PATH and renamed at `close()`; a failed run leaves nothing at PATH.
    """

    def __init__(self, path: str | Path, runs: list):
        self.path = Path(path)
        self.runs = runs
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.tmp = Path(tempfile.mkdtemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=self.path.parent))
            honour_umask(self.tmp)  # mkdtemp makes 0700: the dataset folder gets the usual permissions
        except OSError as exc:
            raise UserError(f"cannot write to {str(self.path.parent)!r}: {exc.strerror}") from None
        self.count = 0
        self.rows = 0

    def update(self, cols: dict) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        if not cols or len(cols["_row"]) == 0:
            return
        r = int(cols["_run"][0])
        run = self.runs[r]
        df = _frame_of_run(run, {k: v for k, v in cols.items() if k not in ("_run", "_row")})
        df = df.drop(columns=[c for c in ("model", "hardware", "workload") if c in df.columns])
        folder = (
            self.tmp / f"model={run.model.name}" / f"hardware={run.hardware.name}" / f"workload={run.workload.kind}"
        )
        table = pa.Table.from_pandas(df, preserve_index=False)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            pq.write_table(table, folder / f"part-{r:03d}-{self.count:05d}.parquet")
        except OSError as exc:  # disk full, quota, ...: abort() removes the temporary folder
            raise UserError(
                f"cannot write {str(self.path)!r}: {write_error_reason(exc)}; nothing was written "
                "(an existing dataset there is unchanged)"
            ) from None
        self.count += 1
        self.rows += len(df)

    def close(self) -> Path:
        if self.path.exists():
            shutil.rmtree(self.path) if self.path.is_dir() else self.path.unlink()
        os.replace(self.tmp, self.path)
        return self.path

    def abort(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)

    def result(self) -> dict:
        return {}


# ----------------------------------------------------------------------------- driver


@dataclass
class StreamResult:
    """What a streamed sweep kept, plus counts of what it walked through."""

    runs: list
    kept: list  # one dict of columns per collector (with _run, _row)
    stats: list  # RunStats per run

    @property
    def evaluated(self) -> int:
        return sum(s.evaluated for s in self.stats)

    @property
    def timed(self) -> int:
        return sum(s.timed for s in self.stats)

    @property
    def considered(self) -> int:
        return sum(s.considered for s in self.stats)

    def dropped(self) -> dict:
        out: dict = {}
        for s in self.stats:
            add_drop_counts(out, s.dropped)
        return out

    def frame(self, i: int = 0, keep_index_columns: bool = False):
        """Collector i's rows as a DataFrame (schema order, readable strings), runs in order."""
        return frame_of_kept(self.runs, self.kept[i], keep_index_columns)


def _frame_of_run(run, cols: dict):
    import pandas as pd

    from ..engine import to_frame

    if run.workload.kind == "train":
        return to_frame(cols, run)
    return pd.DataFrame(cols)


def frame_of_kept(runs: list, cols: dict, keep_index_columns: bool = False):
    """Kept column dict (several runs mixed) -> one DataFrame, rows ordered by collector order."""
    import pandas as pd

    if not cols or len(cols.get("_row", ())) == 0:
        return pd.DataFrame()
    frames = []
    run_ids = cols["_run"]
    for r in np.unique(run_ids):
        idx = np.flatnonzero(run_ids == r)
        sub = _take(cols, idx)
        df = _frame_of_run(runs[int(r)], {k: v for k, v in sub.items() if k not in ("_run", "_row")})
        df.index = idx
        if keep_index_columns:
            df["_run"], df["_row"] = sub["_run"], sub["_row"]
        frames.append(df)
    df = pd.concat(frames) if len(frames) > 1 else frames[0]
    return df.sort_index().reset_index(drop=True)


def _row_base(part: int) -> int:
    """Row numbers are (partition << 32) + position in the partition: enumeration order, and
    known before earlier partitions finish (so workers can number rows independently)."""
    return part << 32


def _tag(cols: dict, r: int, part: int, pos: np.ndarray) -> dict:
    cols["_run"] = np.full(len(pos), r, dtype=np.int32)
    cols["_row"] = pos + _row_base(part)
    return cols


_WORKER: dict = {}


def _worker_init(runs, collectors, chunk_rows, prune):
    _WORKER.update(runs=runs, collectors=collectors, chunk_rows=chunk_rows, prune=prune)


def _worker_task(task):
    """Evaluate one partition in a worker process; return the mergeable collectors' results."""
    r, part = task
    run = _WORKER["runs"][r]
    local = [c.spawn() for c in _WORKER["collectors"]]
    stats = RunStats()
    for cols, pos in iter_partition_chunks(run, part, _WORKER["chunk_rows"], stats, _WORKER["prune"]):
        _tag(cols, r, part, pos)
        for c in local:
            c.update(cols)
    return r, [c.result() for c in local], stats, stats.evaluated


def default_workers(runs) -> int:
    """Worker processes for a sweep: the idle cores (cores minus the 1-minute load average), when
    there are enough partitions to share. On a busy machine extra processes only add overhead."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    parts = sum(partitions_of(r) for r in runs)
    try:
        idle = int(cores - os.getloadavg()[0] + 0.5)
    except OSError:
        idle = cores
    workers = max(1, min(cores, idle))
    return workers if parts >= 2 * workers else 1


def stream_runs(
    runs: list,
    collectors: list[Collector],
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
    progress: Callable[[int, int], None] | None = None,
    workers: int | None = None,
    prune_unfit: bool | None = None,
) -> StreamResult:
    """Evaluate every run chunk by chunk, feeding each chunk to every collector.

    `progress(partitions_done_delta, rows_evaluated_delta)` is called as work completes.
    With workers > 1 (default: every core, for sweeps of enough partitions) partitions are
    evaluated in worker processes when every collector is mergeable (`spawn`); a ParquetSink or
    FitsCollector keeps the sweep in this process. A ParquetSink is closed (renamed into place)
    at the end, or removed on error. prune_unfit (default: when every collector keeps fitting
    rows only) skips the time model for layouts that do not fit in memory.
    """
    stats = [RunStats() for _ in runs]
    if prune_unfit is None:
        prune_unfit = bool(collectors) and all(getattr(c, "where", None) == "fits" for c in collectors)
    sinks = [c for c in collectors if isinstance(c, ParquetSink)]
    workers = default_workers(runs) if workers is None else workers
    mergeable = all(c.spawn() is not None for c in collectors)
    try:
        if workers > 1 and mergeable:
            _stream_parallel(runs, collectors, chunk_rows, progress, workers, stats, prune_unfit)
        else:
            _stream_serial(runs, collectors, chunk_rows, progress, stats, prune_unfit)
        for s in sinks:
            s.close()
    except BaseException:
        for s in sinks:
            s.abort()
        raise
    return StreamResult(runs, [c.result() for c in collectors], stats)


def _stream_serial(runs, collectors, chunk_rows, progress, stats, prune):
    for r, run in enumerate(runs):
        for part in range(partitions_of(run)):
            before = stats[r].evaluated
            for cols, pos in iter_partition_chunks(run, part, chunk_rows, stats[r], prune):
                _tag(cols, r, part, pos)
                for c in collectors:
                    c.update(cols)
            if progress is not None:
                progress(1, stats[r].evaluated - before)


def _stream_parallel(runs, collectors, chunk_rows, progress, workers, stats, prune):
    import multiprocessing as mp

    tasks = [(r, part) for r, run in enumerate(runs) for part in range(partitions_of(run))]
    ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else mp.get_context()
    with ctx.Pool(workers, initializer=_worker_init, initargs=(runs, collectors, chunk_rows, prune)) as pool:
        for r, kept, st, rows in pool.imap(_worker_task, tasks):  # in order: same ties as serial
            s = stats[r]
            s.considered += st.considered
            s.evaluated += st.evaluated
            s.timed += st.timed
            add_drop_counts(s.dropped, st.dropped)
            for c, part_kept in zip(collectors, kept):
                if part_kept:
                    c.update(part_kept)
            if progress is not None:
                progress(1, rows)
        pool.close()
        pool.join()
