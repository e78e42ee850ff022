"""Layouts as recipes run them (issue 32 item 4): the stack survey's rows that MoE parallel folding
(workload.expert_tp) and activation offload (workload.activation_offload_layers) make expressible,
each predicted with the shipped model and printed beside its measured step time.

Prints a table (no pass/fail: tests/test_folding.py and tests/test_offload.py hold the checks):

    python benchmarks/recipe_layouts.py

Row -> overrides: the survey's columns one for one (model by its description, mxfp8 read as fp8,
blank micro-batch 1, blank dispatcher alltoall); the number of offloaded layers is the one the row's
`offload` text states.
"""

from __future__ import annotations

import csv
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from parallmelism.config.compose import load_run_configs  # noqa: E402
from parallmelism.engine import evaluate  # noqa: E402

SURVEY = ROOT / "benchmarks" / "surveys" / "stacks" / "stack_cases.csv"
MODELS = {
    "Qwen3-235B": "qwen3-235b-a22b",
    "Qwen3-30B": "qwen3-30b-a3b",
    "Llama 3 70B": "llama3.1-70b",
    "Llama 3.1 405B": "llama3.1-405b",
}


def overrides(r: dict) -> list[str]:
    model = next(v for k, v in MODELS.items() if r["model_desc"].startswith(k))
    precision = "fp8" if "fp8" in r["precision"] else r["precision"]
    o = [
        f"model={model}",
        f"hardware={r['accelerator']}",
        f"grid.ngpus=[{r['gpus']}]",
        f"grid.tp=[{r['tp']}]",
        f"grid.pp=[{r['pp']}]",
        f"grid.cp=[{r['cp']}]",
        f"grid.vpp=[{r['vpp'] or 1}]",
        f"grid.micro_batch=[{r['micro_batch'] or 1}]",
        f"grid.dp_sharding=[{r['dp_sharding']}]",
        f"grid.recompute=[{r['recompute']}]",
        f"grid.sequence_parallel=[{r['sequence_parallel'] or 'false'}]",
        f"workload.seq_len={r['seq_len']}",
        f"workload.global_batch={r['global_batch']}",
        f"workload.precision={precision}",
    ]
    if r["ep"] and int(r["ep"]) > 1:
        o.append(f"grid.ep=[{r['ep']}]")
    if r["expert_tp"]:
        o.append(f"workload.expert_tp={r['expert_tp']}")
    for col in ("low_precision_gemms", "grad_reduce_dtype", "overlap_ep_comm", "moe_dispatcher"):
        if r[col]:
            o.append(f"workload.{col}={r[col]}")
    m = re.match(r"activations: (\d+) layers", r["offload"] or "")
    if m:
        o.append(f"workload.activation_offload_layers={m.group(1)}")
    return o


def main() -> None:
    rows = [
        r for r in csv.DictReader(SURVEY.open()) if r["expert_tp"] or (r["offload"] or "").startswith("activations")
    ]
    print(f"{'case':60s} {'measured_s':>10s} {'predicted_s':>11s} {'error':>7s} {'HBM_GiB':>8s} fits")
    for r in rows:
        try:
            run = load_run_configs(overrides(r))[0][1]
            df, _ = evaluate(run)
        except Exception as e:  # a row the model still refuses: say why
            print(f"{r['case']:60s} {float(r['step_time_s']):10.2f}  refused: {str(e).splitlines()[-1][:90]}")
            continue
        if len(df) == 0:
            print(f"{r['case']:60s} {float(r['step_time_s']):10.2f}  no layout")
            continue
        row = df.iloc[0]
        meas, pred = float(r["step_time_s"]), float(row["time_step_s"])
        print(
            f"{r['case']:60s} {meas:10.2f} {pred:11.2f} {pred / meas - 1:+7.1%} "
            f"{row['mem_total_gib']:8.1f} {bool(row['fits'])}"
        )


if __name__ == "__main__":
    main()
