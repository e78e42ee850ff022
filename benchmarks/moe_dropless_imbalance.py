"""The busiest EP rank's routed tokens over the mean (workload.moe_imbalance) that Megatron-Core's dropless
routing of Qwen3-235B-A22B had in the Megatron-MoE-ModelZoo runs (issue 32): derived from the ModelZoo's own
forced-balance / dropless pairs, not from the rows it is applied to.

    python benchmarks/moe_dropless_imbalance.py

Source: yanring/Megatron-MoE-ModelZoo best_practice/Qwen3/readme.md (commit c1ad0b5), "Long Context" table
(256 H100, NVLink 4, InfiniBand 8x50 GB/s; Qwen3-235B-A22B, DeepEP, bf16; PP=8 VPP=4 TP=4 EP=8, GBS 256,
selective recompute of layernorm and moe): TFLOP/s per GPU "295 (forced balance) / 237 (dropless)" at 16k
tokens (CP1), 335 / 277 at 32k (CP2), 368 / 320 at 64k (CP4), 389 / 357 at 128k (CP8). The same runs with and
without `--moe-router-force-load-balancing` ("Add --moe-router-force-load-balancing to test forced load
balancing"): the model FLOPs are equal, so forced/dropless TFLOP/s is the dropless step over the forced one.
Dropless routing leaves every MoE layer waiting on its busiest EP rank (its grouped GEMMs and its share of
the all-to-all); the cost model takes that as moe_imbalance, which scales the busiest rank's routed tokens
(cost/flops.py, cost/collective_ops.py ep_dispatch_bytes).

For each pair the layout is built from the shipped ModelZoo TP4 EP8 PP8 row (training_stacks.csv) at the
pair's sequence length, CP and GBS (DP = 256 / (TP·PP·CP), micro-batch 1, selective recompute), and x solves

    T(x) / T(1) = forced TFLOP/s / dropless TFLOP/s

by secant steps. One x per pair; they agree within a few hundredths while the MoE share of the step falls 3x
from 16k to 128k, which is what a per-layer imbalance (not a per-step or per-token overhead) predicts. The
rows of that source that state no forced balance take the mean (rounded to 0.05) as their `moe_imbalance`
column (validate/steptime.py); tests/test_validate_stacks.py holds the stated value to this derivation.
"""

from __future__ import annotations

import sys
from importlib import resources
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

BASE_CASE = "mz-qwen3-235b-h100-256gpu-tp4-ep8-pp8-edp4-deepep"
GPUS, TP, PP, GBS = 256, 4, 8, 256
# (sequence length, CP, forced-balance TFLOP/s per GPU, dropless TFLOP/s per GPU), the readme's "Long Context" table
PAIRS = (
    (16384, 1, 295.0, 237.0),
    (32768, 2, 335.0, 277.0),
    (65536, 4, 368.0, 320.0),
    (131072, 8, 389.0, 357.0),
)
STATED_STEP = 0.05  # the rows state the mean rounded to this


def pair_runs():
    """(seq, cp, measured dropless/forced step ratio, RunConfig at moe_imbalance 1) per pair."""
    import pandas as pd

    from parallmelism.validate.runner import _context
    from parallmelism.validate.steptime import step_time_run_of

    ctx = _context([], None)
    path = resources.files("parallmelism") / "cases" / "training_stacks.csv"
    df = pd.read_csv(str(path), dtype=str, keep_default_na=False).replace({"": None})
    base = next(r for r in df.to_dict("records") if r["case"] == BASE_CASE)
    base = {k: v for k, v in base.items() if k != "moe_imbalance"}
    for seq, cp, forced, dropless in PAIRS:
        row = {
            **base,
            "seq_len": str(seq),
            "cp": str(cp),
            "dp": str(GPUS // (TP * PP * cp)),
            "global_batch": str(GBS),
            "micro_batch": "1",
            "recompute": "selective",
        }
        yield seq, cp, forced / dropless, step_time_run_of(row, ctx)


def step_s(run, imbalance: float) -> float:
    from parallmelism.validate.cases import evaluate_one

    wl = run.workload.model_copy(update={"moe_imbalance": imbalance})
    return float(evaluate_one(run.model_copy(update={"workload": wl}))["time_step_s"])


def solve(run, ratio: float, tol: float = 1e-3) -> tuple[float, float]:
    """(x, T(1)) with T(x)/T(1) = ratio, by secant steps from x = 1 and 2 (T is near-linear in x)."""
    t1 = step_s(run, 1.0)
    x0, f0 = 1.0, 1.0 - ratio
    x1 = 2.0
    f1 = step_s(run, x1) / t1 - ratio
    for _ in range(8):
        if abs(f1) < tol or f1 == f0:
            break
        x0, f0, x1 = x1, f1, x1 - f1 * (x1 - x0) / (f1 - f0)
        f1 = step_s(run, x1) / t1 - ratio
    return x1, t1


def derived_imbalances() -> list[tuple[int, int, float, float]]:
    """(seq, cp, measured ratio, solved moe_imbalance) per pair."""
    return [(seq, cp, ratio, solve(run, ratio)[0]) for seq, cp, ratio, run in pair_runs()]


def stated_value(xs) -> float:
    """The mean of the solved values, rounded to STATED_STEP: what the rows state."""
    mean = sum(xs) / len(xs)
    return round(round(mean / STATED_STEP) * STATED_STEP, 2)


def main() -> int:
    print("seq_len,cp,dropless_over_forced,moe_imbalance")
    rows = derived_imbalances()
    for seq, cp, ratio, x in rows:
        print(f"{seq},{cp},{ratio:.3f},{x:.3f}")
    xs = [r[3] for r in rows]
    print(f"mean {sum(xs) / len(xs):.3f}, spread {min(xs):.3f}-{max(xs):.3f}; stated {stated_value(xs):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
