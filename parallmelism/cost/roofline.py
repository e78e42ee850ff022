"""Time of an op on one GPU: its kernel time from measured kernels, never below the HBM roofline.

Training (`op_times`) takes kernel times from cost.kernels (the accelerator's kernel table, or the
H100 rule for accelerators without one):
  GEMM         forward kernel + backward dgrad and wgrad kernels at the layer shape (m, k, n), in
               the GEMM dtype: the workload precision, except the logits GEMM, which Transformer
               Engine keeps in bf16; eager attention's batched GEMMs run in bf16 as
               (T·heads, d, s) and (T·heads, s, d) GEMMs
  attention    fused attention, forward and backward kernels of the accelerator's backend (cudnn |
               flash2 | flash3), heads on the rank × micro-batch. Without context parallelism one
               causal kernel of s tokens. With c > 1 (`attention_kernels_s`), the p2p ring: one
               causal kernel of s/c tokens and c-1 non-causal blocks, each 1/c of the FLOPs and each
               as slow as the slower orientation (s/c queries × s/(2c) keys, or the transpose: ranks
               run both in a step and the ring waits for the slowest); all_gather: a rank's two
               chunks as two kernels, the first chunk's causal s/(2c) kernel and the last chunk's
               s/(2c) queries against the whole sequence (1/(4c) and the rest of the FLOPs)
  MoE experts  the rank's experts in one grouped kernel per GEMM (Op.rank_experts): the dense kernels of
               all its routed rows (forward, dgrad, wgrad, in the GEMM dtype) times the measured
               grouped/dense ratio at its tokens per expert (cost.kernels.KernelModel.grouped_ratio)
  permute      MoE token permute and unpermute: memory ops at the HBM rate (fused kernels), or with
               Op.gather PyTorch's index_select / index_add_ at their measured rate, the backward the
               other kernel of the pair (KernelModel.permute_s; workload.moe_permute_fusion=false)
  memory ops   bytes ÷ (HBM bandwidth · measured fraction at that transfer size)
and each is at least its HBM bytes ÷ that bandwidth (the fp32 main-gradient traffic of wgrad).

Serving (cost/inference.py, `serving_ops_times`) takes the same forward kernels from the same model:
  GEMM         the forward kernel at (m tokens, k, n) in the GEMM dtype (the workload precision; the
               router and logits GEMMs in bf16, as in training), with the weights' own bytes when
               they are narrower (weight-only quantization); at m <= 256 tokens the kernel model's
               decode regime (measured skinny GEMMs). No Transformer Engine casts: serving engines
               quantize activations inside the preceding kernel
  MoE experts  one grouped kernel over the experts that got tokens (cost.kernels.grouped_gemm_s)
  attention    the prompt tokens' causal kernel (`attention_s` at the causal equivalent of the
               pass's tokens and pairs) plus the decode tokens' one-query kernel over the KV cache
               (`decode_attention_s`), each op its share; without flash attention the scores and
               probabilities also cross HBM (`memory_s`)
  memory ops   bytes ÷ (HBM bandwidth · measured fraction at that transfer size)
A serving kernel is not floored by `memory_s` of its bytes: that fraction is measured on copy
kernels, below what one-query attention reaches (up to 20 % at batch 64, 32k context); training's
floor is there for the backward's fp32 gradient traffic, which its kernels do not measure. The bound
of a serving op is "compute" when its FLOPs at the dtype's peak take longer than its bytes at the
HBM bandwidth (the roofline's ridge), else "memory".
"""

from __future__ import annotations

import numpy as np

from .ops import ACT_BYTES, ATTENTION, MATMUL, Op
from .kernels import KernelModel, first_of_each
from .overheads import expert_quantize_host_s

LOW_PRECISION_BYTES = {"fp8": 1.0, "fp4": 0.5}


# torchao's float8 rowwise recipe (workload.fp8_scaling=rowwise; torchao float8/config.py
# Float8LinearConfig.from_recipe_name("rowwise"): input, weight and grad_output all AXISWISE, e4m3): each
# GEMM scales its operands per row along its own reduction dim (torch._scaled_mm's row-wise scales), so
# an operand read by two GEMMs is cast twice, each time from the bf16 tensor: X along k for the forward
# and along m for wgrad, dY along n for dgrad and along m for wgrad, W along k forward and along n for
# dgrad (float8/float8_linear.py matmul_with_hp_or_float8_args: the backward casts the saved bf16 input and
# weight again). One axiswise cast is an amax reduction over the axis (read 2 B) and the scaled cast
# (read 2 B, write 1 B): AXISWISE_CAST_BYTES per element; none is fused into the preceding norm. torchao
# converts each nn.Linear on its own (convert_to_float8_training swaps modules), and torchtitan's Llama
# runs q, k and v (models/llama3/model.py Attention.wq/wk/wv) and the gate and up projections
# (FeedForward.w1/w3) as separate Linears over one input: that input is cast once per Linear
# (Op.linears). The GEMM itself runs at the fp8 kernel rate: torchao's microbenchmark of
# Llama-70B linears (pytorch/ao#2185) finds the row-wise CUTLASS GEMM's speedup "nearly identical" to
# tensorwise cuBLAS's.
AXISWISE_CAST_BYTES = 2.0 + 2.0 + 1.0


def rowwise_cast_bytes(op: Op):
    """(forward, backward) HBM bytes of torchao's rowwise casts around one fp8 GEMM op (above): the
    forward casts X[m,k] once per Linear; the backward casts dY[m,n] twice and X once more per Linear."""
    m, k, n = (np.asarray(x, dtype=np.float64) for x in op.mkn)
    x = AXISWISE_CAST_BYTES * op.linears * m * k
    return x, 2.0 * AXISWISE_CAST_BYTES * m * n + x


def low_precision_cast_bytes(op: Op, dtype: str, scaling: str = "tensorwise"):
    """(forward, backward) HBM bytes of the casts around one fp8/fp4 GEMM: torchao's rowwise recipe's
    with `scaling` rowwise (`rowwise_cast_bytes`), else Transformer Engine's tensorwise ones.

    Forward: the input X[m,k] is cast with its amax to a row-wise and a column-wise (transposed,
    for wgrad) low-precision copy: read 2 B, write 2·c B per element (c = 1 fp8, 0.5 fp4); the read
    is saved where the cast is fused into the preceding norm (op.norm_fused: TE LayerNormLinear /
    LayerNormMLP write the fp8 copies from the norm). Backward: the
    output gradient dY[m,n] the same way (cast + transpose, unfused). The weights' casts are the
    GEMM's too, not the optimizer's: `weight_cast_bytes`, placed by
    cost.steptime.weight_casts_per_micro_batch."""
    if scaling == "rowwise":
        return rowwise_cast_bytes(op)
    c = LOW_PRECISION_BYTES[dtype]
    m, k, n = (np.asarray(x, dtype=np.float64) for x in op.mkn)
    read = 0.0 if op.norm_fused else 2.0
    return (read + 2.0 * c) * m * k, (2.0 + 2.0 * c) * m * n


def check_precision(hw, precision: str) -> None:
    """fp8/fp4 need the accelerator's own peak for that dtype: no silent bf16 fallback."""
    if precision in LOW_PRECISION_BYTES and precision not in hw.peak_tflops:
        from ..errors import UserError

        have = ", ".join(k for k in hw.peak_tflops if k in LOW_PRECISION_BYTES) or "none"
        raise UserError(
            f"workload.precision={precision} needs an {precision} tensor-core peak, and {hw.name} lists "
            f"none (its low-precision peaks: {have}); use bf16 or another accelerator"
        )


class Rates:
    """Achievable FLOP/s and bytes/s of one accelerator for one workload precision."""

    def __init__(self, hw, precision: str, kernels: KernelModel | None = None, scaling: str = "tensorwise"):
        """`kernels`: the accelerator's kernel model (config.kernel_tables.kernel_model), which
        training's and serving's op times read; `gemm_peak` and `hbm` (the efficiency block's
        achievable roofs) only draw the roofline plot (report.plots). `scaling`: the fp8 recipe's
        (workload.fp8_scaling), which sets the casts around the low-precision GEMMs."""
        check_precision(hw, precision)
        eff = hw.efficiency
        fp8_eff = getattr(eff, "matmul_fp8", None) if precision == "fp8" else None
        # at the clock the part sustains under its power cap (specs AcceleratorSpec.sustained_flops)
        self.gemm_peak = hw.sustained_flops(precision) * (fp8_eff or eff.matmul)
        self.hbm = hw.hbm_bandwidth_gbps * 1e9 * eff.hbm
        self.precision = precision
        self.scaling = scaling
        self._hw = hw
        self._kernels = kernels
        # op sums the step time may gather instead of evaluating (cost/steptime.py ShapeOpSums)
        self.ops_table: object = None

    @property
    def hw(self):
        """The accelerator these rates belong to (its stack overheads included)."""
        return self._hw

    def at_precision(self, precision: str) -> "Rates":
        """The same accelerator's rates at another precision, sharing its kernel model."""
        return Rates(self._hw, precision, self._kernels, self.scaling)

    @property
    def kernels(self) -> KernelModel:
        """Kernel model of the accelerator (given to the constructor: training's op times)."""
        if self._kernels is None:
            raise ValueError("these rates have no kernel model: pass config.kernel_tables.kernel_model(hw)")
        return self._kernels

    def gemm_dtype(self, op: Op) -> str:
        if not op.low_precision or self.precision not in ("fp8", "fp4"):
            return "bf16"
        return self.precision

    def memory_s(self, nbytes):
        """Seconds to stream `nbytes` through HBM (measured fraction at that size)."""
        return self.kernels.memory_s(nbytes)


def weight_cast_bytes(op: Op, dtype: str, scaling: str = "tensorwise"):
    """HBM bytes of one cast of an fp8/fp4 GEMM's weights: read the bf16 weights (2 B) and write
    their row-wise and column-wise low-precision copies (2·c B); with `scaling` rowwise, two axiswise
    casts (along k for the forward, along n for dgrad: 2 · AXISWISE_CAST_BYTES). The GEMM (Transformer Engine)
    casts them, not the optimizer: once per step in the first micro-batch where a rank keeps its
    weights (Megatron's `is_first_microbatch`; the copies are cached), at every use under
    FULLY_SHARD; cost.steptime.weight_casts_per_micro_batch places them."""
    per_param = 2.0 * AXISWISE_CAST_BYTES if scaling == "rowwise" else 2.0 + 2.0 * LOW_PRECISION_BYTES[dtype]
    return per_param * np.asarray(op.weight_params, dtype=np.float64)


def training_ops_times(ops: list[Op], rates: Rates, wl, backward_cast: bool = False) -> list:
    """`ops_times` of one micro-batch's training ops under the workload's low-precision recipe
    (`training_ops_variants`, one variant)."""
    return training_ops_variants(ops, rates, wl, (backward_cast,))[backward_cast]


def training_ops_variants(ops: list[Op], rates: Rates, wl, backward_casts=(False,)) -> dict:
    """{backward_cast: list}: `ops_times` of one micro-batch's training ops under the workload's
    low-precision recipe, each followed by the seconds and HBM bytes of one cast of its weights (0
    for ops in bf16, and with fp8 parameters, `workload.fp8_param_gather`, whose weights already
    are fp8) and whether it runs in fp8/fp4. With `workload.low_precision_gemms=where_faster` a
    GEMM runs in fp8/fp4 only where that is no slower than bf16 in its forward with a whole weight
    cast and in its backward, with one too where the backward casts its weights again
    (`backward_cast`: FULLY_SHARD resharding after forward; a micro-batch pays at most one cast
    per phase, cost.steptime.weight_casts_per_micro_batch), else in bf16 with no cast:
    torchtitan's auto_filter_small_kn, which keeps the layers too small to gain from float8 in
    bf16. Deciding per phase keeps every phase, hence every window that hides communication, no
    longer than in bf16, for any micro-batch count and recompute mode."""
    times = ops_times(ops, rates)
    zero, no = np.zeros(()), np.zeros((), dtype=bool)
    low = [i for i, op in enumerate(ops) if op.kind == MATMUL and op.mkn is not None and rates.gemm_dtype(op) != "bf16"]
    if not low:
        return {v: [t + (zero, zero, no) for t in times] for v in backward_casts}
    shape = np.broadcast_shapes(*[np.shape(x) for t in times for x in t[:2]])
    if wl.fp8_param_gather:
        nbytes = [np.zeros(shape) for _ in low]
        cast = nbytes
    else:
        nbytes = [np.broadcast_to(weight_cast_bytes(ops[i], rates.precision, rates.scaling), shape) for i in low]
        cast = _split(rates.kernels.memory_s(_joined(nbytes, shape)), len(low), shape)
    yes = np.ones(shape, dtype=bool)
    every = {i: times[i] + (cast[j], nbytes[j], yes) for j, i in enumerate(low)}
    if wl.low_precision_gemms == "all":
        return {v: [every.get(i, t + (zero, zero, no)) for i, t in enumerate(times)] for v in backward_casts}
    bf16 = ops_times([ops[i] for i in low], rates.at_precision("bf16"))
    out = {}
    for backward_cast in backward_casts:
        chosen = {}
        for j, i in enumerate(low):
            (f8, b8), (f16, b16) = times[i][:2], bf16[j][:2]
            # a grouped expert GEMM in fp8 also launches its per-expert quantizes (cost.overheads)
            qf, qb = (
                (0.0, 0.0) if ops[i].rank_experts is None else expert_quantize_host_s(rates.hw, ops[i].rank_experts)
            )
            use = (f8 + cast[j] + qf <= f16) & (b8 + (cast[j] if backward_cast else 0.0) + qb <= b16)
            picked = tuple(np.where(use, x, y) for x, y in zip(times[i], bf16[j]))
            chosen[i] = picked + (np.where(use, cast[j], 0.0), np.where(use, nbytes[j], 0.0), use)
        out[backward_cast] = [chosen.get(i, t + (zero, zero, no)) for i, t in enumerate(times)]
    return out


def _joined(values, shape) -> np.ndarray:
    """Arrays broadcast to `shape`, laid end to end (one kernel-model call for all of them)."""
    return np.concatenate([np.broadcast_to(np.asarray(v, dtype=np.float64), shape).ravel() for v in values])


def _split(x: np.ndarray, count: int, shape) -> list:
    size = int(np.prod(shape))
    return [x[i * size : (i + 1) * size].reshape(shape) for i in range(count)]


def _gemm_kernel_times(ops: list[Op], dtype: str, km: KernelModel, shape, scaling: str = "tensorwise") -> list:
    """(forward, backward) kernel seconds of GEMM ops run in `dtype` (module docstring): forward
    kernel, dgrad + wgrad kernels scaled to the op's backward FLOPs, plus the recipe's casts in
    fp8/fp4 (`low_precision_cast_bytes`). The kernels of all `ops` are looked up together (arrays over `shape`)."""
    m, k, n = (_joined([op.mkn[j] for op in ops], shape) for j in range(3))
    fwd, dgrad, wgrad = (_split(x, len(ops), shape) for x in km.gemm_parts_s(m, k, n, dtype, ("fwd", "dgrad", "wgrad")))
    grouped = [j for j, op in enumerate(ops) if op.rank_experts is not None]
    if grouped:  # MoE experts: one grouped kernel by tokens per expert (km.grouped_ratio), every part
        g = [ops[j] for j in grouped]
        e, mats = _joined([op.rank_experts for op in g], shape), _joined([op.expert_matrices for op in g], shape)
        gm, gk, gn = (_joined([op.mkn[i] for op in g], shape) for i in range(3))
        ratio = _split(_once_per_shape(km.grouped_ratio, gm, gk, gn, e, mats), len(g), shape)
        for j, r in zip(grouped, ratio):
            fwd[j], dgrad[j], wgrad[j] = fwd[j] * r, dgrad[j] * r, wgrad[j] * r
    out = [(fwd[j], (dgrad[j] + wgrad[j]) * (np.asarray(op.bwd_flops) / 2.0)) for j, op in enumerate(ops)]
    if dtype not in LOW_PRECISION_BYTES:
        return out
    cast = [low_precision_cast_bytes(op, dtype, scaling) for op in ops]
    cast_s = _split(km.memory_s(_joined([c[0] for c in cast] + [c[1] for c in cast], shape)), 2 * len(ops), shape)
    return [(f + np.where(cast[j][0] > 0, cast_s[j], 0.0), b + cast_s[len(ops) + j]) for j, (f, b) in enumerate(out)]


def op_kernel_times(op: Op, rates: Rates):
    """(forward, backward) kernel seconds of a GEMM or attention op, before the HBM floor."""
    km = rates.kernels
    if op.kind == MATMUL and op.mkn is not None:
        shape = np.broadcast_shapes(*[np.shape(x) for x in op.mkn])
        return _gemm_kernel_times([op], rates.gemm_dtype(op), km, shape, rates.scaling)[0]
    if op.kind == ATTENTION:
        return attention_op_times(km, op)[:2]
    return None


def attention_op_times(km: KernelModel, op: Op):
    """(forward, backward, forward first ring step, backward first ring step) kernel seconds of an
    attention op (`ring_steps_s`; without a p2p ring the first step is the whole kernel time)."""
    flops = np.asarray(op.flops, dtype=np.float64)
    later_steps = np.maximum(np.asarray(1.0 if op.cp is None else op.cp, dtype=np.float64) - 1.0, 0.0)
    first_fwd, later_fwd = ring_steps_s(km, flops, op, backward=False)
    first_bwd, later_bwd = ring_steps_s(km, flops * op.bwd_flops, op, backward=True)
    return first_fwd + later_steps * later_fwd, first_bwd + later_steps * later_bwd, first_fwd, first_bwd


def attention_kernels_s(km: KernelModel, flops, op: Op, backward: bool):
    """Seconds of the fused attention kernels one rank runs for `flops` (module docstring)."""
    seq = np.asarray(op.seq, dtype=np.float64)  # s/c: the rank's tokens
    cp = np.asarray(1.0 if op.cp is None else op.cp, dtype=np.float64)
    if not np.any(cp > 1):
        return km.attention_s(flops, seq, op.heads, backward=backward)
    if op.cp_all_gather:
        q = np.where(cp > 1, seq / 2.0, seq)
        first = np.where(cp > 1, flops / (4.0 * cp), flops)
        t = km.attention_s(first, q, op.heads, backward=backward)
        rest = km.attention_block_s(flops - first, q, seq * cp, op.heads, backward=backward)
        return t + np.where(cp > 1, rest, 0.0)
    first, later = ring_steps_s(km, flops, op, backward)
    return first + (cp - 1.0) * later


def ring_steps_s(km: KernelModel, flops, op: Op, backward: bool):
    """(first step, each later step) seconds of the p2p ring's kernels on one rank: step 0 is the
    causal kernel over the rank's own s/c tokens, steps 1..c−1 the non-causal blocks, each 1/c of
    the FLOPs and each as slow as its slower orientation (module docstring). Without a ring (c = 1,
    or all_gather) the whole attention is the first step and there is no later one."""
    seq = np.asarray(op.seq, dtype=np.float64)
    cp = np.asarray(1.0 if op.cp is None else op.cp, dtype=np.float64)
    if op.cp_all_gather or not np.any(cp > 1):
        return attention_kernels_s(km, flops, op, backward), np.zeros(np.shape(flops))
    each = flops / cp
    causal = km.attention_s(each, seq, op.heads, backward=backward)
    block = np.maximum(
        km.attention_block_s(each, seq, seq / 2.0, op.heads, backward=backward),
        km.attention_block_s(each, seq / 2.0, seq, op.heads, backward=backward),
    )
    return causal, np.where(cp > 1, block, 0.0)


def op_times(op: Op, rates: Rates):
    """(forward seconds, backward seconds, forward compute-bound?, first ring step forward and
    backward seconds) of one op (module docstring, `ops_times`)."""
    return ops_times([op], rates)[0]


def ops_times(ops: list[Op], rates: Rates) -> list:
    """`op_times` of each of `ops` (arrays over the same rows), each its kernel time, at least
    its HBM time, followed by the forward and backward seconds of the op's first p2p ring step
    (the whole op for anything but ring attention: `ring_steps_s`). The kernel model is called once for all of them: one `memory_s` for every
    HBM transfer, one lookup per GEMM dtype (every step is element-wise: the same numbers as
    one op at a time, in fewer calls)."""
    shape = np.broadcast_shapes(*[np.shape(x) for op in ops for x in (op.bytes, op.backward_bytes())])
    gemms: dict[str, list[int]] = {}
    for i, op in enumerate(ops):
        if op.kind == MATMUL and op.mkn is not None:
            shape = np.broadcast_shapes(shape, *[np.shape(x) for x in op.mkn])
            gemms.setdefault(rates.gemm_dtype(op), []).append(i)
    km = rates.kernels
    mem = _split(
        km.memory_s(_joined([op.bytes for op in ops] + [op.backward_bytes() for op in ops], shape)), 2 * len(ops), shape
    )
    kern: dict[int, tuple] = {}
    for dtype, idx in gemms.items():
        kern.update(zip(idx, _gemm_kernel_times([ops[i] for i in idx], dtype, km, shape, rates.scaling)))
    gathers = [i for i, op in enumerate(ops) if op.gather is not None]
    if gathers:  # MoE permute / unpermute: measured token gathers, the backward the other kernel of the pair
        rows, width = (_joined([ops[i].gather[j] for i in gathers], shape) for j in range(2))
        t = _split(_once_per_shape(km.permute_s, rows, width), len(gathers), shape)
        for i, g in zip(gathers, t):
            mem[i] = mem[len(ops) + i] = g
    out = []
    for i, op in enumerate(ops):
        mem_f, mem_b = mem[i], mem[len(ops) + i]
        if op.kind == ATTENTION:
            fwd, bwd, first_f, first_b = attention_op_times(km, op)
            f_s, b_s = np.maximum(fwd, mem_f), np.maximum(bwd, mem_b)
            # the first ring step's share of the op, at the op's time (HBM floor included)
            firsts = (f_s * _share(first_f, fwd), b_s * _share(first_b, bwd))
            out.append((f_s, b_s, fwd >= mem_f) + firsts)
            continue
        k = kern.get(i)
        if k is None:  # a memory op
            out.append((mem_f, mem_b, np.zeros(np.shape(mem_f), dtype=bool), mem_f, mem_b))
            continue
        fwd, bwd = k
        f_s, b_s = np.maximum(fwd, mem_f), np.maximum(bwd, mem_b)
        out.append((f_s, b_s, fwd >= mem_f, f_s, b_s))
    return out


def _share(part, whole):
    """part / whole, 1 where whole is 0."""
    whole = np.asarray(whole, dtype=np.float64)
    return np.where(whole > 0, np.asarray(part) / np.where(whole > 0, whole, 1.0), 1.0)


def serving_ops_times(ops: list[Op], rates: Rates) -> list:
    """(seconds per call, compute-bound?) of each serving op (module docstring, Serving): its forward
    kernels from the kernel model, the same kernels a training forward runs for the same shapes.
    The GEMMs of one dtype (and the grouped ones) are looked up in one kernel-model call, and
    attention ops that share their kernels' shapes (QKᵀ and ·V) once: every step is element-wise."""
    km = rates.kernels
    nbytes = [op.bytes for op in ops]
    shape = np.broadcast_shapes(*[np.shape(x) for op, b in zip(ops, nbytes) for x in (op.flops, b)])
    out: list = [None] * len(ops)
    groups: dict[tuple, list[int]] = {}
    memory = []
    for i, op in enumerate(ops):
        if op.kind == MATMUL and op.mkn is not None:
            groups.setdefault((rates.gemm_dtype(op), op.experts is not None), []).append(i)
        elif op.kind != ATTENTION or op.serving_attention is None:
            memory.append(i)
    if memory:  # memory ops: their bytes at the measured HBM fraction
        mem = _split(km.memory_s(_joined([nbytes[i] for i in memory], shape)), len(memory), shape)
        for i, t in zip(memory, mem):
            out[i] = (t, np.zeros(shape, dtype=bool))
    for (dtype, grouped), idx in groups.items():
        for i, t in zip(idx, _serving_gemms_s([ops[i] for i in idx], dtype, grouped, km, shape)):
            flops = np.broadcast_to(np.asarray(ops[i].flops, dtype=np.float64), shape)
            bound = flops / km.peak_flops(dtype) >= np.asarray(nbytes[i]) / km.hbm_bps
            out[i] = (np.where(flops > 0, t, 0.0), np.broadcast_to(bound, shape))
    kernels: dict[int, tuple] = {}  # id(ServingAttention) -> (prompt kernel s, decode kernel s)
    for i, op in enumerate(ops):
        a = op.serving_attention
        if op.kind != ATTENTION or a is None:
            continue
        pf, kvb = (np.asarray(x, dtype=np.float64) for x in (a.prefill_flops, a.kv_bytes))
        if id(a) not in kernels:
            pf_, kvb_ = np.broadcast_to(pf, shape), np.broadcast_to(kvb, shape)
            prompt, decode = np.zeros(shape), np.zeros(shape)
            if np.any(pf_ > 0):  # a pass with prompt tokens
                t = _once_per_shape(
                    km.attention_s, np.maximum(pf_, 1.0), np.maximum(a.seq, 1.0), np.maximum(a.heads, 1.0)
                )
                prompt = np.where(pf_ > 0, t.reshape(shape), 0.0)
            if np.any(kvb_ > 0):  # a pass with decode tokens
                t = _once_per_shape(km.decode_attention_s, kvb_, a.decode_flops, a.streams, a.context)
                decode = np.where(kvb_ > 0, t.reshape(shape), 0.0)
            kernels[id(a)] = (prompt, decode)
        prompt, decode = kernels[id(a)]
        t = a.share * (prompt + decode)
        unfused = np.asarray(a.unfused_bytes, dtype=np.float64)
        if np.any(unfused > 0):  # eager attention: scores written and probabilities read
            t = t + np.where(unfused > 0, km.memory_s(np.maximum(unfused, 1.0)), 0.0)
        out[i] = (np.broadcast_to(t, shape), np.broadcast_to(prompt >= decode, shape))
    return out


def _serving_gemms_s(ops: list[Op], dtype: str, grouped: bool, km: KernelModel, shape) -> list:
    """Forward kernel seconds of serving GEMM ops in `dtype` (one kernel-model call for all): plain
    GEMMs at (m, k, n), or grouped over `op.experts` experts of (m, k, n) each; the weights at their
    own bytes per element where narrower than the inputs (weight-only quantization)."""
    in_bytes = LOW_PRECISION_BYTES.get(dtype, ACT_BYTES)
    experts = [1.0 if op.experts is None else np.maximum(np.asarray(op.experts, dtype=np.float64), 1.0) for op in ops]
    m, k, n = (_joined([op.mkn[j] for op in ops], shape) for j in range(3))
    e = _joined(experts, shape)
    per_weight = _joined([op.weight_bytes for op in ops], shape) / (k * n * e)
    # the weights at their own bytes (with their scales, workload.quantization) below twice the input
    # dtype's; 16-bit weights under an fp8 GEMM are its fp8 copy's
    w_bytes = np.where((per_weight < 2.0 * in_bytes) & (per_weight > 0), per_weight, in_bytes)
    if grouped:
        mats = _joined([op.expert_matrices for op in ops], shape)
        grouped_s = lambda *c: km.grouped_gemm_s(c[0], c[1], c[2], c[3], dtype, c[4], c[5])  # noqa: E731
        t = _once_per_shape(grouped_s, m, k, n, e, w_bytes, mats)
        if any(op.balanced_rows is not None for op in ops):  # the slower of the busiest and a mean rank
            mb = _joined([op.mkn[0] if op.balanced_rows is None else op.balanced_rows for op in ops], shape)
            t = np.maximum(t, _once_per_shape(grouped_s, mb, k, n, e, w_bytes, mats))
    else:
        t = _once_per_shape(
            lambda *c: km.gemm_s(np.maximum(c[0], 1.0), c[1], c[2], dtype, "fwd", c[4]), m, k, n, e, w_bytes
        )
    return _split(t, len(ops), shape)


# incommensurate weights: a float key per row (a hash, not an order) and a second one to check it
_SHAPE_KEY = (1.0, np.pi, np.e, np.sqrt(2.0), np.sqrt(3.0), np.sqrt(11.0))
_SHAPE_CHECK = (np.sqrt(5.0), 1.0, np.sqrt(7.0), np.pi, np.e, np.sqrt(13.0))


def _once_per_shape(fn, *cols) -> np.ndarray:
    """fn(*cols) (element-wise over rows, at most 6 columns) evaluated once per distinct row: a sweep
    repeats few distinct kernel shapes (they depend on tp, ep and token counts). Rows are matched by a
    float key, checked with a second one; on a collision every row is evaluated."""
    cols = tuple(np.ravel(np.asarray(c, dtype=np.float64)) for c in np.broadcast_arrays(*cols))
    first, inv = first_of_each(sum(w * c for w, c in zip(_SHAPE_KEY, cols)))
    check = sum(w * c for w, c in zip(_SHAPE_CHECK, cols))
    if not np.array_equal(check[first][inv], check):
        return np.asarray(fn(*cols), dtype=np.float64)
    return np.asarray(fn(*(c[first] for c in cols)), dtype=np.float64)[inv]
