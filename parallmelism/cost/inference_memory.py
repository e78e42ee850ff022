"""Serving memory per GPU (busiest pipeline stage): weights, KV cache, workspace, max batch.

  weights   quantized linear weights (weight_dtype and its scales, workload.quantization) + 16-bit norms/router/embedding/head,
            sharded by tp (heads, FFN, vocabulary), pp (ceil(L/pp) layers) and ep (experts)
  KV cache  2·L_stage·g_l·d·bytes·context·batch / sp  with g_l = g/min(tp, g)
            (formulas.md: 2·L·g·d·bytes·context·batch ÷ min(t, g) ÷ p; when tp > g each rank
            keeps one whole KV head, so the cache is replicated tp/g times across the TP group);
            context = input_len + output_len (the cache at the end of the request); sp ranks keep
            the KV of their own prompt chunk, and generated tokens are spread over them
            MLA (model.mla): the cache holds the compressed latent, not per-head K/V:
            L_stage·(kv_lora_rank + qk_rope_head_dim)·bytes·context·batch / sp (576 values per
            token per layer for DeepSeek-V3), the absorbed form DeepSeek-V3 serving uses (W_UK
            folded into the query, W_UV into o_proj); the latent is shared by all heads, so every
            TP rank keeps all of it (not divided by tp)
  workspace the largest transient of prefill on one GPU: the chunk's tokens with the residual
            stream, the normed input and the widest projection output (QKV, or gate/up + SiLU
            product), gathered K/V of the whole prompt when sp > 1, and fp32 logits of the last
            positions
  max_batch largest batch whose weights + KV + workspace fit in hbm_usable_gib (0 if the
            weights alone do not fit); the workspace is one prompt's (continuous batching) or
            grows with the batch (static batching)
All `_gib` values divide bytes by 2**30.
"""

from __future__ import annotations

import numpy as np

from ..specs import BYTES_PER_ELEMENT, InferenceWorkload, ModelSpec
from ..specs.quantization import linear_weight_bytes
from ..units import GIB
from .inference_ops import local_heads, weight_elements_per_gpu
from .layout import ServingLayout
from .ops import ACT_BYTES, HALF_BYTES
from .shapes import kv_cache_width_per_rank

FP32_BYTES = BYTES_PER_ELEMENT["fp32"]


def kv_cache_bytes_per_sequence(model: ModelSpec, wl: InferenceWorkload, tp, layers_on_stage, sp, context):
    """2·L_stage·g_l·d·bytes·context / sp bytes on one GPU for one sequence
    (MLA: L_stage·(kv_lora_rank + qk_rope_head_dim)·bytes·context / sp, on every TP rank)."""
    return (
        np.asarray(layers_on_stage, dtype=np.float64)
        * kv_cache_width_per_rank(model, tp)
        * BYTES_PER_ELEMENT[wl.kv_dtype]
        * context
        / np.asarray(sp, dtype=np.float64)
        * np.ones_like(np.asarray(tp, dtype=np.float64))
    )


def workspace_bytes_per_sequence(model: ModelSpec, wl: InferenceWorkload, tp, sp, prefill_chunks):
    """Peak prefill transient on one GPU per sequence of the batch (module docstring)."""
    tp = np.asarray(tp, dtype=np.float64)
    sp = np.asarray(sp, dtype=np.float64)
    a_l, g_l = local_heads(model, tp)
    q_l, kv_l = a_l * model.d, g_l * model.d
    ffn = model.moe.ffn_hidden * model.moe.top_k if model.moe is not None else model.ffn_hidden
    widest = np.maximum(q_l + 2 * kv_l, model.mlp_matrices * np.maximum(ffn, model.ffn_hidden) / tp)
    chunk_tokens = wl.input_len / sp / np.asarray(prefill_chunks, dtype=np.float64)
    per_token = (2 * model.hidden + widest) * ACT_BYTES
    gathered_kv = np.where(sp > 1, wl.input_len * 2 * kv_l * ACT_BYTES, 0.0)
    logits = model.vocab / tp * FP32_BYTES  # fp32 logits of the last position
    return chunk_tokens * per_token + gathered_kv + logits


def inference_memory(
    lay: ServingLayout,
    model: ModelSpec,
    hw,
    wl: InferenceWorkload,
    prefill_chunks,
    prefill_sequences,
) -> dict[str, np.ndarray]:
    """Memory columns; `prefill_sequences` prompts share one prefill step (1 for continuous
    batching, batch for static), so the workspace scales with it and the KV cache with batch."""
    tp, pp, sp, ep, b = lay.tp, lay.pp, lay.sp, lay.ep, lay.batch
    n = lay.layers_per_stage
    linear, half = weight_elements_per_gpu(model, tp, ep, n, pp)
    weights = linear * linear_weight_bytes(wl) + half * HALF_BYTES  # scales included (specs/quantization.py)
    kv_seq = kv_cache_bytes_per_sequence(model, wl, tp, n, sp, wl.input_len + wl.output_len)
    ws_seq = workspace_bytes_per_sequence(model, wl, tp, sp, prefill_chunks)
    usable = hw.hbm_usable_gib * GIB
    static = wl.batching == "static"
    workspace = prefill_sequences * ws_seq
    total = weights + b * kv_seq + workspace
    room = np.maximum(usable - weights, 0.0)
    max_batch = np.where(static, room / (kv_seq + ws_seq), np.maximum(room - ws_seq, 0.0) / kv_seq)
    max_batch = np.floor(max_batch).astype(np.int64)
    return {
        "mem_weights_gib": weights / GIB,
        "mem_kv_cache_gib": b * kv_seq / GIB,
        "mem_workspace_gib": workspace / GIB,
        "mem_total_gib": total / GIB,
        "hbm_usable_gib": np.full(len(tp), hw.hbm_usable_gib),
        "mem_headroom_gib": (usable - total) / GIB,
        "fits": total <= usable,
        "max_batch": max_batch,
    }
