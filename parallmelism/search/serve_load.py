"""One serving layout under load: its iteration table, its capacity, the simulated requests
(cost.serving_load) and their percentiles. Called by `show` (workload.request_rate) and
`plan serve` (plan.load_percentiles) and by the loaded-point validation."""

from __future__ import annotations

import numpy as np

from ..cost.inference import continuous_terms, spec_positions
from ..cost.iteration_table import iteration_times
from ..cost.layout import ServingLayout
from ..cost.shapes import layers_on_busiest_stage
from ..cost.serving_load import Requests, Scheduler, load_summary, poisson_arrivals_s, replica_share, simulate
from ..errors import UserError


def replica_capacity_rps(model, hw, wl, lay: ServingLayout, km, engine) -> float:
    """Requests/s one replica of the first layout row completes with all `batch` sequences in
    flight: the closed-loop steady state λ of cost.inference_iteration (above it the queue grows)."""
    state = continuous_terms(model, hw, wl, lay.rows(1), km, engine)[-1]
    return float(state["request_rate"][0])


def loaded_point(
    model,
    hw,
    wl,
    lay: ServingLayout,
    km,
    engine,
    reqs: Requests,
    *,
    rate_per_replica: float | None,
    seed: int,
    ttft_slo_ms: float | None,
    itl_slo_ms: float | None,
    concurrency: int | None = None,
    overlap: bool | None = None,
) -> dict[str, float]:
    """The load summary (cost.serving_load.load_summary) of one replica of the first row of `lay`
    (its batch = the most sequences in flight) serving `reqs`: open loop at rate_per_replica
    (Poisson, seeded) or the trace's send times, or a closed loop of `concurrency` clients; `overlap`:
    the engine ran with overlap scheduling (None: engine.overlap_scheduler, the version the engine
    file describes). Raises
    UserError when the open-loop rate reaches the replica's capacity (the queue would not settle).
    The iteration table and the capacity are the cost model's at the requests' mean lengths (a
    trace's, not workload.input_len/output_len): the decode context and the prompt's chunk attention."""
    if wl.batching != "continuous" or wl.spec_method != "none":
        raise UserError(
            "latency under load models continuous batching without speculative decoding; "
            f"workload.batching={wl.batching} workload.spec_method={wl.spec_method} is not simulated"
        )
    one = lay.rows(1)
    max_batch = int(one.batch[0])
    wl = wl.model_copy(
        update={
            "input_len": max(round(float(np.mean(reqs.input_len))), 1),
            "output_len": max(round(float(np.mean(reqs.output_len))), 1),
        }
    )
    cap = replica_capacity_rps(model, hw, wl, one, km, engine)
    n = len(reqs.input_len)
    arrivals = np.zeros(n)  # a closed loop sends as requests finish
    if reqs.arrival_s is not None:
        arrivals = reqs.arrival_s
    elif concurrency is None:
        if rate_per_replica is None:
            raise ValueError("an open loop without a trace needs rate_per_replica")
        if rate_per_replica >= cap:
            raise UserError(
                f"request rate {rate_per_replica:,.3g}/s per replica is at or above this layout's capacity of "
                f"{cap:,.3g} requests/s per replica (batch={max_batch} in flight); the queue grows without "
                "bound (unstable): lower workload.request_rate or add replicas"
            )
        arrivals = poisson_arrivals_s(rate_per_replica, n, seed)
    times = iteration_times(model, hw, wl, one, km, engine, max_batch, wl.prefill_chunk_tokens)
    sched = Scheduler(
        max_batch,
        wl.prefill_chunk_tokens,
        wl.chunked_prefill,
        wl.scheduler_steps,
        engine.overlap_scheduler if overlap is None else overlap,
        engine.batch_wait_timeout_iters,
        engine.batch_wait_max_tokens_ratio,
        spec_positions(wl) - 1,  # draft tokens per decoding sequence (0: refused above)
    )
    sim = simulate(
        arrivals,
        reqs.input_len,
        reqs.output_len,
        times,
        sched,
        engine.request_overhead_ms * 1e-3,
        concurrency=concurrency,
    )
    out = load_summary(
        sim,
        reqs.output_len,
        None if ttft_slo_ms is None else ttft_slo_ms * 1e-3,
        None if itl_slo_ms is None else itl_slo_ms * 1e-3,
    )
    out["replica_capacity_requests_per_s"] = cap
    return out


def plan_under_load(c, model, hw, wl, plan, qps: float, km, engine, reqs: Requests) -> tuple[dict[str, float], float]:
    """(load summary, requests/s per model replica) of the colocated plan's row `c`
    (search.plan.serve_plan_table): qps split evenly over its replicas x the dp replicas in each
    unit (an EP group across replicas counts its dp), each one's batch in flight at most."""
    cols = {k: np.asarray([int(c[k])]) for k in ("tp", "pp", "sp", "ep", "dp", "batch")}
    cols["layers_per_stage"] = layers_on_busiest_stage(model.layers, cols["pp"])  # as grid/inference.py
    lay = ServingLayout.of(cols)
    per_unit = max(int(c["replica_gpus"]) // int(cols["tp"][0] * cols["pp"][0] * cols["sp"][0]), 1)
    rate = qps / (int(c["replicas"]) * per_unit)
    reqs = replica_share(reqs, int(c["replicas"]) * per_unit)
    s = loaded_point(
        model,
        hw,
        wl,
        lay,
        km,
        engine,
        reqs,
        rate_per_replica=rate,
        seed=wl.load_seed,
        ttft_slo_ms=plan.ttft_ms,
        itl_slo_ms=plan.tpot_ms,
    )
    return s, rate


def colocated_under_load(c, run, qps: float, plans, reqs: Requests, km) -> list[str]:
    """plan.load_percentiles: the colocated plan's replica simulated at its share of qps
    (plan_under_load); its summary goes into `plans`' colocated row (LOAD_COLUMNS)
    and comes back as lines. reqs: the workload's requests (config/length_trace.py); km: the
    accelerator's kernel model (config/kernel_tables.py)."""
    from ..report.load_lines import LOAD_COLUMNS, load_lines

    if c is None:
        raise UserError("plan.load_percentiles=true needs a colocated plan; no layout meets the targets")
    wl = run.workload
    s, rate = plan_under_load(c, run.model, run.hardware, wl, run.plan, qps, km, run.serving_engine(), reqs)
    colocated = plans["deployment"] == "colocated"
    for k in LOAD_COLUMNS:
        plans.loc[colocated, k] = s[k]
    head = (
        f"colocated plan under load (cost/serving_load.py, seed {wl.load_seed}): {len(reqs.input_len):,} requests, "
        f"Poisson {rate:,.3g} requests/s per replica (qps {qps:g} over {int(c['replicas']):,} x {int(c['dp'])} "
        f"replicas), batch={int(c['batch'])} in flight, capacity {s['replica_capacity_requests_per_s']:,.3g} requests/s"
    )
    return load_lines(s, head, run.plan.ttft_ms, run.plan.tpot_ms)
