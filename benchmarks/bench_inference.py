"""Serving sweep throughput: inference layouts evaluated per second (enumerate + every cost term).

    python benchmarks/bench_inference.py [--against GIT_REV]

Prints, per case: valid layouts, wall seconds of `engine.evaluate` (best of 3), rows per second.
Cases sweep every tp/pp/sp/ep divisor and ten batch sizes over several GPU counts. With
`--against REV` the same script of that revision runs too (checked out with `git archive` into a
temporary folder, one after the other on the same machine) and the rows/s ratio now / REV prints
per case.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from parallmelism.config import load_run_configs  # noqa: E402
from parallmelism.engine import evaluate  # noqa: E402

BATCHES = "grid.batch=[1,2,4,8,16,32,64,128,256,512]"
CASES = {
    "llama70b": ["model=llama3.1-70b", "grid.ngpus=[8,16,32,64,128,256,512]", BATCHES],
    "llama405b-fp8": [
        "model=llama3.1-405b",
        "workload.weight_dtype=fp8",
        "workload.precision=fp8",
        "grid.ngpus=[8,16,32,64,128,256,512,1024]",
        BATCHES,
    ],
    "mixtral-8x22b": ["model=mixtral-8x22b", "grid.ngpus=[8,16,32,64,128,256,512]", BATCHES],
}


def run_cases():
    rates = {}
    for name, overrides in CASES.items():
        ((_, run),) = load_run_configs(["workload=inference", *overrides])
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            df, _ = evaluate(run)
            best = min(best, time.perf_counter() - t0)
        print(f"{name:>14}: {len(df):>8,} layouts in {best:6.3f} s = {len(df) / best:>10,.0f} rows/s", flush=True)
        rates[name] = len(df) / best
    return rates


def rates_at(rev: str) -> dict[str, float]:
    """Rows/s of each case measured by this script as it was at git revision `rev`."""
    root = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(["git", "-C", str(root), "archive", rev], check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        out = subprocess.run(
            [sys.executable, "benchmarks/bench_inference.py"], cwd=tmp, check=True, capture_output=True, text=True
        ).stdout
    print(f"at {rev}:\n{out}", end="")
    return {m.group(1): float(m.group(2).replace(",", "")) for m in re.finditer(r"(\S+): .*= +([\d,]+) rows/s", out)}


def main(argv):
    against = argv[argv.index("--against") + 1] if "--against" in argv else None
    print("now:")
    now = run_cases()
    if against:
        before = rates_at(against)
        for name, rate in now.items():
            if name in before:
                print(f"{name:>14}: now / {against} = {rate / before[name]:.2f}x rows/s")


if __name__ == "__main__":
    main(sys.argv[1:])
