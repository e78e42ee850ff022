"""Split the predicted inter-token latency of serving case rows into its terms.

    python benchmarks/serving_itl_split.py [CASE_FILE] [--match REGEX]

For each row of CASE_FILE (default: parallmelism/cases/inference_nim_h100.csv) whose case name
matches REGEX, the decode iteration's milliseconds on the critical stage (cost.inference.decode_terms,
the micro-batch at the mean context) by term, then the predicted ITL (validate's tpot_ms) and its
error against measured_itl_ms:
  gemm_<dtype>   GEMM ops of the pass, by the dtype their kernel is timed in (fp8 weights: fp8;
                 router and logits: bf16), grouped MoE experts included
  attention      one-query attention over the KV cache (the measured decode kernel)
  memory         memory-bound ops (norms, element-wise, embedding) at the measured HBM fraction
  comm           exposed per-layer collectives (TP all-reduce, EP all-to-all, ...)
  iter           the fixed iteration overhead (the engine's iteration_overhead_ms + MoE layers ·
                 moe_layer_overhead_us)
  stall          ITL − decode step: the prompts' share of the decode iterations (prefill passes or
                 chunks), not split further; negative where a step yields several tokens (speculative
                 decoding: the ITL is the step over its tokens)
Use it to see which term moves when the kernel model or the serving model changes: run it on two
checkouts from b8e7991 on (serving timed by the kernel model; PYTHONPATH=<checkout>) and compare
the columns. Prints numbers only; no timing.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from parallmelism.config.kernel_tables import kernel_model  # noqa: E402
from parallmelism.cost.inference import decode_terms  # noqa: E402
from parallmelism.cost.layout import ServingLayout  # noqa: E402
from parallmelism.cost.inference_iteration import iteration_overhead_s  # noqa: E402
from parallmelism.cost.ops import ATTENTION, MATMUL  # noqa: E402
from parallmelism.cost.roofline import Rates  # noqa: E402
from parallmelism.schema import INFERENCE_LAYOUT_COLUMNS  # noqa: E402
from parallmelism.validate.inference_cases import inference_run_of, predicted_quantities  # noqa: E402
from parallmelism.validate.runner import _context, _evaluate_one  # noqa: E402

DEFAULT_CASES = Path(__file__).resolve().parent.parent / "parallmelism" / "cases" / "inference_nim_h100.csv"


def split_ms(run, pred) -> dict:
    """Decode-iteration milliseconds by term (module docstring) of one evaluated case row."""
    hw, model, wl = run.hardware, run.model, run.workload
    km = kernel_model(hw)
    cols = {k: np.array([int(pred[k])], dtype=np.int64) for k in INFERENCE_LAYOUT_COLUMNS}
    terms = decode_terms(model, hw, wl, ServingLayout.of(cols), km=km, engine=run.serving_engine())
    rates = Rates(hw, wl.precision, km)
    out: dict = defaultdict(float)
    for op, (t, _) in zip(terms["ops"], terms["times"]):
        ms = float(np.asarray(op.count).reshape(-1)[0] * np.asarray(t).reshape(-1)[0]) * 1e3
        if op.kind == MATMUL and op.mkn is not None:
            out[f"gemm_{rates.gemm_dtype(op)}"] += ms
        elif op.kind == ATTENTION:
            out["attention"] += ms
        else:
            out["memory"] += ms
    out["comm"] = float(np.asarray(terms["comm_s"]).reshape(-1)[0]) * 1e3
    out["iter"] = iteration_overhead_s(model, run.serving_engine()) * 1e3
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cases", nargs="?", default=str(DEFAULT_CASES))
    ap.add_argument("--match", default="", help="regular expression on the case name")
    args = ap.parse_args(argv)
    ctx = _context([], None)
    df = pd.read_csv(args.cases, dtype=str, keep_default_na=False).replace({"": None})
    lines = []
    for row in df.to_dict("records"):
        if row.get("measured_itl_ms") is None or not re.search(args.match, row["case"]):
            continue
        run = inference_run_of(row, *ctx)
        pred = _evaluate_one(run)
        itl = predicted_quantities(row, pred, ctx)["itl_ms"]
        terms = split_ms(run, pred)
        step = float(pred["decode_step_ms"])
        measured = float(row["measured_itl_ms"])
        lines.append(
            {
                "case": row["case"],
                **{k: round(v, 2) for k, v in sorted(terms.items())},
                "step": round(step, 2),
                "stall": round(itl - step, 2),
                "itl": round(itl, 2),
                "measured": measured,
                "error_pct": round(100.0 * (itl - measured) / measured, 2),
            }
        )
    if not lines:
        sys.exit(f"no case in {args.cases} with a measured ITL matches {args.match!r}")
    table = pd.DataFrame(lines).fillna(0.0)
    gemms = sorted(c for c in table.columns if c.startswith("gemm_"))
    order = ["case", *gemms, "attention", "memory", "comm", "iter", "step", "stall", "itl", "measured", "error_pct"]
    table = table[order]
    print(table.to_string(index=False))
    print(f"mean |error| {table['error_pct'].abs().mean():.2f} %, median {table['error_pct'].abs().median():.2f} %")


if __name__ == "__main__":
    main()
