"""`parallmelism plot`: pictures (memory, roofline, pareto, scaling, step time)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from .options import CONFIG_DIR, OVERRIDES, QUIET, a_path

PLOT_KINDS = ("memory", "roofline", "pareto", "scaling", "step-time")


def plot(
    kind: str = typer.Argument(..., help="memory | roofline | pareto | scaling | step-time"),
    overrides: Optional[List[str]] = OVERRIDES,
    out: Path = typer.Option(..., "--out", "-o", parser=a_path, help="picture file: .png or .svg"),
    top: int = typer.Option(8, "--top", help="layouts shown (memory, step-time)", min=1),
    quiet: bool = QUIET,
    config_dir: Optional[List[str]] = CONFIG_DIR,
):
    """Draw a picture: memory, roofline, pareto, scaling or step-time (needs matplotlib: the plot extra)."""
    from ..errors import UserError
    from ..report.writer import check_writable_target
    from .common import console, fail, load_runs
    from .outputs import check_one_output_path

    try:
        if kind not in PLOT_KINDS:
            raise UserError(f"unknown plot {kind!r}; choose {', '.join(PLOT_KINDS)}")
        if out.suffix.lower() not in (".png", ".svg"):
            raise UserError(f"--out {str(out)!r}: give a .png or .svg file")
        check_writable_target(out)
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise UserError("plot needs matplotlib: pip install 'parallmelism[plot]'") from None
        from ..report import plots

        runs = load_runs(overrides, config_dir)
        check_one_output_path(out, {r.output.path for r in runs if r.output.path})  # a table's path: not here
        path = plots.draw(kind, runs, out, top=top)
        console().print(f"wrote {path}", markup=False)
    except UserError as exc:
        fail(str(exc))
