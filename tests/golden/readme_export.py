"""The README's two `export` excerpts are the current output of the README's own export commands.

    python -m tests.golden.readme_export          # rewrite the excerpts' lines in README.md

Each excerpt (between the export-train / export-serve markers) is a subset of the lines its command
prints, in order; each line is matched to the printed line with the same words before its comment
(a `# key: ...` header line by its key) and quoted whole, numbers included. tests/test_readme_numbers.py
fails when they differ, so a change to the cost model cannot leave the README's predicted memory,
times and throughput stale: run this, review the diff, commit both.
"""

from __future__ import annotations

import contextlib
import shlex
import tempfile

from .readme_serve import README

BLOCKS = ("export-train", "export-serve")


def export_commands(text: str) -> list[list[str]]:
    """The `parallmelism export ...` lines of the first bash block of "From plan to run", in order."""
    section = text.split("## From plan to run", 1)[1]
    block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    return [shlex.split(line)[1:] for line in block.splitlines() if line.startswith("parallmelism export ")]


def _span(text: str, block: str) -> tuple[int, int]:
    start_marker = f"<!-- {block}:begin -->\n```\n"
    start = text.index(start_marker) + len(start_marker)
    return start, text.index("```\n<!-- ", start)


def readme_excerpt(text: str, block: str) -> list[str]:
    start, end = _span(text, block)
    return text[start:end].splitlines()


def words(line: str) -> str:
    """What identifies a line across cost-model changes: a flag and its value, or a header's key."""
    return line.split("  #", 1)[0].split(": ", 1)[0] if line.startswith("# ") else line.split("  #", 1)[0]


def printed(args: list[str]) -> list[str]:
    from typer.testing import CliRunner

    from parallmelism.cli.app import app

    with tempfile.TemporaryDirectory() as tmp, contextlib.chdir(tmp):  # a stray output lands there
        res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, f"{args}: {res.output}"
    return res.stdout.splitlines()


def current_excerpt(text: str, block: str) -> list[str]:
    """The excerpt's lines as the command prints them now (each found by `words`)."""
    lines = printed(export_commands(text)[BLOCKS.index(block)])
    out = []
    for line in readme_excerpt(text, block):
        match = [p for p in lines if words(p) == words(line)]
        assert match, f"{block}: no printed line like {line!r}; edit the README's excerpt"
        out.append(match[0])
    return out


def main() -> None:
    text = README.read_text()
    for block in BLOCKS:
        start, end = _span(text, block)
        text = text[:start] + "".join(f"{x}\n" for x in current_excerpt(text, block)) + text[end:]
    README.write_text(text)
    print(f"rewrote the export excerpts in {README}")


if __name__ == "__main__":
    main()
