"""The attention core and the element-wise (HBM-only) ops of one transformer layer on one GPU: the
one inventory of their shapes that training (`cost.flops`) and serving (`cost.inference_ops`,
`cost.inference_mla`) both wrap into ops (issue 27, item 1; the GEMMs and norms are
`cost.layer_gemms`).

Attention core (`attention_core`): Q·Kᵀ over `pairs` query-key pairs per query head, then P·V,
for `queries` T query tokens on the rank and `key_positions` K key (and value) positions read.
Per head the scores are qk_dim wide and the values v_dim wide; a_l = a/t query heads
(`shapes.heads_per_rank`) read K, V heads of `kv_heads` per position:

  form             kv_heads   qk_dim   v_dim   source
  GQA / MHA        g_l        d        d       g_l = max(g/t, 1), `shapes.kv_heads_per_rank`
  MLA naive        a_l        n+p      v       K, V decompressed by kv_up (DeepSeek-V2 §2.1)
  MLA absorbed     1          r_kv+p   r_kv    W_UK folded into Q, W_UV after: the latent is
                                               K and V at once (read once; FlashMLA, vLLM)

  FLOPs   scores 2·P·a_l·qk_dim, values 2·P·a_l·v_dim     (a multiply-add is 2 FLOPs)
  elements  Q T·a_l·qk_dim, O T·a_l·v_dim, K K·kv_heads·qk_dim, V K·kv_heads·v_dim (0 absorbed),
            the score matrix P·a_l (in HBM only without flash attention)

What the two schedules genuinely do differently is a named parameter, not a second formula:
  pairs          the causal prefix: training T·s/2 (a causal kernel skips the blocks above the
                 diagonal, FlashAttention-2; eager attention's full block T·s), serving the exact
                 S(S+1)/2 of each prompt plus a decode query's whole context (`causal_pairs`)
  key_positions  training s·b (every key of the micro-batch's sequences, the CP ring's included);
                 serving the KV-cache positions the pass reads
  absorbed       serving decode's one-query form of MLA (never in training, which has no cache)
Each schedule multiplies the elements by its own bytes (training bf16; serving its kv_dtype for
cache reads) and adds what only it does: training's backward and the CP ring's merges, serving's
cache writes and its kernel shapes (`ops.ServingAttention`).

Element-wise ops (`layer_elementwise`, `embedding`): rows × width / divisor elements, each
accessed `accesses` times (read + written) at 2 bytes:
  rope            T × (q/t + d·g_l) (Q and K heads; MLA: a·p/t + p, the shared RoPE key), 2
  residual_attn   T × h / r, 3 (both summands read, the sum written) (+ dropout's mask)
  swiglu | gelu   T × I / t, 3 | 2 (gate and up read, product written | in, out)
  permute         C × h, 2 (routed token copies gathered per expert; unpermute scatters back)
  activation      C × I_e / t_e, 3 | 2            shared_activation  T × I_s / t, 3 | 2
  residual_mlp    T × h / r, 3 (+ dropout)
  embedding       T × h / r, 2 (a row read, the activation written)
r is training's sequence-parallel divisor (1 in serving), C the routed token copies and t_e the
expert split (`layer_gemms` names them the same). Serving prices the norms and the embedding of
this list; a serving layer's RoPE, residual adds and activations are not priced (an
under-count of HBM traffic stated in `cost.inference_ops`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..specs import ModelSpec
from .shapes import heads_per_rank, kv_heads_per_rank

# Elements accessed (read + written) per element of an element-wise op (module docstring).
RW_ACCESSES = 2.0  # read the input, write the output (norm, RoPE, GELU, permute, embedding row)
RESIDUAL_ACCESSES = 3.0  # read both summands, write the sum
SWIGLU_ACCESSES = 3.0  # read gate and up, write their product


@dataclass(frozen=True)
class AttentionCore:
    """One layer's attention core on one GPU (module docstring); arrays broadcast over layout rows."""

    queries: Any  # T: query tokens on the rank (rows of Q and O)
    pairs: Any  # query-key pairs scored per query head (the causal prefix)
    key_positions: Any  # K: key (and value) positions read
    heads: Any  # query heads on the rank, a/t
    kv_heads: Any  # K, V heads read per key position
    qk_dim: Any  # per-head width of Q and K
    v_dim: Any  # per-head width of V and O
    values_are_keys: bool = False  # MLA absorbed: V is the latent already read as K

    @property
    def scores_flops(self):
        """Q·Kᵀ: 2·P·a_l·qk_dim."""
        return 2.0 * self.pairs * self.heads * self.qk_dim

    @property
    def values_flops(self):
        """P·V: 2·P·a_l·v_dim."""
        return 2.0 * self.pairs * self.heads * self.v_dim

    @property
    def flops(self):
        return self.scores_flops + self.values_flops

    @property
    def scores_share(self):
        """The scores' share of the core's FLOPs, qk_dim / (qk_dim + v_dim)."""
        return self.qk_dim / (self.qk_dim + self.v_dim)

    @property
    def values_share(self):
        return self.v_dim / (self.qk_dim + self.v_dim)

    @property
    def q_elements(self):
        return self.queries * self.heads * self.qk_dim

    @property
    def o_elements(self):
        return self.queries * self.heads * self.v_dim

    @property
    def k_width(self):
        """K elements per key position."""
        return self.kv_heads * self.qk_dim

    @property
    def v_width(self):
        """V elements per key position (0 when the values are the keys)."""
        return 0.0 if self.values_are_keys else self.kv_heads * self.v_dim

    @property
    def k_elements(self):
        return self.key_positions * self.k_width

    @property
    def v_elements(self):
        return self.key_positions * self.v_width

    @property
    def score_elements(self):
        """The P·a_l scores (and as many probabilities) a kernel without flash attention writes."""
        return self.pairs * self.heads


def attention_core(model: ModelSpec, tp, queries, pairs, key_positions, absorbed: bool = False) -> AttentionCore:
    """The attention core of one layer on one GPU (module docstring for the forms and parameters)."""
    t = np.asarray(tp, dtype=np.float64)
    a_l = heads_per_rank(model.heads, t)
    if model.mla is None:
        g_l = kv_heads_per_rank(model.g, t)
        return AttentionCore(queries, pairs, key_positions, a_l, g_l, model.d, model.d)
    m = model.require_mla()
    if absorbed:
        return AttentionCore(queries, pairs, key_positions, a_l, 1.0, m.latent_width, m.kv_lora_rank, True)
    return AttentionCore(queries, pairs, key_positions, a_l, a_l, m.qk_head_dim, m.v_head_dim)


@dataclass(frozen=True)
class ElementwiseShape:
    """An element-wise op over rows × width / divisor elements on one GPU, each accessed `accesses`
    times; `dropout`: a dropout follows it (its mask and dropped output, when the model has one)."""

    name: str
    rows: Any
    width: Any
    accesses: float
    divisor: Any = 1.0  # ranks that split the rows (SP's r) or the width (TP's t)
    dropout: bool = False

    @property
    def elements(self):
        """Elements the op touches on one GPU: rows × width / divisor."""
        return self.rows * self.width / self.divisor


def _activation_accesses(model: ModelSpec) -> float:
    return SWIGLU_ACCESSES if model.gated else RW_ACCESSES


def rope(model: ModelSpec, tokens, tp) -> ElementwiseShape | None:
    """RoPE over the rank's Q and K heads (None for learned positions): GQA q/t + d·g_l per token;
    MLA the a/t heads' p rotary dims and the one shared RoPE key."""
    t = np.asarray(tp, dtype=np.float64)
    if model.mla is not None:
        p = model.mla.qk_rope_head_dim
        return ElementwiseShape("rope", tokens, model.heads * p / t + p, RW_ACCESSES)
    if model.position_embedding != "rope":
        return None
    return ElementwiseShape("rope", tokens, model.q_dim / t + model.d * kv_heads_per_rank(model.g, t), RW_ACCESSES)


def layer_elementwise(
    model: ModelSpec,
    tokens,
    tp,
    moe_layer: bool = False,
    routed_tokens=None,
    expert_tp=None,
    sp_divisor=1.0,
) -> dict[str, ElementwiseShape]:
    """The element-wise ops of one layer on one GPU by name, in execution order (module docstring;
    the norms are `layer_gemms.layer_norms`). `routed_tokens` defaults to T·k, `expert_tp` to t."""
    t, h = np.asarray(tp, dtype=np.float64), model.hidden
    T = tokens
    out: dict[str, ElementwiseShape] = {}
    r = rope(model, T, t)
    if r is not None:
        out["rope"] = r
    out["residual_attn"] = ElementwiseShape("residual_attn", T, h, RESIDUAL_ACCESSES, sp_divisor, dropout=True)
    act = _activation_accesses(model)
    if moe_layer:
        moe = model.require_moe()
        C = T * moe.top_k if routed_tokens is None else routed_tokens
        t_e = t if expert_tp is None else expert_tp
        out["permute"] = ElementwiseShape("permute", C, h, RW_ACCESSES)
        out["activation"] = ElementwiseShape("activation", C, moe.ffn_hidden, act, t_e)
        out["unpermute"] = ElementwiseShape("unpermute", C, h, RW_ACCESSES)
        if moe.num_shared_experts:
            sI = moe.shared_expert_ffn * moe.num_shared_experts
            out["shared_activation"] = ElementwiseShape("shared_activation", T, sI, act, t)
    else:
        name = "swiglu" if model.gated else "gelu"
        out[name] = ElementwiseShape(name, T, model.ffn_hidden, act, t)
    out["residual_mlp"] = ElementwiseShape("residual_mlp", T, h, RESIDUAL_ACCESSES, sp_divisor, dropout=True)
    return out


def embedding(model: ModelSpec, tokens, sp_divisor=1.0) -> ElementwiseShape:
    """The embedding lookup: a row of h read per token, the activation written (then dropout, when
    the model has one)."""
    return ElementwiseShape("embedding", tokens, model.hidden, RW_ACCESSES, sp_divisor, dropout=True)
