"""Which rows to show first."""

from __future__ import annotations


def rank_rows(df):
    """Fitting layouts first; then the fastest step (training) or the cheapest tokens, then the lowest
    request latency (serving)."""
    if "tpot_ms" in df.columns:
        return df.sort_values(
            ["fits", "cost_per_million_tokens", "e2e_latency_ms"], ascending=[False, True, True], kind="stable"
        )
    return df.sort_values(["fits", "time_step_s"], ascending=[False, True], kind="stable")
