"""The console and the one-sentence error every command prints (cli/common.py re-exports them;
cli/outputs.py uses them without importing common, which would close a cycle through hydra_entry)."""

from __future__ import annotations

import os
import re
import sys

WIDE = 200  # the least width on pipes and in CI: wide enough that tables do not wrap


def console(stderr: bool = False):
    from rich.console import Console

    out = Console(stderr=stderr, highlight=False)
    if not out.is_terminal:  # pipes and CI: wide enough that tables do not wrap
        out = Console(stderr=stderr, highlight=False, width=max(out.width, WIDE))
    return out


def plain_width() -> int | None:
    """The width of console() on stdout where rich would print there without colours and not to
    a terminal (a pipe, a file, CI), read as rich reads it (rich 15 Console: is_terminal, size); None
    where rich may see a terminal, colours or a notebook (then only rich knows)."""
    environ = os.environ
    if any(k in environ for k in ("FORCE_COLOR", "TTY_COMPATIBLE", "JUPYTER_COLUMNS", "JUPYTER_LINES")):
        return None
    import builtins

    out = sys.stdout
    if sys.platform == "win32" or hasattr(builtins, "get_ipython"):  # legacy consoles, notebooks
        return None
    if out is None or hasattr(out, "rich_proxied_file") or getattr(sys.stdin, "__module__", "").startswith("idlelib"):
        return None
    try:
        if out.isatty():
            return None
    except (AttributeError, ValueError):  # rich: not a terminal
        pass
    if not (getattr(out, "encoding", None) or "utf-8").lower().startswith("utf"):
        return None  # rich draws its boxes in ASCII then
    width = None
    for fd in (0, 1, 2):  # rich's order: the first stream that is a terminal gives the width
        try:
            width = os.get_terminal_size(fd).columns
        except (AttributeError, ValueError, OSError):
            continue
        break
    columns = environ.get("COLUMNS")
    if columns is not None and columns.isdigit():
        width = int(columns)
    return max(width or 80, WIDE)


_EMOJI_CODE = re.compile(r":\S*:")  # what rich would replace by an emoji (its emoji=True default)


class PlainConsole:
    """console() on stdout where rich prints plain text (plain_width): a line of text that fits, and
    a fit_table table whose plain lines it has (report/plain_table.py), are written as rich would
    write them, without importing rich (~0.1G instructions of a pinned `show`, issue 29); anything
    else goes to the rich console itself, built on first use. tests/test_plain_console.py."""

    def __init__(self, width: int) -> None:
        self.width = width
        self._rich = None

    def rich(self):
        if self._rich is None:
            from rich.console import Console

            self._rich = Console(highlight=False, width=self.width)
        return self._rich

    def _plain(self, item, markup=None, style=None, crop=True) -> list[str] | None:
        from ..report.plain_table import FittedTable

        if isinstance(item, FittedTable):
            return item.plain_lines(self.width)
        if not isinstance(item, str) or markup is not False or not item.isprintable() or _EMOJI_CODE.search(item):
            return None
        if item != item.rstrip() or len(item) > self.width or not (item.isascii() or _cells(item) == len(item)):
            return None
        return [item]

    def print(self, item="", **options) -> None:
        lines = self._plain(item, **options) if set(options) <= {"markup", "style", "crop"} else None
        if lines is None:
            self.rich().print(item, **options)
            return
        sys.stdout.write("".join(line + "\n" for line in lines))
        sys.stdout.flush()  # as rich does: a later line on stderr (an error) comes after it

    def __getattr__(self, name: str):  # the rest of rich's Console (size, options, ...)
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.rich(), name)


def _cells(text: str) -> int:
    from rich.cells import cell_len

    return cell_len(text)


def stdout_console():
    """console() for stdout: a PlainConsole where rich would print plain text, else rich's."""
    width = plain_width()
    return PlainConsole(width) if width is not None else console()


def print_error(message: str) -> None:
    """`error: <one sentence>` on stderr."""
    from rich.markup import escape

    console(stderr=True).print(f"[bold red]error:[/] {escape(message)}", markup=True, soft_wrap=True)


def fail(message: str, code: int = 2):
    import typer  # an error's path only: show's and best's bodies run without typer (cli/app.py)

    print_error(message)
    raise typer.Exit(code)
