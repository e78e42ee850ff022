"""Rich terminal tables (edge module: the core never imports rich)."""

from __future__ import annotations

from ..schema import LAYOUT_AXES

from rich.table import Table

DEFAULT_COLUMNS = [
    "ngpus",
    *LAYOUT_AXES,
    "mem_states_gib",
    "mem_activations_gib",
    "mem_total_gib",
    "mem_headroom_gib",
    "time_step_s",
    "time_bubble_s",
    "time_comm_exposed_s",
    "mfu",
    "tokens_per_s_per_gpu",
    "bound",
]


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:,.2f}" if abs(v) < 1e6 else f"{v:.3e}"
    return str(v)


INFERENCE_DEFAULT_COLUMNS = [
    "ngpus",
    "tp",
    "pp",
    "sp",
    "ep",
    "dp",
    "batch",
    "max_batch",
    "mem_weights_gib",
    "mem_kv_cache_gib",
    "mem_total_gib",
    "ttft_ms",
    "tpot_ms",
    "e2e_latency_ms",
    "throughput_tokens_per_s_per_gpu",
    "cost_per_million_tokens",
    "bound_decode",
]


def frame_table(df, columns=None, title: str | None = None, width: int | None = None) -> Table:
    """A table of rows; with `width` (the terminal's columns) only the columns that fit, in order.

    Numbers and headers are never cut: a numeric column is as wide as its widest cell or header
    (no wrapping, no ellipsis); text columns may wrap. Columns that do not fit are left out and
    named in the caption (every column is in the written file; `--wide` shows them all)."""
    if columns is None and "tpot_ms" in df.columns:
        columns = INFERENCE_DEFAULT_COLUMNS
    columns = [c for c in (columns or DEFAULT_COLUMNS) if c in df.columns]
    cells = {c: [_fmt(v) for v in df[c].tolist()] for c in columns}
    numeric = {c: df[c].dtype.kind in "iufb" for c in columns}
    need = {c: max([len(c)] + [len(x) for x in cells[c]]) for c in columns}
    shown = columns
    if width is not None:
        shown, used = [], 1  # the left border
        for c in columns:
            w = (need[c] if numeric[c] else min(need[c], max(len(c), 12))) + 3  # padding + border
            if shown and used + w > width:
                continue
            shown.append(c)
            used += w
    left_out = [c for c in columns if c not in shown]
    caption = (
        (
            f"{len(left_out)} more column{'s' if len(left_out) > 1 else ''} not shown at this width: "
            f"{', '.join(left_out)} (--wide shows all; every column is in the file)"
        )
        if left_out
        else None
    )
    table = Table(title=title, show_lines=False, caption=caption)
    for c in shown:
        if numeric[c]:
            table.add_column(c, justify="right", no_wrap=True, min_width=need[c])
        else:
            table.add_column(c, justify="left", overflow="fold", min_width=len(c))
    for i in range(len(df)):
        table.add_row(*(cells[c][i] for c in shown))
    return table


def record_table(record: dict, title: str | None = None, descriptions: dict | None = None) -> Table:
    """One layout shown vertically: column, value, meaning."""
    table = Table(title=title)
    table.add_column("column")
    table.add_column("value", justify="right")
    if descriptions:
        table.add_column("meaning")
    for k, v in record.items():
        row = [k, _fmt(v)]
        if descriptions:
            row.append(descriptions.get(k, ""))
        table.add_row(*row)
    return table


def drop_table(dropped: dict[str, int], reasons: dict[str, str], kept: int) -> Table:
    table = Table(title="layouts considered")
    table.add_column("outcome")
    table.add_column("layouts", justify="right")
    table.add_row("kept (valid)", f"{kept:,}")
    for r, n in sorted(dropped.items(), key=lambda kv: -kv[1]):
        if n:
            table.add_row(f"dropped: {reasons[r]}", f"{n:,}")
    return table
