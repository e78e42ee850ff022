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
  - no shipped case file holds it already (the InferenceX SGLang means are in inference_deepseek.csv), and
    it is not one of InferenceX issue 890's runs (their mean, median and p99 TTFT together are loaded
    points: parallmelism/cases/loaded/).
TTFT (measured_ttft_ms) is kept at concurrency 1, and above it where the benchmark that ran is stated,
since there the mean TTFT is the closed loop's start-up burst plus each prompt's wait behind the
iterations in flight, which validate simulates from `requests` and `random_range_ratio`
(validate/inference_cases.py), one rule each:
  - InferenceX runs (the aiconfigurator sample rows whose provenance is an InferenceX database dump,
    INFERENCEX_PROVENANCE) ran bench_serving with --num-prompts 10·concurrency, --max-concurrency
    concurrency, --random-range-ratio 0.8, and InferenceX stores its mean TTFT/TPOT (InferenceX
    benchmarks/*_slurm.sh, .github/workflows/benchmark-tmpl.yml RANDOM_RANGE_RATIO 0.8): requests,
    random_range_ratio = 0.8 and metric_stat = mean;
  - the simulation runs plain decoding, so a run with speculative decoding keeps TTFT reported only;
  - InferenceX's TensorRT-LLM Llama-70B script at 1k/1k and tp < 8 sets batch_wait_timeout_iters 20 and
    batch_wait_max_tokens_ratio 0.9 with --max_num_tokens 16384 (benchmarks/70b_fp8_h200_trt_slurm.sh: a
    new prompt waits up to 20 iterations for more prompts to batch with; TTFT 2.5-3x that of the same
    layouts at 1k/8k): those rows carry the columns batch_wait_timeout_iters, batch_wait_max_tokens_ratio
    and prefill_chunk_tokens (the engine fields and the token budget the ratio is of, cost/batch_wait.py),
    which the simulated scheduler runs;
  - other rows above concurrency 1 (the aiconfigurator sample's TensorRT-LLM 1.0.0rc3 Llama-8B rows,
    whose harness is not stated; LLMPerf's issue-5929 rows, validated as loaded points in
    cases/loaded/) keep TTFT reported only.
prefill_chunk_tokens is the iteration token budget the run's server was started with, where the
survey row states it (InferenceX's DeepSeek-R1 H200 scripts: TensorRT-LLM --max_num_tokens, SGLang
--chunked-prefill-size; the row's notes cite the script); blank = the workload default.
reported_ttft_ms keeps the published value. `sample` says which rows are
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
    "requests",
    "random_range_ratio",
    "chunked_prefill",
    "prefill_chunk_tokens",
    "batch_wait_timeout_iters",
    "batch_wait_max_tokens_ratio",
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


# provenance strings of InferenceX database dumps in the aiconfigurator sample's rows (their notes)
INFERENCEX_PROVENANCE = ("provenance: db-dump/", "provenance: source_file=2026-")
INFERENCEX_REQUESTS_PER_CLIENT = 10  # bench_serving --num-prompts $((CONC * 10))
INFERENCEX_RANGE_RATIO = 0.8  # benchmark-tmpl.yml RANDOM_RANGE_RATIO
# 70b_fp8_h200_trt_slurm.sh at 1k/1k below TP8: llama-config.yml and trtllm-serve --max_num_tokens
# (the survey's text, as its own columns are read)
TRTLLM_BATCH_WAIT = {
    "batch_wait_timeout_iters": "20",
    "batch_wait_max_tokens_ratio": "0.9",
    "prefill_chunk_tokens": "16384",
}


def is_inferencex(row) -> bool:
    return "silicon_sample" in str(row["source"]) and any(p in str(row["notes"]) for p in INFERENCEX_PROVENANCE)


def trtllm_batch_wait(row) -> bool:
    """InferenceX's TensorRT-LLM Llama-70B script's batch wait (module docstring): its rows only (their
    source, not just their engine, model, lengths and TP: another source's runs set no batch wait)."""
    return (
        is_inferencex(row)
        and row["engine"] == "trtllm"
        and row["model"] == "llama3.1-70b"
        and int(row["input_len"]) == 1024
        and int(row["output_len"]) == 1024
        and int(row["tp"]) < 8
    )


def ttft_kept(row) -> bool:
    """Whether measured_ttft_ms is validated (module docstring)."""
    if float(row["concurrency"]) <= 1:
        return True
    return row["requests"] is not None and row["spec_method"] is None


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
    if "InferenceX/issues/890" in str(row["source"]):
        return "loaded kind"  # one run's mean, median and p99 TTFT, together in cases/loaded
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
        out["requests"] = out["random_range_ratio"] = None
        if is_inferencex(row):
            out["requests"] = INFERENCEX_REQUESTS_PER_CLIENT * int(float(row["concurrency"]))
            out["random_range_ratio"] = INFERENCEX_RANGE_RATIO
            out["metric_stat"] = "mean"
        if trtllm_batch_wait(row):
            out.update(TRTLLM_BATCH_WAIT)
        if not ttft_kept(out):
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
