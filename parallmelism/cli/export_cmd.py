"""`parallmelism export ROW_SOURCE [--to TARGET] [--out PATH]`: a layout as a framework's launch configuration."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from .options import CONFIG_DIR, a_path
from ..words import counted


def export(
    args: Optional[List[str]] = typer.Argument(
        None,
        help="ROW_SOURCE (a best, plan or sweep CSV/Parquet) then Hydra overrides it runs under "
        "(workload.precision=fp8 ...); with --pinned, overrides only (as `show` takes them)",
    ),
    to: Optional[str] = typer.Option(
        None,
        "--to",
        "-t",
        help="target: megatron, nemo, torchtitan, deepspeed, maxtext (training); vllm, sglang, trtllm (serving); "
        "dynamo (a serve plan's disaggregated row). Default: the run's stack= (training) or engine= (serving), "
        "dynamo for a disaggregated row",
    ),
    out: Optional[Path] = typer.Option(
        None, "--out", "-o", parser=a_path, help="write the file here (default: print it)"
    ),
    rank: Optional[int] = typer.Option(None, "--rank", help="the row with this rank (a best table)"),
    case: Optional[str] = typer.Option(
        None,
        "--case",
        help="the row whose 'case' column (a serve plan: 'deployment', colocated or disaggregated) is NAME",
    ),
    where: Optional[str] = typer.Option(None, "--where", help="the row a pandas query selects, e.g. 'ngpus == 512'"),
    pinned: bool = typer.Option(False, "--pinned", help="no row source: the layout is pinned by the overrides"),
    config_dir: Optional[List[str]] = CONFIG_DIR,
):
    """Write the launch configuration of one layout for the framework or engine that runs it."""
    from ..errors import UserError
    from .common import console, fail

    try:
        from ..export import DISAGGREGATED_TARGETS, SERVING_TARGETS, default_target, target_module

        words = list(args or [])
        inputs: list = []
        if out is not None:  # a path that cannot be written is refused before any work or note
            from ..report.writer import check_writable_target

            check_writable_target(Path(out))
        if to is None and not pinned and words and "=" not in words[0]:
            from ..export.rows import read_rows, select_row

            row = select_row(read_rows(words[0]), rank, case, where)
            if str(row.get("deployment")) == "disaggregated":
                to = DISAGGREGATED_TARGETS[0]
        if to in DISAGGREGATED_TARGETS:
            module = target_module(to)
            if pinned or not words or "=" in words[0]:
                raise UserError(f"--to {to} writes a `plan serve` file's disaggregated row: give that file first")
            text, summary = _pools(module, words, rank, case, where, config_dir)
            _write(text, out, [words[0]], f"{to}: {summary}")
            return
        if pinned:
            if rank is not None or case is not None or where is not None:
                raise UserError("--rank, --case and --where select a row of a file; --pinned takes overrides only")
            overrides = words
        else:
            if not words or "=" in words[0]:
                raise UserError(
                    "give a row source (a best, plan or sweep CSV/Parquet) first, or --pinned with overrides"
                )
            from ..export.rows import read_rows, row_overrides, select_row

            inputs = [words[0]]
            overrides = row_overrides(select_row(read_rows(words[0]), rank, case, where)) + words[1:]
        planned, note = _planned(overrides, config_dir)
        to = to or default_target(planned)
        module = target_module(to)
        if (planned.kind == "inference") != (to in SERVING_TARGETS):
            what = "a serving" if planned.kind == "inference" else "a training"
            raise UserError(
                f"--to {to} is for {'serving' if to in SERVING_TARGETS else 'training'} and this is {what} layout"
            )
        text = module.render(planned)
        if note:
            console(stderr=True).print(f"note: {note}", markup=False)
        _write(text, out, inputs, f"{to}: {planned.summary()}")
    except UserError as exc:
        fail(str(exc))


def _write(text: str, out, inputs: list, what: str) -> None:
    """Print the export, or write it to `out` (never over an input) and say so."""
    from .common import console

    if out is None:
        typer.echo(text, nl=False)
        return
    from ..report.writer import check_not_an_input, write_text

    check_not_an_input(out, inputs)
    write_text(text, out)
    console().print(f"wrote {out} ({what})", markup=False)


def _pools(module, words: list[str], rank, case, where, config_dir) -> tuple[str, str]:
    """A disaggregated plan row's manifest: each pool's worker layout evaluated as `show` does
    (its overrides + the ones the plan ran under), then module.render_pools. Returns (text, summary)."""
    from ..errors import UserError
    from ..export.rows import disaggregated_pools, read_rows, select_row

    df = read_rows(words[0])
    if "deployment" not in df.columns:
        raise UserError(
            f"--to dynamo writes a `plan serve` file's disaggregated row, and {words[0]!r} has no deployment column"
        )
    row = select_row(df, rank, case if case is not None else "disaggregated", where)
    pools = disaggregated_pools(row)
    planned = {pool: _planned(overrides + words[1:], config_dir)[0] for pool, (overrides, _) in pools.items()}
    replicas = {pool: n for pool, (_, n) in pools.items()}
    text = module.render_pools(planned, replicas, row)
    gpus = sum(replicas[k] * planned[k].ngpus for k in planned)
    return (
        text,
        f"{replicas['prefill']} prefill + {counted(replicas['decode'], 'decode worker')}, {counted(gpus, 'GPU')}",
    )


def _planned(overrides: list[str], config_dir):
    """The pinned layout evaluated as `show` evaluates it: (Planned, a note when the overrides
    left several layouts and the fastest was taken)."""
    from ..export.layout import planned_of
    from .common import fastest_pinned_record

    record, _, run, evaluated = fastest_pinned_record(
        overrides, config_dir, "export writes one layout; remove the sweep (a,b) from the overrides"
    )
    note = f"{evaluated:,} layouts match the overrides; the fastest is exported" if evaluated > 1 else ""
    return planned_of(record, run), note
