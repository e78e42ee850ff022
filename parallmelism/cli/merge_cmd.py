"""`parallmelism merge`: the parts of a multirun (or Parquet datasets) as one table."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from .options import QUIET, a_path
from .outputs import check_out
from ..words import counted


def merge(
    parts: List[str] = typer.Argument(
        ..., help="part files (.csv, .parquet) or Parquet dataset folders; output.path=FILE is --out"
    ),
    out: Optional[Path] = typer.Option(
        None, "--out", "-o", callback=check_out, parser=a_path, help="merged table (.csv or .parquet)"
    ),
    quiet: bool = QUIET,
    allow_partial: bool = typer.Option(
        False, "--allow-partial", help="merge a study folder whose points are not all complete (default: refuse)"
    ),
):
    """Concatenate the parts written by a multirun (one per model x hardware x workload shard) into one table."""
    from ..errors import UserError
    from ..report.merge import merge_tables
    from ..report.writer import check_not_an_input
    from .common import console, fail
    from .outputs import out_of_path_overrides, write_frame

    try:
        out = out_of_path_overrides(out, [p for p in parts if p.startswith("output.path=")])
        files = [Path(p) for p in parts if not p.startswith("output.path=")]
        if out is None:
            raise UserError("merge needs --out FILE (or output.path=FILE): the merged table's .csv or .parquet path")
        if not files:
            raise UserError("merge needs at least one part file or dataset folder")
        check_not_an_input(out, [f for p in files for f in ([p] if not p.is_dir() else p.rglob("*"))])
        from ..study.dataset import is_study

        studies = [f for f in files if is_study(f) or (f.name == "rows" and is_study(f.parent))]
        if studies:  # a study folder (or its rows/): streamed, its manifest checked
            if len(files) > 1:
                raise UserError("merge takes one study folder at a time (its manifest lists every point)")
            from ..study.merge import merge_study

            study, part = (files[0], "data") if is_study(files[0]) else (files[0].parent, "rows")
            rows, merged, missing = merge_study(study, out, allow_partial, part)
            left = f", {missing:,} missing (--allow-partial)" if missing else ""
            console(stderr=quiet).print(
                f"wrote {counted(rows, 'row')} from {counted(merged, 'point')}{left} to {out}", markup=False
            )
            return
        if allow_partial:
            raise UserError("--allow-partial applies to a study folder (one with a manifest.json)")
        merged = merge_tables(files)
        if len(merged) == 0:
            raise UserError(f"the {len(files)} part(s) hold no rows; nothing was written")
        write_frame(merged, out, console(stderr=quiet), tail=f" from {counted(len(files), 'part')}")
    except UserError as exc:
        fail(str(exc))
