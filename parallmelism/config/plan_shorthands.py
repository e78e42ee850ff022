"""The plan commands' shorthands: `days=30` means plan.days=30, `tokens=15e12` workload.tokens=15e12."""

from __future__ import annotations

PLAN_SHORT = {
    "days",
    "gpus",
    "budget_usd",
    "ngpus",
    "utilization",
    "pue",
    "qps",
    "tokens_per_s",
    "ttft_ms",
    "tpot_ms",
    "load",
    "load_percentiles",
    "prefill_gpus",
    "decode_gpus",
}
PLAN_ALIASES = {"budget": "budget_usd", "itl_ms": "tpot_ms"}  # inter-token latency = time per output token
WORKLOAD_SHORT = {
    "tokens",
    "input_len",
    "output_len",
    "seq_len",
    "global_batch",
    "batch",
    "precision",
    "weight_dtype",
    "kv_dtype",
}


def rewrite_plan_overrides(overrides: list[str]) -> list[str]:
    """days=30 -> plan.days=30, tokens=15e12 -> workload.tokens=15e12 (other overrides unchanged).
    Two spellings of one setting (itl_ms=30 tpot_ms=40, budget= and budget_usd=) are one sentence:
    neither silently wins."""
    from ..errors import UserError

    out = []
    spelt: dict[str, str] = {}  # setting -> the spelling the command line gave it
    for o in overrides:
        key, sep, value = o.partition("=")
        bare = key.removeprefix("plan.")
        if sep and (bare in PLAN_SHORT or bare in PLAN_ALIASES):
            setting = PLAN_ALIASES.get(bare, bare)
            if setting in spelt:
                twice = (
                    f"{key}= is given twice"
                    if spelt[setting] == key
                    else f"{spelt[setting]}= and {key}= name one setting"
                )
                raise UserError(f"{twice} (plan.{setting}); give it once")
            spelt[setting] = key
        if sep and key in PLAN_ALIASES:
            key = PLAN_ALIASES[key]
        if sep and key in PLAN_SHORT:
            o = f"plan.{key}={value}"
        elif sep and key in WORKLOAD_SHORT:
            o = f"workload.{key}={value}"
        out.append(o)
    return out
