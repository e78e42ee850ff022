"""Rich tables for `show` on a training layout (edge module: cost.breakdown returns plain records)."""

from __future__ import annotations

import math

from rich.table import Table


def _fmt(v) -> str:
    if isinstance(v, float):
        if math.isnan(v):
            return "-"
        if v != 0 and (abs(v) >= 1e6 or abs(v) < 1e-3):
            return f"{v:.3e}"
        return f"{v:,.3f}"
    return str(v)


def records_table(records: list[dict], title: str) -> Table:
    table = Table(title=title)
    if not records:
        return table
    for c in records[0]:
        table.add_column(c, justify="right" if isinstance(records[0][c], (int, float)) else "left")
    for r in records:
        table.add_row(*(_fmt(v) for v in r.values()))
    return table


def step_time_tables(bd: dict) -> list[Table]:
    """Where the time goes, per-op table, per-collective table, per-link table."""
    s = bd["summary"]
    where = Table(
        title=f"where the step goes: {s['time_step_s']:.3f} s, bound by {s['bound']} "
        f"(critical stage: {s['critical_stage']}, {s['layers_on_stage']} layers, "
        f"{s['micro_batches']} micro-batches; MFU {100 * s['mfu']:.1f} %)"
    )
    where.add_column("part")
    where.add_column("seconds", justify="right")
    where.add_column("share", justify="right")
    for k, (v, frac) in sorted(s["where_time_goes"].items(), key=lambda kv: -kv[1][0]):
        where.add_row(k, f"{v:,.3f}", f"{100 * frac:.1f} %")
    return [
        where,
        records_table(bd["ops"], "per-op roofline (one GPU, one micro-batch; time_step_s = per step)"),
        records_table(bd["collectives"], "per-collective (bytes of the full buffer; link and exposed per step)"),
        records_table(
            bd.get("links", []),
            "per link of one critical-stage GPU (busy = Σ its transfers per step; "
            "the step is no shorter than the busiest)",
        ),
    ]
