"""`parallmelism sweep`: every valid layout, streamed to one CSV or Parquet file chunk by chunk."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from .options import CFG, CHUNK, CONFIG_DIR, INFO, OVERRIDES, RESOLVE, WIDE, WORKERS, a_path
from ..words import counted


def _default_output(runs, fmt: str, folder: str) -> Path:
    def one(values: set) -> str:
        return values.pop() if len(values) == 1 else "multi"

    model = one({r.model.name for r in runs})
    hw = one({r.hardware.name for r in runs})
    kind = one({r.workload.kind for r in runs})
    return Path(folder) / f"{model}_{hw}_{kind}.{fmt}"


def _output_of(runs, out_path: Optional[Path], config_dirs=None):
    """(path, format) the sweep writes, or (None, None); checked before any computation, never a
    file the runs read."""
    from ..report.writer import check_output_path
    from .outputs import check_not_read, check_one_output_path, output_target

    out = runs[0].output
    check_one_output_path(out_path, {r.output.path for r in runs})
    if out_path is not None:  # --out, the spelling every command takes
        out = out.model_copy(update={"path": str(out_path), "write": True})
    if not out.write:
        return None, None
    # the default path (output.dir/<model>_<hardware>_<kind>.<format>) is checked as a given one is
    default = None if out.path else _default_output(runs, out.default_format, out.dir)
    path, fmt = output_target(out) if default is None else check_output_path(default)
    check_not_read(path, runs, config_dirs, "--out" if out_path is not None else "output.path")
    return path, fmt


def run_sweep(
    overrides: list[str],
    config_dirs,
    quiet: bool = False,
    top: Optional[int] = None,
    wide: bool = False,
    out_path: Optional[Path] = None,
    workers: Optional[int] = None,
    chunk_rows: int = 1 << 18,
) -> Optional[Path]:
    """Evaluate every run of a (possibly swept) command line, stream every row to one table,
    print the best rows. Returns the path written (None when output.write=false)."""
    from ..errors import UserError
    from ..grid import DROP_REASONS
    from ..report.rank import rank_keys
    from ..report.table import drop_table, frame_table, print_whole, run_columns
    from ..search import CountCollector, TableSink, TopKCollector
    from .common import console, load_runs, stream, warn_load_not_simulated

    runs = load_runs(overrides, config_dirs)
    warn_load_not_simulated(runs, "sweep")
    path, fmt = _output_of(runs, out_path, config_dirs)
    kinds = {r.workload.kind for r in runs}
    if len(kinds) > 1 and path is not None:
        raise UserError(
            "a sweep writes one table per workload kind; sweep workload=train and workload=inference "
            "separately (or with -m, one part per point)"
        )
    kind = kinds.pop()
    top_rows = TopKCollector(top or runs[0].output.top, rank_keys(kind), (), per_run=False)
    counts = CountCollector("fits")
    collectors = [top_rows, counts] + ([TableSink(path, fmt, runs)] if path is not None else [])
    res = stream(runs, collectors, quiet, chunk_rows, "evaluating", workers, derive=False)
    if res.evaluated == 0:
        raise UserError(res.explain_empty())
    out = console()
    if not quiet:
        out.print(drop_table(res.dropped(), DROP_REASONS, res.evaluated, width=out.width), crop=False)
        rows, fits = res.kept[1]
        table = frame_table(
            res.frame(0),
            title=f"best layouts ({fits:,} of {rows:,} fit in memory)",
            width=None if wide else out.width,
            lead=run_columns(runs),
        )
        if wide:
            print_whole(out, table)
        else:
            out.print(table, crop=False)
    if path is not None:
        out.print(f"wrote {counted(res.kept[2], 'row')} to {path}", markup=False)
    return path


def sweep(
    overrides: Optional[List[str]] = OVERRIDES,
    cfg: bool = CFG,
    resolve: bool = RESOLVE,
    info: bool = INFO,
    config_dir: Optional[List[str]] = CONFIG_DIR,
    multirun: bool = typer.Option(
        False, "--multirun", "-m", help="hand the sweep to Hydra multirun (launcher plugins, one job per point)"
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no tables, just where it wrote"),
    top: Optional[int] = typer.Option(None, "--top", help="rows in the terminal table", min=1),
    wide: bool = WIDE,
    out_path: Optional[Path] = typer.Option(
        None,
        "--out",
        "-o",
        parser=a_path,
        help="write the table here (.csv or .parquet; "
        "the same as output.path=, which needs quotes around , ( ) and non-ASCII)",
    ),
    workers: Optional[int] = WORKERS,
    chunk_rows: int = CHUNK,
):
    """Evaluate every valid layout and write a CSV (default: results/<model>_<hardware>_<workload>.csv)."""
    from ..errors import UserError
    from .common import config_flags, fail

    overrides = list(overrides or [])
    try:
        if config_flags(cfg, resolve, info, overrides, config_dir):
            return
        if multirun:
            from .hydra_entry import refuse_single_outputs, run_multirun

            refuse_single_outputs(out=out_path)
            return run_multirun(overrides, config_dir)
        run_sweep(overrides, config_dir, quiet, top, wide, out_path, workers, chunk_rows)
    except UserError as exc:
        fail(str(exc))
