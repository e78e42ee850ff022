"""Case kind `inference`: files in the format of `shared/reference/inference_measured.csv`.

Each row predicts `ttft_ms` (from `measured_ttft_ms`) and `itl_ms` (inter-token latency, our
`tpot_ms`, from `measured_itl_ms`) with the serving cost model; a blank measurement is skipped. Two
optional columns, where a source publishes them:
- measured_output_tok_s_per_gpu: output tokens per second per GPU at the row's fixed concurrency
  (closed loop, or a static batch of `concurrency` sequences with batching=static), our
  `throughput_tokens_per_s_per_gpu` of the request phase: dp·b·output_len / e2e over the row's GPUs
  (cost/inference.py), quantity `output_tok_s_per_gpu` (tok/s). Not a max-throughput figure whose
  batch the engine chose: a row states the concurrency that ran.
- measured_context_ms: the context pass of the row's batch without a server (TensorRT-LLM's
  gptSessionBenchmark first-token latency: one output token, no HTTP, no request overhead), our
  `prefill_ms`, quantity `context_ms`.
- measured_batch_ms: a static batch of `concurrency` prompts run to its last token without a server
  (vLLM's benchmark_latency: LLM.generate on the batch), prefill_ms + (output_len − 1)·tpot_ms, the
  static e2e less the request overhead no offline run pays (offline_batch_ms), quantity `batch_ms`;
  a row that is not batching=static is one sentence.
How a row becomes a configuration (one rule each, never per case):
- model, accelerator: as for memory cases (`validate/cases.py`); blank accelerator = H100 SXM.
- engine (optional column): the serving engine file (conf/engine/: trtllm, vllm, sglang) whose
  overheads the row runs with; blank = the default engine (conf/config.yaml: trtllm).
- precision: the weight dtype (bf16, fp16, fp8, int8, int4) and, for bf16/fp16/fp8, the matmul
  dtype; int8/int4 are weight-only quantization (bf16 matmuls).
- kv_cache_precision: the KV-cache dtype; blank = bf16.
- gpus: ngpus (blank = tp·pp·sp); tp, pp, ep, sp: blank = 1; dp = gpus / (tp·pp·sp).
- concurrency: concurrent sequences over the deployment; batch per replica = ceil(concurrency / dp)
  (dp = 1 in every row but DP-attention ones); blank = 1.
- spec_method, spec_tokens, spec_acceptance (optional): speculative decoding as the workload fields
  (blank = none).
- disaggregated (optional): true when prefill runs on another pool (the row's layout is the decode
  pool): the predicted ITL is the decode iteration over the expected tokens per step, without prefill
  stalls; TTFT of such rows is not predicted (it depends on the prefill pool and the load).
- moe_dispatcher, eplb_redundant_experts (optional columns): the workload fields (blank = alltoall, 0);
  a row's layout is what ran, so a tp larger than the scale-up domain is kept (grid.cross_node_tp).
- moe_routing (optional column): the workload field (blank = balanced); a row sets it only with the
  reason in its notes (the source's prompts and the routing assumed on them).
- batching (optional column): blank = continuous (every serving stack in the file batches in
  flight).
- scheduler_steps (optional column): decode iterations per scheduler call (vLLM 0.6
  --num-scheduler-steps); blank = 1.
- prefill_chunk_tokens (optional column): the iteration's token budget the engine ran with (vLLM
  --max-num-batched-tokens, SGLang --chunked-prefill-size, TensorRT-LLM max_num_tokens); blank = the
  workload default.
- overlap_scheduler (optional column): true/false where the engine version that ran differs from
  the engine file's engine.overlap_scheduler (cost/first_token.py: TensorRT-LLM v0.14's C++
  executor, SGLang before 0.4), with the reason in the notes; blank = the engine file's.
- batch_wait_timeout_iters, batch_wait_max_tokens_ratio (optional columns): TensorRT-LLM's batch
  waiting where the run's script sets it (cost/batch_wait.py; InferenceX's Llama-70B 1k/1k below TP8:
  20 and 0.9), the engine fields for that row (bounds checked: a bad value is one sentence); blank =
  the engine file's (0: no holding).
- chunked_prefill (optional column): blank = true (prefill chunks share the decode iterations);
  false for stacks run with their default of separate context passes (TensorRT-LLM / NIM with
  enable_chunked_context off, vLLM V0): the decoding sequences wait for each prompt's pass.
- requests, random_range_ratio (optional columns): the closed-loop benchmark a row ran, where its
  source states it: `requests` sent in all by `concurrency` clients that start at once and each send
  their next request when the last one finishes (bench_serving --num-prompts / --max-concurrency),
  each request's lengths uniform integers in [r·L, L] for the row's input_len / output_len L
  (bench_serving --random-range-ratio r as InferenceX's pinned copy draws them; blank = 1, fixed).
TTFT: at concurrency 1 the steady state's (a lone request: prefill + request overhead). Above it
a mean TTFT is the start-up burst (every client's first prompt at once) plus each later prompt's wait
behind the iterations in flight, which only the request-level simulation follows: a row with
`requests` predicts the mean TTFT of that simulation of its benchmark (closed_loop_ttft_ms; the
`loaded` kind's machinery, validate/loaded_cases.py); the case files leave TTFT blank above
concurrency 1 where the benchmark is not stated. ITL stays the steady state's at the row's lengths.
The shipped copy is `parallmelism/cases/inference_measured.csv`.
"""

from __future__ import annotations

from .cases import CaseKind, as_int, evaluate_one, get, result_row
from .serving_run import inference_run_of

QUANTITIES = {
    "ttft_ms": "measured_ttft_ms",
    "itl_ms": "measured_itl_ms",
    "output_tok_s_per_gpu": "measured_output_tok_s_per_gpu",
    "context_ms": "measured_context_ms",
    "batch_ms": "measured_batch_ms",
}
PREDICTED = {"ttft_ms": "ttft_ms", "itl_ms": "tpot_ms"}
# the optional quantities a row predicts only where it has their measured column (module docstring)
PREDICTED_WHERE_MEASURED = {"output_tok_s_per_gpu": "throughput_tokens_per_s_per_gpu", "context_ms": "prefill_ms"}
UNITS = {"ttft_ms": "ms", "itl_ms": "ms", "output_tok_s_per_gpu": "tok/s", "context_ms": "ms", "batch_ms": "ms"}
REQUIRED = ["case", "input_len", "output_len", "concurrency", "measured_ttft_ms", "measured_itl_ms"]


def closed_loop_ttft_ms(row, ctx) -> float:
    """Mean TTFT (ms) of the row's closed-loop benchmark (module docstring: `requests`,
    `random_range_ratio`) by the request-level simulation (validate/loaded_cases.loaded_prediction).
    Lengths uniform integers in [r·L, L] are the simulation's uniform lengths with mean L(1+r)/2 and
    half-width (1−r)/(1+r) of it (cost/serving_load.drawn_requests: [round((1−s)M), round((1+s)M)])."""
    from .loaded_cases import loaded_prediction

    r = float(get(row, "random_range_ratio", 1.0))
    if not 0 < r <= 1:
        from ..errors import UserError

        raise UserError(f"case {row.get('case')!r}: random_range_ratio={r:g} is not in (0, 1]")
    sim_row = {
        **row,
        **{k: max(round(as_int(row, k) * (1 + r) / 2), 1) for k in ("input_len", "output_len")},
        "length_dist": "uniform" if r < 1 else "fixed",
        "length_spread": (1 - r) / (1 + r),
        "load_stat": "mean",
    }
    return float(loaded_prediction(sim_row, ctx)["ttft_mean_ms"])


def simulated_ttft(row) -> bool:
    """Whether the row's TTFT is its closed-loop benchmark's simulated mean (module docstring)."""
    return (
        as_int(row, "concurrency", 1) > 1
        and get(row, "requests") is not None
        and get(row, "measured_ttft_ms") is not None
    )


def offline_batch_ms(row, pred) -> float:
    """A static batch's completion without a server (module docstring, measured_batch_ms): the static e2e of
    cost/inference.py (computed + (output_len − 1)·TPOT, computed = prefill + the engine's request overhead) less
    the request overhead, which an offline run (vLLM's benchmark_latency: LLM.generate, no HTTP) does not pay."""
    if str(get(row, "batching", "continuous")).lower() != "static":
        from ..errors import UserError

        raise UserError(
            f"case {row.get('case')!r}: measured_batch_ms is a static batch's completion: set batching=static"
        )
    return float(pred["prefill_ms"]) + (as_int(row, "output_len") - 1) * float(pred["tpot_ms"])


def predicted_quantities(row, pred, ctx) -> dict:
    """{quantity: predicted ms} of one case row from its evaluated serving row (rules above); `ctx`
    (validate's context) runs the closed-loop simulation of a row whose TTFT is simulated."""
    if str(get(row, "disaggregated", "false")).lower() == "true":
        # decode pool: no prefill iterations among its decode iterations; TTFT not predicted
        return {"itl_ms": float(pred["decode_step_ms"]) / float(pred["spec_tokens_per_step"])}
    out = {q: float(pred[col]) for q, col in PREDICTED.items()}
    out.update(
        {q: float(pred[col]) for q, col in PREDICTED_WHERE_MEASURED.items() if get(row, QUANTITIES[q]) is not None}
    )
    if get(row, "measured_batch_ms") is not None:
        out["batch_ms"] = offline_batch_ms(row, pred)
    if simulated_ttft(row):
        out["ttft_ms"] = closed_loop_ttft_ms(row, ctx)
    return out


def _inference_rows(df, ctx):
    rows = []
    for row in df.to_dict("records"):
        measured = {q: get(row, col) for q, col in QUANTITIES.items()}
        if all(v is None for v in measured.values()):
            continue
        predicted = predicted_quantities(row, evaluate_one(inference_run_of(row, *ctx)), ctx)
        for q, value in measured.items():
            if value is None or q not in predicted:
                continue
            rows.append(result_row(row, q, UNITS[q], value, predicted[q]))
    return rows


KIND = CaseKind(REQUIRED, _inference_rows, list(QUANTITIES.values()), blank_ok=True)
