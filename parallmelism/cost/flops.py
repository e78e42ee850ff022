"""FLOPs: the published closed forms, and the per-op inventory one GPU executes.

Closed forms (`formulas.md`; a multiply-add = 2 FLOPs; attention scores counted WITHOUT causal
masking, the convention of Megatron-LM's `num_floating_point_operations` before it halved the
s/h term, of Korthikanti et al. 2022 and of Narayanan et al. 2021):

  model FLOPs per step  F = 12·B·s·Σ_layers h²·[(1 + g/a + s/h)·(q/h) + (I/h)·k·(3/2 if gated)]
                            + 6·B·s·h·V                          (logits, fwd + bwd)
  GPT (f = 4h, MHA)     F = 72·B·L·s·h²·(1 + s/(6h) + V/(12hL))          Korthikanti eq. 7
  full recompute        F_hw = 96·B·L·s·h²·(1 + s/(6h) + V/(16hL))       Narayanan eq. 3
                        (layers run forward twice, logits once)
  selective recompute   F_hw = F + the attention core forward again, 4·B·s²·q·L. Korthikanti's
                        published HFU implies 72·B·L·s·h²·(1 + s/(3h) + V/(12hL)), i.e. three
                        times that; we count what the kernels execute (stated, tested).

Per-op inventory (`layer_ops`, `head_ops`, `embedding_ops`): for one layer, one micro-batch, on
one GPU (its TP/CP/EP shard). T = (s/cp)·b tokens on the rank; t TP; r = t with sequence
parallelism (norms, residuals and dropout work on T/t tokens) else 1; g_l = max(g/t, 1) KV
heads per rank (whole heads are replicated when t > g); 2-byte activations and weights.
Each op carries forward FLOPs and HBM bytes (read + written) and backward multipliers:
  GEMMs        shapes from `cost.layer_gemms` (the inventory serving wraps too);
               bwd = 2× FLOPs (dgrad + wgrad); bytes: activations read/written again, weights
               read once more and the fp32 main gradient read + written (8 bytes/weight)
  flash core   shape from `cost.layer_cores.attention_core` (the inventory serving wraps too) over
               T·s·c_f pairs (c_f = 1/2: causal blocks skipped) and the s·b key positions:
               fwd 4·T·s·q/t·c_f FLOPs, bwd 2.5× (recomputes QKᵀ; FlashAttention-2); bytes Q, K,
               V, O (+ dO, dQ, dK, dV in bwd)
  eager core   the same shape over the full T×s block: scores and ·V bmm 2·T·s·q/t each (masked
               after), softmax (+dropout) over a·T·s/t elements; bwd 2× FLOPs and bytes
  elementwise  norms (`cost.layer_gemms`), residual adds, dropout, GELU/SwiGLU, RoPE, permute
               (`cost.layer_cores.layer_elementwise`): bytes only; bwd ≈ 2×
  cp_merge     with context parallelism (flash, p2p ring), the merge of each of the c-1 later steps:
               fwd 3·T·(width of V)/t reads + writes of 2 B, bwd 3·T·(q/t + K,V width) (dQ, dK,dV)
MLA (model.mla; DeepSeek-V2/V3, training form without weight absorption): the projections are
  GEMMs q_down T×h×r_q and kv_down T×h×(r_kv+p) (replicated over TP: every rank computes them for
  all T tokens), latent RMSNorms (bytes only), q_up T×r_q×a(n+p)/t (or q_proj T×h×a(n+p)/t),
  kv_up T×r_kv×a(n+v)/t and out_proj T×a·v/t×h; the core scores over n+p dims per head (q/t =
  a(n+p)/t wide) and ·V over v dims: 2·T·s·a·(n+p)/t + 2·T·s·a·v/t forward (×1/2 causal, flash).
  In the closed form this makes the attention bracket W_attn/(2h²) + s·a·(n+p+v)/(2h²) with W_attn
  the attention GEMM weights of `cost.params.mla_params` (norms excluded).
Recompute: full reruns every layer op's forward, selective reruns the attention core forward.
The `executed` FLOPs include the causal saving and the flash-backward recompute, so they are
not the convention of the `flops_*_per_step` columns (which are the closed forms above).
"""

from __future__ import annotations

import numpy as np

from ..specs import BYTES_PER_ELEMENT, ModelSpec, moe_layers_in_range
from .layer_gemms import (
    GemmShape,
    NormShape,
    attention_gemms,
    final_norm,
    head_gemm,
    layer_norms,
    mlp_gemms,
    moe_gemms,
)
from .layer_cores import AttentionCore, ElementwiseShape, attention_core, embedding, layer_elementwise
from .ops import ACT_BYTES, ATTENTION, MATMUL, MEMORY, Op
from .shapes import (
    busiest_stage_first_layer,
    experts_per_rank,
    moe_token_load,
    sp_divisor,
    tokens_per_rank,
)
from .states import GRAD_BYTES, MASTER_WEIGHT_BYTES, MOMENT_BYTES, WORKING_WEIGHT_BYTES

# Bytes per element of what the ops read and write (specs.BYTES_PER_ELEMENT): bf16 activations (ops.ACT_BYTES) and
# weights, an fp32 main gradient (Megatron's gradient-accumulation fusion accumulates wgrad into it)
# and 1-byte dropout masks (Korthikanti et al. 2022 §4.1).
MAIN_GRAD_BYTES = float(BYTES_PER_ELEMENT["fp32"])
MASK_BYTES = 1.0
RW_BYTES = 2 * ACT_BYTES  # a norm or the softmax: read its input, write its output (cost.layer_cores.RW_ACCESSES)
WEIGHT_BWD_BYTES = (
    WORKING_WEIGHT_BYTES + 2 * MAIN_GRAD_BYTES
)  # wgrad/dgrad: weights read again, main grad read + written
DROPOUT_BYTES = MASK_BYTES + ACT_BYTES  # a dropout fused into the op: its mask and its dropped output written
CP_MERGE_BYTES = 3 * ACT_BYTES  # a ring step's merge: read output and partial output, write output
# torch's ring (torch.distributed.tensor.experimental._attention, torch 2.5-2.6: _templated_ring_attention
# and its backward, _SDPAMerger with convert_to_f32), HBM bytes per element of the rank's output O. K and V
# count as O-sized: torchtitan's Llama repeats them to every query head before SDPA (repeat_kv).
# Forward, each of the c-1 later steps: the step's output cast to fp32 (read 2, write 4), then
# out - sigmoid(lse_i - lse) * (out - out_i) in fp32 (three binary kernels, 12 + 8 + 12), and the K,V
# concatenated for the rotater (torch.cat, 2 + 2 per K and per V element): 46 B; once, the fp32 output cast
# back to bf16 (6 B).
TORCH_CP_MERGE_FWD_BYTES = 46.0
TORCH_CP_MERGE_FWD_ONCE_BYTES = 6.0
# Backward, each of the c steps: dQ accumulated in fp32 (grad_query += : read 4 + 2, write 4), dK and dV
# each accumulated into the fp32 buffer received from the previous rank and re-concatenated by
# _partial_update (half an add, 5, plus torch.cat, 8: 13 each), the fp32 dK,dV concatenated for the next
# rank (torch.cat, 8 per K and per V element) and the K,V for the rotater (4 + 4): 60 B; once, dQ, dK and dV
# cast back to bf16 (3 x 6 B).
TORCH_CP_MERGE_BWD_BYTES = 60.0
TORCH_CP_MERGE_BWD_ONCE_BYTES = 18.0
# Cross-entropy over fp32 probabilities (head_ops docstring): per logit 2 + 4 + 4 + 4 bytes forward, 8 backward.
CROSS_ENTROPY_FWD_BYTES = 14.0
CROSS_ENTROPY_BWD_BYTES = 8.0
EMBEDDING_BWD_BYTES = 2 * MAIN_GRAD_BYTES  # the scatter-add reads and writes the fp32 main gradient's rows
# A causal kernel skips the key blocks above the diagonal: half the s×s FLOPs (FlashAttention-2).
CAUSAL_FRACTION = 0.5
# FlashAttention-2's backward runs 5 GEMMs to the forward's 2 (it recomputes QKᵀ): 2.5× the forward
# FLOPs, the convention of Dao 2023's benchmarks (§4.1); its bytes are taken at the same multiple.
FLASH_BWD_FACTOR = 2.5


def _gemm(name, M, K, N, weight=True, low_precision=True, norm_fused=False, column_parallel=False, weight_copies=1.0):
    """C[M,N] = A[M,K]·W[K,N]: 2MKN FLOPs; bytes read A, W, write C (2 bytes each).
    Backward: dgrad + wgrad = 4MKN; bytes 2·(activations) + W read 2 + main grad r/w 8.
    A grouped GEMM (the experts of a rank, Megatron's --moe-grouped-gemm) splits the M rows among
    `weight_copies` weight matrices [K,N]: the same FLOPs, and every expert's weights read and its
    main gradient accumulated."""
    flops = 2.0 * M * K * N
    act = ACT_BYTES * (M * K + M * N)
    w = K * N * np.asarray(weight_copies, dtype=np.float64)
    fwd = act + WORKING_WEIGHT_BYTES * w
    bwd = 2.0 * act + (WEIGHT_BWD_BYTES * w if weight else WORKING_WEIGHT_BYTES * w)
    dim = np.minimum(np.minimum(K, N), M)
    return Op(
        name,
        MATMUL,
        flops,
        fwd,
        2.0,
        dim=dim,
        bwd_bytes_abs=bwd,
        mkn=(M, K, N),
        weight_params=w if weight else 0.0,
        low_precision=low_precision,
        norm_fused=norm_fused,
        column_parallel=column_parallel,
    )


def _gemm_op(g: GemmShape, weight_copies=1.0) -> Op:
    """A training op of an inventory GEMM (`cost.layer_gemms`): its shape and flags, `_gemm`'s bytes."""
    op = _gemm(
        g.name,
        g.m,
        g.k,
        g.n,
        low_precision=g.low_precision,
        norm_fused=g.norm_fused,
        column_parallel=g.column_parallel,
        weight_copies=weight_copies,
    )
    op.linears = g.linears
    return op


def _norm_op(n: NormShape) -> Op:
    """A training op of an inventory norm (`cost.layer_gemms`): read and write each element."""
    return Op(n.name, MEMORY, 0.0, RW_BYTES * n.rows * n.width / n.sp_divisor)


def _elementwise_op(e: ElementwiseShape, dropout: bool = False) -> Op:
    """A training op of an inventory element-wise op (`cost.layer_cores`): its elements accessed at
    2 bytes, and a dropout's mask and output when the op has one and the model drops out."""
    per_element = ACT_BYTES * e.accesses + (DROPOUT_BYTES if dropout and e.dropout else 0.0)
    return Op(e.name, MEMORY, 0.0, per_element * e.elements)


def layer_ops(
    model: ModelSpec,
    s: int,
    b,
    t,
    cp,
    sp,
    flash: bool,
    moe_layer: bool = False,
    moe_imbalance: float = 1.0,
    ep=1,
    cp_comm_type: str = "p2p",
    etp=None,
    permute_fusion: bool = True,
    cp_implementation: str = "transformer_engine",
) -> list[Op]:
    """Ops of one transformer layer, one micro-batch, on one GPU (module docstring); a MoE layer's
    experts are split over `ep` ranks (num_experts / ep on this one), each expert's FFN `etp` ways
    (expert TP; None: t): the rank's experts process the etp ranks' dispatched copies, T·k·load·etp/t
    (the TP group's T·k·load where etp = t), with FFN width I_e/etp; each expert GEMM is one grouped
    kernel over the rank's experts (Op.rank_experts), its token permute and unpermute fused kernels at
    the HBM copy rate (`permute_fusion`) or PyTorch's measured gathers (Op.gather); `cp_comm_type` (p2p |
    all_gather | a2a) says which attention kernels a context-parallel rank runs (cost.roofline), and
    `cp_implementation` (transformer_engine | torch) what runs around them: torch's ring runs one kernel
    per ring step whatever its rotate method and merges in fp32 (TORCH_CP_MERGE_*)."""
    b, t, cp = (np.asarray(x, dtype=np.float64) for x in (b, t, cp))
    r = sp_divisor(t, sp)
    T = tokens_per_rank(s, b, cp)
    drop = bool(model.dropout)
    a2a = cp_comm_type == "a2a"
    torch_ring = cp_implementation == "torch" and not a2a
    routed, expert_tp = None, None
    if moe_layer:  # token copies this GPU's experts process (busiest rank)
        moe = model.require_moe()
        routed = T * moe.top_k * moe_token_load(moe, moe_imbalance)
        if etp is not None:  # folded: the expert-TP group's copies, etp/t of the TP group's
            expert_tp = np.asarray(etp, dtype=np.float64)
            routed = routed * (expert_tp / t)
    gemms = {g.name: g for g in attention_gemms(model, T, t)}
    norms = layer_norms(model, T, r)
    ew = layer_elementwise(model, T, t, moe_layer, routed, expert_tp, sp_divisor=r)
    ops = [_norm_op(norms["norm_attn"])]
    if model.mla is None:
        ops.append(_gemm_op(gemms["qkv"]))
        if "rope" in ew:
            ops.append(_elementwise_op(ew["rope"]))
    else:
        ops += _mla_projection_ops(model, gemms, norms, ew["rope"])
    # a causal kernel scores the T·s/2 pairs below the diagonal; eager attention the whole T×s block
    core = attention_core(model, t, T, T * s * (CAUSAL_FRACTION if flash else 1.0), s * b)
    if flash:
        ops.append(
            Op(
                "attention_core",
                ATTENTION,
                core.flops,
                ACT_BYTES * (core.q_elements + core.o_elements + core.k_elements + core.v_elements),
                FLASH_BWD_FACTOR,
                FLASH_BWD_FACTOR,
                selective=True,
                dim=np.asarray(float(model.d)),
                # a2a (Ulysses): after the all-to-all a rank holds every token of heads/cp heads: one
                # causal kernel over s, no ring (the same FLOPs: s × s pairs of 1/cp of the heads)
                seq=s + 0.0 * cp if a2a else _cp_chunk(s, cp),
                cp=np.ones_like(cp) if a2a else np.asarray(cp, dtype=np.float64),
                cp_all_gather=cp_comm_type == "all_gather" and not torch_ring,
                heads=core.heads * b / (cp if a2a else 1.0),
                attention_core=True,
            )
        )
    else:
        ops += _eager_attention_ops(core, s, drop)
    if flash and torch_ring and np.any(cp > 1):
        # torch's ring: fp32 merges of the c-1 later steps forward, fp32 dQ,dK,dV accumulation over the c
        # steps backward (TORCH_CP_MERGE_*), for its all-gather and its all-to-all rotater alike
        later = np.maximum(cp - 1.0, 0.0)
        ring = np.where(cp > 1, 1.0, 0.0)
        ops.append(
            Op(
                "cp_merge",
                MEMORY,
                0.0,
                (later * TORCH_CP_MERGE_FWD_BYTES + ring * TORCH_CP_MERGE_FWD_ONCE_BYTES) * core.o_elements,
                selective=True,
                bwd_bytes_abs=(cp * ring * TORCH_CP_MERGE_BWD_BYTES + ring * TORCH_CP_MERGE_BWD_ONCE_BYTES)
                * core.o_elements,
            )
        )
    elif flash and cp_comm_type == "p2p" and np.any(cp > 1):
        # Transformer Engine's ring merges each of the c-1 later steps into the output: forward reads
        # the output and the step's partial output and writes the output (3 × T·vw/t, 2 B; the
        # softmax statistics are 1/d of that); backward adds each step's dQ (3 × T·q/t) and dK,dV
        # (3 × T·kv_l) into their accumulators. T tokens per step: a step's block touches half of
        # them on one side (s/(2c) queries or keys), so this is the per-step maximum. The all-gather
        # variant computes each chunk's attention in one kernel and merges nothing.
        steps = np.maximum(cp - 1.0, 0.0)
        ops.append(
            Op(
                "cp_merge",
                MEMORY,
                0.0,
                steps * CP_MERGE_BYTES * core.o_elements,
                selective=True,
                bwd_bytes_abs=steps * CP_MERGE_BYTES * (core.q_elements + T * (core.k_width + core.v_width)),
            )
        )
    ops += [
        _gemm_op(gemms["out_proj"]),
        _elementwise_op(ew["residual_attn"], drop),
        _norm_op(norms["norm_mlp"]),
    ]
    if moe_layer:
        moe = model.require_moe()
        local = experts_per_rank(moe.num_experts, ep)
        mg = {g.name: g for g in moe_gemms(model, T, t, routed, expert_tp, sp_divisor=r)}
        e_up = _gemm_op(mg["experts_up"], weight_copies=local)
        e_down = _gemm_op(mg["experts_down"], weight_copies=local)
        e_up.rank_experts = e_down.rank_experts = local  # one grouped kernel each (cost.roofline)
        e_up.expert_matrices = float(model.mlp_up_matrices)
        permute, unpermute = _elementwise_op(ew["permute"]), _elementwise_op(ew["unpermute"])
        if not permute_fusion:  # PyTorch's gathers of the routed copies (cost.kernels.KernelModel.permute_s)
            permute.gather = unpermute.gather = (ew["permute"].rows, ew["permute"].width)
        ops += [
            _gemm_op(mg["router"]),
            permute,
            e_up,
            _elementwise_op(ew["activation"]),
            e_down,
            unpermute,
        ]
        if moe.num_shared_experts:
            ops += [_gemm_op(mg["shared_up"]), _elementwise_op(ew["shared_activation"]), _gemm_op(mg["shared_down"])]
    else:
        up, down = mlp_gemms(model, T, t)
        ops += [_gemm_op(up), _elementwise_op(ew["swiglu" if model.gated else "gelu"]), _gemm_op(down)]
    ops.append(_elementwise_op(ew["residual_mlp"], drop))
    return ops


def _eager_attention_ops(core: AttentionCore, s, drop: bool) -> list[Op]:
    """Eager attention's core on one rank (`cost.layer_cores.attention_core` over the full T×s
    block): QKᵀ and ·V as batched GEMMs in bf16 around a softmax that writes the scores, with
    dropout's mask when the model has it."""
    scores = core.score_elements  # elements of the s×s score block on this rank
    rows = core.queries * core.heads  # one row per query and head of the batched GEMMs
    return [
        Op(
            "attention_scores",
            MATMUL,
            core.scores_flops,
            ACT_BYTES * (core.q_elements + core.k_elements) + ACT_BYTES * scores,
            2.0,
            2.0,
            selective=True,
            dim=np.asarray(float(core.qk_dim)),
            mkn=(rows, core.qk_dim, s),
            low_precision=False,
            attention_core=True,
        ),
        Op(
            "softmax",
            MEMORY,
            0.0,
            RW_BYTES * scores + (ACT_BYTES + DROPOUT_BYTES if drop else 0.0) * scores,
            2.0,
            2.0,
            selective=True,
        ),
        Op(
            "attention_values",
            MATMUL,
            core.values_flops,
            ACT_BYTES * scores + ACT_BYTES * (core.v_elements + core.o_elements),
            2.0,
            2.0,
            selective=True,
            dim=np.asarray(float(core.v_dim)),
            mkn=(rows, s, core.v_dim),
            low_precision=False,
            attention_core=True,
        ),
    ]


def _cp_chunk(s, cp):
    """Query length of a rank's causal attention kernel: s, or s/cp with context parallelism.
    Transformer Engine's load-balanced ring gives a rank chunks r and 2c-1-r of 2c; per layer it runs
    one causal kernel over its s/c tokens and c-1 non-causal blocks (s/c queries × s/(2c) keys, or
    the transpose), each executing 1/c of the rank's attention FLOPs (cost.roofline.op_kernel_times)."""
    cp = np.asarray(cp, dtype=np.float64)
    return s / np.maximum(cp, 1.0)


def _mla_projection_ops(
    model: ModelSpec, gemms: dict[str, GemmShape], norms: dict[str, NormShape], rope_op
) -> list[Op]:
    """MLA projections (`layer_gemms.attention_gemms`), latent norms and RoPE of one layer (module
    docstring); down projections replicated over TP, up projections split by heads."""
    if model.require_mla().q_lora_rank is None:
        ops = [_gemm_op(gemms["q_proj"])]
    else:
        ops = [
            _gemm_op(gemms["q_down"]),
            _norm_op(norms["q_norm"]),
            _gemm_op(gemms["q_up"]),
        ]
    return ops + [
        _gemm_op(gemms["kv_down"]),
        _norm_op(norms["kv_norm"]),
        _gemm_op(gemms["kv_up"]),
        _elementwise_op(rope_op),
    ]


def _mla_attention_bracket(model: ModelSpec, s: float) -> float:
    """W_attn/(2h²) + s·a·(n+p+v)/(2h²): MLA attention in units of 12·B·s·h² (module docstring)."""
    from .params import mla_params

    m, h = model.require_mla(), model.hidden
    weights = sum(mla_params(model)) - m.kv_lora_rank - (m.q_lora_rank or 0)  # latent norms are not GEMMs
    return (weights + s * model.heads * (m.qk_head_dim + m.v_head_dim)) / (2.0 * h * h)


def head_ops(model: ModelSpec, s: int, b, t, cp, sp) -> list[Op]:
    """Last stage: final norm, logits GEMM (vocab split by t) and fp32 cross-entropy.
    Cross-entropy reads bf16 logits and writes fp32 probabilities, then reads them for the loss
    (≈ 2 + 4 + 4 + 4 = 14 bytes per logit forward, 8 backward); its FLOPs are negligible."""
    V = model.vocab
    b, t, cp = (np.asarray(x, dtype=np.float64) for x in (b, t, cp))
    r = sp_divisor(t, sp)
    T = tokens_per_rank(s, b, cp)
    return [
        _norm_op(final_norm(model, T, r)),
        _gemm_op(head_gemm(model, T, t)),
        Op(
            "cross_entropy",
            MEMORY,
            0.0,
            CROSS_ENTROPY_FWD_BYTES * T * V / t,
            2.0,
            bwd_bytes_abs=CROSS_ENTROPY_BWD_BYTES * T * V / t,
        ),
    ]


def embedding_ops(model: ModelSpec, s: int, b, t, cp, sp) -> list[Op]:
    """First stage: embedding lookup (read rows, write activations; bwd scatters into the fp32
    main gradient)."""
    b, t, cp = (np.asarray(x, dtype=np.float64) for x in (b, t, cp))
    r = sp_divisor(t, sp)
    e = embedding(model, tokens_per_rank(s, b, cp), r)  # the inventory's (cost.layer_cores)
    op = _elementwise_op(e, bool(model.dropout))
    op.bwd_bytes_abs = (EMBEDDING_BWD_BYTES + (DROPOUT_BYTES if model.dropout else 0.0)) * e.elements
    return [op]


def optimizer_bytes_per_param(
    weight_bytes: float = WORKING_WEIGHT_BYTES,
    grad_bytes: float = GRAD_BYTES["fp32"],
    moment_bytes: float = MOMENT_BYTES["fp32"],
) -> float:
    """Adam step over a parameter shard: read fp32 param, m, v (12 B; m and v in bf16 8 B:
    `states.MOMENT_BYTES`) and the main grad (4 B fp32, 2 B bf16), write fp32 param, m, v (12 B,
    or 8) and the working weights (`states.optimizer_weight_bytes`: bf16 2 B; fp8 parameters,
    row-wise and transposed, 2 B): 30 B (22 with bf16 moments). The fp8 copies of bf16 weights
    are not written here: the GEMM (Transformer Engine) casts them (`roofline.weight_cast_bytes`,
    placed by `steptime.weight_casts_per_micro_batch`). FLOPs are negligible."""
    return 2.0 * (MASTER_WEIGHT_BYTES + moment_bytes) + grad_bytes + weight_bytes


# ---- closed forms ------------------------------------------------------------------------------


def _layer_bracket(model: ModelSpec, s: float, moe_layer: bool) -> float:
    """[(1 + g/a + s/h)·(q/h) + (I/h)·k·(3/2 if gated)] of one layer (Megatron)."""
    h = model.hidden
    if model.mla is not None:
        attn = _mla_attention_bracket(model, s)
    else:
        attn = (1.0 + model.g / model.heads + s / h) * (model.q_dim / h)
    gate = 1.5 if model.gated else 1.0
    if moe_layer:
        moe = model.require_moe()
        mlp = moe.ffn_hidden / h * moe.top_k * gate
        if moe.num_shared_experts:
            mlp += moe.shared_expert_ffn * moe.num_shared_experts / h * gate
    else:
        mlp = model.ffn_hidden / h * gate
    return attn + mlp


def model_flops_per_step(model: ModelSpec, global_batch, s: int, causal: bool = False):
    """Megatron `num_floating_point_operations` (forward + backward, no recompute).

    causal=False (default): scores counted without causal masking (formulas.md, Korthikanti
    eq. 7). causal=True halves the s/h term, as current Megatron does for causal masks.
    """
    h, L = model.hidden, model.layers
    n_moe = model.num_moe_layers
    br_d = _layer_bracket(model, s if not causal else s / 2, False)
    bracket = (L - n_moe) * br_d
    if n_moe:
        bracket += n_moe * _layer_bracket(model, s if not causal else s / 2, True)
    B = np.asarray(global_batch, dtype=np.float64)
    return 12.0 * B * s * h * h * bracket + 6.0 * B * s * h * model.vocab


def attention_core_forward_flops(model: ModelSpec, global_batch, s: int):
    """Scores + ·V of every layer, forward, non-causal: 4·B·s²·q·L (MLA: 2·B·s²·a·(n+p+v)·L)."""
    if model.mla is not None:
        width = model.heads * (model.mla.qk_head_dim + model.mla.v_head_dim)
        return 2.0 * np.asarray(global_batch, dtype=np.float64) * s * s * width * model.layers
    return 4.0 * np.asarray(global_batch, dtype=np.float64) * s * s * model.q_dim * model.layers


def hardware_flops_per_step(model: ModelSpec, global_batch, s: int, recompute) -> np.ndarray:
    """Model FLOPs plus the recomputed forward (non-causal convention; module docstring).

    full: + forward of every layer (1/3 of the layers' fwd+bwd) -> Narayanan eq. 3 on GPT;
    selective: + attention core forward 4·B·s²·q·L; none: model FLOPs.
    """
    from .activations import FULL, SELECTIVE

    recompute = np.asarray(recompute)
    F = model_flops_per_step(model, global_batch, s)
    logits = 6.0 * np.asarray(global_batch, dtype=np.float64) * s * model.hidden * model.vocab
    layers = F - logits
    extra = np.where(
        recompute == FULL,
        layers / 3.0,
        np.where(recompute == SELECTIVE, attention_core_forward_flops(model, global_batch, s), 0.0),
    )
    return F + extra


def moe_layer_counts(model: ModelSpec, first_layer, n_layers):
    """(dense, moe) layer counts of a stage holding layers [first_layer, first_layer + n_layers)."""
    n_moe = moe_layers_in_range(model, first_layer, np.asarray(first_layer) + np.asarray(n_layers))
    return np.asarray(n_layers) - n_moe, n_moe


def busiest_stage_layer_counts(model: ModelSpec, pp, n_layers):
    """(dense, moe) layer counts, integers, of the stage holding `n_layers` = ceil(L/pp) layers
    that starts where the first stage ends (`shapes.busiest_stage_first_layer`): training's middle
    stage (`steptime._stage_layout`) and serving's busiest stage count the same layers."""
    return moe_layer_counts(model, busiest_stage_first_layer(model.layers, pp), n_layers)
