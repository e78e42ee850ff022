"""Which rows to show first."""

from __future__ import annotations


def rank_rows(df):
    """Fitting layouts first; then by step time when the time model is present, else by the
    cheapest-to-run proxy: less recomputation, smaller bubble, fewer model-parallel GPUs, less memory."""
    keys, asc = ["fits"], [False]
    if "tpot_ms" in df.columns:  # serving: cheapest tokens first, then the lowest request latency
        return df.sort_values(["fits", "cost_per_million_tokens", "e2e_latency_ms"],
                              ascending=[False, True, True], kind="stable")
    if "time_step_s" in df.columns:
        keys.append("time_step_s"); asc.append(True)
    else:
        df = df.assign(_rc=df["recompute"].cat.codes if hasattr(df["recompute"], "cat") else 0,
                       _mp=df["tp"] * df["pp"] * df["cp"])
        keys += ["_rc", "pp_bubble_rate", "_mp", "mem_total_gib"]
        asc += [True, True, True, True]
    out = df.sort_values(keys, ascending=asc, kind="stable")
    return out.drop(columns=[c for c in ("_rc", "_mp") if c in out.columns])
