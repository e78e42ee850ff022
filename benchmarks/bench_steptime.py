"""Rows/s of `engine.evaluate` on the default sweep, with and without the step-time term.

Run: python benchmarks/bench_steptime.py   (prints figures; not a pass/fail test)
"""

from __future__ import annotations

import time

from parallmelism import engine
from parallmelism.config import load_run_configs


def rows_per_s(run, repeat=3):
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        df, _ = engine.evaluate(run)
        best = min(best, time.perf_counter() - t0)
    return len(df), len(df) / best


def main():
    ((_, run),) = load_run_configs([], None)
    n, with_time = rows_per_s(run)
    real = engine.training_time
    engine.training_time = lambda *a, **k: {}
    try:
        _, without = rows_per_s(run)
    finally:
        engine.training_time = real
    print(f"default sweep: {n:,} rows")
    print(f"evaluate without step time: {without:,.0f} rows/s")
    print(f"evaluate with step time:    {with_time:,.0f} rows/s  (ratio {with_time / without:.2f})")
    from parallmelism.config.kernel_tables import kernel_model
    from parallmelism.cost.steptime import training_time
    from parallmelism.grid import enumerate_training_layouts

    cols = enumerate_training_layouts(run.model, run.hardware, run.workload, run.grid).columns
    t0 = time.perf_counter()
    hw = run.accelerator()
    training_time(cols, run.model, hw, run.workload, kernel_model(hw))
    dt = time.perf_counter() - t0
    print(f"training_time alone:        {n / dt:,.0f} rows/s")


if __name__ == "__main__":
    main()
