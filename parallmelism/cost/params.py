"""Parameter counts: whole model and per GPU (one pipeline stage, one TP/EP shard).

Formulas (`formulas.md`, Llama style; GPT adds biases, LayerNorm bias and learned positions):
  attention per layer  h·q + 2·h·g·d + q·h
  MLA attention        (DeepSeek-V2/V3, HF DeepseekV3Attention; r_q, r_kv ranks, n/p/v the nope,
                       rope and value head dims, a heads)
                       h·r_q + r_q + r_q·a·(n+p)      q_a_proj, q_a_layernorm, q_b_proj
                       (r_q None: h·a·(n+p), one q_proj)
                       + h·(r_kv+p) + r_kv            kv_a_proj_with_mqa, kv_a_layernorm
                       + r_kv·a·(n+v) + a·v·h         kv_b_proj, o_proj
  MLP per layer        3·h·I (SwiGLU) or 2·h·I (GELU)
  MoE layer            E·3·h·I_e + router h·E (+ shared experts); active uses k instead of E
  norms                2·h per layer (RMSNorm; LayerNorm has a bias: 4·h) + final norm
  embedding            V·h; output head V·h unless tied
Sharding: TP splits attention heads (KV heads replicate when tp > g: each rank keeps one whole
KV head), the MLP and the vocabulary; EP splits experts (expert TP = tp, Megatron default);
norms, biases of row-parallel layers and routers are replicated. MLA: q_b_proj, kv_b_proj
and o_proj are split by heads; the down projections q_a_proj and kv_a_proj_with_mqa and the two
latent norms are replicated across TP (Megatron-core MLASelfAttention with the Transformer
Engine spec builds the down projections as TELinear with parallel_mode="duplicated"). DeepSeek-V3's router score-correction bias is a buffer in
transformers (not a parameter) and is not counted.
"""

from __future__ import annotations

import numpy as np

from ..specs import ModelSpec, moe_layers_in_range
from .shapes import experts_per_rank, kv_heads_per_rank


def _norm_params(model: ModelSpec) -> int:
    return model.hidden * (2 if model.norm == "layernorm" else 1)


def mla_params(model: ModelSpec) -> tuple[int, int]:
    """(replicated, head-sharded) MLA parameters of one layer (module docstring)."""
    m, h, a = model.require_mla(), model.hidden, model.heads
    kv_down = h * m.latent_width + m.kv_lora_rank
    sharded = m.kv_lora_rank * a * (m.qk_nope_head_dim + m.v_head_dim) + a * m.v_head_dim * h
    if m.q_lora_rank is None:
        return kv_down, sharded + h * a * m.qk_head_dim
    return kv_down + h * m.q_lora_rank + m.q_lora_rank, sharded + m.q_lora_rank * a * m.qk_head_dim


def attention_params(model: ModelSpec) -> int:
    if model.mla is not None:
        return sum(mla_params(model))
    h, q, kv = model.hidden, model.q_dim, model.kv_dim
    n = h * q + 2 * h * kv + q * h
    if model.bias:
        n += q + 2 * kv + h
    elif model.qkv_bias:
        n += q + 2 * kv
    if model.qk_norm:
        n += 2 * model.d
    return n


def mlp_params(model: ModelSpec, ffn: int) -> int:
    """Weights of one MLP of width `ffn`: 3·h·I (SwiGLU) or 2·h·I (GELU), plus the up and down
    projections' biases when the model has them."""
    h = model.hidden
    return model.mlp_matrices * h * ffn + (model.mlp_up_matrices * ffn + h if model.bias else 0)


def moe_params(model: ModelSpec, experts: int) -> int:
    """Routed experts (`experts` of them), router and shared experts of one MoE layer."""
    moe = model.require_moe()
    n = experts * mlp_params(model, moe.ffn_hidden) + model.hidden * moe.num_experts
    if moe.router_bias:
        n += moe.num_experts
    if moe.num_shared_experts:
        n += moe.num_shared_experts * mlp_params(model, moe.shared_expert_ffn)
    if moe.shared_expert_gate:
        n += model.hidden
    return n


def embedding_params(model: ModelSpec) -> int:
    """Input embedding (+ learned positions) and output head, counted once if tied."""
    n = model.vocab * model.hidden * (1 if model.tie_embeddings else 2)
    if model.position_embedding == "learned":
        n += model.require_max_position() * model.hidden
    return n


def total_params(model: ModelSpec, active: bool = False) -> int:
    """Exact parameter count; `active` counts top-k routed experts instead of all."""
    L, n_moe = model.layers, model.num_moe_layers
    norms = 2 * _norm_params(model)
    dense_layer = attention_params(model) + mlp_params(model, model.ffn_hidden) + norms
    n = (L - n_moe) * dense_layer + embedding_params(model) + _norm_params(model)
    if n_moe:
        experts = model.require_moe().top_k if active else model.require_moe().num_experts
        n += n_moe * (attention_params(model) + moe_params(model, experts) + norms)
    return n


def norm_params_total(model: ModelSpec) -> int:
    """Norm weights (and biases) only: the seed PoC left these out of its counts."""
    return (2 * model.layers + 1) * _norm_params(model)


def params_per_gpu(
    model: ModelSpec, tp, ep, n_layers, first_layer, has_embedding, has_head, etp=None
) -> dict[str, np.ndarray]:
    """Parameters held by one GPU of a pipeline stage, by kind.

    The stage holds `n_layers` contiguous layers starting at `first_layer` (arrays; see
    grid.stage_layer_split), plus the input embedding where `has_embedding` and the output head
    and final norm where `has_head` (a tied head is shared only when both sit on one stage).
    Returns arrays: embedding, attention, mlp (dense MLP + norms + routers + shared experts),
    experts (routed experts, sharded over the expert-data-parallel group), dense = all but
    experts, total. Routed experts: E/ep per rank, each split `etp` ways (expert TP; None: tp).
    """
    h, d = model.hidden, model.d
    tp, ep = (np.asarray(x, dtype=np.int64) for x in (tp, ep))
    n_layers, first_layer = np.asarray(n_layers), np.asarray(first_layer)
    has_embedding, has_head = np.asarray(has_embedding, dtype=bool), np.asarray(has_head, dtype=bool)
    n_moe = moe_layers_in_range(model, first_layer, first_layer + n_layers)
    n_dense = n_layers - n_moe
    g_local = kv_heads_per_rank(model.g, tp)  # whole KV heads per rank (replicated when tp > g)

    attn = (2 * h * model.q_dim) / tp + 2 * h * d * g_local
    if model.mla is not None:
        replicated, sharded = mla_params(model)
        attn = replicated + sharded / tp
    elif model.bias:
        attn = attn + model.q_dim / tp + 2 * d * g_local + h
    elif model.qkv_bias:
        attn = attn + model.q_dim / tp + 2 * d * g_local
    if model.qk_norm:
        attn = attn + 2 * d  # replicated
    norms = 2 * _norm_params(model)

    def mlp_shard(ffn, split=tp):
        n = model.mlp_matrices * h * ffn / split
        if model.bias:
            n = n + model.mlp_up_matrices * ffn / split + h
        return n

    mlp = n_dense * (mlp_shard(model.ffn_hidden) + norms) + n_moe * norms
    experts = np.zeros(np.broadcast(tp, n_layers).shape, dtype=np.float64)
    if model.moe is not None:
        moe = model.moe
        router = h * moe.num_experts + (moe.num_experts if moe.router_bias else 0)
        shared = moe.num_shared_experts * mlp_shard(moe.shared_expert_ffn)
        shared = shared + (h if moe.shared_expert_gate else 0)  # replicated h->1 gate
        mlp = mlp + n_moe * (router + shared)
        split = tp if etp is None else np.asarray(etp, dtype=np.int64)
        experts = n_moe * experts_per_rank(moe.num_experts, ep) * mlp_shard(moe.ffn_hidden, split)

    vocab_shard = model.vocab * h / tp
    pos = model.require_max_position() * h if model.position_embedding == "learned" else 0
    shared_head = model.tie_embeddings & has_embedding & has_head
    embedding = (
        np.where(has_embedding, vocab_shard + pos, 0.0)
        + np.where(has_head & ~shared_head, vocab_shard, 0.0)
        + np.where(has_head, _norm_params(model), 0.0)
    )
    attention = n_layers * attn
    dense = embedding + attention + mlp
    return {
        "embedding": embedding,
        "attention": attention,
        "mlp": mlp,
        "experts": experts,
        "dense": dense,
        "total": dense + experts,
    }
