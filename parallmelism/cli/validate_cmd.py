"""`parallmelism validate`: predict published measurements and report the error per case."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from .options import CONFIG_DIR, OVERRIDES, a_path
from .outputs import check_out
from ..words import plural


def validate(
    cases: Optional[List[Path]] = typer.Option(
        None, "--cases", help="case file(s) in the format of shared/reference/*_measured.csv (default: the shipped set)"
    ),
    out: Optional[Path] = typer.Option(
        None, "--out", callback=check_out, parser=a_path, help="write the per-case table here (.csv or .parquet)"
    ),
    max_error: Optional[float] = typer.Option(None, "--max-error", help="exit 1 if any |error| exceeds PCT", min=0.0),
    overrides: Optional[List[str]] = OVERRIDES,
    config_dir: Optional[List[str]] = CONFIG_DIR,
):
    """Predict published measurements and report the error per case."""
    from ..errors import UserError
    from .common import console, fail
    from ..validate.runner import run_validation, summary
    from ..report.table import frame_table
    from ..report.writer import write_table

    try:
        if out is not None:  # never over a case file, a config file or a kernel table it reads
            from ..report.writer import check_not_an_input
            from ..validate.runner import shipped_case_files
            from .outputs import run_inputs

            check_not_an_input(out, [*(cases or shipped_case_files()), *run_inputs([], config_dir)])
        table = run_validation(cases, list(overrides or []), config_dir)
        failed = table.attrs.get("failed", [])
        if out is not None and not failed:  # first, so an unwritable path fails before anything is printed
            write_table(table, out)
        to = console()
        HINT = "a wider terminal shows them; --out writes every column"
        columns = ["case", "quantity", "measured", "predicted", "error_pct"]
        to.print(
            frame_table(table, columns=columns, title="validation", width=to.width, answers=columns[2:], hint=HINT),
            crop=False,
        )
        for line in summary(table):
            to.print(line, markup=False)
        from ..validate.engine_report import engine_lines

        for line in engine_lines(table):  # per serving engine (issue 33), independent vs aiconfigurator rows
            to.print(line, markup=False)
        if out is not None and not failed:
            to.print(f"wrote {len(table)} {plural(len(table), 'row')} to {out}", markup=False)
        if failed:
            err = console(stderr=True)
            for f in failed:
                err.print(f"could not build case {f['case']} ({f['file']}): {f['reason']}", markup=False)
            # a failing exit leaves no table that looks complete: --out is not written
            unwritten = f"; nothing was written to {str(out)!r}" if out is not None else ""
            err.print(
                f"{len(failed)} case row{'s' if len(failed) > 1 else ''} could not be built; the table above "
                f"holds the others{unwritten}",
                markup=False,
            )
            raise typer.Exit(2)
        if max_error is not None and (table["error_pct"].abs() > max_error).any():
            over = table[table["error_pct"].abs() > max_error]
            over = over.iloc[over["error_pct"].abs().to_numpy().argsort()[::-1]]
            named = ", ".join(f"{r.case} ({r.quantity}) {r.error_pct:+.2f}%" for r in over.itertuples())
            console(stderr=True).print(
                f"{len(over)} case row{'s are' if len(over) > 1 else ' is'} off by more than "
                f"--max-error {max_error}%: {named}",
                markup=False,
            )
            raise typer.Exit(1)
    except UserError as exc:
        fail(str(exc))
