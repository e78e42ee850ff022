"""The README's step-time validation table comes from `validate`, not from hand copies.

    python -m tests.golden.readme_tables          # rewrite the table in README.md from the current model

tests/test_readme_numbers.py fails when the README's rows differ from what `validate` predicts, so a
change to the cost model cannot leave the README stale: run this, review the diff, commit both.
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
CASES = REPO / "parallmelism" / "cases" / "training_measured.csv"
FIRST_ROW = "| korthikanti-22b-full |"


def current_rows() -> list[str]:
    from parallmelism.validate.runner import run_validation

    table = run_validation([CASES], [], None)
    minus = str.maketrans("-", "−")  # the README's typographic minus, in the error column only
    return [
        f"| {r.case} | {r.measured:.3f} | {r.predicted:.3f} | {f'{r.error_pct:+.1f} %'.translate(minus)} |"
        for r in table.itertuples()
    ]


def readme_rows(text: str) -> tuple[int, int, list[str]]:
    start = text.index(FIRST_ROW)
    end = text.index("\n\n", start)
    return start, end, text[start:end].splitlines()


def main() -> None:
    text = README.read_text()
    start, end, _ = readme_rows(text)
    README.write_text(text[:start] + "\n".join(current_rows()) + text[end:])
    print(f"rewrote the step-time validation table in {README}")


if __name__ == "__main__":
    main()
