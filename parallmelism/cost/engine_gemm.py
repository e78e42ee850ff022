"""An engine's GEMM from its measured table: one linear layer (activation quantization and GEMM) on one GPU.

Where a serving engine names a measured table of its linear layers on the accelerator (`gemm_tables` in
conf/engine/NAME.yaml, e.g. TensorRT-LLM's fp8 block-scaled GEMM on H200,
hardware/kernels/h200-sxm-141gb.trtllm-gemm.csv), a serving pass's GEMMs in that scheme take its time:

    log t(m, n, k) = trilinear interpolation of log t_measured in (log m, log n, log k)

over the table's grid of (n, k) pairs, each a curve over m. Between two measured m the curve is
log-log linear (cost.fused_moe.interp_log_log): below the smallest m its time, beyond the largest m
in proportion to m (a compute-bound kernel). An n or k outside the measured range gives NaN: the
caller keeps the kernel model's GEMM. `scheme` is (dtype, fp8_block): fp8 with 128x128 block-scaled
weights is ("fp8", 128), the model's `fp8_block_size`. Nothing here reads a file
(config.kernel_tables.engine_gemm_table reads it).
"""

from __future__ import annotations

import numpy as np

from .fused_moe import interp_log_log, log_bracket, measured_curve


class EngineGemmTable:
    """Measured linear-layer times (module docstring). `rows`: dicts with dtype, fp8_block, m, n, k and
    time_s (the table file's columns)."""

    COLUMNS = ("dtype", "fp8_block", "m", "n", "k", "time_s")

    def __init__(self, rows: list[dict], source: str = ""):
        self.source = source
        series: dict[tuple, dict[tuple[int, int], list[tuple[float, float]]]] = {}
        for r in rows:
            scheme = (str(r["dtype"]), int(float(r["fp8_block"])))
            nk = (int(float(r["n"])), int(float(r["k"])))
            series.setdefault(scheme, {}).setdefault(nk, []).append((float(r["m"]), float(r["time_s"])))
        self._grids = {}
        for scheme, curves in series.items():
            ns = np.array(sorted({n for n, _ in curves}), dtype=np.float64)
            ks = np.array(sorted({k for _, k in curves}), dtype=np.float64)
            if len(curves) != len(ns) * len(ks):
                raise ValueError(f"{source}: GEMM rows of {scheme} need every (n, k) pair of their n and k values")
            grid = {nk: measured_curve(pts, f"{source}: GEMM rows of {scheme} {nk}", "m") for nk, pts in curves.items()}
            self._grids[scheme] = (ns, ks, grid)

    def covers(self, dtype: str, fp8_block: int) -> bool:
        """Whether the table holds this scheme."""
        return (dtype, int(fp8_block)) in self._grids

    def gemm_s(self, m, k, n, dtype: str, fp8_block: int):
        """Seconds of one (m, k, n) linear layer on one GPU (arrays broadcast); NaN outside the
        table's n and k range or for a scheme it does not hold."""
        m, k, n = np.broadcast_arrays(*(np.asarray(x, dtype=np.float64) for x in (m, k, n)))
        out = np.full(m.shape, np.nan)
        held = self._grids.get((dtype, int(fp8_block)))
        if held is None:
            return out
        ns, ks, grid = held
        inside = (n >= ns[0]) & (n <= ns[-1]) & (k >= ks[0]) & (k <= ks[-1])
        for n_, k_ in {(float(a), float(b)) for a, b in zip(n[inside], k[inside])}:
            sel = inside & (n == n_) & (k == k_)
            (i,), (wn,) = log_bracket(np.log(ns), np.log([n_]))
            (j,), (wk,) = log_bracket(np.log(ks), np.log([k_]))
            log_t = 0.0
            for a, w_a in ((i, 1.0 - wn), (i + 1, wn)):
                for b, w_b in ((j, 1.0 - wk), (j + 1, wk)):
                    if w_a * w_b == 0.0:
                        continue
                    curve = grid[(int(ns[a]), int(ks[b]))]
                    log_t = log_t + w_a * w_b * np.log(interp_log_log(m[sel], *curve))
            out[sel] = np.exp(log_t)
        return out
