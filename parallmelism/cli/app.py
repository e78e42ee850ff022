"""`parallmelism` command line: the typer app and its commands, one module per command
(cli/*_cmd.py, shared options and helpers in cli/common.py). Heavy imports (pandas, hydra,
pydantic) happen inside commands so `--help` stays fast."""

from __future__ import annotations

import sys

INTERRUPTED = "interrupted; nothing was written"

try:  # Ctrl-C while the CLI still imports (typer and rich: ~0.2 s) was a KeyboardInterrupt traceback
    import typer

    from .common import EXTRA  # commands taking Hydra overrides accept extra arguments
except KeyboardInterrupt:
    print(INTERRUPTED, file=sys.stderr)
    raise SystemExit(130) from None

# Every command, in the order `--help` lists them: name -> (module in cli/, attribute, context).
# A typer sub-app (plan, study) has None for context. `main` builds the app with only the command
# it is asked for: the other modules are not imported and typer builds no click command for them.
COMMANDS: dict[str, tuple[str, str, dict | None]] = {
    "sweep": ("sweep_cmd", "sweep", EXTRA),
    "show": ("show_cmd", "show", EXTRA),
    "best": ("best_cmd", "best", EXTRA),
    "pareto": ("pareto_cmd", "pareto", EXTRA),
    "plan": ("plan_cmds", "plan_app", None),
    "study": ("study_cmd", "study_app", None),
    "plot": ("plot_cmd", "plot", EXTRA),
    "validate": ("validate_cmd", "validate", EXTRA),
    "list": ("list_cmd", "list_", {}),
    "merge": ("merge_cmd", "merge", {}),
    "compare": ("compare_cmd", "compare", {}),  # CI regression check
    "import-hf": ("import_hf_cmd", "import_hf", {}),
    "export": ("export_cmd", "export", EXTRA),
    "import-run": ("import_run_cmd", "import_run", {}),
    "profile": ("profile_cmd", "profile", {}),
}


def _print_version(value: bool):
    if value:
        from .. import SCHEMA_VERSION, __version__

        typer.echo(f"parallmelism {__version__} (output schema {SCHEMA_VERSION})")
        raise typer.Exit()


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


def build_app(only: str | None = None) -> typer.Typer:
    """The typer app with every command, or with the command `only` alone (what one invocation needs)."""
    import importlib

    built = typer.Typer(
        add_completion=False,
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        context_settings={"help_option_names": ["-h", "--help"]},  # inherited by every command
        help="Analytical cost model for LLM parallelism: memory, time and cost of every layout.",
    )
    built.callback()(_root)
    for name, (module, attribute, context) in COMMANDS.items():
        if only is not None and name != only:
            continue
        command = getattr(importlib.import_module(f"{__package__}.{module}"), attribute)
        if context is None:
            built.add_typer(command, name=name)
        else:
            built.command(name, context_settings=context or None)(command)
    return built


def __getattr__(name: str):
    """`app`: the whole app (tests and embedders import it), built on first use."""
    if name == "app":
        globals()["app"] = whole = build_app()
        return whole
    raise AttributeError(name)


def _raise_on_termination() -> None:
    """SIGTERM and SIGHUP (what `timeout`, SLURM and `kill` send, and a closed terminal) raise
    SystemExit(128 + signal) instead of killing the process outright, so every writer's cleanup
    runs as it does for Ctrl-C (SIGINT: KeyboardInterrupt): temporary files and folders are
    removed and the target path is left as it was."""
    import signal

    from ..stop import quiet_swallowed_stops, request_stop

    def stop(signum, _frame):
        request_stop(128 + signum)  # recorded too: writers check it before committing (parallmelism/stop.py)

    quiet_swallowed_stops()

    for name in ("SIGTERM", "SIGHUP"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), stop)


def main():
    """Console entry: the typer app, every error one sentence. A UserError escaping a command,
    a command-line mistake click finds (bad option value, unknown option, missing argument) and an
    OS error no command anticipated (a name too long, a read-only folder) are one line and exit 2;
    Ctrl-C is exit 130 after the writers have removed their temporaries."""
    from ..errors import UserError
    from .common import console, print_error

    _raise_on_termination()
    import os

    # OpenBLAS starts a thread per core when numpy is imported, ~0.06 CPU-s of every command here;
    # the cost model is element-wise array work that never calls BLAS, and its workers are
    # processes. A value the user set is kept; `profile` (torch kernels) is left alone.
    if sys.argv[1:2] != ["profile"]:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

    # `parallmelism show ...`: only show's module and click command; anything else (--help,
    # --version, a mistyped command) gets the whole app and its usual answer
    asked = sys.argv[1] if len(sys.argv) > 1 else None
    try:
        app = build_app(asked) if asked in COMMANDS else build_app()  # imports the command's module
        code = app(standalone_mode=False)
    except typer.TyperException as exc:  # click's command-line errors, as typer exposes them
        ctx = getattr(exc, "ctx", None)
        # a bare command or group: typer has printed its help already (the class is not in typer's
        # public namespace, hence its name)
        if type(exc).__name__ == "NoArgsIsHelpError":
            raise SystemExit(2) from None
        where = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
        print_error(f"{exc.format_message().rstrip('.')}{where}")
        raise SystemExit(2) from None
    except (KeyboardInterrupt, typer.Abort):
        code = 130
    except UserError as exc:  # pragma: no cover - commands catch their own
        print_error(str(exc))
        raise SystemExit(2) from None
    except OSError as exc:  # what no check foresaw: still one sentence, and nothing half-written
        from ..report.writer import write_error_reason

        where = f" ({str(exc.filename)[:80]!r})" if exc.filename else ""
        print_error(f"{write_error_reason(exc)}{where}")
        raise SystemExit(2) from None
    # typer hands back the code of a typer.Exit (130: its answer to a Ctrl-C inside a command);
    # commands themselves return None (never a count)
    code = code if isinstance(code, int) and not isinstance(code, bool) else 0
    if code == 130:  # Ctrl-C: the writers have removed their temporaries on the way out
        console(stderr=True).print(INTERRUPTED, markup=False)
    raise SystemExit(code)


if __name__ == "__main__":
    main()
