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
  request_latency_s  = (ttft_ms + (output_len − 1) · tpot_ms) / 1000
  replica_rps        = batch / request_latency_s   (`batch` sequences in flight, each finishing a
                                                   request per request latency; under continuous
                                                   batching TTFT and TPOT already carry the
                                                   prefill interference of that closed loop,
                                                   cost.inference_iteration.closed_loop)
  replicas           = ceil(qps / (replica_rps · load))      (load = target busy fraction)
  total_gpus         = replicas · replica_gpus,  replica_gpus = ngpus / dp
  usd_per_million_output_tokens = total_gpus · cost_per_gpu_hour_usd / (qps · output_len · 3600) · 1e6
"""

from __future__ import annotations

import numpy as np

from ..errors import UserError

TRAIN_LAYOUT = ["tp", "pp", "cp", "ep", "dp", "vpp", "micro_batch", "num_micro_batches", "dp_sharding",
                "recompute", "sequence_parallel"]
TRAIN_PLAN_COLUMNS = ["model", "hardware", "gpus", *TRAIN_LAYOUT, "seq_len", "global_batch", "time_step_s",
                      "tokens_per_s", "mfu", "mem_total_gib", "tokens", "steps", "days", "gpu_hours", "energy_mwh",
                      "cost_usd", "utilization", "pue", "tdp_w", "cost_per_gpu_hour_usd", "meets_target", "chosen"]
SERVE_LAYOUT = ["tp", "pp", "sp", "ep", "dp", "batch"]
SERVE_PLAN_COLUMNS = ["model", "hardware", "replica_gpus", *SERVE_LAYOUT, "input_len", "output_len", "ttft_ms",
                      "tpot_ms", "request_latency_s", "replica_rps", "replicas", "total_gpus", "qps", "load",
                      "cost_per_gpu_hour_usd", "usd_per_hour", "usd_per_million_output_tokens",
                      "usd_per_million_tokens", "chosen"]


def _needs(df, cols, what):
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise UserError(f"{what} needs the column {missing[0]!r}, which the cost model does not produce yet "
                        f"({'needs the time model' if what.startswith('plan train') else 'needs the inference latency model'})")


def train_plan_table(best, tokens: float, hw, plan):
    """One row per GPU count (its fastest fitting layout) with days, GPU-hours, energy and cost."""
    _needs(best, ["time_step_s"], "plan train")
    df = best.copy()
    df["gpus"] = df["ngpus"]
    df["tokens"] = float(tokens)
    tokens_per_step = df["global_batch"].astype(float) * df["seq_len"].astype(float)
    df["tokens_per_s"] = tokens_per_step / df["time_step_s"]
    df["steps"] = tokens / tokens_per_step
    df["days"] = tokens / (df["tokens_per_s"] * plan.utilization) / 86400.0
    df["gpu_hours"] = df["gpus"] * df["days"] * 24.0
    df["energy_mwh"] = df["gpus"] * hw.tdp_w * df["days"] * 24.0 * plan.pue / 1e6
    df["cost_usd"] = df["gpu_hours"] * hw.cost_per_gpu_hour_usd
    df["utilization"], df["pue"] = plan.utilization, plan.pue
    df["tdp_w"], df["cost_per_gpu_hour_usd"] = hw.tdp_w, hw.cost_per_gpu_hour_usd
    if plan.gpus is not None:
        meets = df["gpus"] == plan.gpus
    elif plan.days is not None:
        meets = df["days"] <= plan.days
    elif plan.budget_usd is not None:
        meets = df["cost_usd"] <= plan.budget_usd
    else:
        meets = np.ones(len(df), dtype=bool)
    df["meets_target"] = np.asarray(meets, dtype=bool)
    df = df.sort_values("gpus", kind="stable").reset_index(drop=True)
    df["chosen"] = False
    if len(df) and df["meets_target"].any():
        ok = df[df["meets_target"]]
        if plan.days is not None:
            pick = ok.sort_values(["gpus", "cost_usd"], kind="stable").index[0]
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
        return (f"plan.gpus={plan.gpus}: no layout fits on {plan.gpus} GPUs (or that count was not considered); "
                f"counts with a fitting layout: {', '.join(map(str, table['gpus']))}")
    if plan.days is not None:
        return (f"plan.days={plan.days:g}: no GPU count considered finishes in time; the fastest takes "
                f"{fastest['days']:.1f} days on {int(fastest['gpus'])} GPUs (add counts with plan.ngpus=[...])")
    return (f"plan.budget_usd={plan.budget_usd:,.0f}: every plan costs more; the cheapest is "
            f"${cheapest['cost_usd']:,.0f} on {int(cheapest['gpus'])} GPUs")


def serve_plan_table(rows, wl, hw, plan):
    """Every layout that fits and meets the latency limits, sized to the request rate; cheapest first."""
    _needs(rows, ["ttft_ms", "tpot_ms", "batch", "dp"], "plan serve")
    df = rows.copy()
    if "fits" in df.columns:
        df = df[df["fits"]]
    if plan.ttft_ms is not None:
        df = df[df["ttft_ms"] <= plan.ttft_ms]
    if plan.tpot_ms is not None:
        df = df[df["tpot_ms"] <= plan.tpot_ms]
    df = df.copy()
    df["replica_gpus"] = df["ngpus"] // df["dp"]
    df["input_len"], df["output_len"] = wl.input_len, wl.output_len
    df["request_latency_s"] = (df["ttft_ms"] + (wl.output_len - 1) * df["tpot_ms"]) / 1000.0
    df["replica_rps"] = df["batch"] / df["request_latency_s"]
    df["qps"], df["load"] = plan.qps, plan.load
    df["replicas"] = np.ceil(plan.qps / (df["replica_rps"] * plan.load)).astype(np.int64)
    df["total_gpus"] = df["replicas"] * df["replica_gpus"]
    df["cost_per_gpu_hour_usd"] = hw.cost_per_gpu_hour_usd
    df["usd_per_hour"] = df["total_gpus"] * hw.cost_per_gpu_hour_usd
    df["usd_per_million_output_tokens"] = df["usd_per_hour"] / (plan.qps * wl.output_len * 3600.0) * 1e6
    df["usd_per_million_tokens"] = df["usd_per_hour"] / (plan.qps * (wl.input_len + wl.output_len) * 3600.0) * 1e6
    df = df.sort_values(["total_gpus", "request_latency_s"], kind="stable").reset_index(drop=True)
    # one row per replica layout (dp only repeats the replica)
    key = [c for c in ("replica_gpus", "tp", "pp", "sp", "ep", "batch") if c in df.columns]
    df = df.drop_duplicates(key).reset_index(drop=True)
    df["chosen"] = False
    if len(df):
        df.loc[0, "chosen"] = True
    return df[[c for c in SERVE_PLAN_COLUMNS if c in df.columns]]
