"""`parallmelism show` as typer declares it: its options and help. The body is cli/show_run.py,
which imports no typer; a plain command line runs it without typer (cli/app.py `plain_call`)."""

from __future__ import annotations

from typing import List, Optional

from .options import CFG, CONFIG_DIR, INFO, OVERRIDES, RESOLVE


def show(
    overrides: Optional[List[str]] = OVERRIDES,
    cfg: bool = CFG,
    resolve: bool = RESOLVE,
    info: bool = INFO,
    config_dir: Optional[List[str]] = CONFIG_DIR,
):
    """Explain one layout: pin the grid (grid.ngpus=[64] grid.tp=8 ...); the best match is shown."""
    from .show_run import show as run

    run(overrides, cfg, resolve, info, config_dir)
