"""A serving search over every layout of a 64-GPU question (issue 33 done-when: "finishes within
seconds"). Figures to read, never pass/fail.

    python benchmarks/bench_serving_search.py [--repeat 3]

Per question (DeepSeek-V3 fp8 and Llama-3.1-405B fp8 on H100, replicas of 1 to 64 GPUs, every
tp/pp/sp/dp/ep divisor and the batch sizes `plan serve` considers, `plan.serve_batch`):
1. in process: `engine.evaluate` (enumerate + every cost term): layouts considered, valid layouts
   (rows), wall and CPU seconds (min over the repeats);
2. whole commands as a user runs them, fresh processes, alternating: `plan serve` of that question
   with one engine, and with `--engine auto` (every engine in conf/engine/ planned, then the
   cheapest's plan and its disaggregated alternative): wall and CPU (user+sys of the child) seconds.
On a shared machine wall includes waiting for a core; CPU seconds are the steadier figure.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

NGPUS = "grid.ngpus=[1,2,4,8,16,32,64]"
FP8 = ["workload.weight_dtype=fp8", "workload.precision=fp8", "workload.kv_dtype=fp8"]
QUESTIONS = {
    "deepseek-v3 fp8, H100, <= 64 GPUs": [
        "model=deepseek-v3",
        "hardware=h100-sxm-80gb",
        NGPUS,
        *FP8,
        "input_len=4000",
        "output_len=1000",
        "ttft_ms=2000",
        "tpot_ms=30",
        "qps=10",
    ],
    "llama3.1-405b fp8, H100, <= 64 GPUs": [
        "model=llama3.1-405b",
        "hardware=h100-sxm-80gb",
        NGPUS,
        *FP8,
        "input_len=4000",
        "output_len=500",
        "ttft_ms=2000",
        "tpot_ms=30",
        "qps=10",
    ],
}


def in_process(overrides: list[str], repeat: int) -> tuple[int, int, float, float]:
    """(layouts considered, valid layouts, wall s, CPU s) of evaluating every serving layout."""
    from parallmelism.config import load_run_configs
    from parallmelism.config.plan_shorthands import rewrite_plan_overrides
    from parallmelism.engine import evaluate

    ((_, run),) = load_run_configs(["workload=inference", *rewrite_plan_overrides(overrides)])
    run = run.model_copy(update={"grid": run.grid.model_copy(update={"batch": list(run.plan.serve_batch)})})
    wall = cpu = float("inf")
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        df, grid = evaluate(run)
        wall, cpu = min(wall, time.perf_counter() - t0), min(cpu, time.process_time() - c0)
    return int(grid.considered), len(df), wall, cpu


def whole(args: list[str]) -> tuple[float, float]:
    """(wall s, CPU s) of `python -m parallmelism ARGS` in a fresh process."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "parallmelism", *args], cwd=ROOT, env=env, check=True, capture_output=True)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    n = ap.parse_args().repeat
    for name, q in QUESTIONS.items():
        considered, rows, wall, cpu = in_process(q, n)
        print(
            f"{name}: evaluate every serving layout: {considered:,} considered, {rows:,} valid, "
            f"{wall:.2f} s wall, {cpu:.2f} CPU-s ({rows / cpu:,.0f} valid layouts per CPU-s)",
            flush=True,
        )
        one, auto = ["plan", "serve", *q, "-q"], ["plan", "serve", *q, "--engine", "auto", "-q"]
        whole(one)  # warm: bytecode, the composition cache
        times: dict[str, list[tuple[float, float]]] = {"one": [], "auto": []}
        for _ in range(n):  # alternating, so a busy machine slows both alike
            times["one"].append(whole(one))
            times["auto"].append(whole(auto))
        for key, label in (("one", "plan serve (engine trtllm)"), ("auto", "plan serve --engine auto")):
            w, c = min(t[0] for t in times[key]), min(t[1] for t in times[key])
            print(f"  {label}: {w:.2f} s wall, {c:.2f} CPU-s (min of {n}, whole process)", flush=True)
    print(f"command: python -m parallmelism plan serve {' '.join(QUESTIONS[next(iter(QUESTIONS))])} --engine auto")


if __name__ == "__main__":
    main()
