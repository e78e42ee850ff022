"""Where a command's output goes: the --out/--full-output options and their checks (before any
computation), --out against Hydra's output.path=, and writing the table."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .common import fail


def check_full_output(value: Optional[Path]) -> Optional[Path]:
    """--full-output is checked when the command line is read: a new, empty or dataset folder."""
    if value is None:
        return None
    from ..errors import UserError
    from ..report.writer import check_dataset_folder

    try:
        return check_dataset_folder(value)
    except UserError as exc:
        fail(str(exc))
    return None  # pragma: no cover - fail() raises


FULL = typer.Option(
    None,
    "--full-output",
    callback=check_full_output,
    help="also stream EVERY evaluated row to this folder as a "
    "partitioned Parquet dataset (model=/hardware=/workload=/part-*.parquet)",
)


def check_out(value: Optional[Path]) -> Optional[Path]:
    """--out is checked when the command line is read, before any computation."""
    if value is None:
        return None
    from ..errors import UserError
    from ..report.writer import check_output_path

    try:
        return check_output_path(value)[0]
    except UserError as exc:
        fail(str(exc))
    return None  # pragma: no cover - fail() raises


def check_yaml_out(path: Path) -> Path:
    """A config file to write (import-hf --out): a .yaml name whose folder we may write."""
    from ..errors import UserError
    from ..report.writer import check_writable_target

    if path.suffix.lower() not in (".yaml", ".yml"):
        raise UserError(f"--out {str(path)!r} must end in .yaml (a model config file)")
    check_writable_target(path)
    return path


OUT = typer.Option(None, "--out", "-o", callback=check_out, help="write the table here (.csv or .parquet)")


def check_one_output_path(out: Optional[Path], paths: set) -> None:
    """--out and output.path= (Hydra's spelling) name one file: several output.path values (Hydra
    split a comma in it: a sweep) or the two disagreeing is one sentence."""
    from ..errors import UserError

    if len(paths) > 1:
        raise UserError(
            "output.path took several values: Hydra reads a comma as a sweep; quote a path that "
            "holds one, e.g. 'output.path=\"results/a,b.csv\"'"
        )
    given = next((p for p in paths if p), None)
    if out is not None and given and Path(given) != Path(out):
        raise UserError(f"--out {str(out)!r} and output.path={str(given)!r} disagree; give one of them")


def out_of(out: Optional[Path], runs) -> Optional[Path]:
    """--out, or the Hydra spelling output.path= (the two must agree when both are given)."""
    from ..report.writer import check_output_path

    paths = {r.output.path for r in runs if r.output.path}
    check_one_output_path(out, paths)
    return check_output_path(paths.pop())[0] if paths else out


def out_of_path_overrides(out: Optional[Path], overrides: list[str]) -> Optional[Path]:
    """`out_of` for commands without a Hydra config (merge): their `output.path=FILE` arguments."""
    from ..report.writer import check_output_path

    paths = {o.split("=", 1)[1] for o in overrides}
    check_one_output_path(out, paths)
    return check_output_path(paths.pop())[0] if paths else out


def write_frame(df, out: Optional[Path], to, what: str = "rows") -> None:
    if out is None:
        return
    from ..report.writer import write_table

    write_table(df, out)
    to.print(f"wrote {len(df):,} {what} to {out}")


def with_full_output(collectors: list, runs, full_output: Optional[Path]) -> list:
    """--full-output: a ParquetDatasetSink after the search's own collectors."""
    if full_output is None:
        return collectors
    from ..search import ParquetDatasetSink

    return [*collectors, ParquetDatasetSink(full_output, runs)]
