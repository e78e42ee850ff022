"""A stop request (SIGTERM, SIGHUP) that cannot be lost.

The CLI's handler raises SystemExit(128 + signal) so that every writer's cleanup runs. Python
swallows an exception raised while it runs a weakref or __del__ callback ("Exception ignored
in ..."), for instance when the signal lands during an import's module-lock callback; the run
would then go on and commit its output with exit 0. So the handler also records the request,
and every writer asks `raise_if_stopped` before it renames a temporary into place; Python's
"Exception ignored" report of that SystemExit, a traceback on stderr, is silenced
(`quiet_swallowed_stops`).
"""

from __future__ import annotations

import sys

_pending_exit: int | None = None


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
