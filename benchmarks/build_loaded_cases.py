"""Writes parallmelism/cases/loaded/inference_loaded.csv (validate's `loaded` kind, validate/loaded_cases.py)
from the published loaded points of benchmarks/surveys/engines/engine_cases.csv (sources.md there).

Run: python benchmarks/build_loaded_cases.py
A row is kept where the source names its statistic (metric_stat) and its load (request_rate, or
client concurrency) and publishes TTFT or ITL, and the model can express it. One rule per column:
- load_stat = metric_stat; measured_ttft_ms = reported_ttft_ms (the TTFT published at that load),
  measured_itl_ms as in engine_cases.csv (the per-request TPOT, or LLMPerf's ITL p50).
- scheduler_steps = N where the notes say the engine ran with --num-scheduler-steps N (vLLM 0.6's
  multi-step scheduling: the benchmark_vllm_060 rows, 10), else blank (1).
- chunked_prefill = false: each engine at the version measured schedules a prompt's pass apart
  from the decode iterations by default (SGLang without --enable-mixed-chunk, TensorRT-LLM without
  enable_chunked_context, vLLM 0.6's V0 scheduler), as cases/inference_deepseek.csv rules.
- ShareGPT rows (input_len/output_len blank; sglang.bench_serving --dataset-name sharegpt):
  input_len 231, output_len 195, the means of a bench_serving ShareGPT run with a Llama 3 tokenizer
  (230,969 input and 194,523 output tokens over 1,000 requests; the same README's offline run gives
  3,856.01 / 19.84 = 194.4 output tokens per request), length_dist uniform ±90 % (the distribution
  itself is not published with the rows: an assumption), requests = the README's num-prompts.
Left out: nvfp4 rows (no fp4 weights in the serving model), rows without a layout (tp blank).
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "benchmarks/surveys/engines/engine_cases.csv"
OUT = ROOT / "parallmelism/cases/loaded/inference_loaded.csv"
COLUMNS = [
    "case", "model", "accelerator", "precision", "kv_cache_precision", "gpus", "tp", "pp", "ep",
    "input_len", "output_len", "length_dist", "length_spread", "requests", "request_rate", "max_batch",
    "concurrency", "chunked_prefill", "scheduler_steps", "load_stat", "measured_ttft_ms", "measured_itl_ms", "engine",
    "source", "notes",
]  # fmt: skip
SHAREGPT = {"input_len": 231, "output_len": 195, "length_dist": "uniform", "length_spread": 0.9}
SHAREGPT_REQUESTS = {4.0: 1200, 8.0: 2400}  # benchmark_vllm_060/README.md: --num-prompts per --request-rate


def main() -> None:
    df = pd.read_csv(SRC)
    rate = pd.to_numeric(df["request_rate"], errors="coerce")
    keep = (
        df["metric_stat"].isin(["median", "mean", "p50", "p90", "p99"])
        & ((rate.notna() & (rate != float("inf"))) | df["concurrency"].notna())
        & (df["reported_ttft_ms"].notna() | df["measured_itl_ms"].notna())
        & df["precision"].isin(["bf16", "fp16", "fp8"])
        & df["tp"].notna()
    )
    rows = []
    for r in df[keep].to_dict("records"):
        out = {c: r.get(c) for c in COLUMNS if c in r}
        out["load_stat"] = r["metric_stat"]
        out["measured_ttft_ms"] = r["reported_ttft_ms"]
        out["chunked_prefill"] = "false"
        steps = re.search(r"--num-scheduler-steps (\d+)", str(r.get("notes")))
        out["scheduler_steps"] = int(steps.group(1)) if steps else None
        out["length_dist"] = "fixed"
        if pd.isna(r["input_len"]):  # ShareGPT
            out.update(SHAREGPT)
            out["requests"] = SHAREGPT_REQUESTS[float(r["request_rate"])]
            out["notes"] = (
                f"{r['notes']}; lengths: ShareGPT means 231/195 (bench_serving, Llama 3 tokenizer), uniform ±90 % assumed"
            )
        rows.append(out)
    table = pd.DataFrame(rows, columns=COLUMNS)
    for c in ("gpus", "tp", "pp", "ep", "input_len", "output_len", "requests", "concurrency", "scheduler_steps"):
        table[c] = table[c].astype("Int64")
    table.to_csv(OUT, index=False)
    print(f"wrote {len(table)} rows to {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
