"""The load simulation's answer as lines of text (`show` with workload.request_rate, `plan serve`
with plan.load_percentiles) and as CSV columns with units (LOAD_COLUMNS)."""

from __future__ import annotations

from ..cost.serving_load import PERCENTILES

# the columns load_summary returns, in the order a CSV holds them
LOAD_COLUMNS = [
    *(f"{m}_p{p}_ms" for m in ("ttft", "itl") for p in PERCENTILES),
    "ttft_mean_ms",
    "itl_mean_ms",
    *(f"itl_token_p{p}_ms" for p in PERCENTILES),
    "throughput_requests_per_s",
    "throughput_output_tokens_per_s",
    "goodput_requests_per_s",
    "slo_attained",
    "replica_capacity_requests_per_s",
]


def load_lines(s: dict, head: str, ttft_slo_ms, itl_slo_ms) -> list[str]:
    """`head` (what was simulated), a percentile table of TTFT and ITL in ms, and the throughput
    and goodput line (per replica)."""
    w = 10
    lines = [head, f"{'':8}" + "".join(f"{'p' + str(p):>{w}}" for p in PERCENTILES) + f"{'mean':>{w}}"]
    for m, label in (("ttft", "TTFT ms"), ("itl", "ITL ms")):
        vals = [s[f"{m}_p{p}_ms"] for p in PERCENTILES] + [s[f"{m}_mean_ms"]]
        lines.append(f"{label:8}" + "".join(f"{v:>{w},.1f}" for v in vals))
    lines.append(f"{'gap ms':8}" + "".join(f"{s[f'itl_token_p{p}_ms']:>{w},.1f}" for p in PERCENTILES))
    lines.append("(ITL: each request's mean gap after its first token, TPOT; gap: every gap between two tokens)")
    slos = [f"TTFT <= {ttft_slo_ms:g} ms"] if ttft_slo_ms is not None else []
    slos += [f"ITL <= {itl_slo_ms:g} ms"] if itl_slo_ms is not None else []
    within = (
        f"{100 * s['slo_attained']:.1f} % within {' and '.join(slos)}"
        if slos
        else "no SLO given (plan.ttft_ms, plan.tpot_ms)"
    )
    lines.append(
        f"per replica: {s['throughput_requests_per_s']:,.3g} requests/s, "
        f"{s['throughput_output_tokens_per_s']:,.0f} output tokens/s; goodput "
        f"{s['goodput_requests_per_s']:,.3g} requests/s ({within})"
    )
    return lines
