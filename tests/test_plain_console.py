"""cli/console.py PlainConsole: where rich would print plain text on stdout, show prints its lines
and fit_table tables without importing rich's console or table, character for character what
rich prints; anything else goes to rich (issue 29 start-up)."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import pytest

from conftest import REPO
from parallmelism.cli.console import PlainConsole

PROBE = """
import sys
from parallmelism.cli.console import console, plain_width
out = console()
rich_plain = not out.is_terminal and out.color_system is None and not out.options.ascii_only
print("RICH", out.width if rich_plain else None, "PLAIN", plain_width(), file=sys.stderr)
"""


@pytest.mark.parametrize(
    "env",
    [
        {},
        {"COLUMNS": "120"},
        {"COLUMNS": "320"},
        {"FORCE_COLOR": "1"},
        {"FORCE_COLOR": ""},
        {"TTY_COMPATIBLE": "1"},
        {"TTY_COMPATIBLE": "0"},
        {"NO_COLOR": "1"},
        {"TERM": "dumb"},
        {"PYTHONIOENCODING": "latin-1"},
    ],
)
@pytest.mark.parametrize("terminal", [False, True], ids=["pipe", "pty"])
def test_plain_width_is_riches_width_where_rich_prints_plain_text(env, terminal):
    """plain_width() is the width of console() wherever it answers, and it answers None wherever
    rich would see a terminal, colours or an ASCII-only stream."""
    full = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", **env}
    if terminal:
        import pty

        main, child = pty.openpty()
        r = subprocess.run([sys.executable, "-c", PROBE], stdout=child, stderr=subprocess.PIPE, text=True, env=full)
        os.close(main), os.close(child)
    else:
        r = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=full)
    words = r.stderr.split()
    rich_width, plain = words[words.index("RICH") + 1], words[words.index("PLAIN") + 1]
    assert plain in ("None", rich_width), r.stderr
    if terminal or rich_width == "None":
        assert plain == "None", r.stderr


TEXTS = [
    "fits: 17.6 GiB per GPU of 79.6 GiB usable on h100-sxm-80gb (62.0 GiB headroom)",
    "  an indented line",
    "a line with spaces at its end  ",
    "",
    "an emoji code :smile: in it",
    "[bold]markup[/] read literally",
    "a tab\there",
    "wide characters 漢字 and · Σ −",
    "a long line " * 30,
    "two\nlines",
]


@pytest.mark.parametrize("text", TEXTS)
@pytest.mark.parametrize("style", [None, "bold red"])
def test_a_line_prints_as_rich_prints_it(text, style, capsys):
    from rich.console import Console

    expected = io.StringIO()
    Console(file=expected, width=200, highlight=False, color_system=None).print(text, style=style, markup=False)
    PlainConsole(200).print(text, style=style, markup=False)
    assert capsys.readouterr().out == expected.getvalue()


def test_a_pinned_show_on_a_pipe_imports_neither_riches_console_nor_its_table(tmp_path):
    args = [
        "show",
        "model=llama3.1-8b",
        "grid.ngpus=[8]",
        "grid.tp=1",
        "grid.pp=1",
        "grid.cp=1",
        "grid.micro_batch=[1]",
    ]
    probe = (
        "import sys\n"
        "from parallmelism.cli.app import main\n"
        f"sys.argv = ['parallmelism', *{args!r}]\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print('RICH', 'rich.console' in sys.modules, 'rich.table' in sys.modules, file=sys.stderr)\n"
    )
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "PARALLMELISM_CACHE_DIR": str(tmp_path)}
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, cwd=REPO)
    assert "RICH False False" in r.stderr, r.stderr
    assert "where the step goes" in r.stdout and "┏" in r.stdout
