"""Which rows to show first: fitting layouts, then the fastest step (training) or the cheapest
tokens and then the lowest request latency (serving); ties in enumeration order."""

from __future__ import annotations

import numpy as np

RANK_KEYS = {
    "train": [("fits", "max"), ("time_step_s", "min")],
    "inference": [("fits", "max"), ("cost_per_million_tokens", "min"), ("e2e_latency_ms", "min")],
}


def rank_keys(kind: str) -> list[tuple[str, str]]:
    return RANK_KEYS.get(kind, RANK_KEYS["train"])


def rank_order(cols: dict, kind: str) -> np.ndarray:
    """Row indices of array columns, best first (stable: ties keep their order)."""
    keys = [np.asarray(cols[c], dtype=np.float64) * (-1.0 if s == "max" else 1.0) for c, s in rank_keys(kind)]
    return np.lexsort((np.arange(len(keys[0])), *reversed(keys)))


def rank_rows(df):
    """A DataFrame's rows, best first (stable)."""
    keys = rank_keys("inference" if "tpot_ms" in df.columns else "train")
    return df.sort_values([c for c, _ in keys], ascending=[s == "min" for _, s in keys], kind="stable")
