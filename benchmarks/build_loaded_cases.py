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
- moe_routing = power_law_1.01 on TensorRT-LLM issue 5929's rows (ROUTED_5929: a stated assumption,
  its reason appended to their notes), else blank (balanced).
- SemiAnalysis InferenceX rows (issue 870; benchmarks/benchmark_lib.sh run_benchmark_serving at the
  runs' date, 2026-03-05, commit 89ce6098e): vLLM's benchmark_serving.py with --dataset-name random
  --random-range-ratio 0.8 (.github/workflows/benchmark-tmpl.yml RANDOM_RANGE_RATIO) draws every input
  and output length uniformly from the integers [int(0.8 L), L] (utils/bench_serving/
  benchmark_serving.py sample_random_requests), --num-prompts CONC x 10 with --max-concurrency CONC
  and --request-rate inf (a closed loop of CONC clients, all sending at once after 2 x CONC warm-up
  requests), and benchmarks/single_node/dsr1_fp8_h200.sh serves SGLang with --chunked-prefill-size
  32768 --max-prefill-tokens 32768. So: input_len = output_len = 922 (the mean of [819, 1024]),
  length_dist uniform, length_spread 0.111 ([820, 1024]), requests = 10 x concurrency,
  prefill_chunk_tokens 32768.
- overlap_scheduler = false on SGLang rows before 0.4 (engine_version; the overlap schedule became the
  default in sgl-project/sglang PR 2067, 2024-11: the benchmark_vllm_060 rows ran 0.3.0), else blank
  (the engine file's engine.overlap_scheduler).
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
    "concurrency", "chunked_prefill", "prefill_chunk_tokens", "moe_routing", "scheduler_steps", "overlap_scheduler", "load_stat", "measured_ttft_ms", "measured_itl_ms", "engine",
    "source", "notes",
]  # fmt: skip
SHAREGPT = {"input_len": 231, "output_len": 195, "length_dist": "uniform", "length_spread": 0.9}
SHAREGPT_REQUESTS = {4.0: 1200, 8.0: 2400}  # benchmark_vllm_060/README.md: --num-prompts per --request-rate
ISSUE_5929 = "github.com/NVIDIA/TensorRT-LLM/issues/5929"
ROUTED_5929 = (
    "moe_routing=power_law_1.01: a stated assumption, not a fit. LLMPerf's prompts are real text (lines of "
    "Shakespeare's sonnets, ray-project/llmperf README), on which a trained router is not balanced (DeepSeek-V3 "
    "report sec. 3.4 duplicates its high-load experts for serving; vllm-project/vllm#28887, H200 DeepSeek-R1 "
    "1600/600: low-concurrency EP slowed 'due to expert imbalance'); the exponent 1.01 is aiconfigurator 0.12's "
    "default for its DeepSeek estimates on TensorRT-LLM (sdk/config.py workload_distribution power_law, "
    "models/deepseek.py alpha 1.01), under which it measured the fused-MoE op this engine's table holds"
)
INFERENCEX = "github.com/SemiAnalysisAI/InferenceX/"
RANGE_RATIO = 0.8  # InferenceX RANDOM_RANGE_RATIO: lengths uniform on the integers [int(0.8 L), L]
PROMPTS_PER_CLIENT = 10  # --num-prompts $(( CONC * 10 ))
INFERENCEX_CHUNK = 32768  # dsr1_fp8_h200.sh --chunked-prefill-size / --max-prefill-tokens


def benchmark_serving_lengths(length: int) -> dict:
    """The mean and half-width share of benchmark_serving's uniform lengths on [int(r L), L]: the
    mean rounded to a token, the spread to three digits (module docstring)."""
    lo = int(length * RANGE_RATIO)
    mean = round((lo + length) / 2)
    return {"mean": mean, "spread": round((length - lo) / 2 / mean, 3)}


def _version(text) -> tuple[int, ...]:
    """The leading numeric release of a version string ("0.3.0" -> (0, 3, 0), "0.21.0rc2" -> (0, 21, 0))."""
    return tuple(int(m) for m in re.findall(r"\d+", str(text).split("rc")[0])[:3])


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
        if ISSUE_5929 in str(r["source"]):
            out["moe_routing"] = "power_law_1.01"
            if ROUTED_5929 not in str(r["notes"]):  # the survey's notes may state it already
                out["notes"] = f"{r['notes']}; {ROUTED_5929}"
        if INFERENCEX in str(r["source"]) and pd.notna(r["concurrency"]):
            sin, sout = benchmark_serving_lengths(int(r["input_len"])), benchmark_serving_lengths(int(r["output_len"]))
            assert sin["spread"] == sout["spread"], "one length_spread column for both lengths"
            out.update(
                input_len=sin["mean"], output_len=sout["mean"], length_dist="uniform", length_spread=sin["spread"]
            )
            out["requests"] = PROMPTS_PER_CLIENT * int(r["concurrency"])
            out["prefill_chunk_tokens"] = INFERENCEX_CHUNK
            out["notes"] = (
                f"{r['notes']}; load as InferenceX ran it (benchmarks/benchmark_lib.sh run_benchmark_serving, 2026-03): "
                f"benchmark_serving --dataset-name random --random-range-ratio {RANGE_RATIO} (lengths uniform on "
                f"[{int(int(r['input_len']) * RANGE_RATIO)}, {int(r['input_len'])}]), --num-prompts "
                f"{PROMPTS_PER_CLIENT} x concurrency, --request-rate inf, all clients at once after a warm-up; SGLang "
                f"--chunked-prefill-size {INFERENCEX_CHUNK} (benchmarks/single_node/dsr1_fp8_h200.sh)"
            )
        if r["engine"] == "sglang" and _version(r["engine_version"]) < (0, 4):
            out["overlap_scheduler"] = "false"
            out["notes"] = (
                f"{r['notes']}; overlap_scheduler=false: SGLang {r['engine_version']} predates the overlap schedule"
            )
        if pd.isna(r["input_len"]):  # ShareGPT
            out.update(SHAREGPT)
            out["requests"] = SHAREGPT_REQUESTS[float(r["request_rate"])]
            out["notes"] = (
                f"{r['notes']}; lengths: ShareGPT means 231/195 (bench_serving, Llama 3 tokenizer), uniform ±90 % assumed"
            )
        rows.append(out)
    table = pd.DataFrame(rows, columns=COLUMNS)
    for c in (
        "gpus", "tp", "pp", "ep", "input_len", "output_len", "requests", "concurrency", "prefill_chunk_tokens",
        "scheduler_steps",
    ):  # fmt: skip
        table[c] = table[c].astype("Int64")
    table.to_csv(OUT, index=False)
    print(f"wrote {len(table)} rows to {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
