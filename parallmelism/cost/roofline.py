"""Roofline time of an op: max(FLOPs ÷ achievable FLOP/s, bytes ÷ achievable HBM bandwidth).

Achievable rates come from the accelerator's `efficiency` block (set once per accelerator):
  GEMM         peak(dtype) · matmul · n/(n + matmul_half_dim), n = smallest GEMM dimension
               (a saturating fit: small GEMMs fill fewer tensor cores); fp8 raises the peak of
               GEMMs only (attention core and elementwise ops stay bf16), at eff.matmul_fp8 when
               the accelerator sets it
  attention    attention core, fused (flash) or eager (QKᵀ and ·V batched GEMMs): peak(bf16) · attention
               forward, peak(bf16) · attention_backward backward (None: the forward fraction)
  memory ops   hbm_bandwidth · hbm (FLOPs ≈ 0)
The bound of an op is "compute" when the FLOP term is the larger, else "memory".
"""

from __future__ import annotations

import numpy as np

from .flops import ATTENTION, MATMUL, Op


class Rates:
    """Achievable FLOP/s and bytes/s of one accelerator for one workload precision."""

    def __init__(self, hw, precision: str):
        eff = hw.efficiency
        fp8_eff = getattr(eff, "matmul_fp8", None) if precision == "fp8" else None
        self.gemm_peak = hw.peak_flops(precision) * (fp8_eff or eff.matmul)
        self.bf16_peak = hw.peak_flops("bf16")
        self.attention = self.bf16_peak * eff.attention
        self.attention_backward = self.bf16_peak * (eff.attention_backward or eff.attention)
        self.bf16_gemm = self.bf16_peak * eff.matmul
        self.half_dim = eff.matmul_half_dim
        self.hbm = hw.hbm_bandwidth_gbps * 1e9 * eff.hbm

    def flops_rate(self, op: Op, backward: bool = False):
        attention = self.attention_backward if backward else self.attention
        if op.kind == MATMUL:
            if op.name.startswith("attention_"):
                # Eager attention's batched GEMMs (K or N = head_dim) run in the activation dtype
                # at the attention-core fraction, like the fused kernel.
                return attention
            peak = self.gemm_peak
            if self.half_dim and op.dim is not None:
                n = np.asarray(op.dim, dtype=np.float64)
                return peak * n / (n + self.half_dim)
            return peak
        if op.kind == ATTENTION:
            return attention
        return np.inf


def op_time_s(flops, nbytes, flops_rate, hbm_rate):
    """Roofline: max(FLOPs/rate, bytes/HBM rate), seconds."""
    return np.maximum(np.asarray(flops) / flops_rate, np.asarray(nbytes) / hbm_rate)


def op_times(op: Op, rates: Rates):
    """(forward seconds, backward seconds, forward compute-bound?) of one op."""
    rate = rates.flops_rate(op)
    fwd = op_time_s(op.flops, op.bytes, rate, rates.hbm)
    bwd = op_time_s(np.asarray(op.flops) * op.bwd_flops, op.backward_bytes(), rates.flops_rate(op, backward=True),
                    rates.hbm)
    compute_bound = np.asarray(op.flops) / rate >= np.asarray(op.bytes) / rates.hbm
    return fwd, bwd, compute_bound
