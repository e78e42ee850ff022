"""A stop request (SIGTERM, SIGHUP) that cannot be lost.

The CLI's handler raises SystemExit(128 + signal) so that every writer's cleanup runs. Python
swallows an exception raised while it runs a weakref or __del__ callback ("Exception ignored
in ..."), for instance when the signal lands during an import's module-lock callback; the run
would then go on and commit its output with exit 0. So the handler also records the request,
and every writer asks `raise_if_stopped` before it renames a temporary into place; Python's
"Exception ignored" report of that SystemExit, a traceback on stderr, is silenced
(`quiet_swallowed_stops`).

It also keeps the output paths a command was asked to write, so that the CLI's message for an
interrupt names those already renamed into place (`written_targets`).
"""

from __future__ import annotations

import os
import sys

_pending_exit: int | None = None

# Output paths this process was asked to write -> what stood there before (device, inode), or None.
# A target renamed into place has a new inode, so an interrupt that lands after a commit (while a
# sweep prints its table, or validate its cases) can say the file was written in full instead of
# "nothing was written" (`written_targets`). Filled by report/writer.py's check of every target.
_targets: dict[str, tuple[str, tuple[int, int] | None]] = {}


def request_stop(code: int) -> None:
    """Record the exit code a stop signal asks for, then raise it (from a signal handler)."""
    global _pending_exit
    _pending_exit = code
    raise SystemExit(code)


def raise_if_stopped() -> None:
    """SystemExit with the recorded code if a stop was requested (its first raise may have been lost)."""
    if _pending_exit is not None:
        raise SystemExit(_pending_exit)


def quiet_swallowed_stops() -> None:
    """Print nothing for a stop's SystemExit that Python swallows: it reports such an exception
    through sys.unraisablehook ("Exception ignored in ..." and a traceback on stderr), where a
    stop is not an error (it is recorded, and the next commit honours it). Anything else still
    reaches the hook that was installed before."""
    previous = sys.unraisablehook

    def hook(unraisable):
        if isinstance(unraisable.exc_value, SystemExit) and _pending_exit is not None:
            return
        previous(unraisable)

    sys.unraisablehook = hook


_STOPS = ("SIGINT", "SIGTERM", "SIGHUP")
_held_at_exit = False


def hold_stops_at_exit() -> None:
    """Block SIGINT, SIGTERM and SIGHUP once the interpreter starts to exit (the last atexit call).

    After the command, Python tears its modules down (~0.15 s for the CLI's ~840 modules) with these
    signals back at their default action (it disables its handlers first): a Ctrl-C there killed a
    run that had finished and said what it wrote, exit 130 in the shell and no sentence. Blocked,
    the signal waits and dies with the process, which exits with the command's own code. The atexit
    calls registered later (a pool's shutdown, which could wait) run before this one, Ctrl-C still
    reaching them."""
    global _held_at_exit
    if _held_at_exit:
        return
    _held_at_exit = True
    import atexit
    import signal

    stops = {getattr(signal, name) for name in _STOPS if hasattr(signal, name)}
    if hasattr(signal, "pthread_sigmask"):
        atexit.register(signal.pthread_sigmask, signal.SIG_BLOCK, stops)


def _identity(path: str) -> tuple[int, int] | None:
    try:
        st = os.lstat(path)  # a link is replaced by the rename, its target never
    except OSError:
        return None
    return st.st_dev, st.st_ino


def note_target(path) -> None:
    """Remember an output path and what stands there now (before the run writes it)."""
    key = os.path.abspath(path)
    if key not in _targets:
        _targets[key] = (str(path), _identity(key))


def forget_targets() -> None:
    """A new command (the CLI's entry point) starts with no targets."""
    _targets.clear()


def written_targets() -> list[str]:
    """The noted targets (as given) that have been replaced or created since they were noted."""
    return [given for key, (given, before) in _targets.items() if (now := _identity(key)) is not None and now != before]
