"""One serving recommendation: colocated or disaggregated prefill/decode, and what binds each.

Rule (`recommend`), over the plans that meet every target (TTFT, ITL, the request rate):
  1. fewest GPUs (one accelerator: also the lowest $ per token);
  2. on a tie, the more headroom on its tightest target, headroom per target being
       latency      1 − value / limit             (TTFT, ITL; only the limits given)
       rate         capacity · load / qps − 1     (capacity: requests/s the fleet, or its smaller
                                                   pool, serves at 100 % busy; 0 = exactly at the
                                                   planned busy fraction `load`)
  3. then colocated (one pool to run, no KV transfer to operate).
A deployment with no plan (no layout meets a limit, no scale-out link) is never picked; it is
reported with the reason. `recommend` is pure over `Deployment`s; `colocated_deployment` and
`disaggregated_deployment` build them from the plan rows of search/plan.py and search/serve_disagg.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from ..words import counted

COLOCATED, DISAGGREGATED = "colocated", "disaggregated"


@dataclass(frozen=True)
class Deployment:
    """A planned deployment: kind, GPUs (None: no plan meets every target), its pools in words,
    what binds its size (or why there is no plan), and the headroom per target."""

    kind: str
    gpus: int | None
    pools: str = ""  # e.g. "15 replicas x 4 GPUs" or "26 prefill + 12 decode GPUs"
    binding: str = ""  # e.g. "ITL 30 ms binds at 15 replicas x 4 GPUs"
    headroom: tuple[tuple[str, float], ...] = ()  # (target, fraction), e.g. (("ITL", 0.03),)

    def tightest(self) -> tuple[str, float]:
        """The target with the least headroom (name, fraction)."""
        return min(self.headroom, key=lambda h: h[1]) if self.headroom else ("", float("inf"))


@dataclass(frozen=True)
class Recommendation:
    pick: Deployment | None
    line: str  # "Recommended: ..." (one line)


def _name(d: Deployment) -> str:
    return "disaggregated prefill/decode" if d.kind == DISAGGREGATED else d.kind


def recommend(colocated: Deployment | None, disaggregated: Deployment | None) -> Recommendation:
    """The deployment to run by the module's rule, and one line naming it, its GPUs and what binds."""
    plans = [d for d in (colocated, disaggregated) if d is not None]
    ok = [d for d in plans if d.gpus is not None]
    if not ok:
        why = "; ".join(f"{_name(d)}: {d.binding}" for d in plans)
        return Recommendation(None, f"Recommended: none; no deployment meets every target ({why}).")
    order = {COLOCATED: 0, DISAGGREGATED: 1}
    pick = min(ok, key=lambda d: (d.gpus, -d.tightest()[1], order.get(d.kind, 2)))
    other = next((d for d in plans if d is not pick), None)
    gpus = int(pick.gpus or 0)  # in `ok`: never None
    if other is None:
        why = ""
    elif other.gpus is None:
        why = f"; the only deployment meeting every target ({_name(other)}: {other.binding})"
    elif other.gpus > gpus:
        why = f"; {counted(other.gpus - gpus, 'fewer GPU', 'fewer GPUs')} than {_name(other)} ({other.gpus:,})"
    else:
        mine, theirs = pick.tightest(), other.tightest()
        if mine[1] != theirs[1]:
            why = (
                f"; as many GPUs as {_name(other)}, more headroom on its tightest target "
                f"({mine[0]} {mine[1]:.0%} vs {theirs[0]} {theirs[1]:.0%})"
            )
        else:
            why = f"; as many GPUs and as much headroom as {_name(other)}: colocated is one pool to run"
    return Recommendation(
        pick, f"Recommended: {_name(pick)} on {counted(gpus, 'GPU')} ({pick.pools}); {pick.binding}{why}."
    )


def limit_text(target: str, plan) -> str:
    """'TTFT 1000 ms' / 'ITL 30 ms': a latency target with its limit."""
    value = plan.ttft_ms if target == "TTFT" else plan.tpot_ms
    return f"{target} {value:g} ms"


def colocated_deployment(c, counts: dict | None, plan, qps: float) -> Deployment:
    """The colocated plan (row `c` of serve_plan_table, None when no layout meets the targets) and
    what binds it, from `counts` (search.plan.serve_binding_counts: fewest GPUs with both limits,
    none, TTFT only, ITL only)."""
    if c is None:
        limits = [limit_text(n, plan) for n, v in (("TTFT", plan.ttft_ms), ("ITL", plan.tpot_ms)) if v is not None]
        return Deployment(COLOCATED, None, binding=f"no layout meets {' and '.join(limits) or 'the targets'}")
    replicas, unit = int(c["replicas"]), int(c["replica_gpus"])
    at = f"{counted(replicas, 'replica')} x {counted(unit, 'GPU')}"
    both = counts["both"] if counts else None
    if counts is None or both == counts["free"]:
        binding = f"the request rate ({qps:g} requests/s) binds at {at}"
    else:
        named = [
            limit_text(n, plan)
            for n, g in (("TTFT", counts["ttft"]), ("ITL", counts["tpot"]))
            if g == both and g != counts["free"]
        ]
        binding = (
            f"{' and '.join(named)} bind{'s' if len(named) == 1 else ''} at {at}"
            if named
            else f"{limit_text('TTFT', plan)} and {limit_text('ITL', plan)} together bind at {at}"
        )
    headroom = [("rate", float(c["replicas"] * c["replica_rps"] * plan.load / qps - 1))]
    if plan.ttft_ms is not None:
        headroom.append(("TTFT", 1 - float(c["ttft_ms"]) / plan.ttft_ms))
    if plan.tpot_ms is not None:
        headroom.append(("ITL", 1 - float(c["tpot_ms"]) / plan.tpot_ms))
    return Deployment(COLOCATED, int(c["total_gpus"]), at, binding, tuple(headroom))


def disaggregated_deployment(dis: dict | None, bindings: tuple[str, str], plan, qps: float) -> Deployment:
    """The disaggregated plan (search.serve_disagg.disaggregated_plan's dict, None when it was not
    planned) with each pool's binding (serve_disagg.pool_bindings)."""
    if dis is None:
        return Deployment(DISAGGREGATED, None, binding="not planned, no fitting layout has a decode step time")
    if dis.get("no_link"):
        return Deployment(DISAGGREGATED, None, binding=f"not planned, {dis['no_link']}")
    if dis.get("total_gpus") is None:
        missing = (
            f"the prefill pool's {limit_text('TTFT', plan)}"
            if dis["prefill"] is None
            else f"the decode pool's {limit_text('ITL', plan)}"
        )
        return Deployment(DISAGGREGATED, None, binding=f"no layout meets {missing}")
    p, d = dis["prefill"], dis["decode"]
    pools = f"{int(p['pool_gpus']):,} prefill + {int(d['pool_gpus']):,} decode GPUs"
    binding = f"prefill pool: {bindings[0]}; decode pool: {bindings[1]}"
    rate = min(float(p["pool_rps"]), float(d["pool_rps"]))
    headroom = [("rate", rate * plan.load / qps - 1)]
    if plan.ttft_ms is not None:
        headroom.append(("TTFT", 1 - float(dis["ttft_ms"]) / plan.ttft_ms))
    if plan.tpot_ms is not None:
        headroom.append(("ITL", 1 - float(dis["itl_ms"]) / plan.tpot_ms))
    return Deployment(DISAGGREGATED, int(dis["total_gpus"]), pools, binding, tuple(headroom))


_POOL = ["replica_gpus", "tp", "pp", "sp", "ep", "dp"]
SERVE_PLANS_INT = [
    "input_len",
    "output_len",
    "total_gpus",
    *_POOL,
    "batch",
    "replicas",
    *(f"prefill_{c}" for c in _POOL),
    "prefill_replicas",
    "prefill_gpus",
    *(f"decode_{c}" for c in _POOL),
    "decode_batch",
    "decode_replicas",
    "decode_gpus",
]
SERVE_PLANS_COLUMNS = [
    "deployment",
    "recommended",
    "chosen",  # the colocated plan's row, as before: the one replica layout `export` reads by default
    "binding_constraint",
    "model",
    "hardware",
    "input_len",
    "output_len",
    "qps",
    "load",
    "total_gpus",
    "ttft_ms",
    "tpot_ms",
    "request_latency_s",
    "cost_per_gpu_hour_usd",
    "usd_per_hour",
    "usd_per_million_output_tokens",
    "usd_per_million_tokens",
    # colocated: one pool of `replicas` replicas
    *_POOL,
    "batch",
    "replicas",
    # disaggregated: a prefill pool (batch-1 replicas) and a decode pool
    *(f"prefill_{c}" for c in _POOL),
    "prefill_replicas",
    "prefill_gpus",
    "prefill_ms",
    "kv_transfer_ms",
    *(f"decode_{c}" for c in _POOL),
    "decode_batch",
    "decode_replicas",
    "decode_gpus",
]


_COLOCATED = [  # copied from the colocated plan's row (search.plan.serve_plan_table)
    *_POOL,
    "batch",
    "replicas",
    "ttft_ms",
    "tpot_ms",
    "request_latency_s",
    "usd_per_hour",
    "usd_per_million_output_tokens",
    "usd_per_million_tokens",
]


def plans_frame(model_name: str, hw, wl, plan, qps: float, c, dis, deployments, pick):
    """One row per deployment (colocated, disaggregated), always both, in SERVE_PLANS_COLUMNS:
    its pools' layouts, latencies and cost, `recommended` on the pick, `binding_constraint` what
    sets its size (or why it has no plan); a column a deployment has no value for is empty.
    `chosen` keeps its meaning from the file of colocated layouts this replaced: the colocated
    plan's row (export/rows.py pins that one replica layout by default)."""
    import pandas as pd

    base = {
        "model": model_name,
        "hardware": hw.name,
        "input_len": wl.input_len,
        "output_len": wl.output_len,
        "qps": qps,
        "load": plan.load,
        "cost_per_gpu_hour_usd": hw.cost_per_gpu_hour_usd,
    }
    rows = []
    for d in deployments:
        row = {**base, "deployment": d.kind, "recommended": d is pick, "binding_constraint": d.binding}
        row["chosen"] = d.kind == COLOCATED and d.gpus is not None
        if d.gpus is not None and d.kind == COLOCATED:
            row.update({k: c[k] for k in _COLOCATED if k in c})
        elif d.gpus is not None:
            p, q = dis["prefill"], dis["decode"]
            row.update({f"prefill_{k}": p[k] for k in _POOL if k in p})
            row.update({f"decode_{k}": q[k] for k in _POOL if k in q})
            row.update(
                {
                    "prefill_replicas": p["replicas"],
                    "prefill_gpus": p["pool_gpus"],
                    "prefill_ms": p["prefill_ms"],
                    "kv_transfer_ms": p["kv_transfer_ms"],
                    "decode_batch": q["batch"],
                    "decode_replicas": q["replicas"],
                    "decode_gpus": q["pool_gpus"],
                    "ttft_ms": dis["ttft_ms"],
                    "tpot_ms": dis["itl_ms"],
                    "request_latency_s": (dis["ttft_ms"] + (wl.output_len - 1) * dis["itl_ms"]) / 1000.0,
                    "usd_per_hour": dis["usd_per_hour"],
                    "usd_per_million_output_tokens": dis["usd_per_million_output_tokens"],
                    "usd_per_million_tokens": dis["usd_per_hour"]
                    / (qps * (wl.input_len + wl.output_len) * 3600.0)
                    * 1e6,
                }
            )
        row["total_gpus"] = d.gpus
        rows.append(row)
    df = pd.DataFrame(rows, columns=SERVE_PLANS_COLUMNS)
    for col in SERVE_PLANS_COLUMNS:
        if col in SERVE_PLANS_INT:
            df[col] = pd.array([None if pd.isna(v) else int(v) for v in df[col]], dtype="Int64")
        elif col in ("recommended", "chosen"):
            df[col] = df[col].astype(bool)
        elif col not in ("deployment", "binding_constraint", "model", "hardware"):
            df[col] = df[col].astype("float64")
    return df
