"""Rich table of a per-op breakdown (edge module: the core returns records, this renders them)."""

from __future__ import annotations

import math

from typing import TYPE_CHECKING

from .table import fit_table

if TYPE_CHECKING:
    from rich.console import Group

    from .plain_table import FittedTable


def _num(v, unit: str = "") -> str:
    if isinstance(v, float) and math.isnan(v):
        return "-"
    if unit == "ms":
        return f"{v:,.3f}"
    if abs(v) >= 1e4:
        return f"{v:.3e}"
    return f"{v:,.2f}" if isinstance(v, float) and not v.is_integer() else f"{v:,.0f}"


def breakdown_table(
    records: list[dict], title: str = "per-op breakdown (busiest stage, one GPU)", width: int | None = None
) -> FittedTable | Group:
    """Columns: phase, op, calls per stage, FLOPs / weight bytes / other HBM bytes per call,
    time on the stage (ms), bound (serving's `ttft` rows: the parts of one request's mean TTFT). At `width`, the columns that fit whole (phase and op kept)."""
    cells: dict[str, list[str]] = {
        "phase": [r["phase"] for r in records],
        "op": [r["op"] for r in records],
        "calls": [_num(r["calls"]) for r in records],
        "flops/call": [_num(r["flops"]) for r in records],
        "weight B/call": [_num(r["weight_bytes"]) for r in records],
        "other HBM B/call": [_num(r["other_bytes"]) for r in records],
        "time_ms": [_num(r["time_ms"], "ms") for r in records],
        "bound": [r["bound"] for r in records],
    }
    kinds = {c: "value" if c in ("phase", "op", "bound") else "number" for c in cells}
    first = ("phase", "op", "time_ms", "bound")
    hint = "a wider terminal shows them"
    return fit_table(list(cells), cells, kinds, width, title=title, first=first, keep=("phase", "op"), hint=hint)
