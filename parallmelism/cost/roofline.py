"""Time of an op on one GPU: its kernel time from measured kernels, never below the HBM roofline.

Training (`op_times`) takes kernel times from cost.kernels (the accelerator's kernel table, or the
H100 rule for accelerators without one):
  GEMM         forward kernel + backward dgrad and wgrad kernels at the layer shape (m, k, n), in
               the GEMM dtype: the workload precision, except the logits GEMM, which Transformer
               Engine keeps in bf16; eager attention's batched GEMMs run in bf16 as
               (T·heads, d, s) and (T·heads, s, d) GEMMs
  attention    fused causal attention at (query length s/cp, heads on the rank × micro-batch),
               forward and backward kernels of the accelerator's backend (cudnn | flash2 | flash3)
  memory ops   bytes ÷ (HBM bandwidth · measured fraction at that transfer size)
and each is at least its HBM bytes ÷ that bandwidth (the fp32 main-gradient traffic of wgrad).

Serving (cost/inference.py) uses `Rates.flops_rate`, from the `efficiency` block:
  GEMM         peak(dtype) · matmul; fp8 raises the peak of GEMMs only (attention core and elementwise ops stay bf16), at eff.matmul_fp8 when
               the accelerator sets it
  attention    attention core, fused (flash) or eager (QKᵀ and ·V batched GEMMs): peak(bf16) · attention
               (serving runs forward passes only; training backward times come from cost.kernels)
  memory ops   hbm_bandwidth · hbm (FLOPs ≈ 0)
The bound of an op is "compute" when the FLOP term is the larger, else "memory".
"""

from __future__ import annotations

import numpy as np

from .ops import ATTENTION, MATMUL, Op
from .ops import MEMORY as MEMORY_KIND
from .kernels import KernelModel

LOW_PRECISION_BYTES = {"fp8": 1.0, "fp4": 0.5}


def low_precision_cast_bytes(op: Op, dtype: str):
    """(forward, backward) HBM bytes of Transformer Engine's casts around one fp8/fp4 GEMM.

    Forward: the input X[m,k] is cast with its amax to a row-wise and a column-wise (transposed,
    for wgrad) low-precision copy: read 2 B, write 2·c B per element (c = 1 fp8, 0.5 fp4); the read
    is saved where the cast is fused into the preceding norm (op.norm_fused: TE LayerNormLinear /
    LayerNormMLP write the fp8 copies from the norm). Backward: the
    output gradient dY[m,n] the same way (cast + transpose, unfused). Weight casts happen once per
    step after the optimizer (cost.flops.optimizer_bytes_per_param)."""
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

    def __init__(self, hw, precision: str):
        check_precision(hw, precision)
        eff = hw.efficiency
        fp8_eff = getattr(eff, "matmul_fp8", None) if precision == "fp8" else None
        self.gemm_peak = hw.peak_flops(precision) * (fp8_eff or eff.matmul)
        self.bf16_peak = hw.peak_flops("bf16")
        self.attention = self.bf16_peak * eff.attention
        self.hbm = hw.hbm_bandwidth_gbps * 1e9 * eff.hbm
        self.precision = precision
        self._hw = hw
        self._kernels: KernelModel | None = None

    @property
    def kernels(self) -> KernelModel:
        """Kernel model of the accelerator (loaded on first use: serving does not need it)."""
        if self._kernels is None:
            self._kernels = KernelModel(self._hw)
        return self._kernels

    def gemm_dtype(self, op: Op) -> str:
        if not op.low_precision or self.precision not in ("fp8", "fp4"):
            return "bf16"
        return self.precision

    def memory_s(self, nbytes):
        """Seconds to stream `nbytes` through HBM (measured fraction at that size)."""
        return self.kernels.memory_s(nbytes)

    def flops_rate(self, op: Op):
        """Forward FLOP/s of a serving op from the `efficiency` fractions."""
        attention = self.attention
        if op.kind == MATMUL:
            if op.attention_core:
                # Eager attention's batched GEMMs (K or N = head_dim) run in the activation dtype
                # at the attention-core fraction, like the fused kernel.
                return attention
            return self.gemm_peak
        if op.kind == ATTENTION:
            return attention
        return np.inf


def op_time_s(flops, nbytes, flops_rate, hbm_rate):
    """Roofline: max(FLOPs/rate, bytes/HBM rate), seconds."""
    return np.maximum(np.asarray(flops) / flops_rate, np.asarray(nbytes) / hbm_rate)


def op_kernel_times(op: Op, rates: Rates):
    """(forward, backward) kernel seconds of a GEMM or attention op, before the HBM floor."""
    km = rates.kernels
    if op.kind == MATMUL and op.mkn is not None:
        m, k, n = op.mkn
        dtype = rates.gemm_dtype(op)
        fwd, dgrad, wgrad = km.gemm_parts_s(m, k, n, dtype, ("fwd", "dgrad", "wgrad"))
        bwd = (dgrad + wgrad) * (np.asarray(op.bwd_flops) / 2.0)
        if dtype in LOW_PRECISION_BYTES:
            cast_f, cast_b = low_precision_cast_bytes(op, dtype)
            fwd = fwd + np.where(cast_f > 0, km.memory_s(cast_f), 0.0)
            bwd = bwd + km.memory_s(cast_b)
        return fwd, bwd
    if op.kind == ATTENTION:
        flops = np.asarray(op.flops, dtype=np.float64)
        fwd = km.attention_s(flops, op.seq, op.heads, backward=False)
        bwd = km.attention_s(flops * op.bwd_flops, op.seq, op.heads, backward=True)
        return fwd, bwd
    return None


def op_times(op: Op, rates: Rates):
    """(forward seconds, backward seconds, forward compute-bound?) of one op (module docstring)."""
    mem_f = rates.memory_s(op.bytes)
    mem_b = rates.memory_s(op.backward_bytes())
    kern = op_kernel_times(op, rates) if op.kind != MEMORY_KIND else None
    if kern is None:
        return mem_f, mem_b, np.zeros(np.shape(mem_f), dtype=bool)
    fwd, bwd = kern
    return np.maximum(fwd, mem_f), np.maximum(bwd, mem_b), fwd >= mem_f


def ops_times(ops: list[Op], rates: Rates) -> list:
    """`op_times` of each of `ops` (arrays over the same rows), with the kernel model called once
    for all of them: one `memory_s` for every HBM transfer, one `gemm_parts_s` per GEMM dtype.
    The same numbers as `op_times` op by op (every step is element-wise), in fewer calls."""
    shape = np.broadcast(*[np.asarray(x) for op in ops for x in (op.bytes, op.backward_bytes())]).shape
    for op in ops:
        if op.kind == MATMUL and op.mkn is not None:
            shape = np.broadcast_shapes(shape, *[np.shape(x) for x in op.mkn])
    km = rates.kernels

    def joined(values):
        return np.concatenate([np.broadcast_to(np.asarray(v, dtype=np.float64), shape).ravel() for v in values])

    def split(x, count):
        size = int(np.prod(shape))
        return [x[i * size : (i + 1) * size].reshape(shape) for i in range(count)]

    mem = split(km.memory_s(joined([op.bytes for op in ops] + [op.backward_bytes() for op in ops])), 2 * len(ops))
    kern: dict[int, tuple] = {}
    gemms: dict[str, list[int]] = {}
    for i, op in enumerate(ops):
        if op.kind == MATMUL and op.mkn is not None:
            gemms.setdefault(rates.gemm_dtype(op), []).append(i)
        elif op.kind == ATTENTION:
            kern[i] = op_kernel_times(op, rates)
    for dtype, idx in gemms.items():
        m, k, n = (joined([ops[i].mkn[j] for i in idx]) for j in range(3))
        fwd, dgrad, wgrad = (split(x, len(idx)) for x in km.gemm_parts_s(m, k, n, dtype, ("fwd", "dgrad", "wgrad")))
        casts = None
        if dtype in LOW_PRECISION_BYTES:
            cast = [low_precision_cast_bytes(ops[i], dtype) for i in idx]
            casts = split(km.memory_s(joined([c[0] for c in cast] + [c[1] for c in cast])), 2 * len(idx))
        for j, i in enumerate(idx):
            f = fwd[j]
            b = (dgrad[j] + wgrad[j]) * (np.asarray(ops[i].bwd_flops) / 2.0)
            if casts is not None:
                cast_f = cast[j][0]
                f = f + np.where(cast_f > 0, casts[j], 0.0)
                b = b + casts[len(idx) + j]
            kern[i] = (f, b)
    out = []
    for i, op in enumerate(ops):
        mem_f, mem_b = mem[i], mem[len(ops) + i]
        if i not in kern or kern[i] is None:
            out.append((mem_f, mem_b, np.zeros(np.shape(mem_f), dtype=bool)))
            continue
        fwd, bwd = kern[i]
        out.append((np.maximum(fwd, mem_f), np.maximum(bwd, mem_b), fwd >= mem_f))
    return out
