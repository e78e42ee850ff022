"""Serving sweep throughput: inference layouts evaluated per second (enumerate + every cost term).

    python benchmarks/bench_inference.py

Prints, per case: valid layouts, wall seconds of `engine.evaluate` (best of 3), rows per second.
Cases sweep every tp/pp/sp/ep divisor and ten batch sizes over several GPU counts.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from parallmelism.config import load_run_configs  # noqa: E402
from parallmelism.engine import evaluate  # noqa: E402

BATCHES = "grid.batch=[1,2,4,8,16,32,64,128,256,512]"
CASES = {
    "llama70b": ["model=llama3.1-70b", "grid.ngpus=[8,16,32,64,128,256,512]", BATCHES],
    "llama405b-fp8": ["model=llama3.1-405b", "workload.weight_dtype=fp8", "workload.precision=fp8",
                      "grid.ngpus=[8,16,32,64,128,256,512,1024]", BATCHES],
    "mixtral-8x22b": ["model=mixtral-8x22b", "grid.ngpus=[8,16,32,64,128,256,512]", BATCHES],
}


def main():
    for name, overrides in CASES.items():
        (_, run), = load_run_configs(["workload=inference", *overrides])
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            df, _ = evaluate(run)
            best = min(best, time.perf_counter() - t0)
        print(f"{name:>14}: {len(df):>8,} layouts in {best:6.3f} s = {len(df) / best:>10,.0f} rows/s")


if __name__ == "__main__":
    main()
