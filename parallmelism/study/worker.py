"""Run a batch of a study's points in this process, with the project's Python API (no Hydra launcher).

Each point's RunConfig is its base (the study's overrides plus the point's `model=`/`hardware=`/...
choices), composed once per process and reused, with the point's fields set on it
(config.compose.run_with_fields). A point writes its partition (temporary folder, then rename) or,
on a user error, its failure record; the batch carries on either way. A point already completed
(a retried task, a resumed study) is skipped.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UserError
from ..search.collectors import Collector
from .dataset import (
    ROWS,
    StudyContext,
    clear_failure,
    column_value,
    commit_partition,
    partition,
    write_failure,
)
from .spec import Point

GROUP_KEYS = ("model", "hardware", "workload", "grid")
PART_FILE = "part-0.parquet"
# Test-only hook (tests/test_study.py): "POINT_ID:MARKER" makes the worker that reaches that point
# exit at once (a lost worker, as a killed node or the OOM killer leaves it) the first time, i.e.
# while MARKER does not exist; the engine's retry then completes the batch.
CRASH_ONCE_ENV = "PARALLMELISM_STUDY_CRASH_ONCE"


@dataclass(frozen=True)
class PointResult:
    point: str
    status: str  # "done", "skipped" (completed before), "failed"
    rows: int = 0
    reason: str = ""
    evaluated: int = 0  # valid layouts through the cost model


_BASES: dict[tuple, Any] = {}  # (config dirs, base overrides) -> RunConfig, composed once per process


def run_config(ctx: StudyContext, point: Point):
    """The point's RunConfig: its composed base with its fields set."""
    from ..config import load_run_configs
    from ..config.compose import run_with_fields

    groups = [o for o in point.overrides if o.split("=", 1)[0] in GROUP_KEYS]
    fields = {k: v for k, v in point.values.items() if k not in GROUP_KEYS}
    base_key = (ctx.config_dirs, (*ctx.overrides, *groups))
    if base_key not in _BASES:
        runs = load_run_configs(list(base_key[1]), list(ctx.config_dirs) or None)
        if len(runs) != 1:
            raise UserError(f"the study's overrides {list(ctx.overrides)} hold a sweep; put swept values in points")
        _BASES[base_key] = runs[0][1]
    try:
        return run_with_fields(_BASES[base_key], fields)
    except KeyError:  # not a field of the composed config: Hydra composes it, or says why not
        return load_run_configs([*base_key[1], *point.overrides], list(ctx.config_dirs) or None)[0][1]


def _with_point_columns(table, ctx: StudyContext, point: Point):
    import pyarrow as pa

    for key, kind in ctx.columns.items():
        value = column_value(point.values.get(key), kind)
        table = table.append_column(key, pa.array([value] * table.num_rows, type=pa.type_for_alias(kind)))
    return table


class PointSink(Collector):
    """Every row of one point into its partition's Parquet file, with the point's columns."""

    def __init__(self, tmp: Path, run, ctx: StudyContext, point: Point):
        self.tmp, self.run, self.ctx, self.point = tmp, run, ctx, point
        self.rows = 0
        self._writer: Any = None

    def update(self, cols: dict) -> None:
        import pyarrow.parquet as pq

        from ..search.frames import arrow_of_run

        if not cols or len(cols["_row"]) == 0:
            return
        table = _with_point_columns(arrow_of_run(self.run, cols), self.ctx, self.point)
        if self._writer is None:
            self._writer = pq.ParquetWriter(self.tmp / PART_FILE, table.schema)
        self._writer.write_table(table)
        self.rows += table.num_rows

    def close(self):
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        return self.rows

    def abort(self) -> None:
        if self._writer is not None:
            try:
                self._writer.close()
            except Exception:  # noqa: BLE001 - the temporary folder goes anyway
                pass
            self._writer = None

    def result(self):
        return self.rows


def _evaluate(ctx: StudyContext, point: Point, tmp: Path, rows_tmp: Path | None) -> tuple[int, int]:
    """Write the point's rows into tmp/part-0.parquet (best with full_output: every row into
    rows_tmp/part-0.parquet too); (rows, layouts evaluated). A user error raises."""
    from ..search import stream_runs

    run = run_config(ctx, point)
    if ctx.command == "sweep":
        sink = PointSink(tmp, run, ctx, point)
        res = stream_runs([run], [sink], ctx.chunk_rows, workers=1, derive=False)
        if res.evaluated == 0:
            raise UserError(res.explain_empty())
        return sink.rows, res.evaluated
    import pyarrow.parquet as pq

    from ..report.writer import arrow_table
    from ..search.best import search_best

    every = [PointSink(rows_tmp, run, ctx, point)] if rows_tmp is not None else []
    table, evaluated = search_best([run], ctx.top, lambda rs, cs: stream_runs(rs, cs, ctx.chunk_rows, workers=1), every)
    out = _with_point_columns(arrow_table(table), ctx, point)
    pq.write_table(out, tmp / PART_FILE)
    return out.num_rows, evaluated


def _crash_hook(point: Point) -> None:
    spec = os.environ.get(CRASH_ONCE_ENV, "")
    if spec.partition(":")[0] == point.id:
        marker = Path(spec.partition(":")[2])
        if not marker.exists():
            marker.touch()
            os._exit(1)


def run_point(ctx: StudyContext, point: Point) -> PointResult:
    """Run one point: its partition, or its failure record (user error, one sentence)."""
    from ..report.writer import create_temp, remove_temp, temp_beside

    folder = Path(ctx.folder)
    final = partition(folder, point.id)
    if final.is_dir():
        return PointResult(point.id, "skipped")
    _crash_hook(point)
    tmp = temp_beside(final)
    every = partition(folder, point.id, ROWS) if ctx.full_output else None
    rows_tmp = temp_beside(every) if every is not None else None
    temps = [t for t in (tmp, rows_tmp) if t is not None]
    try:
        for t in temps:
            t.parent.mkdir(parents=True, exist_ok=True)
            create_temp(t, folder=True)
        rows, evaluated = _evaluate(ctx, point, tmp, rows_tmp)
        if every is not None and rows_tmp is not None:  # every row first: data/ marks the point complete
            commit_partition(rows_tmp, every, replace=True)
        if commit_partition(tmp, final):
            clear_failure(folder, point.id)
        return PointResult(point.id, "done", rows, evaluated=evaluated)
    except UserError as exc:
        reason = str(exc)
    except (KeyboardInterrupt, SystemExit):
        for t in temps:
            remove_temp(t)
        raise
    except Exception as exc:  # noqa: BLE001 - a bug in one point is recorded; the study goes on
        reason = f"internal error ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"
    for t in temps:
        remove_temp(t)
    write_failure(folder, point, reason)
    return PointResult(point.id, "failed", 0, reason)


@dataclass(frozen=True)
class BatchResult:
    """A batch's answers and what it cost its worker process (figures for benchmarks/)."""

    results: list
    pid: int
    cpu_s: float  # CPU seconds of this worker process spent on the batch
    peak_rss_mib: float  # the worker process's peak resident memory so far


def run_batch(ctx: StudyContext, points: list[Point]) -> BatchResult:
    """Run a batch of points in order; every point answers (done, skipped or failed)."""
    import resource
    import time

    start = time.process_time()
    results = [run_point(ctx, p) for p in points]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    return BatchResult(results, os.getpid(), time.process_time() - start, peak)
