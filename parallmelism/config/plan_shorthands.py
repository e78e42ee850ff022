"""The plan commands' shorthands: `days=30` means plan.days=30, `tokens=15e12` workload.tokens=15e12."""

from __future__ import annotations

PLAN_ALIASES = {"budget": "budget_usd", "itl_ms": "tpot_ms"}  # inter-token latency = time per output token
# The plan settings only one of the two commands reads. Given to the other they were ignored without
# a word: `plan serve qps=3 gpus=8` planned a fleet of any size, `plan train ... ttft_ms=5` the usual plan.
TRAIN_ONLY = {"days", "gpus", "budget_usd", "ngpus", "default_ngpus", "utilization", "pue"}
SERVE_ONLY = {
    "qps",
    "tokens_per_s",
    "ttft_ms",
    "tpot_ms",
    "load",
    "load_percentiles",
    "prefill_gpus",
    "decode_gpus",
    "serve_batch",
}
# `days=30` for plan.days=30: every plan setting of either command but the two candidate lists that
# stand in when none is given (default_ngpus, serve_batch: set as plan.default_ngpus=[...])
PLAN_SHORT = (TRAIN_ONLY | SERVE_ONLY) - {"default_ngpus", "serve_batch"}
OTHER_HINT = {
    ("serve", "gpus"): " (plan serve sizes the fleet from the load; grid.ngpus=[...] sets the GPUs of a replica)",
    ("serve", "ngpus"): " (grid.ngpus=[...] sets the GPUs of a replica)",
}
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


def rewrite_plan_overrides(overrides: list[str], command: str | None = None) -> list[str]:
    """days=30 -> plan.days=30, tokens=15e12 -> workload.tokens=15e12 (other overrides unchanged).
    Two spellings of one setting (itl_ms=30 tpot_ms=40, budget= and budget_usd=) are one sentence:
    neither silently wins; so is, for `command` ("train" or "serve"), a setting only the other plan
    command reads."""
    from ..errors import UserError

    out = []
    spelt: dict[str, str] = {}  # setting -> the spelling the command line gave it
    for o in overrides:
        key, sep, value = o.partition("=")
        bare = key.lstrip("+").removeprefix("plan.")
        setting = PLAN_ALIASES.get(bare, bare)
        is_plan = key.lstrip("+").startswith("plan.") or bare in PLAN_SHORT or bare in PLAN_ALIASES
        theirs, others = {"train": ("serve", SERVE_ONLY), "serve": ("train", TRAIN_ONLY)}.get(
            command or "", ("", set())
        )
        if sep and is_plan and setting in others:
            raise UserError(
                f"{key}= is a `plan {theirs}` setting that plan {command} does not read; remove it"
                + OTHER_HINT.get((command or "", setting), "")
            )
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
