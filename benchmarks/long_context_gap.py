"""Where the long-context step-time gap sits (issue 32): per long-context row, the attention kernels' share
of the predicted step and the factor on them that the measured step would need. A diagnosis, not a fit:
nothing here feeds the cost model.

    python benchmarks/long_context_gap.py                      # the shipped long-context rows, as validated
    python benchmarks/long_context_gap.py --batch-scale 8      # NeMo rows at 8x the assumed global batch

For each row (parallmelism/cases/training_long_context_moe.csv and training_stacks.csv, case names matching
PATTERNS): measured and predicted step seconds, the seconds of the `attention_core` op on the critical stage
(forward, backward and any recompute: cost/breakdown.py; with pipeline parallelism times 1 + bubble/compute,
the bubble being stage time too), and

    needed = 1 + (measured - predicted) / attention        (1.0: the row is explained without touching attention)

If the gap were something around the ring (transfers, merges, per-step launches) it would follow cp; if it
were the kernels' own time in these runs it would follow the attention share at any cp, without CP too.

--batch-scale N multiplies the global batch of the NeMo rows (`nemo2403-*`) and their derived step time
(the page publishes TFLOP/s per GPU; the step is that rate over NeMo's FLOP count at a global batch of dp
sequences, which the page does not state): it shows how much of a row's error is the fixed per-step terms
(step_fixed_ms, optimizer, exposed gradient reduction) charged on an unpublished batch.
"""

from __future__ import annotations

import argparse
import sys
from importlib import resources
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

PATTERNS = ("nemo2403-", "tt2412-8b-8gpu-fsdp8-cp1", "-cp2-", "-cp4-", "-cp8-")
FILES = ("training_long_context_moe.csv", "training_stacks.csv")


def long_context_rows(batch_scale: float):
    """(case, stack, measured s, run) of every row matching PATTERNS, NeMo rows at `batch_scale` x batch."""
    import pandas as pd

    from parallmelism.validate.runner import _context
    from parallmelism.validate.steptime import step_time_run_of

    ctx = _context([], None)
    for name in FILES:
        path = resources.files("parallmelism") / "cases" / name
        df = pd.read_csv(str(path), dtype=str, keep_default_na=False).replace({"": None})
        for row in df.to_dict("records"):
            case = row["case"]
            if not any(p in case for p in PATTERNS) or row.get("step_time_s") is None:
                continue
            measured = float(row["step_time_s"])
            if case.startswith("nemo2403-") and batch_scale != 1:
                row = {**row, "global_batch": str(int(round(float(row["global_batch"]) * batch_scale)))}
                measured *= batch_scale
            yield case, row.get("stack") or "megatron-te", measured, step_time_run_of(row, ctx)


def attention_seconds(run) -> float:
    """Seconds of the attention kernels in one step on the critical stage (cost/breakdown.py)."""
    from parallmelism.config.kernel_tables import kernel_model
    from parallmelism.cost.breakdown import training_breakdown
    from parallmelism.search import RowsCollector, stream_runs

    res = stream_runs([run], [RowsCollector()], workers=1, derive=False)
    cols = {k: v[[0]] for k, v in res.kept[0].items() if k not in ("_run", "_row")}
    hw = run.accelerator()
    bd = training_breakdown(cols, run.model, hw, run.training_workload(), kernel_model(hw))
    return sum(op["time_step_s"] for op in bd["ops"] if op["op"] == "attention_core")


def main(argv=None) -> int:
    from parallmelism.validate.cases import evaluate_one

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-scale", type=float, default=1.0, help="NeMo rows' global batch x this")
    args = parser.parse_args(argv)
    print("case,stack,cp,measured_s,predicted_s,error_pct,attention_s,attention_share,needed_factor")
    for case, stack, measured, run in long_context_rows(args.batch_scale):
        out = evaluate_one(run)
        pred = float(out["time_step_s"])
        # a pipelined step's bubble is stage time too: attention's share of it scales with it
        attn = attention_seconds(run) * (1.0 + float(out["time_bubble_s"]) / float(out["time_compute_s"]))
        needed = 1.0 + (measured - pred) / attn if attn > 0 else float("nan")
        cp = run.grid.cp[0] if run.grid.cp else 1
        print(
            f"{case},{stack},{cp},{measured:.4f},{pred:.4f},{100 * (pred / measured - 1):+.1f},"
            f"{attn:.4f},{attn / pred:.2f},{needed:.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
