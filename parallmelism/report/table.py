"""Rich terminal tables (edge module: the core never imports rich). rich is imported where a table
is built: a quiet command (`best -q`) asks this module for its column choices only and prints nothing."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..schema import LAYOUT_AXES

if TYPE_CHECKING:
    from rich.console import Group
    from rich.table import Table

    from .plain_table import FittedTable

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


COUNT_PREFIX = "params_"  # parameter counts: whole numbers, whatever the column's dtype


def _fmt(v, column: str = "") -> str:
    if isinstance(v, float):
        if abs(v) >= 1e6:
            return f"{v:.3e}"
        return f"{v:,.0f}" if column.startswith(COUNT_PREFIX) and v.is_integer() else f"{v:,.2f}"
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


# Free text (a sentence): the only cells that may wrap (between words; a word wider than the column
# folds onto the next line whole). Every other text cell is a name or a categorical value (model,
# hardware, case, dp_sharding, recompute, bound, ...) and is never cut, wrapped or ellipsised: a
# column that does not fit is left out whole.
TEXT_COLUMNS = frozenset({"why", "notes", "note", "reason", "meaning", "description", "outcome", "source"})
IDENTITY_COLUMNS = ("model", "hardware", "case", "name")
WIDE_HINT = "--wide shows all; every column is in the file"
_TEXT_MIN = 12  # a wrapping column is at least this wide (or its header, or its whole text)


def _words_max(cells: list[str]) -> int:
    from rich.cells import cell_len

    return max([cell_len(w) for x in cells for w in x.split()] or [0])


def fitted_columns(columns, cells, kinds, width, first=()):
    """(shown, widths, left_out): the columns that fit `width` terminal cells, whole.

    kinds[c]: "number" and "value" columns are as wide as their widest cell or header (never cut or
    wrapped); "text" columns (sentences) wrap between words (a word wider than the column folds
    onto the next line, never cut); "tokens" columns (e.g. `key=value` groups) wrap between tokens
    only: at least as wide as their longest token. Every column is at least as wide as its header.
    `first` are fitted before the others (in their order); the rest in `columns` order. Shown columns keep `columns` order; wrapping columns then share what
    is left, up to their natural width. width=None: every column at its natural width."""
    from rich.cells import cell_len

    need = {c: max([cell_len(c)] + [cell_len(x) for x in cells[c]]) for c in columns}
    least = {
        c: max(cell_len(c), min(need[c], _TEXT_MIN))
        if kinds[c] == "text"
        else max(cell_len(c), _words_max(cells[c]), min(need[c], _TEXT_MIN))
        if kinds[c] == "tokens"
        else need[c]
        for c in columns
    }
    if width is None:
        return list(columns), need, []
    fitted: set[str] = set()
    used = 1  # the left border
    for c in list(dict.fromkeys([c for c in first if c in columns] + list(columns))):
        if used + least[c] + 3 <= width:  # padding on both sides + the border
            fitted.add(c)
            used += least[c] + 3
    shown = [c for c in columns if c in fitted]
    widths = {c: least[c] for c in shown}
    for c in shown:  # wrapping columns take what is left, in order
        if kinds[c] in ("text", "tokens"):
            extra = min(need[c] - widths[c], width - used)
            widths[c] += extra
            used += extra
    return shown, widths, [c for c in columns if c not in fitted]


def fit_table(
    columns, cells, kinds, width, *, title=None, first=(), keep=(), hint=WIDE_HINT, right=()
) -> FittedTable | Group:
    """A table of `cells` (column -> its cells as text) that fits `width` terminal cells without
    cutting a value: columns that do not fit are left out whole and named in the caption. When a
    `keep` column (a row's identity: a name) cannot fit at all, the rows are listed instead, one
    `column=value` group after another, every value whole (print it with crop=False: a value wider
    than the terminal then wraps in the terminal, not cut by rich). `right`: text columns justified
    right (numbers are). See fitted_columns for `kinds` and `first`."""
    shown, widths, left_out = fitted_columns(columns, cells, kinds, width, first)
    rows = len(cells[columns[0]]) if columns else 0
    if width is not None and (not shown or any(c in left_out for c in keep)):
        return _records(columns, cells, kinds, rows, width, title)
    caption = (
        (
            f"{len(left_out)} more column{'s' if len(left_out) > 1 else ''} not shown at this width: "
            f"{', '.join(left_out)}" + (f" ({hint})" if hint else "")
        )
        if left_out
        else None
    )
    from .plain_table import FittedTable

    declared = []
    for c in shown:
        options: dict = {"justify": "right" if kinds[c] == "number" or c in right else "left"}
        if kinds[c] not in ("text", "tokens"):
            options["no_wrap"] = True
        options.update(overflow="fold", width=widths[c] if width is not None else None, min_width=widths[c])
        declared.append((c, options))
    cells_of_rows = [[cells[c][i] for c in shown] for i in range(rows)]
    # every column at its fitted width: printable without rich's engine
    fixed = (
        ([widths[c] for c in shown], [o["justify"] for _, o in declared], cells_of_rows) if width is not None else None
    )
    return FittedTable(title, caption, declared, cells_of_rows, fixed)


def _records(columns, cells, kinds, rows, width, title) -> Group:
    """Rows as `column=value` groups packed into lines of `width` cells: a value's group never
    splits, and one wider than the line stands alone (the terminal wraps it; rich must print it with
    crop=False); a sentence or a list of groups (kinds "text", "tokens") gets lines of its own,
    wrapped between words."""
    import textwrap

    from rich.cells import cell_len
    from rich.console import Group
    from rich.text import Text

    lines = textwrap.wrap(title, width) if title else []
    for i in range(rows):
        line, started = "", False  # started: the record's first line is out (later ones are indented)
        for c in columns:
            group = f"{c}={cells[c][i]}"
            lead = "  " if started or line else ""
            if kinds[c] in ("text", "tokens") and cell_len(group) > width - 2:
                if line:
                    lines.append(line)
                lines += textwrap.wrap(
                    group,
                    width,
                    initial_indent=lead,
                    subsequent_indent=lead + "  ",
                    break_long_words=False,
                    break_on_hyphens=False,
                )  # wrapped between words only: a word stays whole
                line, started = "", True
            elif line and cell_len(line) + 2 + cell_len(group) > width:
                lines.append(line)
                line, started = "  " + group, True
            else:
                line = f"{line}  {group}" if line else lead + group
        if line:
            lines.append(line)
    # in a Group: Console.print joins bare Text objects into a new Text, which drops no_wrap
    return Group(Text("\n".join(lines), no_wrap=True, overflow="ignore"))


def frame_table(
    df, columns=None, title: str | None = None, width: int | None = None, answers=(), lead=(), hint=WIDE_HINT
) -> FittedTable | Group:
    """A table of rows; with `width` (the terminal's columns) only the columns that fit, in order.

    Numbers, names, categorical values and headers are never cut: such a column is as wide as its
    widest cell or header (no wrapping, no ellipsis); free-text columns (TEXT_COLUMNS) wrap between
    words. Columns that do not fit are left out whole and named in the caption (every column is in
    the written file; `--wide` shows them all); the answer columns (ANSWER_COLUMNS and the caller's
    `answers`, e.g. a front's objectives) are fitted before the others. `lead`: columns put first
    (e.g. `run_columns(runs)`); they and the model, hardware or case column are the rows' identity:
    where one of them cannot fit, the rows are listed as `column=value` groups instead."""
    columns, cells, kinds, first, keep = _frame_parts(df, columns, answers, lead)
    return fit_table(columns, cells, kinds, width, title=title, first=first, keep=keep, hint=hint)


def frame_columns(df, columns=None, width: int | None = None, answers=(), lead=()) -> tuple[list[str], list[str]]:
    """(shown, left_out): the columns frame_table shows at `width`, and those it leaves out."""
    columns, cells, kinds, first, _ = _frame_parts(df, columns, answers, lead)
    shown, _, left_out = fitted_columns(columns, cells, kinds, width, first)
    return shown, left_out


def _frame_parts(df, columns, answers, lead):
    if columns is None and "tpot_ms" in df.columns:
        columns = INFERENCE_DEFAULT_COLUMNS
    columns = [c for c in (columns or DEFAULT_COLUMNS) if c in df.columns]
    columns = list(dict.fromkeys([c for c in lead if c in df.columns] + columns))
    cells = {c: [_fmt(v, c) for v in df[c].tolist()] for c in columns}
    kinds = {c: "number" if df[c].dtype.kind in "iufb" else "text" if c in TEXT_COLUMNS else "value" for c in columns}
    keep = [c for c in columns if c in lead or c in IDENTITY_COLUMNS]
    first = keep + [c for c in columns if c in ANSWER_COLUMNS or c in answers]
    return columns, cells, kinds, first, keep


def show_table(console, table: Table | FittedTable | Group, wide: bool = False) -> None:
    """Print a fitted table (crop=False: a listed value wider than the terminal wraps there, whole),
    or with `wide` every column at its natural width (print_whole)."""
    if wide:
        print_whole(console, table)
    else:
        console.print(table, crop=False)


def print_whole(console, table: Table | FittedTable | Group) -> None:
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


def record_table(
    record: dict, title: str | None = None, descriptions: dict | None = None, width: int | None = None
) -> FittedTable | Group:
    """One layout shown vertically: column, value, meaning (the meaning wraps; names and values do
    not, and at a narrow `width` the meaning column is left out before a value is cut)."""
    cells: dict[str, list[str]] = {"column": [], "value": []}
    if descriptions:
        cells["meaning"] = []
    for k, v in record.items():
        cells["column"].append(str(k))
        cells["value"].append(_fmt(v, str(k)))
        if descriptions:
            cells["meaning"].append(descriptions.get(k, ""))
    kinds = {"column": "value", "value": "value", "meaning": "text"}
    return fit_table(list(cells), cells, kinds, width, title=title, keep=("column", "value"), hint="", right=("value",))


def drop_table(dropped: dict[str, int], reasons: dict[str, str], kept: int, width: int | None = None):
    cells = {"outcome": ["kept (valid)"], "layouts": [f"{kept:,}"]}
    for r, n in sorted(dropped.items(), key=lambda kv: -kv[1]):
        if n:
            cells["outcome"].append(f"dropped: {reasons[r]}")
            cells["layouts"].append(f"{n:,}")
    kinds = {"outcome": "text", "layouts": "number"}
    return fit_table(list(cells), cells, kinds, width, title="layouts considered", keep=("layouts",))
