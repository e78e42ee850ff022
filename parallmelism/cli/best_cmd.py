"""`parallmelism best` as typer declares it: its options and help. The body is cli/best_run.py,
which imports no typer; a plain command line runs it without typer (cli/app.py `plain_call`)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from .options import CHUNK, CONFIG_DIR, FULL, OUT, OVERRIDES, QUIET, WIDE, WORKERS


def best(
    overrides: Optional[List[str]] = OVERRIDES,
    top: int = typer.Option(5, "--top", "-k", help="layouts per group: the winner and its runner-ups", min=1),
    out: Optional[Path] = OUT,
    full_output: Optional[Path] = FULL,
    quiet: bool = QUIET,
    chunk_rows: int = CHUNK,
    workers: Optional[int] = WORKERS,
    config_dir: Optional[List[str]] = CONFIG_DIR,
    wide: bool = WIDE,
    multirun: bool = typer.Option(
        False,
        "--multirun",
        "-m",
        help="hand the search to Hydra multirun: one job per point (launcher plugins), "
        "each writing its best table as part.csv in its job folder; `merge` joins them",
    ),
):
    """Fastest layout that fits, per (model, hardware, ngpus, workload), with runner-ups and why they lose."""
    from .best_run import best as run

    return run(overrides, top, out, full_output, quiet, chunk_rows, workers, config_dir, wide, multirun)
