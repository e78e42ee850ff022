"""The options and arguments typer declares for the commands (cli/*_cmd.py), and the app's own
(--version). Kept apart from
cli/common.py and cli/outputs.py, which import no typer, so that show's and best's bodies
(cli/show_run.py, cli/best_run.py) run without it (cli/app.py `plain_call`)."""

from __future__ import annotations

from pathlib import Path

import typer

from .outputs import check_full_output, check_out


def a_path(value: str | Path) -> Path:
    """A path option's text as a Path; an empty one ('' would read as '.', the current folder) is
    the one-sentence usage error. An option's default (a Path: profile's --out .) comes through too."""
    if not str(value).strip():
        raise typer.BadParameter("an empty path names no file or folder")
    return Path(value)


OVERRIDES = typer.Argument(None, help="Hydra overrides, e.g. model=llama3.1-405b grid.ngpus=[1024]")
CONFIG_DIR = typer.Option(
    None,
    "--config-dir",
    "-cd",
    help="user folder with models/, hardware/, workload/, grid/ whose files add to or "
    "replace the shipped ones by name (repeatable; also $PARALLMELISM_CONFIG_PATH)",
)
# As in Hydra: -c/--cfg [job|hydra|all] prints the composed config, --resolve resolves ${...} in it,
# --info [all|config|defaults|defaults-tree|plugins|searchpath] prints Hydra's composition details.
# The mode word is taken from the arguments (it is never an override: overrides hold `=`).
CFG = typer.Option(False, "--cfg", "-c", help="print the composed config and exit; then job (default), hydra or all")
RESOLVE = typer.Option(False, "--resolve", help="with --cfg: resolve ${...} interpolations")
INFO = typer.Option(
    False,
    "--info",
    help="print Hydra's information about the composition and exit; then all "
    "(default), config, defaults, defaults-tree, plugins or searchpath",
)
WIDE = typer.Option(False, "--wide", help="show every table column (default: the columns that fit the terminal)")
QUIET = typer.Option(False, "--quiet", "-q", help="no progress bar or tables (CI)")
CHUNK = typer.Option(1 << 18, "--chunk-rows", help="rows evaluated at a time (bounds memory)", min=1000)
WORKERS = typer.Option(
    None,
    "--workers",
    "-j",
    min=1,
    help="processes evaluating the grid (default: the cores not busy with other work, when the grid has "
    "enough partitions; a count above the cores or the grid's tasks is lowered, with a note; the output "
    "is the same for any count)",
)
FULL = typer.Option(
    None,
    "--full-output",
    callback=check_full_output,
    parser=a_path,
    help="also stream EVERY evaluated row to this folder as a "
    "partitioned Parquet dataset (model=/hardware=/workload=/part-*.parquet)",
)
OUT = typer.Option(
    None, "--out", "-o", callback=check_out, parser=a_path, help="write the table here (.csv or .parquet)"
)


def _print_version(value: bool):
    if value:
        from .. import SCHEMA_VERSION, __version__

        typer.echo(f"parallmelism {__version__} (output schema {SCHEMA_VERSION})")
        raise typer.Exit()


def root(
    version: bool = typer.Option(
        False,
        "--version",
        "-V",
        callback=_print_version,
        is_eager=True,
        help="print the version and the output schema version, then exit",
    ),
):
    """Analytical cost model for LLM parallelism: memory, time and cost of every layout."""
