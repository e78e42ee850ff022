"""Capacity plans from the fastest layouts: how many GPUs, how long, how much energy and money.

Training (one row per GPU count, its fastest layout that fits):
  tokens_per_s   = global_batch · seq_len / time_step_s
  days           = tokens / (tokens_per_s · utilization) / 86400
                   (utilization = goodput: failures, restarts, checkpoints take the rest)
  gpu_hours      = gpus · days · 24                          (billed wall-clock, idle time included)
  energy_mwh     = gpus · tdp_w · days · 24 · pue / 1e6       (GPU board power at TDP: an upper bound
                                                               for the GPUs; hosts, network and cooling
                                                               enter only through PUE)
  cost_usd       = gpu_hours · cost_per_gpu_hour_usd
Serving (one row per layout meeting the TTFT/TPOT limits; `batch` sequences in flight per replica):
  request_latency_s  = e2e_latency_ms / 1000   (the cost model's: TTFT + (output_len − 1)·TPOT, less
                                                the first token's send delay, cost/first_token.py)
  replica_rps        = batch / request_latency_s   (`batch` sequences in flight, each finishing a
                                                   request per request latency; under continuous
                                                   batching TTFT and TPOT already carry the
                                                   prefill interference of that closed loop,
                                                   cost.inference_iteration.closed_loop)
  replicas           = ceil(qps / (replica_rps · load))      (load = target busy fraction)
  total_gpus         = replicas · replica_gpus,  replica_gpus = ngpus / dp (experts spread over
                                                   replicas: the whole EP group, ngpus, serving
                                                   dp · batch sequences)
  usd_per_million_output_tokens = total_gpus · cost_per_gpu_hour_usd / (qps · output_len · 3600) · 1e6
"""

from __future__ import annotations

import numpy as np

from ..errors import UserError
from ..schema import LAYOUT_AXES
from ..words import counted

_MB = LAYOUT_AXES.index("micro_batch") + 1
TRAIN_LAYOUT = [*LAYOUT_AXES[:_MB], "num_micro_batches", *LAYOUT_AXES[_MB:]]
TRAIN_PLAN_COLUMNS = [
    "model",
    "hardware",
    "ngpus",
    *TRAIN_LAYOUT,
    "seq_len",
    "global_batch",
    "time_step_s",
    "tokens_per_s",
    "mfu",
    "mem_total_gib",
    "tokens",
    "steps",
    "days",
    "gpu_hours",
    "energy_mwh",
    "cost_usd",
    "utilization",
    "pue",
    "tdp_w",
    "cost_per_gpu_hour_usd",
    "meets_target",
    "chosen",
]
SERVE_LAYOUT = ["tp", "pp", "sp", "ep", "dp", "batch"]
SERVE_PLAN_COLUMNS = [
    "model",
    "hardware",
    "replica_gpus",
    *SERVE_LAYOUT,
    "input_len",
    "output_len",
    "ttft_ms",
    "tpot_ms",
    "request_latency_s",
    "replica_rps",
    "replicas",
    "total_gpus",
    "qps",
    "load",
    "cost_per_gpu_hour_usd",
    "usd_per_hour",
    "usd_per_million_output_tokens",
    "usd_per_million_tokens",
    "chosen",
]


def _days(days: float) -> str:
    return f"{days:.1f}" if days < 1e6 else f"{days:.3g}"


def _needs(df, cols, what):
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise UserError(
            f"{what} needs the column {missing[0]!r}, which the cost model does not produce yet "
            f"({'needs the time model' if what.startswith('plan train') else 'needs the inference latency model'})"
        )


def train_plan_table(best, tokens: float, hw, plan):
    """One row per GPU count (its fastest fitting layout) with days, GPU-hours, energy and cost."""
    _needs(best, ["time_step_s"], "plan train")
    df = best.copy()
    df["tokens"] = float(tokens)
    tokens_per_step = df["global_batch"].astype(float) * df["seq_len"].astype(float)
    df["tokens_per_s"] = tokens_per_step / df["time_step_s"]
    df["steps"] = tokens / tokens_per_step
    df["days"] = tokens / (df["tokens_per_s"] * plan.utilization) / 86400.0
    df["gpu_hours"] = df["ngpus"] * df["days"] * 24.0
    df["energy_mwh"] = df["ngpus"] * hw.tdp_w * df["days"] * 24.0 * plan.pue / 1e6
    df["cost_usd"] = df["gpu_hours"] * hw.cost_per_gpu_hour_usd
    df["utilization"], df["pue"] = plan.utilization, plan.pue
    df["tdp_w"], df["cost_per_gpu_hour_usd"] = hw.tdp_w, hw.cost_per_gpu_hour_usd
    if plan.gpus is not None:
        meets = df["ngpus"] == plan.gpus
    elif plan.days is not None:
        meets = df["days"] <= plan.days
    elif plan.budget_usd is not None:
        meets = df["cost_usd"] <= plan.budget_usd
    else:
        meets = np.ones(len(df), dtype=bool)
    df["meets_target"] = np.asarray(meets, dtype=bool)
    df = df.sort_values("ngpus", kind="stable").reset_index(drop=True)
    df["chosen"] = False
    if len(df) and df["meets_target"].any():
        ok = df[df["meets_target"]]
        if plan.days is not None:
            pick = ok.sort_values(["ngpus", "cost_usd"], kind="stable").index[0]
        elif plan.budget_usd is not None:
            pick = ok.sort_values(["days", "cost_usd"], kind="stable").index[0]
        else:
            pick = ok.sort_values(["cost_usd", "days"], kind="stable").index[0]
        df.loc[pick, "chosen"] = True
    cols = [c for c in TRAIN_PLAN_COLUMNS if c in df.columns]
    return df[cols]


def train_plan_failure(table, plan) -> str | None:
    """One sentence when no GPU count meets the target (None when one does)."""
    if len(table) == 0:
        return "no layout fits in memory at any of the GPU counts considered; add larger counts with plan.ngpus=[...]"
    if table["chosen"].any():
        return None
    fastest = table.loc[table["days"].idxmin()]
    cheapest = table.loc[table["cost_usd"].idxmin()]
    if plan.gpus is not None:
        return (
            f"plan.gpus={plan.gpus}: no layout fits on {counted(plan.gpus, 'GPU')} (or that count was not considered); "
            f"counts with a fitting layout: {', '.join(map(str, table['ngpus']))}"
        )
    if plan.days is not None:
        return (
            f"plan.days={plan.days:g}: no GPU count considered finishes in time; the fastest takes "
            f"{_days(fastest['days'])} days on {counted(int(fastest['ngpus']), 'GPU')} (add counts with plan.ngpus=[...])"
        )
    return (
        f"plan.budget_usd={plan.budget_usd:,.0f}: every plan costs more; the cheapest is "
        f"${cheapest['cost_usd']:,.0f} on {counted(int(cheapest['ngpus']), 'GPU')}"
    )


def ep_across_replicas(df):
    """Rows whose experts are spread over replicas (ep > 1 not dividing tp, grid.inference)."""
    if "ep" not in df.columns:
        return np.zeros(len(df), dtype=bool)
    ep, tp = df["ep"].to_numpy(), df["tp"].to_numpy()
    return (ep > 1) & (tp % ep != 0)


def plan_qps(plan, wl) -> float:
    """Requests/s the plan serves: plan.qps, or plan.tokens_per_s output tokens/s over output_len."""
    if (plan.qps is None) == (plan.tokens_per_s is None):
        raise UserError("plan serve needs exactly one of qps= (requests/s) and tokens_per_s= (output tokens/s)")
    return plan.qps if plan.qps is not None else plan.tokens_per_s / wl.output_len


def _meets(df, plan, ttft=True, tpot=True):
    ok = np.ones(len(df), dtype=bool)
    if ttft and plan.ttft_ms is not None:
        ok &= df["ttft_ms"].to_numpy() <= plan.ttft_ms
    if tpot and plan.tpot_ms is not None:
        ok &= df["tpot_ms"].to_numpy() <= plan.tpot_ms
    return ok


def serve_plan_table(rows, wl, hw, plan, limits: bool = True):
    """Every layout that fits and meets the latency limits, sized to the request rate; cheapest first.
    limits=False sizes every fitting layout (to find which limit binds)."""
    _needs(rows, ["ttft_ms", "tpot_ms", "e2e_latency_ms", "batch", "dp"], "plan serve")
    qps = plan_qps(plan, wl)
    df = rows.copy()
    if "fits" in df.columns:
        df = df[df["fits"]]
    if limits:
        df = df[_meets(df, plan)]
    df = df.copy()
    # the unit of replication: one replica, or the whole EP group when experts are spread over
    # replicas (DP attention + EP: the dp replicas step together through the all-to-all)
    tied = ep_across_replicas(df)
    df["replica_gpus"] = np.where(tied, df["ngpus"], df["ngpus"] // df["dp"])
    df["input_len"], df["output_len"] = wl.input_len, wl.output_len
    df["request_latency_s"] = df["e2e_latency_ms"] / 1000.0
    df["replica_rps"] = df["batch"] * np.where(tied, df["dp"], 1) / df["request_latency_s"]
    df["qps"], df["load"] = qps, plan.load
    df["replicas"] = np.ceil(qps / (df["replica_rps"] * plan.load)).astype(np.int64)
    df["total_gpus"] = df["replicas"] * df["replica_gpus"]
    df["cost_per_gpu_hour_usd"] = hw.cost_per_gpu_hour_usd
    df["usd_per_hour"] = df["total_gpus"] * hw.cost_per_gpu_hour_usd
    df["usd_per_million_output_tokens"] = df["usd_per_hour"] / (qps * wl.output_len * 3600.0) * 1e6
    df["usd_per_million_tokens"] = df["usd_per_hour"] / (qps * (wl.input_len + wl.output_len) * 3600.0) * 1e6
    df = df.sort_values(["total_gpus", "request_latency_s"], kind="stable").reset_index(drop=True)
    # one row per replica layout (dp only repeats the replica)
    key = [c for c in ("replica_gpus", "tp", "pp", "sp", "ep", "batch") if c in df.columns]
    df = df.drop_duplicates(key).reset_index(drop=True)
    df["chosen"] = False
    if len(df):
        df.loc[0, "chosen"] = True
    return df[[c for c in SERVE_PLAN_COLUMNS if c in df.columns]]


def serve_binding_counts(rows, wl, hw, plan) -> dict | None:
    """Fewest GPUs of a colocated plan meeting both limits ("both"), none ("free": the request rate
    alone), TTFT only ("ttft") and TPOT/ITL only ("tpot"); None when no layout fits."""
    every = serve_plan_table(rows, wl, hw, plan, limits=False)
    if len(every) == 0:
        return None

    def fewest(ttft, tpot):
        ok = _meets(every, plan, ttft, tpot)
        return int(every.loc[ok, "total_gpus"].min()) if ok.any() else None

    return {
        "both": fewest(True, True),
        "free": fewest(False, False),
        "ttft": fewest(True, False),
        "tpot": fewest(False, True),
    }


def serve_binding(rows, wl, hw, plan, counts: dict | None = None) -> str:
    """Which service-level target sets the fleet size: compare the fewest GPUs meeting both limits
    with the fewest meeting each alone and with none (the request rate alone)."""
    counts = serve_binding_counts(rows, wl, hw, plan) if counts is None else counts
    if counts is None:
        return ""
    both, free, only_ttft, only_tpot = counts["both"], counts["free"], counts["ttft"], counts["tpot"]
    rate = f"{plan_qps(plan, wl):g} requests/s"
    if both is None:
        return ""
    if both == free:
        return (
            f"Binding constraint: the request rate ({rate}); the latency limits cost nothing extra "
            f"(the cheapest fitting layout already meets them, {counted(both, 'GPU')})."
        )
    named = [n for n, g in (("TTFT", only_ttft), ("TPOT/ITL", only_tpot)) if g == both and g != free]
    which = " and ".join(named) if named else "TTFT and TPOT/ITL together"
    return (
        f"Binding constraint: {which}; without the latency limits {counted(free, 'GPU')} would serve {rate} "
        f"(with TTFT only: {only_ttft}, with TPOT only: {only_tpot}, with both: {both})."
    )


def serve_plan_failure(rows, model_name, hw_name, plan) -> str:
    """One sentence when no fitting layout meets the limits: how close the best one came."""
    df = rows[rows["fits"]] if "fits" in rows.columns else rows
    limits = " and ".join(
        x
        for x in (
            f"ttft_ms={plan.ttft_ms:g}" if plan.ttft_ms else "",
            f"tpot_ms={plan.tpot_ms:g}" if plan.tpot_ms else "",
        )
        if x
    )
    if len(df) == 0:
        return (
            f"no serving layout of {model_name} on {hw_name} fits in memory; add GPUs (grid.ngpus) or use "
            "smaller weights (weight_dtype=fp8)"
        )
    ratio = np.zeros(len(df))
    if plan.ttft_ms:
        ratio = np.maximum(ratio, df["ttft_ms"].to_numpy() / plan.ttft_ms)
    if plan.tpot_ms:
        ratio = np.maximum(ratio, df["tpot_ms"].to_numpy() / plan.tpot_ms)
    c = df.iloc[int(np.argmin(ratio))]
    layout = ", ".join(f"{k} {int(c[k])}" for k in ("tp", "pp", "sp", "ep", "batch") if k in c)
    return (
        f"no serving layout of {model_name} on {hw_name} meets {limits}: the closest ({layout} on "
        f"{counted(int(c['ngpus'] // c['dp']), 'GPU')} per replica) reaches TTFT {c['ttft_ms']:.1f} ms and TPOT "
        f"{c['tpot_ms']:.2f} ms, {float(ratio.min()):.2f}x the limit it misses most; relax a limit or add GPUs (grid.ngpus)"
    )
