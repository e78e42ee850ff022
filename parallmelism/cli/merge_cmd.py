"""`parallmelism merge`: the parts of a multirun (or Parquet datasets) as one table."""

from __future__ import annotations

from pathlib import Path
from typing import List

import typer

from .common import QUIET


def merge(
    parts: List[Path] = typer.Argument(..., help="part files (.csv, .parquet) or Parquet dataset folders"),
    out: Path = typer.Option(..., "--out", "-o", help="merged table (.csv or .parquet)"),
    quiet: bool = QUIET,
):
    """Concatenate the parts written by a multirun (one per model x hardware x workload shard) into one table."""
    from ..errors import UserError
    from ..report.merge import merge_tables
    from .common import console, fail, write_frame

    try:
        merged = merge_tables(list(parts))
        write_frame(merged, out, console(stderr=quiet), f"rows from {len(parts)} parts")
    except UserError as exc:
        fail(str(exc))
