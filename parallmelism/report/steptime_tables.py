"""Rich tables for `show` on a training layout (edge module: cost.breakdown returns plain records)."""

from __future__ import annotations

import math

from typing import TYPE_CHECKING

from .table import fit_table

if TYPE_CHECKING:
    from rich.console import Group

    from .plain_table import FittedTable


def _fmt(v) -> str:
    if isinstance(v, float):
        if math.isnan(v):
            return "-"
        if v != 0 and (abs(v) >= 1e6 or abs(v) < 1e-3):
            return f"{v:.3e}"
        return f"{v:,.3f}"
    return str(v)


HINT = "a wider terminal shows them"
ANSWERS = ("time_step_s", "bound", "time_exposed_s", "busy_s", "exposed_s")  # fitted first after the name


def records_table(records: list[dict], title: str, width: int | None = None):
    """Records as rows; at `width`, the columns that fit whole (the first column, the row's name, kept)."""
    if not records:
        from rich.table import Table

        return Table(title=title)
    columns = list(records[0])
    cells = {c: [_fmt(r[c]) for r in records] for c in columns}
    kinds = {c: "number" if isinstance(records[0][c], (int, float)) else "value" for c in columns}
    first = columns[:1] + [c for c in columns if c in ANSWERS]
    return fit_table(columns, cells, kinds, width, title=title, first=first, keep=columns[:1], hint=HINT)


def step_time_tables(bd: dict, width: int | None = None) -> list[FittedTable | Group]:
    """Where the time goes, per-op table, per-collective table, per-link table (each fitted to `width`)."""
    s = bd["summary"]
    title = (
        f"where the step goes: {s['time_step_s']:.3f} s, bound by {s['bound']} "
        f"(critical stage: {s['critical_stage']}, {s['layers_on_stage']} layers, "
        f"{s['micro_batches']} micro-batches; MFU {100 * s['mfu']:.1f} %)"
    )
    parts = sorted(s["where_time_goes"].items(), key=lambda kv: -kv[1][0])
    cells = {
        "part": [k for k, _ in parts],
        "seconds": [f"{v:,.3f}" for _, (v, _f) in parts],
        "share": [f"{100 * frac:.1f} %" for _, (_v, frac) in parts],
    }
    kinds = {"part": "text", "seconds": "number", "share": "number"}  # a part is named in words
    return [
        fit_table(list(cells), cells, kinds, width, title=title, keep=("seconds",), hint=HINT),
        records_table(bd["ops"], "per-op roofline (one GPU, one micro-batch; time_step_s = per step)", width),
        records_table(
            bd["collectives"],
            "per-collective (bytes per call: nccl-tests size; wire_bytes: per rank and direction; "
            "calls, link and exposed seconds per step)",
            width,
        ),
        records_table(
            bd.get("links", []),
            "per link of one critical-stage GPU (busy = Σ its transfers per step; "
            "the step is no shorter than the busiest)",
            width,
        ),
    ]
