"""`parallmelism` command line: the typer app and its commands, one module per command
(cli/*_cmd.py; their options in cli/options.py, shared helpers in cli/common.py). Heavy imports (pandas,
hydra, pydantic) happen inside commands so `--help` stays fast, and a plain `show` or `best` (overrides
and bare flags) runs its body without typer (`plain_call`)."""

from __future__ import annotations

import sys

INTERRUPTED = "interrupted; nothing was written"

try:  # Ctrl-C while the CLI still imports was a KeyboardInterrupt traceback
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


def build_app(only: str | None = None):
    """The typer app with every command, or with the command `only` alone (what one invocation needs)."""
    import importlib

    import typer

    from .options import root

    built = typer.Typer(
        add_completion=False,
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        context_settings={"help_option_names": ["-h", "--help"]},  # inherited by every command
        help="Analytical cost model for LLM parallelism: memory, time and cost of every layout.",
    )
    built.callback()(root)
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

    from ..stop import hold_stops_at_exit, quiet_swallowed_stops, request_stop

    def stop(signum, _frame):
        request_stop(128 + signum)  # recorded too: writers check it before committing (parallmelism/stop.py)

    quiet_swallowed_stops()
    hold_stops_at_exit()  # the interpreter's teardown after the command, where its handlers are gone

    for name in ("SIGTERM", "SIGHUP"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), stop)


# show and best asked with overrides alone (words that do not start with "-") and these bare flags:
# click would hand the command the overrides, True for each flag and every other parameter at its
# default, so their bodies are called so, without typer (cli/show_run.py, cli/best_run.py). Typer's
# import and the pydantic TypeAdapter it builds for each option were ~0.17G of a pinned show's 1.43G
# instructions (issue 29). Anything else (an option with a value, --help, a shell-completion request)
# typer reads. tests/test_cli_plain.py holds the bodies' defaults and these flags to typer's declarations.
PLAIN: dict[str, tuple[str, str, dict[str, str]]] = {
    "show": ("show_run", "show", {}),
    "best": ("best_run", "best", {"-q": "quiet", "--quiet": "quiet"}),
}


def plain_call(argv: list[str]) -> tuple[str, str, dict] | None:
    """(module, function, keyword arguments) of a plain show or best command line (`argv`: the
    arguments after the program's name), or None where typer reads it."""
    import os

    if not argv or argv[0] not in PLAIN:
        return None
    module, function, flags = PLAIN[argv[0]]
    args = argv[1:]
    if any(a.startswith("-") and a not in flags for a in args):
        return None
    if any(k.startswith("_") and k.endswith("_COMPLETE") for k in os.environ):  # click's shell completion
        return None
    return (
        module,
        function,
        {"overrides": [a for a in args if a not in flags], **{flags[a]: True for a in args if a in flags}},
    )


def run_plain(module: str, function: str, kwargs: dict) -> int:
    """The body called as typer's main calls a command: the code of a typer.Exit it raises (fail()),
    an empty line and 130 for an end of input, exit 1 and no message for a closed pipe (`| head`)."""
    import importlib

    body = getattr(importlib.import_module(f"{__package__}.{module}"), function)
    try:
        body(**kwargs)
    except EOFError:
        print(file=sys.stderr)
        return 130
    except BrokenPipeError:
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # what is still buffered goes nowhere
        raise SystemExit(1) from None
    except Exception as exc:
        import typer  # fail() has imported it; anything else is no exit code of ours

        if isinstance(exc, typer.Exit):
            return exc.exit_code
        raise
    return 0


def run_typer(asked: str | None) -> int:
    """The typer app: for `parallmelism show ...` only show's module and click command; anything
    else (--help, --version, a mistyped command) gets the whole app and its usual answer. A
    command-line mistake click finds is one sentence and exit 2."""
    import typer

    from .common import print_error

    try:
        app = build_app(asked) if asked in COMMANDS else build_app()  # imports the command's module
        return app(standalone_mode=False)
    except typer.TyperException as exc:  # click's command-line errors, as typer exposes them
        ctx = getattr(exc, "ctx", None)
        # a bare command or group: typer has printed its help already (the class is not in typer's
        # public namespace, hence its name)
        if type(exc).__name__ == "NoArgsIsHelpError":
            raise SystemExit(2) from None
        where = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
        print_error(f"{exc.format_message().rstrip('.')}{_overrides_first(exc, ctx)}{where}")
        raise SystemExit(2) from None
    except typer.Abort:
        return 130


def _overrides_first(exc, ctx) -> str:
    """'; a command comes before its overrides: ...' when a group (the program, plan, study) was given an
    override where its command belongs (`parallmelism plan model=llama3.1-405b tokens=15e12`)."""
    import re

    word = re.fullmatch(r"No such command '(.*)'\.?", exc.format_message())
    commands = getattr(getattr(ctx, "command", None), "commands", None)
    if word is None or "=" not in word.group(1) or not commands:
        return ""
    which = "|".join(commands) if len(commands) <= 3 else "COMMAND"
    return f"; a command comes before its overrides: `{ctx.command_path} {which} {word.group(1)} ...`"


def _choose_arrow_memory_pool(environ) -> None:
    """Arrow's allocator for this process, chosen before pyarrow is first imported (Arrow reads
    ARROW_DEFAULT_MEMORY_POOL once, at its first allocation; `pyarrow.set_memory_pool` later does
    not reach the Parquet writer's own buffers). On Linux, jemalloc: the Parquet encoder's scratch
    buffers are freed back to it page by page, where mimalloc (the wheels' default) keeps the pages
    it once used: measured on `sweep` to Parquet, peak RSS 278 -> 227 MiB at 169k rows and
    351 -> 285 MiB at 9M rows, the same bytes written, the same time
    (benchmarks/bench_cli.py). Linux only: the Linux wheels and conda-forge build Arrow with
    jemalloc; elsewhere Arrow would warn that the backend is missing. A value the user set is kept."""
    if sys.platform.startswith("linux"):
        environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "jemalloc")


def interrupted_message() -> str:
    """What a Ctrl-C left: nothing, or the outputs already renamed into place (whole files: a
    sweep commits its table before printing it, validate its cases before listing them)."""
    from ..stop import written_targets

    written = written_targets()
    if not written:
        return INTERRUPTED
    return f"interrupted after writing {', '.join(written)} in full; nothing else was written"


def main():
    """Console entry: a plain show or best (`plain_call`) or the typer app, every error one sentence.
    A UserError escaping a command,
    a command-line mistake click finds (bad option value, unknown option, missing argument) and an
    OS error no command anticipated (a name too long, a read-only folder) are one line and exit 2;
    Ctrl-C is exit 130 after the writers have removed their temporaries."""
    from ..errors import UserError
    from ..stop import forget_targets
    from .common import console, print_error

    _raise_on_termination()
    forget_targets()
    import os

    # OpenBLAS starts a thread per core when numpy is imported, ~0.06 CPU-s of every command here;
    # the cost model is element-wise array work that never calls BLAS, and its workers are
    # processes. A value the user set is kept; `profile` (torch kernels) is left alone.
    if sys.argv[1:2] != ["profile"]:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    _choose_arrow_memory_pool(os.environ)

    plain = plain_call(sys.argv[1:])
    try:
        code = run_plain(*plain) if plain is not None else run_typer(sys.argv[1] if len(sys.argv) > 1 else None)
    except KeyboardInterrupt:
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
        console(stderr=True).print(interrupted_message(), markup=False, soft_wrap=True)
    raise SystemExit(code)


if __name__ == "__main__":
    main()
