"""Activation memory: bytes saved for backward, per layer and per pipeline stage.

Per-tensor inventory of one transformer layer for one micro-batch on one GPU, Megatron-style
fused kernels (Korthikanti et al. 2022, section 4.1). Notation: S = s/cp tokens per sequence on
this rank, b micro-batch, t TP, r = t with sequence parallelism else 1 (tensors outside the TP
region are replicated without SP), 2-byte activations, 1-byte dropout masks.

  attention: norm input 2Sbh/r, QKV input 2Sbh/r, Q 2Sbq/t, K and V 4Sb·d·g_local,
             scores: softmax 2aSsb/t (+ dropout mask aSsb/t + dropout output 2aSsb/t),
             or with flash attention only the fp32 log-sum-exp 4aSb/t,
             projection input 2Sbq/t, dropout mask Sbh/r
  MLA attention (model.mla; q = a·(n+p) query/key width, a·v value width): Q and K 2Sbq/t each,
             V and projection input 2Sb·a·v/t each (decompressed, split by heads), and the latent
             tensors the norms and up projections keep, on all S·b tokens of every TP rank (the
             down projections are replicated, so SP does not split them): q_down output (norm
             input) and q_a_layernorm output (q_up input) 2·r_q each, kv latent and
             kv_a_layernorm output (kv_up input) 2·r_kv each; the RoPE part k_pe is consumed
             by the fused RoPE (backward needs only the frequencies)
  MLP:       norm input 2Sbh/r, fc1 input 2Sbh/r, GELU 4SbI/t or SwiGLU 6SbI/t
             (fc1 output 2·2SbI/t and the gated product 2SbI/t), dropout mask Sbh/r
  MoE MLP:   fc1 input 2Sbh/r, router probabilities 4SbE/r (fp32); routed tokens R =
             S·b·k·imbalance (capped by the capacity factor): permuted input 2h·R/r and expert
             output 2h·R/r (sequence-parallel shards, combine backward), expert MLP 6I_e·R/t
             (SwiGLU) or 4I_e·R/t on the TP-all-gathered tokens (Megatron alltoall dispatcher:
             the SP shard goes over EP, then an all-gather over TP; expert TP = TP)
With GPT shapes (f = 4h, MHA, dropout, no flash) this is exactly Korthikanti's Table 2:
  sbh(34 + 5as/h) unsharded, sbh(10 + 24/t + 5as/(ht)) with TP, /t with TP+SP.
Selective recompute recomputes the attention core: drops the score terms (and the LSE).
Full recompute keeps only the layer input 2Sbh/r.

FP8_SAVED_INPUTS (workload.precision=fp8 with low_precision_gemms=all: Transformer Engine's
fp8_autocast over every Linear, as NVIDIA's Megatron recipes run it). TE's modules save the
fp8-quantized input of each GEMM for the wgrad GEMM instead of the bf16 one, 1 byte per element
(NVIDIA/TransformerEngine transformer_engine/pytorch/module/layernorm_linear.py, _LayerNormLinear
forward: `ln_out` quantized, `update_usage(rowwise_usage=False)` keeps the column-wise copy only,
or the row-wise shard alone under sequence parallelism, which backward all-gathers;
module/linear.py, _Linear forward: "Discard row-wise data since it is not needed in backward
pass"; both still save the bf16 norm input `inputmat` for the norm's backward). Per layer:
  QKV input (LayerNormLinear)   2Sbh/r -> Sbh/r
  fc1 input (LayerNormLinear)   2Sbh/r -> Sbh/r         (dense layers)
  fc2 input (Linear)            2SbI/t -> SbI/t          (the SwiGLU / GELU output; dense layers)
  out_proj input (Linear)       + Sbq/t: its fp8 copy, beside the bf16 attention output the fused
                                attention saves for its own backward (TE's attention runs in bf16
                                unless fp8_dot_product_attention, which the recipes leave off)
MLA layers and MoE layers' expert GEMMs (grouped GEMMs on the dispatched tokens) keep the bf16
count here.
"""

from __future__ import annotations

import numpy as np

from ..specs import ModelSpec, Recompute
from .shapes import kv_heads_per_rank, moe_token_load, sp_divisor, tokens_per_rank

NONE, SELECTIVE, FULL = (int(c) for c in (Recompute.NONE, Recompute.SELECTIVE, Recompute.FULL))


def fp8_saved_inputs(wl) -> bool:
    """Whether the layers' GEMMs save their inputs in fp8 (`layer_activation_bytes`): fp8 under
    Transformer Engine's fp8_autocast over every Linear (workload.low_precision_gemms=all, as
    NVIDIA's recipes run it). torchao's Float8Linear (where_faster, torchtitan) saves its
    high-precision input and casts again in backward; fp4 recipes keep the bf16 count."""
    return wl.precision == "fp8" and wl.low_precision_gemms == "all"


def layer_activation_bytes(
    model: ModelSpec,
    s: int,
    b,
    t,
    cp,
    sp,
    recompute,
    flash: bool,
    moe_layer: bool = False,
    moe_imbalance: float = 1.0,
    fp8_inputs: bool = False,
) -> np.ndarray:
    """Bytes one layer saves for backward, one micro-batch, one GPU (see module docstring);
    fp8_inputs: the GEMMs keep fp8 copies of their inputs (`fp8_saved_inputs`, FP8_SAVED_INPUTS)."""
    h, a, q, d, I = model.hidden, model.heads, model.q_dim, model.d, model.ffn_hidden
    b, t, cp = (np.asarray(x, dtype=np.float64) for x in (b, t, cp))
    recompute = np.asarray(recompute)
    r = sp_divisor(t, sp)
    tok = tokens_per_rank(s, b, cp)  # tokens of this micro-batch on this rank
    g_local = kv_heads_per_rank(model.g, t)
    mask = 1.0 if model.dropout else 0.0

    # attention block
    replicated = (2 * h + 2 * h + mask * h) * tok / r  # norm input, QKV input, dropout mask
    sharded = (2 * q / t + 4 * d * g_local + 2 * q / t) * tok  # Q, K+V, projection input
    if model.mla is not None:  # Q, K (n+p wide), V, projection input (v wide); latent tensors
        vw = a * model.mla.v_head_dim
        sharded = (2 * q / t + 2 * q / t + 4 * vw / t) * tok + 4.0 * (model.mla.q_lora_rank or 0) * tok
        sharded = sharded + 4.0 * model.mla.kv_lora_rank * tok
    if flash:
        core = 4.0 * a * tok / t  # fp32 log-sum-exp per head
    else:
        core = (2.0 + 3.0 * mask) * a * tok * s / t  # softmax (+ mask + dropout output)
    core = np.where(recompute == NONE, core, 0.0)

    # MLP block
    replicated = replicated + (2 * h + 2 * h) * tok / r  # norm input, fc1 input
    if moe_layer:
        moe = model.require_moe()
        load = moe_token_load(moe, moe_imbalance)
        routed = tok * moe.top_k * load  # routed tokens of this TP group (all TP ranks together)
        # permuted input and expert output are sequence-parallel shards (/r); the expert MLP runs on
        # the TP-all-gathered tokens with I_e split by t (Megatron alltoall dispatcher, ETP = TP)
        mlp = (
            routed * (2 * h + 2 * h) / r
            + routed * (6 if model.gated else 4) * moe.ffn_hidden / t
            + 4.0 * moe.num_experts * tok / r
        )
        if moe.num_shared_experts:
            sI = moe.shared_expert_ffn * moe.num_shared_experts
            mlp = mlp + (6 if model.gated else 4) * sI / t * tok
    else:
        mlp = (6 if model.gated else 4) * I / t * tok + mask * h * tok / r
    full_layer = replicated + sharded + core + mlp
    if fp8_inputs and model.mla is None:
        full_layer = full_layer - fp8_input_savings(model, tok, t, r, moe_layer)
    return np.where(recompute == FULL, 2.0 * h * tok / r, full_layer)


def fp8_input_savings(model: ModelSpec, tok, t, r, moe_layer: bool):
    """Bytes an fp8 layer saves for backward below the bf16 inventory (FP8_SAVED_INPUTS): the QKV
    input h/r and, in a dense layer, the fc1 input h/r and the fc2 input I/t go from 2 bytes to 1;
    the attention output (projection input) gains a 1-byte copy q/t beside the bf16 one the fused
    attention keeps. MoE layers' expert GEMMs keep the bf16 count."""
    h, q = model.hidden, model.q_dim
    saved = (h / r - q / t) * tok
    if not moe_layer:
        saved = saved + (h / r + model.ffn_hidden / t) * tok
    return saved


def logits_bytes(model: ModelSpec, s: int, b, t, cp) -> np.ndarray:
    """Last stage: bf16 logits (2SbV/t) and their fp32 copy kept by cross-entropy (4SbV/t)."""
    b, t, cp = (np.asarray(x, dtype=np.float64) for x in (b, t, cp))
    return 6.0 * tokens_per_rank(s, b, cp) * model.vocab / t


def stage_extra_bytes(
    model: ModelSpec, s: int, b, t, cp, sp, stage_has_embedding, stage_has_head, inflight_first
) -> np.ndarray:
    """Outside the layers: embedding dropout mask per in-flight micro-batch on the first stage;
    final-norm input and output-head input (2·2Sbh/r) on the last stage."""
    b, t, cp = (np.asarray(x, dtype=np.float64) for x in (b, t, cp))
    r = sp_divisor(t, sp)
    tok = tokens_per_rank(s, b, cp)
    emb = (1.0 if model.dropout else 0.0) * model.hidden * tok / r * inflight_first
    head = 4.0 * model.hidden * tok / r
    return np.where(stage_has_embedding, emb, 0.0) + np.where(stage_has_head, head, 0.0)
