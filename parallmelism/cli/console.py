"""The console and the one-sentence error every command prints (cli/common.py re-exports them;
cli/outputs.py uses them without importing common, which would close a cycle through hydra_entry)."""

from __future__ import annotations


def console(stderr: bool = False):
    from rich.console import Console

    out = Console(stderr=stderr, highlight=False)
    if not out.is_terminal:  # pipes and CI: wide enough that tables do not wrap
        out = Console(stderr=stderr, highlight=False, width=max(out.width, 200))
    return out


def print_error(message: str) -> None:
    """`error: <one sentence>` on stderr."""
    from rich.markup import escape

    console(stderr=True).print(f"[bold red]error:[/] {escape(message)}", markup=True, soft_wrap=True)


def fail(message: str, code: int = 2):
    import typer  # an error's path only: show's and best's bodies run without typer (cli/app.py)

    print_error(message)
    raise typer.Exit(code)
