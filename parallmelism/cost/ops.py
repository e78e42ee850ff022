"""One op (a kernel or a fused group of kernels) on one GPU: the unit every time term sums over.

Training ops (cost/flops.py) describe one micro-batch's forward with backward multipliers;
serving ops (cost/inference_ops.py, cost/inference_mla.py) describe one step's call with a call
count. Behaviour follows the fields, never the op's name:
  kind            MATMUL (tensor-core GEMM) | ATTENTION (fused attention kernel) | MEMORY (bandwidth only)
  low_precision   a GEMM that runs in fp8/fp4 under a low-precision recipe; Transformer Engine and
                  Megatron keep the logits GEMM, the router and attention's batched GEMMs in bf16
  attention_core  part of the attention core (the fused kernel, or eager attention's batched
                  GEMMs): selective recompute reruns it, the CP ring hides under it, and it runs
                  at the attention kernels' rate
  norm_fused      a GEMM whose input is a norm's output: Transformer Engine's LayerNormLinear /
                  LayerNormMLP write its fp8 input copy from the norm (no separate read for the cast)
  linears         the nn.Linear modules over one input a GEMM stands for (q, k, v: 3; gate, up: 2): a
                  recipe that casts per Linear (torchao rowwise, cost/roofline.py) casts that input as often
  column_parallel a column-parallel GEMM where a TP region starts (Megatron ColumnParallelLinear:
                  QKV, fc1/gate_up): its backward is the window that hides the TP input-gradient
                  collectives (cost/comm.py tp_layer_times_s)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..specs import BYTES_PER_ELEMENT, Code
from .layer_gemms import GemmShape, NormShape


class OpKind(Code):
    MATMUL = 0
    ATTENTION = 1
    MEMORY = 2


MATMUL, ATTENTION, MEMORY = OpKind.MATMUL, OpKind.ATTENTION, OpKind.MEMORY


@dataclass
class ServingAttention:
    """Kernel shapes of a serving attention op, timed by cost.roofline.serving_ops_times: one layer's
    attention core is a causal kernel over the prompt tokens of the pass (prefill form) plus a
    one-query kernel over the KV cache for its decode tokens; the op (scores or values half) takes
    `share` of both. Arrays broadcast over layout rows."""

    share: Any  # this op's share of the layer's attention kernels (by FLOPs)
    prefill_flops: Any  # FLOPs of the prompt tokens' kernel (both halves; 0 in a decode pass)
    seq: Any  # query length of that kernel's causal equivalent: 2 · pairs / tokens
    heads: Any  # query heads on the GPU × prompt sequences of that kernel (parallel CTAs)
    kv_bytes: Any  # KV-cache bytes the decode tokens read (both halves; 0 in a prefill pass)
    decode_flops: Any  # FLOPs of the decode tokens' kernel (both halves)
    streams: Any  # decode sequences × KV heads (or latent heads) on the GPU
    context: Any  # key positions each decode query reads on this GPU
    unfused_bytes: Any = 0.0  # this op's scores and probabilities in HBM without flash attention


@dataclass
class Op:
    """Arrays broadcast over layout rows."""

    name: str
    kind: OpKind
    flops: Any  # forward FLOPs executed (serving: per call)
    other_bytes: Any  # HBM bytes read + written besides weight_bytes (training: all forward bytes)
    bwd_flops: float = 2.0  # backward FLOPs = bwd_flops × forward
    bwd_bytes: float = 2.0  # backward bytes = bwd_bytes × forward, unless bwd_bytes_abs is given
    selective: bool = False  # rerun by selective recompute (attention core)
    dim: Any = None  # smallest GEMM dimension (rows = tokens for serving GEMMs); efficiency falls below a tile
    bwd_bytes_abs: Any = None  # backward HBM bytes, when not a multiple of the forward's
    mkn: Any = None  # GEMM (m, k, n) of the layer shape, for the kernel model (cost/kernels.py)
    seq: Any = None  # attention core: query length of the rank's causal kernel (s/cp)
    cp: Any = None  # attention core: context-parallel size c (cost.roofline.op_kernel_times: the kernels a rank runs)
    cp_all_gather: bool = False  # attention core: K,V all-gathered (Llama 3) instead of TE's p2p ring
    heads: Any = None  # attention core: heads on the rank × micro-batch (parallel CTAs)
    count: Any = 1.0  # serving: calls per pipeline stage (layers of this type, or 1)
    weight_bytes: Any = 0.0  # serving: weight bytes read per call (once per step, whatever the batch)
    weight_params: Any = 0.0  # training GEMM: parameters of its weight matrices on the GPU (K·N per matrix)
    low_precision: bool = True
    attention_core: bool = False
    norm_fused: bool = False
    column_parallel: bool = False
    linears: float = 1.0
    experts: Any = None  # serving MoE GEMM: experts one grouped kernel runs (mkn per expert)
    # MoE expert GEMM: expert weight matrices side by side in its n (gate+up 2 when gated, down 1;
    # cost.kernels.KernelModel.grouped_gemm_s reads its measured layer at one matrix's size)
    expert_matrices: Any = 1.0
    # training MoE expert GEMM: the rank's experts, among which one grouped kernel splits mkn's m rows
    # (mkn is all the rank's routed rows; cost.roofline times it by tokens per expert)
    rank_experts: Any = None
    # a MoE token permute or unpermute timed as PyTorch's gathers: (token copies, elements per token)
    # (cost.kernels.KernelModel.permute_s); None: its bytes at the HBM copy rate
    gather: Any = None
    # serving MoE GEMM under moe_imbalance: rows per expert on a rank at the MEAN load. mkn is the
    # busiest rank's; the step waits for the slowest rank, and a grouped kernel can stream slower at
    # fewer rows per expert (h100_decode_kernels.csv moe rows), so the op takes the longer of the two
    balanced_rows: Any = None
    serving_attention: ServingAttention | None = None  # serving attention op: its kernels' shapes
    # serving MLA: one of the attention module's ops between the fused q_a/kv_a projection and the TP
    # all-reduce (latent norms, q_b and kv_b projections, prefill attention, o_proj), for which an engine's
    # measured module stands in prefill (cost/mla_context.py)
    mla_module: bool = False

    @property
    def bytes(self):
        """HBM bytes read + written (forward, or per serving call)."""
        return self.weight_bytes + self.other_bytes

    def backward_bytes(self):
        return self.bwd_bytes_abs if self.bwd_bytes_abs is not None else self.bwd_bytes * np.asarray(self.bytes)


ACT_BYTES = float(BYTES_PER_ELEMENT["bf16"])  # B per element: activations, their gradients and K,V travel in bf16
HALF_BYTES = 2  # serving norms, router, embedding and head stay 16-bit (vLLM / TensorRT-LLM fp8, int4 checkpoints)


def serving_op(name: str, kind: str, count, flops, weight_bytes, other_bytes, rows, attention=None) -> Op:
    """A serving op: `count` calls of `flops` and weight + other bytes each; `rows` = GEMM rows;
    `attention`: an attention op's kernel shapes."""
    k = OpKind[kind.upper()]
    return Op(
        name,
        k,
        flops,
        other_bytes,
        dim=rows,
        count=count,
        weight_bytes=weight_bytes,
        attention_core=k == OpKind.ATTENTION,
        serving_attention=attention,
    )


def serving_gemm(g: GemmShape, count, weight_bytes) -> Op:
    """A serving op of an inventory GEMM (`cost.layer_gemms`): `count` calls, each reading
    `weight_bytes` and its activations (g.m·(k + n) 16-bit elements per GEMM of the batch); the
    kernel model times a batch of per-head GEMMs as one g.batch times as wide."""
    activations = g.m * g.batch * (g.k + g.n) * ACT_BYTES
    op = serving_op(g.serving_name, "matmul", count, g.flops, weight_bytes + 0 * g.m, activations, g.m)
    op.mkn = (g.m, g.k, g.n * g.batch)
    op.low_precision, op.norm_fused, op.column_parallel = g.low_precision, g.norm_fused, g.column_parallel
    return op


def serving_norm(n: NormShape, count, zero) -> Op:
    """A serving op of an inventory norm (`cost.layer_gemms`): `count` calls, each reading its
    16-bit weight and reading + writing n.rows × n.width activations; `zero` a row-shaped 0."""
    return serving_op(
        n.serving_name,
        "memory",
        count,
        zero,
        zero + n.width * HALF_BYTES,
        2 * n.rows * n.width * ACT_BYTES,
        np.full_like(zero, np.inf),
    )


def prompt_attention_shape(tokens, pairs, heads):
    """(query length, heads × sequences) of the causal kernel with the prompt tokens' `tokens` and
    query-key `pairs` (S tokens of one causal prompt: S(S+1)/2 pairs, so length ≈ 2·pairs/tokens; a
    chunk attending to a cached prefix runs as that many CTAs of the same total work)."""
    t, p = (np.asarray(x, dtype=np.float64) for x in (tokens, pairs))
    seq = np.where(t > 0, 2.0 * p / np.where(t > 0, t, 1.0), 0.0)
    return seq, np.where(seq > 0, heads * t / np.where(seq > 0, seq, 1.0), 0.0)


def decode_attention_shape(tokens, pairs, kv_positions):
    """(key positions per decode query, decode sequences) of a pass's decode tokens: each of
    `tokens` queries reads pairs/tokens keys, and the cache positions read, `kv_positions`, are
    that context once per sequence."""
    t, p, k = (np.asarray(x, dtype=np.float64) for x in (tokens, pairs, kv_positions))
    ctx = np.where(t > 0, p / np.where(t > 0, t, 1.0), 0.0)
    return ctx, np.where(ctx > 0, k / np.where(ctx > 0, ctx, 1.0), 0.0)
