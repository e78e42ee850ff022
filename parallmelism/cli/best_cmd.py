"""`parallmelism best`: fastest layout that fits per GPU count, runner-ups, near misses."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from ..schema import LAYOUT_AXES
from .common import CHUNK, CONFIG_DIR, OVERRIDES, QUIET, WORKERS
from .outputs import FULL, OUT

TABLE_COLUMNS = [
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
    multirun: bool = typer.Option(
        False,
        "--multirun",
        "-m",
        help="hand the search to Hydra multirun: one job per point (launcher plugins), "
        "each writing its best table as part.csv in its job folder; `merge` joins them",
    ),
):
    """Fastest layout that fits, per (model, hardware, ngpus, workload), with runner-ups and why they lose."""
    from ..errors import UserError
    from ..report.table import frame_table, run_columns
    from ..search.best import search_best
    from .common import console, fail, load_runs, stream
    from .outputs import check_distinct_outputs, out_of, say_full_output, with_full_output, write_frame

    try:
        if multirun:
            from .hydra_entry import refuse_single_outputs, run_multirun_best

            refuse_single_outputs(out=out, full_output=full_output)

            return run_multirun_best(list(overrides or []), config_dir, top)
        runs = load_runs(overrides, config_dir)
        out = out_of(out, runs, config_dir)
        check_distinct_outputs(out, full_output)
        table, evaluated = search_best(
            runs,
            top,
            lambda rs, cs: stream(rs, cs, quiet, chunk_rows, "searching", workers),
            with_full_output([], runs, full_output),
        )
        to = console()
        if not quiet:
            where = ""
            if len(runs) == 1:  # one model and accelerator: say it once, in the title
                where = f" of {runs[0].model.name} on {runs[0].hardware.name}"
            title = f"fastest layouts that fit{where} ({evaluated:,} layouts evaluated)"
            to.print(frame_table(table, columns=TABLE_COLUMNS, width=to.width, title=title, lead=run_columns(runs)))
        write_frame(table, out, to)
        say_full_output(full_output, evaluated, to)
    except UserError as exc:
        fail(str(exc))
