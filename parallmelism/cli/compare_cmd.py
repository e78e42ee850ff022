"""`parallmelism compare BASELINE NEW`: CI check that no capacity number moved beyond tolerance.

Exit codes: 0 within tolerance, 1 something moved (or rows/columns were added/removed),
2 bad input (unreadable file, unknown key column, duplicate keys, another schema_version).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import List, Optional

import typer
from ..words import counted


def compare(
    baseline: Path = typer.Argument(..., help="baseline table (CSV or Parquet), e.g. tests/golden/x.csv"),
    new: Path = typer.Argument(..., help="new table to check against the baseline"),
    rtol: float = typer.Option(1e-9, "--rtol", help="relative tolerance for numeric columns"),
    atol: float = typer.Option(1e-12, "--atol", help="absolute tolerance for numeric columns"),
    tolerances: Optional[Path] = typer.Option(
        None, "--tolerances", help="YAML: column (or glob) -> {rtol, atol} or a bare rtol"
    ),
    key: Optional[List[str]] = typer.Option(
        None,
        "--key",
        help="columns that identify a row, comma-separated or the option repeated "
        "(default: the configuration columns present in both files)",
    ),
    max_rows: int = typer.Option(40, "--max-rows", help="moved values listed (largest relative change first)", min=0),
):
    """Compare two result tables; exit 0 within tolerance, 1 when something moved, 2 on bad input."""
    from ..errors import UserError
    from .common import console, fail

    try:
        from ..report.compare import compare_files, load_tolerances

        tol = load_tolerances(tolerances) if tolerances is not None else None
        # every --key given (a repeated option kept only its last: --key case --key quantity keyed on quantity)
        keys = [k.strip() for given in key for k in given.split(",") if k.strip()] if key else None
        if key and not keys:
            raise UserError(f"--key={','.join(key)!r} names no column")
        comp = compare_files(baseline, new, key=keys, rtol=rtol, atol=atol, tolerances=tol)
    except UserError as exc:
        fail(str(exc))
    print_comparison(comp, console(), max_rows)
    raise typer.Exit(0 if comp.ok else 1)


def print_comparison(comp, console, max_rows: int = 40) -> None:
    from ..report.compare import row_label, summary_by_column, varying_key
    from ..report.table import fit_table

    shown = varying_key(comp)
    width = console.width  # names and values are never cut: columns that do not fit are left out whole
    if len(comp.moved):
        summ = summary_by_column(comp)
        cells = {
            "column": [str(r.column) for r in summ.itertuples(index=False)],
            "rows moved": [f"{r.rows_moved:,}" for r in summ.itertuples(index=False)],
            "max |rel change|": [_pct(r.max_abs_rel_change) for r in summ.itertuples(index=False)],
        }
        kinds = {"column": "value", "rows moved": "number", "max |rel change|": "number"}
        title = (
            f"columns that moved ({counted(len(comp.moved), 'value')} in {counted(comp.rows_compared, 'row')} compared)"
        )
        console.print(fit_table(list(cells), cells, kinds, width, title=title, keep=("column",), hint=""), crop=False)
        moved = comp.moved.assign(_abs=comp.moved["rel_change"].astype(float).abs().fillna(math.inf))
        moved = moved.sort_values("_abs", ascending=False, kind="stable").head(max_rows)
        rows = [r for _, r in moved.iterrows()]
        cells = {
            "row": [row_label(r, shown) for r in rows],  # key=value groups: wrapped between groups only
            "column": [str(r["column"]) for r in rows],
            "old": [_num(r["old"]) for r in rows],
            "new": [_num(r["new"]) for r in rows],
            "rel change": [_change(r) for r in rows],
        }
        kinds = {"row": "tokens", "column": "value", "old": "value", "new": "value", "rel change": "number"}
        title = f"largest changes (first {len(moved)} of {len(comp.moved):,})"
        table = fit_table(
            list(cells),
            cells,
            kinds,
            width,
            title=title,
            first=("row", "column", "rel change", "new", "old"),
            keep=("row", "column"),
            hint="",
            right=("old", "new"),
        )
        console.print(table, crop=False)
        one_nan = int(sum(_is_nan(o) != _is_nan(n) for o, n in zip(comp.moved["old"], comp.moved["new"])))
        if one_nan:  # NaN on both sides is unchanged; on one side only it moved, and says so
            console.print(f"note: {one_nan:,} moved value{'s are' if one_nan > 1 else ' is'} NaN on one side only")
    for label, frame in (
        ("rows only in new (added)", comp.added_rows),
        ("rows only in baseline (removed)", comp.removed_rows),
    ):
        if len(frame):
            console.print(f"{label}: {len(frame):,}")
            for _, r in frame.head(10).iterrows():
                console.print(f"  {row_label(r, shown)}", markup=False)
            if len(frame) > 10:
                console.print(f"  ... and {len(frame) - 10:,} more")
    if comp.added_columns:
        console.print(f"columns only in new (added): {', '.join(comp.added_columns)}", markup=False)
    if comp.removed_columns:
        console.print(f"columns only in baseline (removed): {', '.join(comp.removed_columns)}", markup=False)
    if comp.unmatched_tolerances:
        names = ", ".join(repr(p) for p in comp.unmatched_tolerances)
        console.print(f"note: the tolerance for {names} matches no compared column (is it spelt right?)", markup=False)
    verdict = "within tolerance" if comp.ok else "DIFFERENT"
    console.print(
        f"{verdict}: {counted(comp.rows_compared, 'row')} x {counted(comp.columns_compared, 'column')} compared on key "
        f"({', '.join(comp.key)})",
        markup=False,
    )


def _is_nan(v) -> bool:
    try:
        return math.isnan(float(v))
    except (TypeError, ValueError):
        return v is None


def _change(r) -> str:
    """The relative change, or which side is NaN (a value that appeared or went missing)."""
    old_nan, new_nan = _is_nan(r["old"]), _is_nan(r["new"])
    if old_nan != new_nan:
        return "now NaN" if new_nan else "was NaN"
    return _pct(r["rel_change"])


def _num(v) -> str:
    if isinstance(v, float) or getattr(getattr(v, "dtype", None), "kind", "") == "f":  # numpy floats too
        return f"{v:.6g}"
    return str(v)


def _pct(v) -> str:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return "-"
    if math.isnan(f):
        return "-"
    if math.isinf(f):
        return "new nonzero"
    return f"{100 * f:+.4g}%"
