"""`parallmelism best`'s body: fastest layout that fits per GPU count, runner-ups, near misses.
No typer here (its options: cli/best_cmd.py), so a plain command line runs it without typer
(cli/app.py `plain_call`)."""

from __future__ import annotations

import re
from pathlib import Path

from ..schema import LAYOUT_AXES
from ..words import counted, plural

TABLE_COLUMNS = [
    "ngpus",
    "rank",
    *LAYOUT_AXES,
    "time_step_s",
    "mfu",
    "mem_total_gib",
    "why",
]


def best(
    overrides: list[str] | None = None,
    top: int = 5,
    out: Path | None = None,
    full_output: Path | None = None,
    quiet: bool = False,
    chunk_rows: int = 1 << 18,
    workers: int | None = None,
    config_dir: list[str] | None = None,
    wide: bool = False,
    multirun: bool = False,
):
    """Per (model, hardware, ngpus, workload) the fastest layout that fits, its runner-ups and near
    misses: printed (unless quiet), written to `out`, every row to `full_output`."""
    from ..errors import UserError
    from ..report.table import run_columns
    from ..search.best import search_best
    from .common import console, fail, load_runs, stream, warn_load_not_simulated
    from .outputs import check_distinct_outputs, out_of, say_full_output, with_full_output, write_frame

    try:
        if multirun:
            from .hydra_entry import refuse_single_outputs, run_multirun_best

            refuse_single_outputs(out=out, full_output=full_output)

            return run_multirun_best(list(overrides or []), config_dir, top)
        runs = load_runs(overrides, config_dir)
        warn_load_not_simulated(runs, "best")
        out = out_of(out, runs, config_dir)
        check_distinct_outputs(out, full_output)
        table, evaluated = search_best(
            runs,
            top,
            lambda rs, cs: stream(rs, cs, quiet, chunk_rows, "searching", workers),
            with_full_output([], runs, full_output),
        )
        # a quiet search without files prints nothing: no console, so rich is never imported (~20 ms)
        to = console() if not quiet or out is not None or full_output is not None else None
        if not quiet:
            where = ""
            if len(runs) == 1:  # one model and accelerator: say it once, in the title
                where = f" of {runs[0].model.name} on {runs[0].hardware.name}"
            title = f"fastest layouts that fit{where} ({counted(evaluated, 'layout')} evaluated)"
            print_best(to, table, title, run_columns(runs), wide)
        write_frame(table, out, to)
        say_full_output(full_output, evaluated, to)
    except UserError as exc:
        fail(str(exc))


def print_best(to, table, title: str, lead: list[str], wide: bool = False) -> None:
    """The best table on `to`. With every column at its natural width (`--wide`, or a terminal wide
    enough) `why` is a column; otherwise it leaves the table for lines of its own below it, one per
    row in the table's order (a sentence wrapped over 5-9 lines of a narrow column reads badly), and
    where layout columns were left out each group's winner is spelt out whole."""
    from rich.text import Text

    from ..report.records import Records
    from ..report.table import fitted_columns, frame_columns, frame_table, print_whole

    if wide:
        print_whole(to, frame_table(table, columns=TABLE_COLUMNS, title=title, lead=lead))
        return
    columns = [c for c in lead + TABLE_COLUMNS if c in table.columns]
    probe = {c: [str(v) for v in table[c].tolist()] for c in columns}  # close enough to decide the layout
    kinds = {c: "value" for c in columns}
    shown, _, _ = fitted_columns(columns, probe, kinds, to.width)
    if shown == columns:
        to.print(frame_table(table, columns=TABLE_COLUMNS, width=to.width, title=title, lead=lead), crop=False)
        return
    without = [c for c in TABLE_COLUMNS if c != "why"]
    to.print(frame_table(table, columns=without, width=to.width, title=title, lead=lead), crop=False)
    _, left_out = frame_columns(table, columns=without, width=to.width, lead=lead)
    axes = [c for c in LAYOUT_AXES if c in table.columns]
    rows = table.rows if isinstance(table, Records) else table.to_dict("records")
    if any(c in left_out for c in axes):
        for r in [r for r in rows if r["rank"] == 1]:
            who = " ".join(str(r[c]) for c in lead)
            layout = " ".join(f"{c}={r[c]}" for c in axes)
            to.print(Text(f"winner at {r['ngpus']} {plural(r['ngpus'], 'GPU')}{' of ' + who if who else ''}: {layout}"))
    to.print(Text("why, row by row:"))
    note = ""
    for r in rows:
        who = " ".join([str(r[c]) for c in lead] + [f"{r['ngpus']} {plural(r['ngpus'], 'GPU')}"])
        label = f"#{r['rank']}" if r["rank"] else "near miss"
        why = str(r["why"])
        m = re.search(r"; (near misses within .* are listed)\)$", why)
        if m:  # said once below, not on every near miss
            why, note = why[: m.start()] + ")", m.group(1)
        to.print(Text(f"  {who} {label}: {why}"))
    if note:
        to.print(Text(f"({note}; the file has the full text)"))
