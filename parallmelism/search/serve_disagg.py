"""Disaggregated serving: separate prefill and decode pools (DistServe, Splitwise, Mooncake; NVIDIA
Dynamo, SGLang and vLLM P/D disaggregation), sized for a request rate and compared with colocated.

  (a "replica" is the unit of replication: one replica, or the whole EP group with its dp replicas
  when the experts are spread over replicas, DP attention + EP)
  prefill pool  replicas of one layout that only prefill; one prompt at a time, no decode tokens
                in its iterations: service time P = the layout's prefill_ms at batch 1 (its chunks,
                each with the iteration overhead). N_p = ceil(qps·P / load) replicas; each runs at
                utilization ρ = qps·P / N_p and a prompt waits W = ρ·P / (2(1−ρ)) (M/D/1, Poisson
                arrivals) before its prefill.
  KV transfer   the prompt's KV cache goes to a decode replica over the scale-out link, once per
                request: bytes = the cache of input_len tokens of the whole model (2·L·g·d·kv_bytes
                per token; MLA the latent L·(r_kv + p)·kv_bytes), spread over the prefill
                replica's tp·pp·sp GPUs, each sending its share through its own NIC at
                scale_out·eff.scale_out, + one NIC latency. Counted as exposed (no layer-wise
                overlap with the prefill): an upper bound on what Mooncake / NIXL pipelines hide.
  decode pool   replicas of one layout with `batch` sequences decoding and no prefill stalls:
                ITL = decode_step_ms / spec_tokens_per_step; a replica finishes
                batch / ((output_len − 1)·ITL) requests/s; N_d = ceil(qps / (that · load)).
  TTFT          the engine's request overhead + W + P + KV transfer (the first token comes from the prefill
                pool). Both are MEANS, like the colocated model's.
The TTFT limit constrains only the prefill layout and the ITL limit only the decode layout, so
each pool takes its cheapest layout meeting its own limit; the P:D split is N_p·g_p : N_d·g_d.
"""

from __future__ import annotations

import numpy as np

from ..cost.inference_memory import kv_cache_bytes_per_sequence
from .plan import ep_across_replicas
from ..words import counted, plural


def kv_transfer_ms(model, hw, wl, tp, pp, sp):
    """Milliseconds to ship one prompt's KV cache from a prefill replica (module docstring)."""
    total = float(
        kv_cache_bytes_per_sequence(
            model, wl, np.array([1]), model.layers, np.array([1]), wl.input_len * (1 - wl.prefix_cache_hit)
        )[0]
    )
    if hw.scale_out is None:
        return np.full(np.shape(tp), np.inf)
    gpus = np.asarray(tp, dtype=np.float64) * np.asarray(pp) * np.asarray(sp)
    bw = hw.scale_out.bandwidth_gbps * 1e9 * hw.efficiency.scale_out
    return (total / gpus / bw + hw.scale_out.latency_us * 1e-6) * 1e3


def disaggregated_plan(rows, model, hw, wl, engine, plan, qps: float, pools: tuple | None = None) -> dict | None:
    """Cheapest prefill pool + cheapest decode pool meeting the limits; None if either has none.
    pools=(prefill GPUs, decode GPUs): a fixed split; each pool takes the layouts whose unit divides
    its GPU count, as many units as fit in it."""
    df = rows[rows["fits"]] if "fits" in rows.columns else rows
    if len(df) == 0 or "decode_step_ms" not in df.columns:
        return None
    if hw.scale_out is None:  # the pools' replicas ship each prompt's KV cache over the scale-out link
        why = f"{hw.name} has no scale-out link to ship the KV cache from the prefill to the decode pool"
        return {"total_gpus": None, "prefill": None, "decode": None, "no_link": why}
    tied = ep_across_replicas(df)  # the EP group is the unit: its dp replicas run together
    g = np.where(tied, df["ngpus"], df["ngpus"] // df["dp"])
    lanes = np.where(tied, df["dp"], 1)  # prompts (prefill) / batches (decode) a unit serves at once
    # prefill pool: batch-1 rows (no decode tokens share their iterations)
    one = (df["batch"] == 1).to_numpy()
    pre = df[one].copy()
    pre["replica_gpus"], pre_lanes = g[one], lanes[one]
    P = pre["prefill_ms"].to_numpy() / 1e3
    pre["replicas"] = np.ceil(qps * P / (pre_lanes * plan.load)).astype(np.int64)
    if pools is not None:
        ok = pools[0] % pre["replica_gpus"].to_numpy() == 0
        pre, P, pre_lanes = pre[ok].copy(), P[ok], pre_lanes[ok]
        pre["replicas"] = pools[0] // pre["replica_gpus"].to_numpy()
        keep = qps * P / (pre["replicas"].to_numpy() * pre_lanes) < 1  # the pool keeps up with the load
        pre, P, pre_lanes = pre[keep].copy(), P[keep], pre_lanes[keep]
    rho = qps * P / (pre["replicas"].to_numpy() * pre_lanes)
    wait = rho * P / (2 * (1 - rho))
    pre["kv_transfer_ms"] = kv_transfer_ms(
        model, hw, wl, pre["tp"].to_numpy(), pre["pp"].to_numpy(), pre["sp"].to_numpy() if "sp" in pre else 1
    )
    pre["ttft_ms"] = engine.request_overhead_ms + (wait + P) * 1e3 + pre["kv_transfer_ms"]
    pre["pool_gpus"] = pre["replicas"] * pre["replica_gpus"]
    pre["pool_rps"] = pre["replicas"].to_numpy() * pre_lanes / P  # prompts/s the pool prefills at 100 % busy
    if plan.ttft_ms is not None:
        pre = pre[pre["ttft_ms"] <= plan.ttft_ms]
    # decode pool
    dec = df.copy()
    dec["replica_gpus"] = g
    spec = dec["spec_tokens_per_step"].to_numpy() if "spec_tokens_per_step" in dec else 1.0
    dec["itl_ms"] = dec["decode_step_ms"].to_numpy() / spec
    rps = lanes * dec["batch"].to_numpy() / (max(wl.output_len - 1, 1) * dec["itl_ms"].to_numpy() / 1e3)
    dec["replica_rps"] = rps
    dec["replicas"] = np.ceil(qps / (rps * plan.load)).astype(np.int64)
    if pools is not None:
        fits_pool = pools[1] % dec["replica_gpus"].to_numpy() == 0
        dec["replicas"] = pools[1] // dec["replica_gpus"].to_numpy()
        dec = dec[fits_pool & (dec["replicas"].to_numpy() * rps >= qps)].copy()
    dec["pool_gpus"] = dec["replicas"] * dec["replica_gpus"]
    dec["pool_rps"] = dec["replicas"] * dec["replica_rps"]  # requests/s the pool finishes at 100 % busy
    if plan.tpot_ms is not None:
        dec = dec[dec["itl_ms"] <= plan.tpot_ms]
    if len(pre) == 0 or len(dec) == 0:
        return {"prefill": None if len(pre) == 0 else pre, "decode": None if len(dec) == 0 else dec}
    p = pre.sort_values(["pool_gpus", "ttft_ms"], kind="stable").iloc[0]
    d = dec.sort_values(["pool_gpus", "itl_ms"], kind="stable").iloc[0]
    total = int(p["pool_gpus"] + d["pool_gpus"])
    usd_h = total * hw.cost_per_gpu_hour_usd
    return {
        "prefill": p,
        "decode": d,
        "total_gpus": total,
        "usd_per_hour": usd_h,
        "usd_per_million_output_tokens": usd_h / (qps * wl.output_len * 3600.0) * 1e6,
        "ttft_ms": float(p["ttft_ms"]),
        "itl_ms": float(d["itl_ms"]),
    }


def pool_bindings(rows, model, hw, wl, engine, plan, qps: float, dis: dict) -> tuple[str, str]:
    """What sets each pool's size, in words: its latency limit when the cheapest pool without
    that limit has fewer GPUs, else the request rate; a fixed split (prefill_gpus=, decode_gpus=)
    is set by the user."""
    p, d = dis["prefill"], dis["decode"]
    at_p = f"{int(p['replicas']):,} x {counted(int(p['replica_gpus']), 'GPU')}"
    at_d = f"{int(d['replicas']):,} x {counted(int(d['replica_gpus']), 'GPU')}"
    if plan.prefill_gpus and plan.decode_gpus:
        return (
            f"prefill_gpus={plan.prefill_gpus} fixes it at {at_p}",
            f"decode_gpus={plan.decode_gpus} fixes it at {at_d}",
        )
    free = disaggregated_plan(
        rows, model, hw, wl, engine, plan.model_copy(update={"ttft_ms": None, "tpot_ms": None}), qps
    )
    rate = f"the request rate ({qps:g} requests/s) binds"

    def binds(limit_ms, label: str, pool: str, needed) -> str:
        """The pool's latency limit binds when the pool without it would need fewer GPUs."""
        lower = free.get(pool) if free else None
        if limit_ms is not None and lower is not None and lower["pool_gpus"] < needed["pool_gpus"]:
            return f"{label} {limit_ms:g} ms binds"
        return rate

    pre = binds(plan.ttft_ms, "TTFT", "prefill", p)
    dec = binds(plan.tpot_ms, "ITL", "decode", d)
    return f"{pre} at {at_p}", f"{dec} at {at_d}"


def disaggregated_lines(dis, colocated_gpus: int | None, plan) -> list[str]:
    """Summary lines comparing the disaggregated plan with the colocated one."""
    if dis is None:
        return []
    if dis.get("no_link"):  # never an inf TTFT: the plan cannot be priced without the link
        return [f"- disaggregated prefill/decode: not planned, {dis['no_link']}."]
    if dis.get("total_gpus") is None:
        missing = "prefill pool (TTFT)" if dis["prefill"] is None else "decode pool (ITL)"
        return [f"- disaggregated prefill/decode: no layout meets the limit of the {missing}."]

    def lay(r):
        return ", ".join(f"{k} {int(r[k])}" for k in ("tp", "pp", "sp", "ep") if k in r)

    p, d = dis["prefill"], dis["decode"]
    lines = [
        f"- disaggregated prefill/decode: {int(p['replicas'])} x {counted(int(p['replica_gpus']), 'prefill GPU')} "
        f"({lay(p)}) + {int(d['replicas'])} x {counted(int(d['replica_gpus']), 'decode GPU')} ({lay(d)}, batch "
        f"{int(d['batch'])}) = {counted(dis['total_gpus'], 'GPU')}, P:D = {int(p['pool_gpus'])}:{int(d['pool_gpus'])}; "
        f"TTFT {dis['ttft_ms']:.1f} ms (KV transfer {p['kv_transfer_ms']:.2f} ms), ITL {dis['itl_ms']:.2f} ms, "
        f"${dis['usd_per_million_output_tokens']:.3f} per million output tokens"
    ]
    if colocated_gpus:
        diff = dis["total_gpus"] - colocated_gpus
        verdict = "fewer" if diff < 0 else "more" if diff > 0 else "as many"
        lines.append(
            f"- disaggregated vs colocated: {abs(diff):,} {verdict} {plural(abs(diff), 'GPU')} than the colocated plan's {colocated_gpus:,}"
            if diff
            else f"- disaggregated vs colocated: as many GPUs ({colocated_gpus:,})."
        )
    return lines


def fixed_split_plan(rows, model, hw, wl, engine, plan, qps: float) -> dict:
    """The disaggregated plan on exactly plan.prefill_gpus : plan.decode_gpus GPUs, or one sentence
    (UserError) saying which pool cannot hold a layout, keep up with the load or meet its limit."""
    from ..errors import UserError

    if not (plan.prefill_gpus and plan.decode_gpus):
        raise UserError("a fixed P:D split needs both prefill_gpus= and decode_gpus=")
    fit = rows[rows["fits"]] if "fits" in rows.columns else rows
    units = np.where(ep_across_replicas(fit), fit["ngpus"], fit["ngpus"] // fit["dp"]) if len(fit) else np.array([])
    for name, n in (("prefill", plan.prefill_gpus), ("decode", plan.decode_gpus)):
        if len(units) == 0 or not (n % units == 0).any():
            smallest = int(units.min()) if len(units) else None
            raise UserError(
                f"the {name} pool of {counted(n, 'GPU')} holds no serving layout of {model.name} that fits in "
                f"memory"
                + (
                    f" (the smallest fitting unit has {counted(smallest, 'GPU')})"
                    if smallest
                    else " (none fits at these GPU counts)"
                )
            )
    dis = disaggregated_plan(rows, model, hw, wl, engine, plan, qps, pools=(plan.prefill_gpus, plan.decode_gpus))
    if dis is not None and dis.get("no_link"):
        raise UserError(f"a P:D split (prefill_gpus=, decode_gpus=) cannot be planned: {dis['no_link']}")
    if dis is None or dis.get("total_gpus") is None:
        missing = "prefill" if dis is None or dis["prefill"] is None else "decode"
        limit = "TTFT" if missing == "prefill" else "ITL"
        n = plan.prefill_gpus if missing == "prefill" else plan.decode_gpus
        raise UserError(
            f"the {missing} pool of {counted(n, 'GPU')} cannot serve {qps:g} requests/s within the {limit} limit "
            f"with any layout; give it more GPUs"
        )
    return dis
