"""Derived sizes of one rank's share of a layer: each formula once, used by every cost term.

Notation (Megatron-LM, Korthikanti et al. 2022): s sequence, b micro-batch, t tensor-parallel
size, cp context-parallel size, g KV heads (GQA groups), sp sequence parallelism on/off.
"""

from __future__ import annotations

import numpy as np


def tokens_per_rank(s, b, cp):
    """T = (s / cp) · b: the tokens one context-parallel rank holds in a micro-batch."""
    return (s / np.asarray(cp, dtype=np.float64)) * np.asarray(b, dtype=np.float64)


def sp_divisor(t, sp):
    """r = t with sequence parallelism, else 1: norms, residuals and dropout work on T / r tokens
    (Korthikanti et al. 2022 §4.2.2: outside the TP regions the sequence is split over t ranks)."""
    return np.where(np.asarray(sp, dtype=bool), np.asarray(t, dtype=np.float64), 1.0)


def kv_heads_per_rank(kv_heads: int, t):
    """Whole KV heads per TP rank, max(g / t, 1): GQA heads split over t ranks, replicated when
    t > g (Megatron-LM requires t | g or g | t; the grid drops other layouts)."""
    return np.maximum(kv_heads / np.asarray(t, dtype=np.float64), 1.0)


def kv_replication(t, kv_heads: int):
    """How many TP ranks hold a copy of each KV head: t / g when t > g, else 1."""
    t = np.asarray(t)
    return np.where(t > kv_heads, t // kv_heads, 1)


def moe_token_load(moe, imbalance: float) -> float:
    """Busiest expert's tokens / the mean: the workload's imbalance, capped by the router's
    capacity factor when tokens beyond it are dropped (GShard / Megatron `moe_expert_capacity_factor`;
    None = dropless, no cap)."""
    if moe is None or moe.capacity_factor is None:
        return imbalance
    return min(imbalance, moe.capacity_factor)
