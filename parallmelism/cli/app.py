"""`parallmelism` command line: the typer app and its commands, one module per command
(cli/*_cmd.py, shared options and helpers in cli/common.py). Heavy imports (pandas, hydra,
pydantic) happen inside commands so `--help` stays fast."""

from __future__ import annotations

import typer

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},  # inherited by every command
    help="Analytical cost model for LLM parallelism: memory, time and cost of every layout.",
)


def _print_version(value: bool):
    if value:
        from .. import SCHEMA_VERSION, __version__

        typer.echo(f"parallmelism {__version__} (output schema {SCHEMA_VERSION})")
        raise typer.Exit()


@app.callback()
def _root(
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


from .best_cmd import best  # noqa: E402
from .compare_cmd import compare  # noqa: E402  (CI regression check)
from .import_hf_cmd import import_hf  # noqa: E402
from .list_cmd import list_  # noqa: E402
from .merge_cmd import merge  # noqa: E402
from .pareto_cmd import pareto  # noqa: E402
from .plan_cmds import plan_app  # noqa: E402
from .plot_cmd import plot  # noqa: E402
from .profile_cmd import profile  # noqa: E402
from .show_cmd import show  # noqa: E402
from .sweep_cmd import sweep  # noqa: E402
from .validate_cmd import validate  # noqa: E402
from .common import EXTRA  # noqa: E402  (commands taking Hydra overrides accept extra arguments)

app.command(context_settings=EXTRA)(sweep)
app.command(context_settings=EXTRA)(show)
app.command(context_settings=EXTRA)(best)
app.command(context_settings=EXTRA)(pareto)
app.add_typer(plan_app, name="plan")
app.command(context_settings=EXTRA)(plot)
app.command(context_settings=EXTRA)(validate)
app.command("list")(list_)
app.command()(merge)
app.command()(compare)
app.command("import-hf")(import_hf)
app.command()(profile)


def _raise_on_termination() -> None:
    """SIGTERM and SIGHUP (what `timeout`, SLURM and `kill` send, and a closed terminal) raise
    SystemExit(128 + signal) instead of killing the process outright, so every writer's cleanup
    runs as it does for Ctrl-C (SIGINT: KeyboardInterrupt): temporary files and folders are
    removed and the target path is left as it was."""
    import signal

    def stop(signum, _frame):
        raise SystemExit(128 + signum)

    for name in ("SIGTERM", "SIGHUP"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), stop)


def main():
    """Console entry: typer app; any UserError escaping a command is one line and exit 2."""
    from ..errors import UserError
    from .common import console, fail

    _raise_on_termination()
    try:
        app()
    except KeyboardInterrupt:  # Ctrl-C: the writers have removed their temporaries on the way out
        console(stderr=True).print("interrupted; nothing was written", markup=False)
        raise SystemExit(130) from None
    except UserError as exc:  # pragma: no cover - commands catch their own
        fail(str(exc))


if __name__ == "__main__":
    main()
