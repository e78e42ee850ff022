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
The projections and the absorbed per-head GEMMs are `cost.layer_gemms`' (`attention_gemms`,
`absorbed_gemms`), both forms of the core `cost.layer_cores.attention_core` (absorbed=True: the
latent read once as K and V).
A mixed iteration (chunked prefill) runs its decode tokens absorbed and its prompt chunk naive,
as the vLLM MLA backend splits them; the shared projections see all the iteration's tokens.
"""

from __future__ import annotations

import numpy as np

from ..specs import BYTES_PER_ELEMENT
from ..specs.quantization import linear_weight_bytes
from .layer_cores import attention_core
from .layer_gemms import GemmShape, absorbed_gemms, attention_gemms, layer_norms
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


def mla_attention_ops(model, wl, tp, tokens, count, naive, absorbed, kv_write_tokens) -> list[Op]:
    """MLA ops of one stage on one GPU, replacing qkv_proj, attention_qk/pv and output_proj.

    tokens           T, all tokens of the pass (projections)
    naive            (tokens, causal pairs, key positions read) in the prefill form
    absorbed         (tokens, pairs, key positions read) in the absorbed decode form
    kv_write_tokens  positions appended to the latent cache
    count            layers of the stage (calls)
    """
    m = model.require_mla()
    T = np.asarray(tokens, dtype=np.float64)
    wb, kvb, ab = linear_weight_bytes(wl), BYTES_PER_ELEMENT[wl.kv_dtype], ACT_BYTES
    Tn, Pn, Kn = (np.asarray(x, dtype=np.float64) + 0 * T for x in naive)
    Ta, Pa, Ka = (np.asarray(x, dtype=np.float64) + 0 * T for x in absorbed)
    inf = np.full_like(T, np.inf)
    zero = np.zeros_like(T)

    def gemm(g: GemmShape):  # an inventory GEMM (`cost.layer_gemms`)
        # a GEMM with no rows this pass reads no weights (e.g. kv_b_proj in a pure decode step)
        return serving_gemm(g, count, np.where(g.m > 0, g.weight_elements * wb, 0.0) + zero)

    # projections: the prefill form decompresses every key position read (kv_up rows = Kn)
    proj = {g.name: g for g in attention_gemms(model, T, tp, kv_up_rows=Kn)}
    q_absorb, v_up = absorbed_gemms(model, Ta, tp)
    norms = layer_norms(model, T)

    def norm(name):
        return serving_norm(norms[name], count, zero)

    def module(op: Op) -> Op:  # an op the engine's measured MLA module stands for (cost/mla_context.py)
        op.mla_module = True
        return op

    ops = []
    if m.q_lora_rank is None:
        ops.append(gemm(proj["q_proj"]))
    else:
        ops += [gemm(proj["q_down"]), module(norm("q_norm")), module(gemm(proj["q_up"]))]
    kv_a = gemm(proj["kv_down"])
    kv_a.other_bytes = kv_a.other_bytes + np.asarray(kv_write_tokens, dtype=np.float64) * m.latent_width * kvb
    ops += [kv_a, module(norm("kv_norm"))]
    # prefill form: decompress every key position read, then MHA with d_qk = n+p, d_v = v
    ops.append(module(gemm(proj["kv_up"])))
    pre = attention_core(model, tp, Tn, Pn, Kn)  # K, V decompressed, 16-bit
    lat = attention_core(model, tp, Ta, Pa, Ka, absorbed=True)  # the latent cache, kv_dtype
    seq, heads = prompt_attention_shape(Tn, Pn, pre.heads)
    ctx, seqs = decode_attention_shape(Ta, Pa, Ka)

    # Without flash attention the prompt's kernel writes its scores and reads the probabilities, 16
    # bits per head and kept pair, as the GQA form does (`cost.inference_ops`); the absorbed decode
    # kernel (FlashMLA) is always fused
    scores = 0.0 if wl.flash_attention else pre.score_elements * ab

    def naive_form(share):  # the prompt's MHA kernel (d_qk = n+p, d_v = v), no decode tokens
        return ServingAttention(share, pre.flops, seq, heads, zero, zero, zero, zero, scores)

    def absorbed_form(share):  # one latent "KV head" per sequence, read once by both halves
        kv = (lat.k_elements + lat.v_elements) * kvb
        return ServingAttention(share, zero, zero, zero, kv, lat.flops, seqs, ctx)

    def attention(name, flops, nbytes, kernels):
        return serving_op(name, "attention", count, flops, zero, nbytes, inf, kernels)

    q_bytes = (pre.q_elements + pre.k_elements) * ab + scores
    o_bytes = (pre.v_elements + pre.o_elements) * ab + scores
    ops += [
        module(attention("attention_qk", pre.scores_flops, q_bytes, naive_form(pre.scores_share))),
        module(attention("attention_pv", pre.values_flops, o_bytes, naive_form(pre.values_share))),
        # absorbed decode form: per-head W_UK before the latent scores and values, W_UV after
        gemm(q_absorb),
        attention(
            "attention_latent_qk",
            lat.scores_flops,
            lat.k_elements * kvb + lat.q_elements * ab,
            absorbed_form(lat.scores_share),
        ),
        attention(
            "attention_latent_pv",
            lat.values_flops,
            lat.v_elements * kvb + lat.o_elements * ab,
            absorbed_form(lat.values_share),
        ),
        gemm(v_up),
        module(gemm(proj["out_proj"])),
    ]
    return ops
