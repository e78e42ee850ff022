"""Loaded serving points (issue 33 item 3): the request-level simulation (cost/serving_load.py)
against the published percentiles in parallmelism/cases/loaded/inference_loaded.csv (built from
benchmarks/surveys/engines/engine_cases.csv by build_loaded_cases.py), and its wall time.

Run: python benchmarks/serving_loaded_points.py
Prints, per statistic (p50 = median, mean, p99; no source publishes p90) and quantity, the mean
|error| and the rows used; then the load's own effect, separated from the light-load model: where
the same source and layout has a concurrency-1 row, the measured loaded/light ratio against the
predicted one (a TTFT or ITL miss at light load is the per-iteration and per-request model's, issue
33 items 0-1; the ratio is what the queue adds).
"""

from __future__ import annotations

import re
import time
from pathlib import Path

from parallmelism.validate.runner import run_validation

CASES = Path(__file__).resolve().parents[1] / "parallmelism/cases/loaded/inference_loaded.csv"


def main() -> None:
    t0 = time.perf_counter()
    table = run_validation([CASES], [], None)
    wall = time.perf_counter() - t0
    print(f"{len(table)} points from {CASES.name} in {wall:.1f} s (validate, every row simulated)")
    for q, g in table.groupby("quantity", sort=True):
        err = g["error_pct"].abs()
        print(
            f"{q:14} {len(g):2} rows  mean |error| {err.mean():5.1f} %  max {err.max():5.1f} %  rows: {', '.join(g['case'])}"
        )
    light = {}
    for r in table.itertuples():
        m = re.match(r"(.*)-c1$", r.case)
        if m:
            light[(m.group(1), r.quantity)] = r
    print("\nload effect where a concurrency-1 row of the same layout exists (loaded / light):")
    errs = []
    for r in table.itertuples():
        m = re.match(r"(.*)-c(\d+)$", r.case)
        if not m or m.group(2) == "1" or (m.group(1), r.quantity) not in light:
            continue
        base = light[(m.group(1), r.quantity)]
        meas, pred = r.measured / base.measured, r.predicted / base.predicted
        errs.append(abs(pred / meas - 1) * 100)
        print(
            f"  {r.case:42} {r.quantity:12} measured x{meas:5.2f}  predicted x{pred:5.2f}  ({(pred / meas - 1) * 100:+5.1f} %)"
        )
    if errs:
        print(f"  mean |error| of the load ratio: {sum(errs) / len(errs):.1f} % over {len(errs)} rows")


if __name__ == "__main__":
    main()
