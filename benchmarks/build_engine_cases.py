"""Write parallmelism/cases/inference_engines.csv: the engine survey's light-load rows that a case
row can express (issue 33: each engine's published runs as shipped serving cases).

    python benchmarks/build_engine_cases.py

From benchmarks/surveys/engines/engine_cases.csv (sources.md there says how every number was read)
a row is kept when, one rule each:
  - it has a measured ITL (TPOT) and a closed-loop concurrency of at most 8 (light load; request-rate
    rows are loaded points: validate's `loaded` kind, parallmelism/cases/loaded/);
  - its statistic is a mean, a median or unstated (p99 rows are loaded percentiles);
  - its layout is stated (tp given; the tt-inference-server 16-GPU SGLang and 8-GPU vLLM rows name none);
  - its weights are a dtype the workload takes (bf16, fp16, fp8, int8, int4; nvfp4 is not modelled);
  - no shipped case file holds it already (the InferenceX SGLang means are in inference_deepseek.csv).
TTFT is kept (measured_ttft_ms) at concurrency 1 only, as in the NIM file: above it the closed loop's
TTFT includes waiting behind the other clients' prompts (the aiconfigurator rows' TTFT grows with
OSL at a fixed ISL); reported_ttft_ms keeps the published value. `sample` says which rows are
aiconfigurator 0.12.0's measured silicon sample (the points that tool is checked against) and which
come from independent publications: the per-engine report scores them separately. moe_routing and
spec_method/spec_tokens/spec_acceptance are copied from the survey (the routing assumed on a source's
prompts, the speculative decoding a run had; blank = balanced, none), with the reason in the row's
notes. Prints what it kept and left out, by engine and reason.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
SURVEY = ROOT / "benchmarks" / "surveys" / "engines" / "engine_cases.csv"
OUT = ROOT / "parallmelism" / "cases" / "inference_engines.csv"
WEIGHT_DTYPES = {"bf16", "fp16", "fp8", "int8", "int4"}
COLUMNS = [
    "case",
    "model",
    "accelerator",
    "precision",
    "kv_cache_precision",
    "gpus",
    "tp",
    "pp",
    "ep",
    "input_len",
    "output_len",
    "concurrency",
    "chunked_prefill",
    "moe_routing",
    "spec_method",
    "spec_tokens",
    "spec_acceptance",
    "measured_ttft_ms",
    "measured_itl_ms",
    "reported_ttft_ms",
    "engine",
    "engine_version",
    "metric_stat",
    "sample",
    "source",
    "notes",
]


def shipped_cases() -> set[str]:
    names: set[str] = set()
    for f in (ROOT / "parallmelism" / "cases").glob("inference_*.csv"):
        if f != OUT:
            names |= set(pd.read_csv(f, dtype=str)["case"])
    return names


def why_left_out(row, shipped: set[str]) -> str | None:
    """The rule a survey row fails (module docstring), or None when it is kept."""
    if row["measured_itl_ms"] is None:
        return "no ITL"
    if row["request_rate"] is not None:
        return "request-rate (loaded) point"
    if row["concurrency"] is None or float(row["concurrency"]) > 8:
        return "concurrency above 8 (loaded)"
    if row["metric_stat"] == "p99":
        return "p99 (loaded percentile)"
    if row["tp"] is None:
        return "layout not stated"
    if row["precision"] not in WEIGHT_DTYPES:
        return f"weights {row['precision']} not modelled"
    if row["case"] in shipped:
        return "already shipped"
    if "InferenceX/issues/870" in str(row["source"]):
        return "already shipped"  # the InferenceX SGLang means are inference_deepseek.csv's ix870-* rows
    return None


def main() -> int:
    survey = pd.read_csv(SURVEY, dtype=str, keep_default_na=False).replace({"": None})
    shipped = shipped_cases()
    kept, left = [], []
    for row in survey.to_dict("records"):
        reason = why_left_out(row, shipped)
        if reason is not None:
            left.append((row["engine"], reason))
            continue
        out = dict(row)
        out["sample"] = "aiconfigurator" if "silicon_sample" in str(row["source"]) else "independent"
        if float(row["concurrency"]) > 1:
            out["measured_ttft_ms"] = None
        kept.append({c: out.get(c) for c in COLUMNS})
    df = pd.DataFrame(kept, columns=COLUMNS)
    df.to_csv(OUT, index=False, lineterminator="\n")
    print(f"wrote {len(df)} rows to {OUT.relative_to(ROOT)}")
    print(df.groupby(["engine", "sample"]).size().to_string())
    print("left out:")
    print(pd.DataFrame(left, columns=["engine", "reason"]).value_counts().sort_index().to_string())
    return 0


if __name__ == "__main__":
    sys.exit(main())
