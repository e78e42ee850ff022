"""Case kind `loaded`: serving latency percentiles under load (issue 33 item 3), predicted by the
request-level simulation (cost/serving_load.py via search/serve_load.py).

A row is a published loaded point: a statistic (`load_stat`: p50, p90, p99 or mean, over requests)
of TTFT (`measured_ttft_ms`) and per-request ITL (`measured_itl_ms`, the TPOT: the request's mean
gap after its first token) for one pinned serving layout under one load. The layout, model,
precisions and chunked_prefill columns mean what they mean for the `inference` kind
(validate/inference_cases.py: one rule each). The load:
- request_rate: open loop, Poisson requests/s over the deployment (split over its dp replicas);
  max_batch: the engine's limit of sequences in flight per replica (blank: 256, vLLM's max_num_seqs);
- concurrency (request_rate blank): a closed loop of that many clients over the deployment
  (bench_serving --max-concurrency, LLMPerf concurrent requests), ceil(concurrency/dp) per replica,
  all sending their first request at once;
- input_len, output_len: the lengths (fixed), or the means of `length_dist=uniform` lengths
  within ±length_spread (a dataset whose length distribution is not published, ShareGPT);
- requests: how many the source sent (blank: 1,000), simulated with seed 0;
- overlap_scheduler (optional): true/false where the engine version that ran differs from the
  engine file's engine.overlap_scheduler (blank: the engine file's), with the reason in the notes.
"""

from __future__ import annotations

import numpy as np

from .cases import CaseKind, as_int, get, overlap_of, result_row
from .serving_run import inference_run_of

STATS = {"p50": "p50", "median": "p50", "p90": "p90", "p99": "p99", "mean": "mean"}
QUANTITIES = {"ttft": "measured_ttft_ms", "itl": "measured_itl_ms"}
REQUIRED = ["case", "load_stat", "input_len", "output_len", "measured_ttft_ms", "measured_itl_ms"]
DEFAULT_REQUESTS = 1000
DEFAULT_MAX_BATCH = 256  # vLLM's max_num_seqs default


def loaded_prediction(row, ctx) -> dict:
    """The load summary (search.serve_load.loaded_point) of one case row."""
    from ..config.kernel_tables import serving_kernel_model
    from ..cost.layout import ServingLayout
    from ..errors import UserError
    from ..cost.serving_load import drawn_requests
    from ..search.serve_load import loaded_point
    from .cases import evaluate_one

    rate = get(row, "request_rate")
    closed = rate is None
    if closed and get(row, "concurrency") is None:
        raise UserError(f"case {row.get('case')!r}: a loaded point needs request_rate or concurrency")
    layout_row = dict(row)
    if not closed:  # the pinned batch is the engine's in-flight limit, on every replica
        tp, pp, sp = (as_int(row, k, 1) for k in ("tp", "pp", "sp"))
        replicas = max(as_int(row, "gpus", tp * pp * sp) // (tp * pp * sp), 1)
        layout_row["concurrency"] = as_int(row, "max_batch", DEFAULT_MAX_BATCH) * replicas
    run = inference_run_of(layout_row, *ctx)
    spread = get(row, "length_spread")
    wl = run.workload.model_copy(
        update={
            "length_dist": str(get(row, "length_dist", "fixed")).lower(),
            **({"length_spread": float(spread)} if spread is not None else {}),
        }
    )
    pred = evaluate_one(run.model_copy(update={"workload": wl}))
    cols = {k: [pred[k]] for k in ("tp", "pp", "sp", "ep", "dp", "batch", "layers_per_stage")}
    lay = ServingLayout.of({k: np.asarray(v) for k, v in cols.items()})
    dp = int(pred["dp"])
    n = as_int(row, "requests", DEFAULT_REQUESTS)
    reqs = drawn_requests(wl, n, 0)
    return loaded_point(
        run.model,
        run.hardware,
        wl,
        lay,
        serving_kernel_model(run.hardware, run.serving_engine()),
        run.serving_engine(),
        reqs,
        rate_per_replica=None if closed else float(rate) / dp,
        seed=0,
        ttft_slo_ms=None,
        itl_slo_ms=None,
        concurrency=-(-as_int(row, "concurrency") // dp) if closed else None,
        overlap=overlap_of(row),
    )


def _loaded_rows(df, ctx):
    from ..errors import UserError

    rows = []
    for row in df.to_dict("records"):
        stat = str(get(row, "load_stat", "")).lower()
        if stat not in STATS:
            raise UserError(f"case {row.get('case')!r}: load_stat={stat!r} is not one of {', '.join(STATS)}")
        measured = {q: get(row, col) for q, col in QUANTITIES.items()}
        if all(v is None for v in measured.values()):
            continue
        s = loaded_prediction(row, ctx)
        for q, value in measured.items():
            if value is not None:
                key = f"{q}_{STATS[stat]}_ms"
                rows.append(result_row(row, key, "ms", value, s[key]))
    return rows


KIND = CaseKind(REQUIRED, _loaded_rows, list(QUANTITIES.values()), blank_ok=True)
