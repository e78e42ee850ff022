"""Start-up cost of the config layer: wall seconds of whole CLI commands (composition included).

    python benchmarks/bench_startup.py [OTHER_CHECKOUT]

Runs each command 7 times in fresh processes and prints the median and the best. With
OTHER_CHECKOUT (another copy of the repository, e.g. `git archive main | tar -x -C /tmp/base`),
the two are run alternately in the same loop and the ratio this/other of the medians is printed,
so a shared, noisy machine affects both alike.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
COMMANDS = {
    "show": ["show", "model=llama3.1-8b", "grid.ngpus=[8]", "grid.tp=8", "grid.pp=1"],
    "sweep --cfg": ["sweep", "--cfg"],
    "sweep model=a,b --cfg": ["sweep", "--cfg", "model=llama3.1-8b,mixtral-8x7b"],
}
REPEATS = 7


def _time(cwd: Path, args: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "parallmelism", *args],
        cwd=cwd,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return time.perf_counter() - t0


def main():
    other = Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else None
    for name, args in COMMANDS.items():
        mine, theirs = [], []
        for _ in range(REPEATS):
            mine.append(_time(HERE, args))
            if other is not None:
                theirs.append(_time(other, args))
        line = f"{name:>24}: median {statistics.median(mine):.3f} s, best {min(mine):.3f} s"
        if other is not None:
            line += (
                f" | other median {statistics.median(theirs):.3f} s, best {min(theirs):.3f} s"
                f" | ratio {statistics.median(mine) / statistics.median(theirs):.3f}"
            )
        print(line)


if __name__ == "__main__":
    main()
