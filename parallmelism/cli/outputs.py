"""Where a command's output goes: the --out/--full-output checks (before any computation; the
options themselves: cli/options.py), --out against Hydra's output.path=, and writing the table."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from .console import fail
from ..words import counted


def _checked_when_read(check, value: Optional[Path]) -> Optional[Path]:
    """An option's path through `check` as the command line is read, before any computation; a
    refusal is the one-sentence error."""
    if value is None:
        return None
    from ..errors import UserError

    try:
        return check(value)
    except UserError as exc:
        fail(str(exc))
    return None  # pragma: no cover - fail() raises


def check_full_output(value: Optional[Path]) -> Optional[Path]:
    """--full-output: a new, empty or dataset folder."""
    from ..report.writer import check_dataset_folder

    return _checked_when_read(check_dataset_folder, value)


def check_out(value: Optional[Path]) -> Optional[Path]:
    """--out: a table path (.csv or .parquet) we may write."""
    from ..report.writer import check_output_path

    return _checked_when_read(lambda path: check_output_path(path)[0], value)


def check_yaml_out(path: Path) -> Path:
    """A config file to write (import-hf --out): a .yaml name whose folder we may write."""
    from ..errors import UserError
    from ..report.writer import check_writable_target

    if path.suffix not in (".yaml", ".yml"):  # the config loader reads these two, lower case
        raise UserError(f"--out {str(path)!r} must end in .yaml (a model config file)")
    check_writable_target(path)
    return path


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


def out_of(out: Optional[Path], runs, config_dirs=None) -> Optional[Path]:
    """--out, or the Hydra spelling output.path= (the two must agree when both are given); an
    output.format given must agree with its extension; never a file the runs read."""
    from ..report.writer import check_output_path

    path = _one_output(out, {r.output.path for r in runs if r.output.path})
    for fmt in sorted({r.output.format for r in runs if r.output.format}):
        if path is not None:
            check_output_path(path, fmt)
    if path is not None:
        check_not_read(path, runs, config_dirs)
    return path


def run_inputs(runs, config_dirs=None) -> list[Path]:
    """The files a run reads besides its command line: every file of the config folders it composes
    from (shipped and user models/, hardware/ with their kernel tables, workloads, grids) and each
    run's kernel table wherever it lies."""
    from ..config.cache import USER_SUBFOLDERS
    from ..config.paths import data_root, user_config_dirs
    from ..config.kernel_tables import resolve_table
    from ..errors import UserError

    folders = [data_root() / sub for sub in ("conf", "models", "hardware")]
    folders += [d / sub for d in user_config_dirs(config_dirs) for sub in USER_SUBFOLDERS]
    files = [p for f in folders if f.is_dir() for p in f.rglob("*") if p.is_file()]
    for table in sorted({r.hardware.kernels.table for r in runs if r.hardware.kernels.table}):
        try:
            files.append(resolve_table(table))
        except UserError:  # the run itself names a missing table
            pass
    return files


def check_not_read(path: Path, runs, config_dirs=None, option: str = "--out") -> None:
    """A table path that is one of the runs' inputs (a kernel table, a config file) is refused."""
    from ..report.writer import check_not_an_input

    check_not_an_input(path, run_inputs(runs, config_dirs), option)


def out_of_path_overrides(out: Optional[Path], overrides: list[str]) -> Optional[Path]:
    """`out_of` for commands without a Hydra config (merge): their `output.path=FILE` arguments,
    quotes around the value removed as Hydra does."""
    from ..errors import UserError

    paths = {o.split("=", 1)[1].strip().strip("'\"") for o in overrides}
    if "" in paths:
        raise UserError("output.path= is empty; give the merged table's .csv or .parquet path")
    if len(paths) > 1:
        raise UserError(f"output.path= is given {len(paths)} times with different values; give it once")
    return _one_output(out, paths)


def _one_output(out: Optional[Path], paths: set) -> Optional[Path]:
    from ..report.writer import check_output_path

    check_one_output_path(out, paths)
    return check_output_path(paths.pop())[0] if paths else out


def output_target(output) -> tuple[Path, str]:
    """(path, format) of a run's `output.path`: the format follows the extension; an
    `output.format`, when given, must agree with it."""
    from ..report.writer import check_output_path

    return check_output_path(output.path, output.format)


def check_distinct_outputs(out: Optional[Path], full_output: Optional[Path]) -> None:
    """--out (a table) and --full-output (a dataset folder) are two paths, never one."""
    from ..errors import UserError

    if out is not None and full_output is not None and Path(out).resolve() == Path(full_output).resolve():
        raise UserError(f"--out and --full-output both name {str(out)!r}; give the table and the dataset two paths")


def write_frame(df, out: Optional[Path], to, tail: str = "") -> None:
    """The table at --out, then "wrote N rows{tail} to OUT"."""
    if out is None:
        return
    from ..report.writer import write_table

    write_table(df, out)
    to.print(f"wrote {counted(len(df), 'row')}{tail} to {out}", markup=False)


def say_full_output(full_output: Optional[Path], evaluated: int, to) -> None:
    """Where --full-output put every evaluated row (the dataset folder), once the search is done."""
    if full_output is not None:
        to.print(f"wrote all {evaluated:,} evaluated rows to {full_output} (Parquet dataset)", markup=False)


def with_full_output(collectors: list, runs, full_output: Optional[Path]) -> list:
    """--full-output: a ParquetDatasetSink after the search's own collectors."""
    if full_output is None:
        return collectors
    from ..search import ParquetDatasetSink

    return [*collectors, ParquetDatasetSink(full_output, runs)]
