"""The README's `plan serve` recommendations are the current output of the README's own commands.

    python -m tests.golden.readme_serve          # rewrite the quoted lines in README.md

Each `parallmelism plan serve ...` line of the README's bash blocks runs with `--out` into a temporary
folder; its summary's "Recommended: ..." line is quoted, in order, between the plan-serve markers.
tests/test_readme_numbers.py fails when they differ, so a change to the serving model cannot leave
the README stale: run this, review the diff, commit both.
"""

from __future__ import annotations

import re
import shlex
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
START, END = "<!-- plan-serve:start -->\n```text\n", "```\n<!-- plan-serve:end -->"


def serve_commands(text: str) -> list[list[str]]:
    cmds = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split("  #")[0].strip()
            if line.startswith("parallmelism plan serve "):
                cmds.append(shlex.split(line)[1:])
    return cmds


def current_lines(text: str | None = None) -> list[str]:
    from typer.testing import CliRunner

    from parallmelism.cli.app import app

    lines = []
    for i, args in enumerate(serve_commands(README.read_text() if text is None else text)):
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / f"serve{i}.csv"
            res = CliRunner().invoke(app, [*args, "-q", "--out", str(out)])
            assert res.exit_code == 0, f"{args}: {res.output}"
            summary = (Path(tmp) / f"serve{i}.summary.md").read_text()
        lines.append(next(x for x in summary.splitlines() if x.startswith("Recommended: ")))
    return lines


def readme_lines(text: str) -> tuple[int, int, list[str]]:
    start = text.index(START) + len(START)
    end = text.index(END, start)
    return start, end, text[start:end].splitlines()


def main() -> None:
    text = README.read_text()
    start, end, _ = readme_lines(text)
    README.write_text(text[:start] + "".join(f"{x}\n" for x in current_lines(text)) + text[end:])
    print(f"rewrote the plan serve recommendations in {README}")


if __name__ == "__main__":
    main()
