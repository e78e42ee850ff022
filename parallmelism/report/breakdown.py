"""Rich table of a per-op breakdown (edge module: the core returns records, this renders them)."""

from __future__ import annotations

import math

from rich.table import Table


def _num(v, unit: str = "") -> str:
    if isinstance(v, float) and math.isnan(v):
        return "-"
    if unit == "ms":
        return f"{v:,.3f}"
    if abs(v) >= 1e4:
        return f"{v:.3e}"
    return f"{v:,.2f}" if isinstance(v, float) and not v.is_integer() else f"{v:,.0f}"


def breakdown_table(records: list[dict], title: str = "per-op breakdown (busiest stage, one GPU)") -> Table:
    """Columns: phase, op, calls per stage, FLOPs / weight bytes / other HBM bytes per call,
    time on the stage (ms), bound."""
    table = Table(title=title)
    for c, j in (
        ("phase", "left"),
        ("op", "left"),
        ("calls", "right"),
        ("flops/call", "right"),
        ("weight B/call", "right"),
        ("other HBM B/call", "right"),
        ("time_ms", "right"),
        ("bound", "left"),
    ):
        table.add_column(c, justify=j)  # type: ignore[arg-type]  # rich wants a Literal; the values above are literal
    for r in records:
        table.add_row(
            r["phase"],
            r["op"],
            _num(r["calls"]),
            _num(r["flops"]),
            _num(r["weight_bytes"]),
            _num(r["other_bytes"]),
            _num(r["time_ms"], "ms"),
            r["bound"],
        )
    return table
