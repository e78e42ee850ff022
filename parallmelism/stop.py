"""A stop request (SIGTERM, SIGHUP) that cannot be lost.

The CLI's handler raises SystemExit(128 + signal) so that every writer's cleanup runs. Python
swallows an exception raised while it runs a weakref or __del__ callback ("Exception ignored
in ..."), for instance when the signal lands during an import's module-lock callback; the run
would then go on and commit its output with exit 0. So the handler also records the request,
and every writer asks `raise_if_stopped` before it renames a temporary into place.
"""

from __future__ import annotations

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
