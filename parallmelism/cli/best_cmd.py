"""`parallmelism best`: fastest layout that fits per GPU count, runner-ups, near misses."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from ..schema import LAYOUT_AXES
from .common import CHUNK, CONFIG_DIR, FULL, OUT, OVERRIDES, QUIET, WORKERS

TABLE_COLUMNS = [
    "model",
    "hardware",
    "ngpus",
    "rank",
    *LAYOUT_AXES,
    "time_step_s",
    "mfu",
    "mem_total_gib",
    "why",
]


def best(
    overrides: Optional[List[str]] = OVERRIDES,
    top: int = typer.Option(5, "--top", "-k", help="layouts per group: the winner and its runner-ups", min=1),
    out: Optional[Path] = OUT,
    full_output: Optional[Path] = FULL,
    quiet: bool = QUIET,
    chunk_rows: int = CHUNK,
    workers: Optional[int] = WORKERS,
    config_dir: Optional[List[str]] = CONFIG_DIR,
):
    """Fastest layout that fits, per (model, hardware, ngpus, workload), with runner-ups and why they lose."""
    from ..errors import UserError
    from ..report.table import frame_table
    from ..search import TopKCollector, frame_of_kept
    from ..search.best import best_table
    from .common import console, fail, load_runs, out_of, stream, with_full_output, write_frame

    try:
        runs = load_runs(overrides, config_dir)
        out = out_of(out, runs)
        if any(r.workload.kind != "train" for r in runs):
            raise UserError(
                "best ranks training layouts by step time; for serving use `parallmelism plan serve` "
                "or `parallmelism pareto workload=inference`"
            )
        fits = TopKCollector(top, "time_step_s", group_by=["ngpus"], where="fits")
        near = TopKCollector(max(1, top // 2), "time_step_s", group_by=["ngpus"], where=None)
        collectors = with_full_output([fits, near], runs, full_output)
        res = stream(runs, collectors, quiet, chunk_rows, "searching", workers)
        if res.evaluated == 0:
            raise UserError(res.explain_empty())
        fit = frame_of_kept(runs, res.kept[0], keep_index_columns=True)
        if len(fit) == 0:
            raise UserError(
                f"none of the {res.evaluated:,} valid layouts fits in memory; "
                f"try more GPUs (grid.ngpus) or a larger accelerator"
            )
        table = best_table(fit, frame_of_kept(runs, res.kept[1], keep_index_columns=True), top)
        to = console()
        if not quiet:
            cols, where = TABLE_COLUMNS, ""
            if len(runs) == 1:  # one model and accelerator: say it once, in the title
                cols, where = cols[2:], f" of {runs[0].model.name} on {runs[0].hardware.name}"
            title = f"fastest layouts that fit{where} ({res.evaluated:,} layouts evaluated)"
            to.print(frame_table(table, columns=cols, width=to.width, title=title))
        write_frame(table, out, to)
    except UserError as exc:
        fail(str(exc))
