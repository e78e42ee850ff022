"""Serving ops of multi-head latent attention (DeepSeek-V2 §2.1, DeepSeek-V3 §2.1.1) on one GPU.

Shapes (model.mla): h hidden, a heads (a_l = a/tp per GPU), r_q q_lora_rank, r_kv kv_lora_rank,
n qk_nope_head_dim, p qk_rope_head_dim, v v_head_dim. Per layer and token:
  q_a_proj h→r_q, q_a_layernorm, q_b_proj r_q→a_l·(n+p)   (no r_q: q_proj h→a_l·(n+p))
  kv_a_proj_with_mqa h→r_kv+p (the latent c_KV and the one shared RoPE key; both replicated on
      every TP rank), kv_a_layernorm; the KV cache keeps r_kv+p values per token and layer
  o_proj a_l·v→h
Two forms of the attention itself (vLLM / SGLang MLA backends, FlashMLA):
  prefill (naive, MHA form): kv_b_proj r_kv→a_l·(n+v) decompresses K_nope and V of every key
      position the chunk attends to, then causal attention with d_qk = n+p and d_v = v:
          FLOPs 2·pairs·a_l·(n+p) (QKᵀ) + 2·pairs·a_l·v (·V)
  decode (absorbed): W_UK is folded into the query and W_UV applied after attention, so the
      cache is read as the latent (r_kv+p per position, shared by all local heads) and never
      decompressed:
          q_absorb   2·T·a_l·n·r_kv        (q_nope·W_UK per head; weights a_l·n·r_kv)
          scores     2·pairs·a_l·(r_kv+p)  (latent + rope key: a 576-wide MQA for DeepSeek-V3)
          ·latent    2·pairs·a_l·r_kv      (values are the latent itself)
          v_up       2·T·a_l·r_kv·v        (W_UV per head; weights a_l·r_kv·v)
      and reads the latent cache once per position: K·(r_kv+p)·kv_bytes.
A mixed iteration (chunked prefill) runs its decode tokens absorbed and its prompt chunk naive,
as the vLLM MLA backend splits them; the shared projections see all the iteration's tokens.
"""

from __future__ import annotations

import numpy as np

from ..specs import BYTES_PER_ELEMENT
from .layer_gemms import GemmShape, attention_gemms, layer_norms
from .ops import (
    ACT_BYTES,
    Op,
    ServingAttention,
    decode_attention_shape,
    prompt_attention_shape,
    serving_gemm,
    serving_norm,
    serving_op,
)
from .shapes import heads_per_rank


def mla_attention_ops(model, wl, tp, tokens, count, naive, absorbed, kv_write_tokens) -> list[Op]:
    """MLA ops of one stage on one GPU, replacing qkv_proj, attention_qk/pv and output_proj.

    tokens           T, all tokens of the pass (projections)
    naive            (tokens, causal pairs, key positions read) in the prefill form
    absorbed         (tokens, pairs, key positions read) in the absorbed decode form
    kv_write_tokens  positions appended to the latent cache
    count            layers of the stage (calls)
    """
    m = model.require_mla()
    rq, rkv, n, p, v = (
        m.q_lora_rank,
        m.kv_lora_rank,
        m.qk_nope_head_dim,
        m.qk_rope_head_dim,
        m.v_head_dim,
    )
    latent = m.latent_width  # rkv + p: the cached latent and the shared RoPE key
    a_l = heads_per_rank(model.heads, tp)
    T = np.asarray(tokens, dtype=np.float64)
    wb, kvb, ab = BYTES_PER_ELEMENT[wl.weight_dtype], BYTES_PER_ELEMENT[wl.kv_dtype], ACT_BYTES
    Tn, Pn, Kn = (np.asarray(x, dtype=np.float64) + 0 * T for x in naive)
    Ta, Pa, Ka = (np.asarray(x, dtype=np.float64) + 0 * T for x in absorbed)
    inf = np.full_like(T, np.inf)
    zero = np.zeros_like(T)

    def linear(name, n_in, n_out, rows, weights=None):  # the absorbed form's per-head GEMMs
        w = (n_in * n_out if weights is None else weights) * wb
        op = serving_op(
            name,
            "matmul",
            count,
            2 * rows * n_in * n_out,
            np.where(rows > 0, w, 0.0) + zero,
            rows * (n_in + n_out) * ab,
            rows,
        )
        op.mkn = (rows, n_in, n_out)
        return op

    def gemm(g: GemmShape):  # an inventory GEMM (`cost.layer_gemms`)
        # a GEMM with no rows this pass reads no weights (e.g. kv_b_proj in a pure decode step)
        return serving_gemm(g, count, np.where(g.m > 0, g.weight_elements * wb, 0.0) + zero)

    # projections: the prefill form decompresses every key position read (kv_up rows = Kn)
    proj = {g.name: g for g in attention_gemms(model, T, tp, kv_up_rows=Kn)}

    norms = layer_norms(model, T)

    def norm(name):
        return serving_norm(norms[name], count, zero)

    ops = []
    if rq is None:
        ops.append(gemm(proj["q_proj"]))
    else:
        ops += [gemm(proj["q_down"]), norm("q_norm"), gemm(proj["q_up"])]
    kv_a = gemm(proj["kv_down"])
    kv_a.other_bytes = kv_a.other_bytes + np.asarray(kv_write_tokens, dtype=np.float64) * latent * kvb
    ops += [kv_a, norm("kv_norm")]
    # prefill form: decompress every key position read, then MHA with d_qk = n+p, d_v = v
    ops.append(gemm(proj["kv_up"]))
    seq, heads = prompt_attention_shape(Tn, Pn, a_l)
    ctx, seqs = decode_attention_shape(Ta, Pa, Ka)

    def naive_form(share):  # the prompt's MHA kernel (d_qk = n+p, d_v = v), no decode tokens
        return ServingAttention(share, 2 * Pn * a_l * (n + p + v), seq, heads, zero, zero, zero, zero)

    def absorbed_form(share):  # one latent "KV head" per sequence, read once by both halves
        flops = 2 * Pa * a_l * (latent + rkv)
        return ServingAttention(share, zero, zero, zero, Ka * latent * kvb, flops, seqs, ctx)

    ops.append(
        serving_op(
            "attention_qk",
            "attention",
            count,
            2 * Pn * a_l * (n + p),
            zero,
            (Tn + Kn) * a_l * (n + p) * ab,
            inf,
            naive_form((n + p) / (n + p + v)),
        )
    )
    ops.append(
        serving_op(
            "attention_pv",
            "attention",
            count,
            2 * Pn * a_l * v,
            zero,
            (Kn + Tn) * a_l * v * ab,
            inf,
            naive_form(v / (n + p + v)),
        )
    )
    # absorbed decode form: latent scores and values, per-head W_UK before and W_UV after
    q_absorb = linear("q_absorb", n, rkv, Ta, weights=a_l * n * rkv)
    q_absorb.flops = 2 * Ta * a_l * n * rkv
    q_absorb.other_bytes = Ta * a_l * (n + rkv) * ab
    q_absorb.mkn = (Ta, n, a_l * rkv)  # a_l per-head GEMMs (Ta, n, r_kv): the FLOPs and weights of one this wide
    ops.append(q_absorb)
    ops.append(
        serving_op(
            "attention_latent_qk",
            "attention",
            count,
            2 * Pa * a_l * latent,
            zero,
            Ka * latent * kvb + Ta * a_l * latent * ab,
            inf,
            absorbed_form(latent / (latent + rkv)),
        )
    )
    ops.append(
        serving_op(
            "attention_latent_pv",
            "attention",
            count,
            2 * Pa * a_l * rkv,
            zero,
            Ta * a_l * rkv * ab,
            inf,
            absorbed_form(rkv / (latent + rkv)),
        )
    )
    v_up = linear("v_up", rkv, v, Ta, weights=a_l * rkv * v)
    v_up.flops = 2 * Ta * a_l * rkv * v
    v_up.other_bytes = Ta * a_l * (rkv + v) * ab
    v_up.mkn = (Ta, rkv, a_l * v)  # a_l per-head GEMMs (Ta, r_kv, v)
    ops.append(v_up)
    ops.append(gemm(proj["out_proj"]))
    return ops
