"""Where the long-context step-time gap sits (issue 32): per long-context row, the attention kernels' share
of the predicted step and the factor on them that the measured step would need. A diagnosis, not a fit:
nothing here feeds the cost model.

    python benchmarks/long_context_gap.py                      # the shipped long-context rows, as validated
    python benchmarks/long_context_gap.py --batch-scale 8      # NeMo rows at 8x the assumed global batch
    python benchmarks/long_context_gap.py --split              # NeMo 24.03 rows: what each length's step is made of

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

--split prints, for the NeMo 24.03 rows only, the predicted step cut into its terms (cost/breakdown.py: the
attention kernels, the GEMMs, the memory-bound ops, exposed TP/CP, the named overheads each zeroed in turn:
comm_contention, straggler_per_doubling, step_fixed_ms, layer_launch_us), the attention rate the model
prices per backend (attention FLOPs as cost/flops.py counts them: causal, backward 2.5x forward) on the
stated FlashAttention-2 and on cuDNN, and the row's error on each backend.
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


# the named overheads --split zeroes one at a time (conf/stack/megatron-te.yaml, cost/overheads.py)
SPLIT_OVERHEADS = ("comm_contention", "straggler_per_doubling", "step_fixed_ms", "layer_launch_us")
GEMM_KINDS = ("matmul",)


def _breakdown(run):
    """cost/breakdown.py's tables for the run's pinned layout."""
    from parallmelism.config.kernel_tables import kernel_model
    from parallmelism.cost.breakdown import training_breakdown
    from parallmelism.search import RowsCollector, stream_runs

    res = stream_runs([run], [RowsCollector()], workers=1, derive=False)
    cols = {k: v[[0]] for k, v in res.kept[0].items() if k not in ("_run", "_row")}
    hw = run.accelerator()
    return training_breakdown(cols, run.model, hw, run.training_workload(), kernel_model(hw))


def attention_seconds(run) -> float:
    """Seconds of the attention kernels in one step on the critical stage (cost/breakdown.py)."""
    return sum(op["time_step_s"] for op in _breakdown(run)["ops"] if op["op"] == "attention_core")


def _attention(bd) -> tuple[float, float]:
    """(seconds, TFLOP/s) of the attention kernels in one step on the critical stage: FLOPs forward plus
    2.5x forward backward (the kernel tables' count), over the seconds the model prices them."""
    ops = [op for op in bd["ops"] if op["op"] == "attention_core"]
    seconds = sum(op["time_step_s"] for op in ops)
    m = bd["summary"]["micro_batches"]
    flops = sum(3.5 * op["flops_fwd"] * op["count"] * m for op in ops)
    return seconds, flops / seconds / 1e12 if seconds else float("nan")


def split(batch_scale: float) -> int:
    """The NeMo 24.03 rows cut into their terms, per length (module docstring, --split)."""
    from parallmelism.validate.cases import evaluate_one
    from parallmelism.validate.runner import _context
    from parallmelism.validate.steptime import step_time_run_of

    rows = list(_nemo_rows(batch_scale))
    key = "stack.overheads.h100-sxm-80gb."
    zeroed = {name: _context([f"{key}{name}=0"], None) for name in SPLIT_OVERHEADS}
    ctx = _context([], None)
    print(
        "case,seq_k,cp,measured_s,predicted_s,error_pct,attention_s,attention_share,gemm_s,gemm_share,"
        "memory_ops_s,exposed_comm_s,"
        + ",".join(f"{name}_s" for name in SPLIT_OVERHEADS)
        + ",flash2_attention_tflops,cudnn_attention_tflops,error_cudnn_pct,needed_attention_factor"
    )
    for row, measured in rows:
        run = step_time_run_of(row, ctx)
        pred = float(evaluate_one(run)["time_step_s"])
        bd = _breakdown(run)
        attn_s, attn_tflops = _attention(bd)
        gemm_s = sum(op["time_step_s"] for op in bd["ops"] if op["kind"] in GEMM_KINDS)
        mem_s = sum(op["time_step_s"] for op in bd["ops"] if op["bound"] == "memory" and op["kind"] != "attention")
        parts = bd["summary"]["where_time_goes"]
        exposed = sum(v for k, (v, _) in parts.items() if k.startswith("exposed "))
        terms = [pred - float(evaluate_one(step_time_run_of(row, zeroed[n]))["time_step_s"]) for n in SPLIT_OVERHEADS]
        cudnn_row = {**row, "attention_backend": "cudnn"}
        cudnn_run = step_time_run_of(cudnn_row, ctx)
        cudnn_pred = float(evaluate_one(cudnn_run)["time_step_s"])
        _, cudnn_tflops = _attention(_breakdown(cudnn_run))
        print(
            f"{row['case']},{int(row['seq_len']) // 1024},{row['cp']},{measured:.4f},{pred:.4f},"
            f"{100 * (pred / measured - 1):+.1f},{attn_s:.4f},{attn_s / pred:.2f},{gemm_s:.4f},{gemm_s / pred:.2f},"
            f"{mem_s:.4f},{exposed:.4f}," + ",".join(f"{t:.4f}" for t in terms) + f",{attn_tflops:.0f},"
            f"{cudnn_tflops:.0f},{100 * (cudnn_pred / measured - 1):+.1f},{1 + (measured - pred) / attn_s:.2f}"
        )
    return 0


def _nemo_rows(batch_scale: float):
    """(row, measured s) of the NeMo 24.03 rows, at `batch_scale` x their global batch and step."""
    import pandas as pd

    path = resources.files("parallmelism") / "cases" / "training_long_context_moe.csv"
    df = pd.read_csv(str(path), dtype=str, keep_default_na=False).replace({"": None})
    for row in df.to_dict("records"):
        if not row["case"].startswith("nemo2403-"):
            continue
        measured = float(row["step_time_s"])
        if batch_scale != 1:
            row = {**row, "global_batch": str(int(round(float(row["global_batch"]) * batch_scale)))}
            measured *= batch_scale
        yield row, measured


def main(argv=None) -> int:
    from parallmelism.validate.cases import evaluate_one

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-scale", type=float, default=1.0, help="NeMo rows' global batch x this")
    parser.add_argument("--split", action="store_true", help="the NeMo 24.03 rows cut into their terms")
    args = parser.parse_args(argv)
    if args.split:
        return split(args.batch_scale)
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
