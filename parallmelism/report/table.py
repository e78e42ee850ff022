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


# What a table answers (the row's identity, the objectives and metrics): when the terminal is too
# narrow for every column these are fitted first and the layout columns share what is left, in
# their listed order. Shown columns keep the caller's order either way.
ANSWER_COLUMNS = frozenset(
    {
        "model",
        "hardware",
        "ngpus",
        "rank",
        "replica_gpus",
        "time_step_s",
        "mfu",
        "mem_total_gib",
        "why",
        "days",
        "gpu_hours",
        "energy_mwh",
        "cost_usd",
        "chosen",
        "ttft_ms",
        "tpot_ms",
        "usd_per_million_output_tokens",
    }
)


def run_columns(runs) -> list[str]:
    """The columns ("model", "hardware") whose value differs between `runs`: a table of several
    runs' rows leads with them, so rows ranked together can be told apart (one run: the title
    names them)."""
    names = {"model": {r.model.name for r in runs}, "hardware": {r.hardware.name for r in runs}}
    return [c for c, v in names.items() if len(v) > 1]


def frame_table(df, columns=None, title: str | None = None, width: int | None = None, answers=(), lead=()) -> Table:
    """A table of rows; with `width` (the terminal's columns) only the columns that fit, in order.

    Numbers and headers are never cut: a numeric column is as wide as its widest cell or header
    (no wrapping, no ellipsis); text columns may wrap. Columns that do not fit are left out and
    named in the caption (every column is in the written file; `--wide` shows them all); the
    answer columns (ANSWER_COLUMNS and the caller's `answers`, e.g. a front's objectives) are
    fitted before the others. `lead`: columns put first (e.g. `run_columns(runs)`)."""
    if columns is None and "tpot_ms" in df.columns:
        columns = INFERENCE_DEFAULT_COLUMNS
    columns = [c for c in (columns or DEFAULT_COLUMNS) if c in df.columns]
    columns = list(dict.fromkeys([c for c in lead if c in df.columns] + columns))
    cells = {c: [_fmt(v) for v in df[c].tolist()] for c in columns}
    numeric = {c: df[c].dtype.kind in "iufb" for c in columns}
    need = {c: max([len(c)] + [len(x) for x in cells[c]]) for c in columns}
    shown = columns
    if width is not None:
        first = ANSWER_COLUMNS | set(answers)
        fitted: set[str] = set()
        used = 1  # the left border
        for c in [c for c in columns if c in first] + [c for c in columns if c not in first]:
            w = (need[c] if numeric[c] else min(need[c], max(len(c), 12))) + 3  # padding + border
            if fitted and used + w > width:
                continue
            fitted.add(c)
            used += w
        shown = [c for c in columns if c in fitted]
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


def print_whole(console, table: Table) -> None:
    """Print `table` at its natural width even past the terminal's (`--wide`: every column, none
    squeezed; the terminal or a pager scrolls sideways)."""
    from rich.measure import Measurement

    natural = Measurement.get(console, console.options.update(max_width=1 << 16), table).maximum
    width = console.width
    console.width = max(width, natural)  # rich caps print(width=) at the console's own width
    try:
        console.print(table, crop=False)
    finally:
        console.width = width


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
