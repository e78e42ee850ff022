"""Rewrite the golden CSVs: `python -m tests.golden.refresh [NAME ...]` (default: all cases and
the validation table, `validation`).

Run it only when a change to the cost model is meant to move numbers; then commit the golden
diff together with that change, so the review shows what moved. `parallmelism compare OLD NEW`
prints the same diff in a readable table before you refresh.
"""

from __future__ import annotations

import sys
from pathlib import Path

from .cases import CASES, VALIDATION, generate, generate_validation, golden_path


def main(argv: list[str], folder=None) -> int:
    """Regenerate the named cases (all by default) into `folder` (default: tests/golden)."""
    names = argv or [*CASES, "validation"]
    unknown = [n for n in names if n not in CASES and n != "validation"]
    if unknown:
        print(f"unknown golden case(s) {', '.join(unknown)}; known: {', '.join(CASES)}, validation", file=sys.stderr)
        return 2
    for name in names:
        if name == "validation":
            generate_validation(VALIDATION if folder is None else Path(folder) / VALIDATION.name)
            continue
        generate(name, golden_path(name) if folder is None else Path(folder) / f"{name}.csv")  # prints "wrote ..."
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
