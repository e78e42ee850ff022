"""Derived sizes of one rank's share of a layer: each formula once, used by every cost term.

Notation (Megatron-LM, Korthikanti et al. 2022): s sequence, b micro-batch, t tensor-parallel
size, cp context-parallel size, a query heads, g KV heads (GQA groups), sp sequence parallelism
on/off, E routed experts, ep expert-parallel size, dp data-parallel size.
"""

from __future__ import annotations

import numpy as np

from ..specs.codes import DPSharding


def tokens_per_rank(s, b, cp):
    """T = (s / cp) · b: the tokens one context-parallel rank holds in a micro-batch."""
    return (s / np.asarray(cp, dtype=np.float64)) * np.asarray(b, dtype=np.float64)


def sp_divisor(t, sp):
    """r = t with sequence parallelism, else 1: norms, residuals and dropout work on T / r tokens
    (Korthikanti et al. 2022 §4.2.2: outside the TP regions the sequence is split over t ranks)."""
    return np.where(np.asarray(sp, dtype=bool), np.asarray(t, dtype=np.float64), 1.0)


def heads_per_rank(heads: int, t):
    """Query heads per TP rank, a / t: Megatron-LM splits attention by heads (column-parallel QKV,
    row-parallel output projection); the grid keeps t | a."""
    return heads / np.asarray(t, dtype=np.float64)


def kv_heads_per_rank(kv_heads: int, t):
    """Whole KV heads per TP rank, max(g / t, 1): GQA heads split over t ranks, replicated when
    t > g (Megatron-LM requires t | g or g | t; the grid drops other layouts)."""
    return np.maximum(kv_heads / np.asarray(t, dtype=np.float64), 1.0)


def kv_replication(t, kv_heads: int):
    """How many TP ranks hold a copy of each KV head: t / g when t > g, else 1."""
    t = np.asarray(t)
    return np.where(t > kv_heads, t // kv_heads, 1)


def kv_width_per_rank(model, t):
    """Elements of K plus V per token on one TP rank: 2·d·max(g / t, 1) for GQA/MHA (whole KV heads,
    replicated when t > g), or (a / t)·(qk_head_dim + v_head_dim) for MLA, whose attention (and CP
    ring) works on the decompressed per-head K and V (DeepSeek-V3 `kv_b_proj`)."""
    if model.mla is not None:
        return heads_per_rank(model.heads, t) * (model.mla.qk_head_dim + model.mla.v_head_dim)
    return 2.0 * kv_heads_per_rank(model.g, t) * model.d


def kv_cache_width_per_rank(model, t):
    """Values one TP rank caches per token and layer: K and V of its whole KV heads, 2·d·max(g / t, 1)
    (formulas.md: the cache divides by min(t, g), replicated t/g times when t > g), or MLA's latent
    kv_lora_rank + qk_rope_head_dim, which every TP rank keeps whole (absorbed MLA, DeepSeek-V3)."""
    if model.mla is not None:
        return model.mla.latent_width
    return 2 * kv_heads_per_rank(model.g, t) * model.d


def layers_on_busiest_stage(layers: int, pp):
    """ceil(L / pp): layers of the most loaded pipeline stage (the middle stages of the uneven
    split in grid.stage_layer_split; serving's busiest stage)."""
    return -(-layers // np.asarray(pp))


def stage_layer_split(L: int, pp):
    """Layers on the first, a middle and the last pipeline stage (Megatron-style uneven split).

    Middle stages hold ceil(L/pp) layers; the d = pp·ceil(L/pp) - L missing layers are taken from
    the first stage (ceil(d/2)) and the last stage (floor(d/2)), which also carry the embedding
    and the output head (Llama 3 405B: 126 layers on pp=16 -> 7, 8 x 14, 7). Even splits give
    L/pp everywhere.
    """
    pp = np.asarray(pp, dtype=np.int64)
    middle = layers_on_busiest_stage(L, pp)
    d = pp * middle - L
    first = np.where(pp == 1, L, middle - (d + 1) // 2)
    last = np.where(pp == 1, L, middle - d // 2)
    return first, np.where(pp == 1, L, middle), last


def busiest_stage_first_layer(L: int, pp):
    """First layer of the stage `layers_on_busiest_stage` counts: the stage after the first in
    `stage_layer_split` (training's middle stage, serving's busiest), layer 0 when pp = 1."""
    first, _, _ = stage_layer_split(L, pp)
    return np.where(np.asarray(pp) == 1, 0, first)


def experts_per_rank(num_experts: int, ep):
    """Routed experts per expert-parallel rank, E / ep (Megatron-Core `num_local_experts`; the grid
    keeps ep | E)."""
    return num_experts / np.asarray(ep, dtype=np.float64)


def dense_dp_size(dp, cp):
    """Ranks that reduce (and, under ZeRO/FSDP, shard) one dense parameter: dp·cp. Megatron-LM
    reduces gradients over the data-parallel × context-parallel group, since CP ranks hold the
    same weights and see different tokens."""
    return np.asarray(dp) * np.asarray(cp)


def dp_shard_ranks(dp, sharding, dp_shard_size):
    """DP ranks a sharded strategy's states are split over: all dp, or dp_shard_size of them under
    hybrid sharding (workload.dp_shard_size; the grid keeps dp a multiple of it). NO_OP shards
    nothing and all-reduces over all dp."""
    dp = np.asarray(dp)
    if dp_shard_size is None:
        return dp
    return np.where(np.asarray(sharding) == int(DPSharding.NO_OP), dp, np.minimum(dp, dp_shard_size))


def expert_tp_size(tp, expert_tp=None):
    """Ways each routed expert's FFN is split, per row: workload.expert_tp (MoE parallel folding),
    else tp (Megatron-Core's default, expert_tensor_parallel_size = tensor_model_parallel_size)."""
    tp = np.asarray(tp)
    return tp if expert_tp is None else np.full(tp.shape, expert_tp, dtype=tp.dtype)


def expert_dp_size(dp, cp, ep, tp=1, etp=1):
    """Ranks that hold a copy of one routed expert shard (Megatron-Core `expert_data_parallel_size`
    = world / (etp·ep·pp), parallel_state.initialize_model_parallel @ d98e8a64): the expert grid
    etp × ep × edp folds over the same tp × cp × dp ranks of a stage as the dense layers, so
    edp = tp·dp·cp / (etp·ep), at least 1; the grid keeps etp·ep | tp·dp·cp. With expert TP = tp
    (no folding; the tp and etp defaults) this is dp·cp / ep: EP carved out of the DP × CP group."""
    folded = dense_dp_size(dp, cp) * np.asarray(tp)
    return np.maximum(folded // (np.asarray(etp) * np.asarray(ep)), 1)


def moe_token_load(moe, imbalance: float) -> float:
    """Busiest expert's tokens / the mean: the workload's imbalance, capped by the router's
    capacity factor when tokens beyond it are dropped (GShard / Megatron `moe_expert_capacity_factor`;
    None = dropless, no cap)."""
    if moe is None or moe.capacity_factor is None:
        return imbalance
    if np.ndim(imbalance):  # per layout row (serving's EPLB bound, cost/eplb.py)
        return np.minimum(imbalance, moe.capacity_factor)
    return min(imbalance, moe.capacity_factor)
