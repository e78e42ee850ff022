"""The GEMMs of one transformer layer (and of the logits head) on one GPU: the one inventory of
their shapes that training (`cost.flops`) and serving (`cost.inference_ops`, `cost.inference_mla`)
both wrap into ops (issue 27, item 1).

A GEMM C[m, n] = A[m, k]·W[k, n] of a rank's shard, for `tokens` T rows on the rank and TP size t
(Megatron-LM's split: column-parallel QKV / gate_up by heads or FFN columns, row-parallel out_proj /
down by their input; the logits GEMM splits the vocabulary). h hidden, a heads of d dims
(q = a·d), g_l = max(g/t, 1) KV heads per rank (`shapes.kv_heads_per_rank`), I the FFN width,
m = `model.mlp_up_matrices` (2 when gated):

  qkv          T × h × (q/t + 2·d·g_l)            out_proj   T × q/t × h
  gate_up|fc1  T × h × m·I/t                      down|fc2   T × I/t × h
  MLA (DeepSeek-V2/V3): q_proj T × h × a(n+p)/t, or q_down T × h × r_q and q_up T × r_q × a(n+p)/t;
               kv_down T × h × (r_kv+p), kv_up R × r_kv × a(n+v)/t, out_proj T × a·v/t × h
               (the down projections are replicated over TP)
  MoE layer:   router T/r × h × E (bf16), experts_up C × h × m·I_e/t_e, experts_down C × I_e/t_e × h,
               shared_up T × h × m·I_s/t, shared_down T × I_s/t × h (I_s = shared experts' total FFN)
  head:        logits T × h × V/t (bf16)

What the two schedules genuinely do differently is a named parameter here, not a second formula:
  sp_divisor     r: the router's rows are the sequence-parallel shard, T/r (training with SP; 1 else)
  routed_tokens  C: token copies this GPU's experts process (training: T·k·load on the busiest
                 rank; serving: T·k/ep with EP inside TP, T·k across replicas, × imbalance)
  expert_tp      t_e: ways each routed expert's FFN is split (t; serving's EP-inside-TP: t/ep)
  kv_up_rows     R: rows of MLA's K,V decompression (training: T; serving's prefill form: the key
                 positions the chunk reads)
  absorbed_gemms MLA's per-head q_absorb T × n × r_kv and v_up T × r_kv × v (a/t of each, `batch`):
                 serving's decode tokens read the latent cache without decompressing it
The inventory names are training's op names; serving labels the same GEMMs `SERVING_NAMES`.

Each GEMM carries the flags the schedules read (`cost.ops.Op`): low_precision (fp8/fp4 under a
low-precision recipe; the router and logits stay bf16), norm_fused (its input is a norm's
output), column_parallel (a TP region starts). What a phase adds stays with the phase: training's
backward bytes, weight copies of a grouped GEMM and main gradient (`flops._gemm`); serving's
weight bytes per call, call counts per stage, experts touched and grouped-kernel rows.

The norms are here too (`layer_norms`, `final_norm`): RMSNorm/LayerNorm over `rows` tokens of
`width` elements, h for the block norms, r_q and r_kv for MLA's latent norms (not split by SP:
the latents are replicated); training's sequence parallelism holds rows/r of the block norms'
tokens. The attention cores, residuals, activations and other element-wise ops are
`cost.layer_cores`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..specs import ModelSpec
from .shapes import heads_per_rank, kv_heads_per_rank

# The serving schedule's label of each inventory GEMM (vLLM's module names).
SERVING_NAMES = {
    "qkv": "qkv_proj",
    "out_proj": "output_proj",
    "gate_up": "gate_up_proj",
    "fc1": "gate_up_proj",
    "down": "down_proj",
    "fc2": "down_proj",
    "router": "router",
    "experts_up": "experts_gate_up",
    "experts_down": "experts_down",
    "shared_up": "shared_gate_up",
    "shared_down": "shared_down",
    "q_proj": "q_proj",
    "q_down": "q_a_proj",
    "q_up": "q_b_proj",
    "kv_down": "kv_a_proj",
    "kv_up": "kv_b_proj",
    "q_absorb": "q_absorb",
    "v_up": "v_up",
    "logits": "lm_head",
    "norm_attn": "attn_norm",
    "norm_mlp": "mlp_norm",
    "q_norm": "q_a_norm",
    "kv_norm": "kv_a_norm",
    "final_norm": "final_norm",
}


@dataclass(frozen=True)
class GemmShape:
    """One GEMM of a rank's shard, C[m, n] = A[m, k]·W[k, n]; arrays broadcast over layout rows."""

    name: str  # inventory (training) name; `serving_name` is serving's label
    m: Any  # rows: tokens on the rank (routed token copies for the experts)
    k: Any
    n: Any
    group: str  # attention | mlp | router | experts | shared | head
    low_precision: bool = True
    norm_fused: bool = False
    column_parallel: bool = False
    batch: Any = 1.0  # independent GEMMs of this shape, one per head (MLA's absorbed per-head GEMMs)
    # nn.Linear modules over the same input that this one GEMM stands for in a PyTorch model (HF and
    # torchtitan Llama: q, k, v and the gate and up projections are separate Linears; Megatron fuses them)
    linears: float = 1.0

    @property
    def serving_name(self) -> str:
        return SERVING_NAMES[self.name]

    @property
    def flops(self):
        """2·m·k·n per GEMM of the batch (a multiply-add is 2 FLOPs)."""
        return 2.0 * self.m * self.k * self.n * self.batch

    @property
    def weight_elements(self):
        """k·n per GEMM of the batch: elements of one weight matrix (an expert's, for the routed
        experts; a head's for a batched GEMM, so batch·k·n)."""
        return self.batch * self.k * self.n


@dataclass(frozen=True)
class NormShape:
    """A norm over `rows` tokens of `width` elements on one GPU (bytes only: each element read and
    written; its weight is `width` elements); training's SP shard holds rows/`sp_divisor` of them."""

    name: str  # inventory (training) name; `serving_name` is serving's label
    rows: Any
    width: Any
    sp_divisor: Any = 1.0

    @property
    def serving_name(self) -> str:
        return SERVING_NAMES[self.name]


def layer_norms(model: ModelSpec, tokens, sp_divisor=1.0) -> dict[str, NormShape]:
    """The norms of one layer by inventory name: the block norms before attention and the MLP, and
    MLA's latent norms after q_down and kv_down (module docstring)."""
    h = model.hidden
    out = {
        "norm_attn": NormShape("norm_attn", tokens, h, sp_divisor),
        "norm_mlp": NormShape("norm_mlp", tokens, h, sp_divisor),
    }
    if model.mla is not None:
        if model.mla.q_lora_rank is not None:
            out["q_norm"] = NormShape("q_norm", tokens, model.mla.q_lora_rank)
        out["kv_norm"] = NormShape("kv_norm", tokens, model.mla.kv_lora_rank)
    return out


def final_norm(model: ModelSpec, tokens, sp_divisor=1.0) -> NormShape:
    """The norm before the logits head."""
    return NormShape("final_norm", tokens, model.hidden, sp_divisor)


def _f(x) -> np.ndarray:
    return np.asarray(float(x))


def attention_gemms(model: ModelSpec, tokens, tp, kv_up_rows=None) -> list[GemmShape]:
    """Projections of the attention block, in execution order (module docstring)."""
    T, t = tokens, np.asarray(tp, dtype=np.float64)
    h, a = model.hidden, model.heads
    if model.mla is None:
        qkv_n = model.q_dim / t + 2.0 * model.d * kv_heads_per_rank(model.g, t)
        return [
            GemmShape("qkv", T, h, qkv_n, "attention", norm_fused=True, column_parallel=True, linears=3.0),
            GemmShape("out_proj", T, model.q_dim / t, h, "attention"),
        ]
    m = model.require_mla()
    n, p, v = m.qk_nope_head_dim, m.qk_rope_head_dim, m.v_head_dim
    if m.q_lora_rank is None:
        q = [GemmShape("q_proj", T, h, a * (n + p) / t, "attention", norm_fused=True)]
    else:
        q = [
            GemmShape("q_down", T, h, _f(m.q_lora_rank), "attention", norm_fused=True),
            GemmShape("q_up", T, _f(m.q_lora_rank), a * (n + p) / t, "attention"),
        ]
    return q + [
        GemmShape("kv_down", T, h, _f(m.latent_width), "attention", norm_fused=True),
        GemmShape("kv_up", T if kv_up_rows is None else kv_up_rows, _f(m.kv_lora_rank), a * (n + v) / t, "attention"),
        GemmShape("out_proj", T, a * v / t, h, "attention"),
    ]


def absorbed_gemms(model: ModelSpec, tokens, tp) -> list[GemmShape]:
    """MLA's absorbed decode form (DeepSeek-V2 §2.1.3; vLLM and SGLang's MLA backends): per head,
    q_absorb folds W_UK into the query (T × n × r_kv) and v_up applies W_UV after attention over the
    latent (T × r_kv × v), a/t heads each (`batch`); serving's decode tokens only (training has no
    cache and runs the naive form, kv_up)."""
    m = model.require_mla()
    a_l = heads_per_rank(model.heads, np.asarray(tp, dtype=np.float64))
    n, r, v = _f(m.qk_nope_head_dim), _f(m.kv_lora_rank), _f(m.v_head_dim)
    return [
        GemmShape("q_absorb", tokens, n, r, "attention", batch=a_l),
        GemmShape("v_up", tokens, r, v, "attention", batch=a_l),
    ]


def mlp_gemms(model: ModelSpec, tokens, tp) -> list[GemmShape]:
    """A dense layer's MLP: gate_up (fc1) and down (fc2)."""
    t, h, I = np.asarray(tp, dtype=np.float64), model.hidden, model.ffn_hidden
    up, down = ("gate_up", "down") if model.gated else ("fc1", "fc2")
    return [
        GemmShape(
            up,
            tokens,
            h,
            model.mlp_up_matrices * I / t,
            "mlp",
            norm_fused=True,
            column_parallel=True,
            linears=float(model.mlp_up_matrices),
        ),
        GemmShape(down, tokens, I / t, h, "mlp"),
    ]


def moe_gemms(model: ModelSpec, tokens, tp, routed_tokens, expert_tp=None, sp_divisor=1.0) -> list[GemmShape]:
    """A MoE layer's router, routed experts (one matrix each; the schedule counts the copies) and
    shared experts (module docstring for the parameters)."""
    moe = model.require_moe()
    t, h = np.asarray(tp, dtype=np.float64), model.hidden
    t_e = t if expert_tp is None else expert_tp
    I, mult = moe.ffn_hidden, model.mlp_up_matrices
    out = [
        GemmShape("router", tokens / sp_divisor, h, _f(moe.num_experts), "router", low_precision=False),
        GemmShape("experts_up", routed_tokens, h, mult * I / t_e, "experts"),
        GemmShape("experts_down", routed_tokens, I / t_e, h, "experts"),
    ]
    if moe.num_shared_experts:
        sI = moe.shared_expert_ffn * moe.num_shared_experts
        out += [
            GemmShape("shared_up", tokens, h, mult * sI / t, "shared", norm_fused=True, column_parallel=True),
            GemmShape("shared_down", tokens, sI / t, h, "shared"),
        ]
    return out


def head_gemm(model: ModelSpec, tokens, tp) -> GemmShape:
    """The logits GEMM, vocabulary split by t; kept in bf16 (Transformer Engine, vLLM)."""
    t = np.asarray(tp, dtype=np.float64)
    return GemmShape("logits", tokens, model.hidden, model.vocab / t, "head", low_precision=False)


def layer_gemms(
    model: ModelSpec,
    tokens,
    tp,
    moe_layer: bool = False,
    routed_tokens=None,
    expert_tp=None,
    sp_divisor=1.0,
    kv_up_rows=None,
) -> list[GemmShape]:
    """Every GEMM of one layer on one GPU, in execution order: attention projections, then the
    dense MLP or (moe_layer) the router, routed and shared experts. `routed_tokens` defaults to
    T·k, every token's k copies on this GPU (one rank holding all experts, no imbalance)."""
    out = attention_gemms(model, tokens, tp, kv_up_rows)
    if not moe_layer:
        return out + mlp_gemms(model, tokens, tp)
    if routed_tokens is None:
        routed_tokens = tokens * model.require_moe().top_k
    return out + moe_gemms(model, tokens, tp, routed_tokens, expert_tp, sp_divisor)
