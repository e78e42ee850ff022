"""Wall time of latency under load (issue 33 item 3: `plan serve` with load stays within seconds):
`plan serve` with and without plan.load_percentiles, alternating A/B in fresh processes, and the
simulation alone in process (iteration table + 1,000 requests) at 20-80 % of a replica's capacity.

    python benchmarks/bench_serving_load.py [--repeat 3]

Figures to read (minimum wall seconds over the repeats), never pass/fail.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PLAN = ["plan", "serve", "model=llama3.1-70b", "qps=20", "ttft_ms=500", "tpot_ms=40"]


def _wall(args: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "parallmelism", *args], cwd=ROOT, check=True, capture_output=True)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    n = ap.parse_args().repeat
    _wall(PLAN)  # warm: bytecode, the composition cache
    plain, loaded = [], []
    for _ in range(n):  # alternating, so a busy machine slows both alike
        plain.append(_wall(PLAN))
        loaded.append(_wall([*PLAN, "load_percentiles=true"]))
    print(f"plan serve {' '.join(PLAN[2:])}: {min(plain):.2f} s; with load_percentiles=true {min(loaded):.2f} s")

    import numpy as np

    from parallmelism.config import load_option
    from parallmelism.config.kernel_tables import kernel_model
    from parallmelism.cost.layout import ServingLayout
    from parallmelism.cost.serving_load import drawn_requests
    from parallmelism.search.serve_load import loaded_point, replica_capacity_rps
    from parallmelism.specs import InferenceWorkload

    model, hw = load_option("model", "llama3.1-70b"), load_option("hardware", "h100-sxm-80gb")
    engine = load_option("engine", "trtllm")
    wl = InferenceWorkload(input_len=2048, output_len=256)
    one = {k: np.array([v]) for k, v in dict(tp=4, pp=1, sp=1, ep=1, dp=1, batch=64, layers_per_stage=80).items()}
    lay, km = ServingLayout.of(one), kernel_model(hw)
    cap = replica_capacity_rps(model, hw, wl, lay, km, engine)
    reqs = drawn_requests(wl, 1000, 0)
    for f in (0.2, 0.5, 0.8):
        t0 = time.perf_counter()
        s = loaded_point(
            model, hw, wl, lay, km, engine, reqs, rate_per_replica=f * cap, seed=0, ttft_slo_ms=None, itl_slo_ms=None
        )
        dt = time.perf_counter() - t0
        print(
            f"llama3.1-70b TP4 batch 64 at {f:.0%} of {cap:.2f} req/s: 1,000 requests in {dt:.2f} s "
            f"(TTFT p50/p99 {s['ttft_p50_ms']:.0f}/{s['ttft_p99_ms']:.0f} ms, ITL p50/p99 "
            f"{s['itl_p50_ms']:.1f}/{s['itl_p99_ms']:.1f} ms)"
        )


if __name__ == "__main__":
    main()
