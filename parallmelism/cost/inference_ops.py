"""Per-op FLOPs and HBM bytes of one decoder layer on one GPU, for prefill or one decode step.

The op list is the seed's (shared/seeds/001, "LLM Workloads"): normalize, QKV_proj,
attention_QK, attention_(QK)V, output_proj, up/gate_proj, down_proj; MoE layers replace the MLP
by a router and the routed (+ shared) experts; the output head runs once per step on the last
stage. Shapes per GPU (t = tp):
  a_l = a/t query heads, g_l = g/min(t, g) KV heads (whole heads, replicated when t > g),
  q_l = a_l·d, kv_l = g_l·d, I_l = I/t (the expert FFN is split by t too: expert TP = tp).
A multiply-add is 2 FLOPs; non-matmul FLOPs (norms, SiLU, softmax) are not counted (seed), but
their HBM traffic is.

The GEMM shapes (projections, MLP, router, experts, head) come from `cost.layer_gemms` and the
attention core and embedding from `cost.layer_cores`, the one inventory training wraps too. Of
that inventory's element-wise ops serving prices the norms and the embedding; a layer's RoPE,
residual adds and SwiGLU are not priced (vLLM fuses the residual add into its RMSNorm kernel,
but RoPE and SiLU-and-mul are kernels of their own: an HBM under-count, largest in prefill; for
Llama-3.1-70B at TP8, 255 MB of a prefill layer's 546 MB priced at 2,048 tokens, 8 of 291 MB in a
decode step of 64 sequences at 2,048 tokens of context, `cost.layer_cores.layer_elementwise`). Every op carries: flops, weight bytes (read once per call), other
HBM bytes (activations in and out, KV-cache reads and writes), its compute class (matmul |
attention | memory) and the GEMM size that limits its efficiency (tokens, or tokens per local
expert).

Attention convention: CAUSAL. Prefill scores count S(S+1)/2 query-key pairs per sequence
(`causal_pairs`); decode attends one query to the whole context. With flash attention (default)
Q, K, V are read once and O written once (no S×S matrix in HBM); `flash_attention=false` adds
the scores written and the probabilities read, 2 bytes per head per kept pair each.

Dtypes: `weight_dtype` (with its scales under `quantization`, specs/quantization.py) applies to
the decoder's linear layers (the quantized GEMMs); norms,
router, embedding and output head stay 16-bit, as in vLLM / TensorRT-LLM fp8 and int4
checkpoints. Activations are 16-bit; the KV cache uses `kv_dtype`.
"""

from __future__ import annotations

import numpy as np

from ..specs import BYTES_PER_ELEMENT, InferenceWorkload, ModelSpec
from ..specs.quantization import linear_weight_bytes
from .flops import busiest_stage_layer_counts
from .inference_mla import mla_attention_ops
from .layer_cores import attention_core, embedding
from .layer_gemms import GemmShape, attention_gemms, final_norm, head_gemm, layer_norms, mlp_gemms, moe_gemms
from .ops import (
    ACT_BYTES,
    HALF_BYTES,
    Op,
    ServingAttention,
    decode_attention_shape,
    prompt_attention_shape,
    serving_gemm,
    serving_norm,
    serving_op,
)
from .shapes import experts_per_rank, heads_per_rank, kv_heads_per_rank


def causal_pairs(seq_len):
    """Query-key pairs a causal mask keeps in one sequence: S(S+1)/2."""
    s = np.asarray(seq_len, dtype=np.float64)
    return s * (s + 1) / 2


def local_heads(model: ModelSpec, tp):
    """(query heads, KV heads) per GPU; KV heads are whole and replicated when tp > g."""
    return heads_per_rank(model.heads, tp), kv_heads_per_rank(model.g, tp)


def experts_touched(num_local, top_k, num_experts, tokens_routed):
    """Expected local experts that receive at least one of `tokens_routed` tokens (uniform
    top-k routing): num_local·(1 − (1 − k/E)^tokens). A decode step with few tokens reads only
    those experts' weights (Mixtral batch 1 reads 2 of 8)."""
    miss = np.power(1.0 - top_k / num_experts, np.asarray(tokens_routed, dtype=np.float64))
    return num_local * (1.0 - miss)


def ep_in_tp(tp, ep):
    """EP lives inside the TP group when ep > 1 divides tp (the seed's EP: attention split by heads,
    experts spread over the same ranks, results summed by the TP all-reduce); otherwise ep spans
    replicas / prompt shards (dp·sp) and tokens travel by all-to-all."""
    tp, ep = np.asarray(tp), np.asarray(ep)
    return (ep > 1) & (tp % ep == 0)


def expert_tp(tp, ep):
    """Ways each routed expert's FFN is split: tp/ep with EP inside TP, else tp (Megatron default)."""
    tp = np.asarray(tp, dtype=np.float64)
    return np.where(ep_in_tp(tp, ep), tp / np.asarray(ep, dtype=np.float64), tp)


def layer_ops(
    model: ModelSpec,
    wl: InferenceWorkload,
    tp,
    ep,
    tokens,
    attn_pairs,
    kv_read_tokens,
    kv_write_tokens,
    kv_read_bytes,
    moe_imbalance,
    dense_layers,
    moe_layers,
    decode_part=None,
) -> list[Op]:
    """Ops of the decoder layers of one stage on one GPU.

    tokens           T, tokens this GPU pushes through the projections
    attn_pairs       query-key pairs this GPU scores (sum over its sequences)
    kv_read_tokens   K/V positions read by attention (per layer, summed over sequences)
    kv_write_tokens  K/V positions appended to the cache
    kv_read_bytes    bytes per K (or V) element read: kv_dtype in decode, 16-bit in prefill
    dense_layers, moe_layers  layers of each type on the stage (counts)
    decode_part      (tokens, pairs, key positions) of the above that are decode tokens reading
                     the cache at kv_dtype (the rest reads kv_read_bytes); None: none of them
    MLA models (model.mla): the attention ops are `cost.inference_mla` (prefill in the naive
    form, decode tokens absorbed over the latent cache).
    """
    tp = np.asarray(tp, dtype=np.float64)
    T = np.asarray(tokens, dtype=np.float64)
    wb = linear_weight_bytes(wl)  # the element and its scales (specs/quantization.py)
    kvb = BYTES_PER_ELEMENT[wl.kv_dtype]
    ab = ACT_BYTES
    all_layers = np.asarray(dense_layers, dtype=np.float64) + moe_layers
    inf = np.full_like(T, np.inf)
    zero = np.zeros_like(T)

    norms = layer_norms(model, T)

    def norm(name, count):
        return serving_norm(norms[name], count, zero)

    def linear(g: GemmShape, count, weight_bytes=wb, weights=None):
        return serving_gemm(g, count, (g.weight_elements if weights is None else weights) * weight_bytes)

    pairs, kv_pos = np.asarray(attn_pairs, dtype=np.float64), np.asarray(kv_read_tokens, dtype=np.float64)
    if decode_part is None:
        decode_part = (0 * T, 0 * T, 0 * T)
    Td, Pd, Kd = (np.asarray(x, dtype=np.float64) for x in decode_part)
    if model.mla is not None:
        ops = [norm("norm_attn", all_layers)]
        ops += mla_attention_ops(
            model, wl, tp, T, all_layers, (T - Td, pairs - Pd, kv_pos - Kd), (Td, Pd, Kd), kv_write_tokens
        )
        ops.append(norm("norm_mlp", all_layers))
        return ops + _mlp_ops(model, tp, ep, T, dense_layers, moe_layers, moe_imbalance, linear)
    # the pass's attention core (`cost.layer_cores`), and the prompt tokens' and decode tokens' parts
    core = attention_core(model, tp, T, pairs, kv_pos)
    prompt_core = attention_core(model, tp, T - Td, pairs - Pd, kv_pos - Kd)
    decode_core = attention_core(model, tp, Td, Pd, Kd)
    # K (or V) bytes read per element of a key position: decode positions from the cache at kv_dtype,
    # the rest at kv_read_bytes
    kv_read = (kv_pos - Kd) * kv_read_bytes + Kd * kvb
    # Without flash attention the scores are written by QKᵀ and the probabilities read by ·V, one
    # 16-bit element per head and kept pair (an upper-triangle-skipping kernel; eager PyTorch
    # materializes the masked half too)
    scores = 0.0 if wl.flash_attention else core.score_elements * ab
    prompt = prompt_attention_shape(prompt_core.queries, prompt_core.pairs, core.heads)
    decode = decode_attention_shape(Td, Pd, Kd)

    def kernels(share):
        return ServingAttention(
            share=share,
            prefill_flops=prompt_core.flops,
            seq=prompt[0],
            heads=prompt[1],
            kv_bytes=(decode_core.k_elements + decode_core.v_elements) * kvb,
            decode_flops=decode_core.flops,
            streams=decode[1] * core.kv_heads,
            context=decode[0],
            unfused_bytes=scores,
        )

    qkv, out_proj = attention_gemms(model, T, tp)
    cache_write = kv_write_tokens * (core.k_width + core.v_width) * kvb  # the new K and V appended
    ops = [
        norm("norm_attn", all_layers),
        linear(qkv, all_layers),
        # scores: reads Q and K, writes the new K and V to the cache
        serving_op(
            "attention_qk",
            "attention",
            all_layers,
            core.scores_flops,
            zero,
            core.q_elements * ab + kv_read * core.k_width + cache_write + scores,
            inf,
            kernels(core.scores_share),
        ),
        # probabilities · V: reads V, writes the output
        serving_op(
            "attention_pv",
            "attention",
            all_layers,
            core.values_flops,
            zero,
            kv_read * core.v_width + core.o_elements * ab + scores,
            inf,
            kernels(core.values_share),
        ),
        linear(out_proj, all_layers),
        norm("norm_mlp", all_layers),
    ]
    return ops + _mlp_ops(model, tp, ep, T, dense_layers, moe_layers, moe_imbalance, linear)


def _mlp_ops(model, tp, ep, T, dense_layers, moe_layers, moe_imbalance, linear) -> list[Op]:
    """Dense MLP (dense layers) and router + routed/shared experts (MoE layers) of one stage."""
    h = model.hidden
    dense = np.asarray(dense_layers, dtype=np.float64)
    ops = [linear(g, dense) for g in mlp_gemms(model, T, tp)]
    if model.moe is not None:
        moe = model.moe
        E, k = moe.num_experts, moe.top_k
        ep = np.asarray(ep, dtype=np.float64)
        local = experts_per_rank(E, ep)
        in_tp = ep_in_tp(tp, ep)
        # EP inside the TP group (seed, vLLM): every rank sees the replica's T tokens and keeps those
        # routed to its E/ep experts, T·k/ep on average, each expert split tp/ep ways. EP across
        # replicas: the all-to-all brings ep·T·k tokens to ep GPUs, T·k each, experts split tp ways.
        # The busiest GPU gets moe_imbalance × the mean (only when experts are spread, ep > 1).
        T_e = T * k / np.where(in_tp, ep, 1.0) * np.where(ep > 1, moe_imbalance, 1.0)
        touched = experts_touched(local, k, E, np.where(in_tp, T, T * ep))
        per_expert = np.maximum(T_e / local, 1.0)  # GEMM rows per local expert
        ml = np.asarray(moe_layers, dtype=np.float64)
        router, g_up, g_down, *shared = moe_gemms(model, T, tp, T_e, expert_tp(tp, ep))
        ops.append(linear(router, ml, weight_bytes=HALF_BYTES))  # bf16, as in training
        up = linear(g_up, ml, weights=touched * g_up.k * g_up.n)  # the touched experts' weights
        down = linear(g_down, ml, weights=touched * g_down.k * g_down.n)
        up.dim = down.dim = per_expert
        # one grouped kernel over the experts that got tokens, rows = routed copies per such expert
        rows = np.maximum(T_e / np.maximum(touched, 1.0), 1.0)
        up.mkn, down.mkn = (rows, h, g_up.n), (rows, g_down.k, h)
        up.experts = down.experts = touched
        up.expert_matrices = float(model.mlp_up_matrices)
        imbalance = np.where(ep > 1, moe_imbalance, 1.0)
        if np.any(imbalance > 1.0):  # the ranks at the mean load (Op.balanced_rows)
            up.balanced_rows = down.balanced_rows = np.maximum(T_e / imbalance / np.maximum(touched, 1.0), 1.0)
        ops += [up, down] + [linear(g, ml) for g in shared]
    return ops


def head_ops(model: ModelSpec, tp, tokens, head_tokens, has_embedding, has_head) -> list[Op]:
    """Embedding gather (first stage) and final norm + output head (last stage), once per step.

    Only the last position of each sequence needs logits (`head_tokens` = sequences), in prefill
    as in decode; logits are written in fp32. The vocabulary is split by tp.
    """
    h, V = model.hidden, model.vocab
    tp = np.asarray(tp, dtype=np.float64)
    T = np.asarray(tokens, dtype=np.float64)
    Th = np.asarray(head_tokens, dtype=np.float64) + 0 * T
    inf = np.full_like(T, np.inf)
    g = head_gemm(model, Th, tp)  # logits stay bf16, as in training
    lm_head = serving_gemm(g, np.where(has_head, 1.0, 0.0) + 0 * T, g.weight_elements * HALF_BYTES + 0 * T)
    lm_head.other_bytes = Th * (h * ACT_BYTES + V / tp * 4)  # logits written in fp32
    emb = np.where(has_embedding, 1.0, 0.0) + 0 * T
    head = np.where(has_head, 1.0, 0.0) + 0 * T
    e = embedding(model, T)  # the inventory's (cost.layer_cores): a 16-bit row read, the activation written
    return [
        serving_op("embedding", "memory", emb, 0 * T, e.elements * HALF_BYTES, e.elements * ACT_BYTES, inf),
        serving_norm(final_norm(model, Th), head, 0 * T),
        lm_head,
    ]


def weight_elements_per_gpu(model: ModelSpec, tp, ep, layers_on_stage, pp):
    """Parameters one GPU holds (busiest stage), split into quantized linear weights and 16-bit
    rest (norms, router, embedding, head). All experts count (memory), not just touched ones.

    Returns (linear, half) element counts. With tp=pp=ep=1 their sum is the exact parameter
    count (`cost.params.total_params`). With pp > 1 the busiest stage holds ceil(L/pp) layers and
    one vocabulary matrix (embedding on the first stage, head on the last).
    """
    h, d, V = model.hidden, model.d, model.vocab
    tp = np.asarray(tp, dtype=np.float64)
    pp = np.asarray(pp)
    a_l, g_l = local_heads(model, tp)
    q_l, kv_l = a_l * d, g_l * d
    n = np.asarray(layers_on_stage, dtype=np.float64)
    n_dense, n_moe = busiest_stage_layer_counts(model, pp, layers_on_stage)  # integers, as in training
    mult = model.mlp_matrices
    attn = h * (q_l + 2 * kv_l) + q_l * h
    latent_norms = 0
    if model.mla is not None:  # down projections replicated, up projections and o_proj split by heads
        from .params import mla_params

        latent_norms = model.mla.kv_lora_rank + (model.mla.q_lora_rank or 0)
        replicated, sharded = mla_params(model)
        attn = replicated - latent_norms + sharded / tp
    linear = n * attn + n_dense * mult * h * model.ffn_hidden / tp
    half = n * (2 * h + latent_norms)  # two RMSNorms per layer (+ MLA's latent RMSNorms)
    if model.moe is not None:
        moe = model.moe
        linear = linear + (
            n_moe * experts_per_rank(moe.num_experts, ep) * mult * h * moe.ffn_hidden / expert_tp(tp, ep)
        )
        if moe.num_shared_experts:
            linear = linear + n_moe * moe.num_shared_experts * mult * h * moe.shared_expert_ffn / tp
        half = half + n_moe * h * moe.num_experts
    vocab = V * h / tp
    single = pp == 1
    half = half + np.where(single, vocab * (1 if model.tie_embeddings else 2) + h, vocab + h)
    return linear, half
