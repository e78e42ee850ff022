"""Per-kernel time from kernel measurements: GEMM, fused causal attention, memory-bound ops.

An accelerator with a kernel table (`kernels.table` in hardware/NAME.yaml, format in
validate/kernel_table.py) predicts a kernel as

    time = physics(shape, this accelerator) · exp(residual(shape))

physics    a roofline with the quantization a GPU imposes (below), from the accelerator's own peak
           FLOP/s, HBM bandwidth and SM count;
residual   log(measured / physics) of the table's kernels, interpolated by inverse-distance
           weighting (power 3) in log2 of the shape: a measured shape gets its measured time
           back (duplicates averaged), a new one the residual of its neighbours.
An accelerator without a table uses the residuals of the reference table (the H100's,
config.kernel_tables.REFERENCE_TABLE) on its own physics: the same fraction of its own peak and bandwidth at the
same shape, with wave quantization on its own SM count (the rule for A100, H200, B200, ...).

Physics, per family (all seconds; arrays broadcast):
  GEMM       C[m,n] = A[m,k]·B[k,n] on tiles of GEMM_TILE = 64×128 outputs; when there are
             fewer tiles than SMs the k dimension is split (≤ k/GEMM_SPLIT_K_MIN ways) to fill
             them; util = CTAs / (waves · SMs).
               t = max(2mkn / (peak(dtype) · GEMM_PEAK_FRACTION[dtype] · util),
                       (a·(mk + kn) + 2mn) / (HBM · GEMM_HBM_FRACTION)) + GEMM_LAUNCH_S
             (a = 1 byte for fp8 inputs, 2 for bf16; output bf16)
  attention  causal flash-style kernel, one CTA per 128 query rows per head (heads × batch);
               t = flops / (peak(bf16) · ATTENTION_PEAK_FRACTION · util) + ATTENTION_LAUNCH_S
             the same physics for a non-causal block (seq queries × kv_seq keys, a context-
             parallel ring step), with its own residuals over (seq, kv_seq, heads): a block runs
             1.3-2x faster per FLOP than a causal kernel of its query length (no masked tiles, no
             short diagonal CTAs; H100 grid in hardware/kernels/h100-sxm-80gb-profiled.attention-grid.csv)
             measured lengths (H100 table): causal 1k-128k (cuDNN at 8-64 heads, FlashAttention-2 at 8 and
             32 heads from 32k), blocks up to 32k queries × 128k keys (h100_attention_long.csv); a longer
             kernel takes its nearest measured neighbours' residual, i.e. the efficiency measured at 128k
             (an extrapolation; the reference shows no fall-off from 32k to 128k)
             backends: cudnn (cuDNN fused attention: what Transformer Engine runs on Hopper),
             flash2 (FlashAttention-2), flash3 (FlashAttention-3: the cudnn residuals, both are
             Hopper warp-specialized kernels at similar rates; no measurement here), eager (not
             this function: batched GEMMs, cost.roofline).
  memory     bytes / (HBM · fraction(bytes)): the table's measured bandwidth over transfer size,
             interpolated in log(bytes), clamped at the ends (small transfers are latency-bound).
The physics constants are a rough fit to the H100 table (python -m parallmelism.validate.kernel_report
prints it and the per-row errors); the residuals carry the rest. Nothing here reads a file: the
tables are read and resolved by config/kernel_tables.py (`kernel_model(hw)`) and passed in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

# Physics constants: fitted roughly to the H100 table (source: python -m parallmelism.validate.kernel_report,
# which prints them and the per-row errors), except where a line names another source.
REFERENCE_SM_COUNT = 132  # SMs of the H100 SXM the reference table was measured on (NVIDIA H100 datasheet)
GEMM_TILE = (64.0, 128.0)  # output rows × columns per CTA tile (CUTLASS/cuBLAS Hopper tile shape)
GEMM_SPLIT_K_MIN = 1024.0  # elements of k per split-k slice, at least
GEMM_PEAK_FRACTION = {"bf16": 0.78, "fp8": 0.69}  # fraction of the dtype's dense peak FLOP/s
GEMM_HBM_FRACTION = 0.85  # fraction of HBM bandwidth a GEMM streams its operands at
GEMM_LAUNCH_S = 7e-6  # seconds: fixed cost of one GEMM kernel
GEMM_INPUT_BYTES = {"bf16": 2.0, "fp8": 1.0, "fp4": 0.5}  # bytes per input element (other dtypes as bf16)
GEMM_OUTPUT_BYTES = 2.0  # bytes per output element (bf16 output)
ATTENTION_BLOCK = 128.0  # query rows per CTA of a fused attention kernel (FlashAttention-2/3, cuDNN)
ATTENTION_PEAK_FRACTION = 0.6  # fraction of bf16 peak FLOP/s of a fused attention kernel
ATTENTION_LAUNCH_S = 10e-6  # seconds: fixed cost of one attention kernel
BACKENDS = ("cudnn", "flash2", "flash3")
# causal kernels (fwd, bwd) and non-causal blocks of a context-parallel ring step (fwd_block, bwd_block)
ATTENTION_PARTS = ("fwd", "bwd", "fwd_block", "bwd_block")
IDW_POWER = 3.0  # inverse-distance weighting exponent of the residual interpolation
# Decode regime (h100_decode_kernels.csv, L2 flushed as in a decode step):
#   skinny GEMM   forward kernels at m <= DECODE_GEMM_MAX_ROWS rows of a dtype with `gemm_decode` rows
#                 (weight streaming, m 1-256) take their residual from those rows and the table's other
#                 forward rows at such m (the curves' m = 16-256); larger m from all GEMM rows, as before:
#                 the decode rows stay out of that set so that they move no training-sized GEMM
#   grouped GEMM  one MoE layer's experts as one grouped kernel (torch._grouped_mm, what fused-MoE
#                 kernels do): the physics of one GEMM of rows-per-expert × k × (n · experts) (the
#                 experts' weights streamed once, their FLOPs summed), residual over (rows per expert,
#                 weight elements per expert, experts) from the `moe_grouped` rows, which time gate+up and
#                 down together: GROUPED_EXPERT_MATRICES = 3 matrices of k × n per expert (SwiGLU)
#                 (h100_decode_kernels.csv at 1-100 rows per expert; h100_moe_experts.csv at 64-4096, the
#                 training and prefill regime: Qwen3-30B/235B, DeepSeek-V3 at EP 32, Mixtral-8x7B)
#   token gathers one MoE permute or unpermute of m token copies × k elements: bytes / HBM × residual
#                 over log2(m, k) of the `moe_permute` rows (h100_moe_experts.csv: index_select / index_add_)
#   decode attention  one query per sequence against a KV cache: KV bytes / HBM bandwidth +
#                 ATTENTION_LAUNCH_S, residual over (sequences × KV heads, context) from the
#                 attention rows of part `decode`
DECODE_GEMM_MAX_ROWS = 256.0  # rows (tokens): the largest m of the gemm_decode rows of the H100 table
PERMUTE_RW_BYTES = 4.0  # bytes per element of a token gather: read bf16, write bf16 (the moe_permute rows' bytes)
# rows-per-expert doublings over which the grouped/dense ratio falls to 1 beyond the largest measured
# rows per expert (KernelModel.grouped_ratio): an extrapolation rule, not a fit
GROUPED_RATIO_TAPER_DOUBLINGS = 1.0
GROUPED_EXPERT_MATRICES = 3.0  # gate, up, down projections of one SwiGLU expert (the moe_grouped rows' layer)
# A GEMM's backward runs two kernels on the same layer shape (m tokens, k in, n out):
# dgrad dX = dY·Wᵀ and wgrad dW = Xᵀ·dY. The table labels them by the layer shape; their residuals
# are told apart by a fourth coordinate, half a doubling of a dimension apart (the parts of a shape
# differ by up to 35 % in the H100 table, e.g. the wgrad of a down projection).
GEMM_PARTS = ("fwd", "dgrad", "wgrad")
GEMM_PART_DISTANCE = 0.5  # log2 units between the dgrad/wgrad/fwd residual coordinates (above)
_CHUNK = 2048  # query rows per IDW block (bounds the distance matrix's memory)
_MEMO_MAX = 1 << 16  # remembered residuals (shapes) before the memo is cleared
_KEY_WEIGHTS = np.array([1.0, np.pi * 1e3, np.e * 1e6, np.sqrt(2.0) * 1e9])


def _util(ctas, sms):
    waves = np.ceil(ctas / sms)
    return ctas / np.maximum(waves, 1.0) / sms


def gemm_physics_s(m, k, n, dtype, peak_flops, hbm_bps, sms, weight_bytes=None):
    """Quantized roofline of one GEMM (module docstring), seconds. `weight_bytes`: bytes per element
    of B when they differ from the inputs' (weight-only quantized serving: int4 or fp8 weights with
    bf16 math, dequantized in registers); None: the input dtype's."""
    m, k, n = (np.asarray(x, dtype=np.float64) for x in (m, k, n))
    tiles = np.ceil(m / GEMM_TILE[0]) * np.ceil(n / GEMM_TILE[1])
    splits = np.clip(np.floor(sms / tiles), 1.0, np.maximum(1.0, k / GEMM_SPLIT_K_MIN))
    util = _util(tiles * splits, sms)
    frac = GEMM_PEAK_FRACTION.get(dtype, GEMM_PEAK_FRACTION["bf16"])
    t_c = 2.0 * m * k * n / (peak_flops * frac * util)
    in_bytes = GEMM_INPUT_BYTES.get(dtype, GEMM_INPUT_BYTES["bf16"])
    if weight_bytes is None:
        inputs = in_bytes * (m * k + k * n)
    else:
        inputs = in_bytes * m * k + np.asarray(weight_bytes, dtype=np.float64) * k * n
    t_m = (inputs + GEMM_OUTPUT_BYTES * m * n) / (hbm_bps * GEMM_HBM_FRACTION)
    return np.maximum(t_c, t_m) + GEMM_LAUNCH_S


def decode_attention_physics_s(kv_bytes, flops, hbm_bps, peak_bf16):
    """One-query attention over a KV cache (module docstring, decode regime): the cache streamed
    once at HBM bandwidth, or its FLOPs at the attention kernels' fraction of peak where more (MLA's
    many query heads on one latent), plus a launch, seconds."""
    t_m = np.asarray(kv_bytes, dtype=np.float64) / hbm_bps
    t_c = np.asarray(flops, dtype=np.float64) / (peak_bf16 * ATTENTION_PEAK_FRACTION)
    return np.maximum(t_m, t_c) + ATTENTION_LAUNCH_S


def decode_attention_flops(query_heads, context, head_dim):
    """4·heads·context·d: QKᵀ and ·V of one query per head (query heads × sequences)."""
    return 4.0 * np.asarray(query_heads, dtype=np.float64) * np.asarray(context, dtype=np.float64) * head_dim


def attention_physics_s(flops, seq, heads, peak_bf16, sms):
    """Causal fused attention (module docstring), seconds; heads = heads per GPU × batch."""
    ctas = np.ceil(np.asarray(seq, dtype=np.float64) / ATTENTION_BLOCK) * np.asarray(heads, dtype=np.float64)
    return (
        np.asarray(flops, dtype=np.float64) / (peak_bf16 * ATTENTION_PEAK_FRACTION * _util(ctas, sms))
        + ATTENTION_LAUNCH_S
    )


def block_attention_flops(seq, kv_seq, heads, head_dim, backward=False):
    """4·seq·kv_seq·heads·d forward (no mask), 2.5× that backward."""
    f = 4.0 * np.asarray(seq, dtype=np.float64) * np.asarray(kv_seq, dtype=np.float64) * np.asarray(heads) * head_dim
    return f * (2.5 if backward else 1.0)


def causal_attention_flops(seq, heads, head_dim, backward=False):
    """4·s²·heads·d/2 forward (causal half), 2.5× that backward (the measurement convention)."""
    f = 2.0 * np.asarray(seq, dtype=np.float64) ** 2 * np.asarray(heads, dtype=np.float64) * head_dim
    return f * (2.5 if backward else 1.0)


def _idw(points, values, query):
    """Inverse-distance-weighted mean of `values` at `query` rows (power IDW_POWER); exact at a point."""
    query = np.atleast_2d(query)
    out = np.empty(len(query))
    for lo in range(0, len(query), _CHUNK):
        q = query[lo : lo + _CHUNK]
        # elementwise, no BLAS: a row's result must not depend on which rows share its call (the
        # streamed and one-shot evaluations of a grid agree bit for bit)
        d2 = ((q[:, None, :] - points[None, :, :]) ** 2).sum(axis=2)
        w = 1.0 / (d2 ** (IDW_POWER / 2.0) + 1e-9)
        out[lo : lo + _CHUNK] = (w * values[None, :]).sum(axis=1) / w.sum(axis=1)
    return out


# Below this many rows first_of_each sorts (np.unique: 1.5 ms at 16k rows) rather than import
# pandas, ~0.3 s of a small question's ~0.3 s start-up (issue 29); above it pandas pays for itself.
FACTORIZE_MIN_ROWS = 1 << 14


def first_of_each(key):
    """(index of the first row of each distinct value of `key`, each row's distinct-value number):
    np.unique's return_index and return_inverse. Large keys by hashing, not sorting (pandas.factorize:
    ~6x faster on a sweep chunk's 10^5 rows of a few hundred shapes), small ones with np.unique
    (no pandas import); the numbering differs (order of appearance or sorted), and callers gather
    a value per distinct key back with it, so their result does not depend on it."""
    key = np.asarray(key)
    if key.size < FACTORIZE_MIN_ROWS:
        _, first, inv = np.unique(key, return_index=True, return_inverse=True)
        return first.astype(np.int64), inv.ravel()
    import pandas as pd

    inv, uniques = pd.factorize(key)
    first = np.empty(len(uniques), dtype=np.int64)
    first[inv[::-1]] = np.arange(len(inv) - 1, -1, -1)
    return first, inv


def _log_ratio(measured, physics):
    """log(measured / physics); NaN for blank or non-positive times (the table check rejects them)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.log(np.asarray(measured, dtype=np.float64) / physics)


def _log2(x):
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.log2(np.asarray(x, dtype=np.float64))


@dataclass(frozen=True)
class _Residuals:
    points: np.ndarray  # (P, D) log2 coordinates
    values: np.ndarray  # (P,) log(measured / physics)
    # coordinates per shape -> (sorted keys, their shapes, residuals) of the shapes seen (bounded)
    memo: dict = field(default_factory=dict, compare=False, repr=False)

    def __call__(self, *coords, extra=None):
        """Residual at log2 of `coords`, plus an `extra` coordinate taken as is (the GEMM part)."""
        return self.at_extras(coords, [extra])[0]

    def at_extras(self, coords, extras) -> list:
        """`self(*coords, extra=e)` for each e of `extras` (one lookup for all of them)."""
        shape = np.broadcast(*coords).shape
        cols = [np.log2(np.broadcast_to(np.asarray(c, dtype=np.float64), shape)).ravel() for c in coords]
        rows = len(cols[0])
        if len(self.values) == 0:
            return [np.zeros(shape) for _ in extras]
        blocks = [np.stack(cols + ([] if e is None else [np.full(rows, float(e))]), axis=1) for e in extras]
        q = blocks[0] if len(blocks) == 1 else np.concatenate(blocks)
        # A grid repeats few distinct shapes (they depend on micro-batch, tp, cp only): interpolate each once.
        # (one float key per row: incommensurate weights on log2 coordinates; a 1-D unique is ~10x a row-unique)
        key = q @ _KEY_WEIGHTS[: q.shape[1]]
        first, inv = first_of_each(key)
        uq = np.ascontiguousarray(q[first])
        res = self._memoized(key[first], uq)
        out = res[inv.ravel()]
        return [out[i * rows : (i + 1) * rows].reshape(shape) for i in range(len(extras))]

    def _memoized(self, key, shapes) -> np.ndarray:
        """Residual of each shape row (distinct keys `key`): sweeps evaluate the same shapes chunk
        after chunk, so each is interpolated once and looked up after (one search over the sorted
        keys of the shapes seen, a hit only where the whole row matches; no Python per shape)."""
        width = shapes.shape[1]
        keys, seen, values = self.memo.get(width, (np.empty(0), np.empty((0, width)), np.empty(0)))
        res = np.empty(len(key))
        hit = np.zeros(len(key), dtype=bool)
        if len(keys):
            at = np.minimum(np.searchsorted(keys, key), len(keys) - 1)
            hit = (keys[at] == key) & (seen[at] == shapes).all(axis=1)
            res[hit] = values[at[hit]]
        todo = np.flatnonzero(~hit)
        if len(todo):
            res[todo] = _idw(self.points, self.values, shapes[todo])
            new = todo[key[todo] == key[todo]]  # a NaN key never matches: not remembered
            if len(keys) + len(new) > _MEMO_MAX:
                keys, seen, values = keys[:0], seen[:0], values[:0]
            keys, seen, values = (
                np.concatenate(x) for x in ((keys, key[new]), (seen, shapes[new]), (values, res[new]))
            )
            order = np.argsort(keys, kind="stable")
            self.memo[width] = (keys[order], seen[order], values[order])
        return res


@dataclass(frozen=True)
class _ShiftedResiduals:
    """Block residual of a table without block rows (KernelModel._completed): the reference's block
    residual minus its causal residual, plus the table's own causal residual, at (seq, kv_seq, heads)."""

    block_ref: Any  # the reference's _Residuals over (seq, kv_seq, heads)
    causal_ref: Any  # over (seq, heads)
    causal_own: Any

    def __call__(self, seq, kv_seq, heads):
        return self.block_ref(seq, kv_seq, heads) - self.causal_ref(seq, heads) + self.causal_own(seq, heads)


class KernelTable:
    """Measured kernels of one accelerator (a table file) as residuals over the reference physics
    of the accelerator they were measured on."""

    def __init__(
        self, rows: list[dict], peak_tflops: dict, hbm_gbps: float, sms: int, require_all: bool = True, path=None
    ):
        """`rows`: the table's rows as {column: text} (read by config.kernel_tables); `path`: where
        they came from, for messages and reports only (nothing is read here)."""
        self.path = path
        if not rows:
            raise ValueError(f"{path}: no kernel rows")

        def f(r, c):
            return float(r[c]) if r.get(c) not in (None, "") else np.nan

        peak = {k: v * 1e12 for k, v in peak_tflops.items()}
        bw = hbm_gbps * 1e9
        self.gemm = {}
        for dtype in sorted({r["dtype"] for r in rows if r["family"] == "gemm"}):
            g = [r for r in rows if r["family"] == "gemm" and r["dtype"] == dtype]
            if dtype not in peak and dtype != "fp32":
                continue
            m, k, n, t = (np.array([f(r, c) for r in g]) for c in ("m", "k", "n", "measured_s"))
            part = np.array([GEMM_PARTS.index(r.get("part") or "fwd") for r in g], dtype=np.float64)
            base = gemm_physics_s(m, k, n, dtype, peak.get(dtype, peak["bf16"]), bw, sms)
            coords = np.stack([_log2(m), _log2(k), _log2(n), GEMM_PART_DISTANCE * part], axis=1)
            self.gemm[dtype] = _Residuals(coords, _log_ratio(t, base))
        self.attention: dict[tuple[str, str], Any] = {}  # _Residuals (measured) or _ShiftedResiduals
        for backend in sorted({r["backend"] for r in rows if r["family"] == "attention"}):
            for direction in ATTENTION_PARTS:
                a = [
                    r for r in rows if r["family"] == "attention" and r["backend"] == backend and r["part"] == direction
                ]
                if not a:
                    continue
                s, h, d, t = (np.array([f(r, c) for r in a]) for c in ("seq", "heads", "head_dim", "measured_s"))
                bwd = direction.startswith("bwd")
                if direction.endswith("_block"):  # non-causal: seq queries × kv_seq keys, (seq, kv_seq, heads)
                    kv = np.array([f(r, "kv_seq") for r in a])
                    flops = block_attention_flops(s, kv, h, d, bwd)
                    coords = np.stack([s, kv, h], axis=1)
                else:
                    flops = causal_attention_flops(s, h, d, bwd)
                    coords = np.stack([s, h], axis=1)
                base = attention_physics_s(flops, s, h, peak["bf16"], sms)
                self.attention[(backend, direction)] = _Residuals(_log2(coords), _log_ratio(t, base))
        self._decode_families(rows, f, peak, bw, sms)
        self.has_hbm = any(r["family"] == "hbm" for r in rows)
        if not require_all:
            if not (self.gemm or self.attention or self.has_hbm):
                raise ValueError("no gemm, attention or hbm rows")
        missing = (
            []
            if not require_all
            else [
                what
                for what, ok in (
                    ("GEMM rows", bool(self.gemm)),
                    ("attention forward rows", any(p == "fwd" for _, p in self.attention)),
                    ("attention backward rows", any(p == "bwd" for _, p in self.attention)),
                )
                if not ok
            ]
        )
        if missing:
            raise ValueError(f"no {', no '.join(missing)}")
        for res in list(self.gemm.values()) + list(self.attention.values()):
            if not np.all(np.isfinite(res.values)) or not np.all(np.isfinite(res.points)):
                raise ValueError("a blank, zero or negative size or time")
        hb = [r for r in rows if r["family"] == "hbm"]
        if hb:
            b, t = (np.array([f(r, c) for r in hb]) for c in ("bytes", "measured_s"))
            order = np.argsort(b)
            frac = b / t / bw
            lb = np.log(b[order])
            # pooled duplicates: mean fraction per size
            u, inv = np.unique(lb, return_inverse=True)
            self.hbm_log_bytes = u
            self.hbm_fraction = np.bincount(inv, frac[order]) / np.bincount(inv)
            if not (np.all(np.isfinite(self.hbm_fraction)) and np.all(self.hbm_fraction > 0)):
                raise ValueError("an hbm row with a blank, zero or negative size or time")
        else:  # no measured transfers: no fraction to read (KernelModel takes the reference table's)
            self.hbm_log_bytes = np.array([])
            self.hbm_fraction = np.array([])

    def _decode_families(self, rows, f, peak, bw, sms):
        """Residuals of the decode regime (module docstring): skinny GEMMs per dtype, the grouped
        expert layer, one-query attention (None where the table has no such rows)."""
        self.gemm_decode = {}
        for dtype in sorted({r["dtype"] for r in rows if r["family"] == "gemm_decode"}):
            g = [r for r in rows if r["family"] == "gemm_decode" and r["dtype"] == dtype]
            m, k, n, t = (np.array([f(r, c) for r in g]) for c in ("m", "k", "n", "measured_s"))
            base = gemm_physics_s(m, k, n, dtype, peak.get(dtype, peak["bf16"]), bw, sms)
            points = np.stack([_log2(m), _log2(k), _log2(n)], axis=1)
            values = _log_ratio(t, base)
            main = self.gemm.get(dtype)
            if main is not None:  # the table's other forward GEMMs of this regime (the curves' m = 16-256)
                keep = (main.points[:, 3] == 0.0) & (main.points[:, 0] <= np.log2(DECODE_GEMM_MAX_ROWS))
                points, values = (
                    np.concatenate([points, main.points[keep, :3]]),
                    np.concatenate([values, main.values[keep]]),
                )
            self.gemm_decode[dtype] = _Residuals(points, values)
        g = [r for r in rows if r["family"] == "moe_grouped" and r["part"] == "grouped"]
        self.grouped = None
        if g:
            m, k, n, e, t = (np.array([f(r, c) for r in g]) for c in ("m", "k", "n", "experts", "measured_s"))
            base = gemm_physics_s(m, k, GROUPED_EXPERT_MATRICES * n * e, "bf16", peak["bf16"], bw, sms)
            coords = np.stack([_log2(m), _log2(k * n), _log2(e)], axis=1)  # weight elements of one matrix
            self.grouped = _Residuals(coords, _log_ratio(t, base))
        # grouped over dense of the same FLOPs, both measured in one run (h100_moe_experts.csv: same source)
        d = {
            (r["m"], r["k"], r["n"], r["experts"], r.get("source")): f(r, "measured_s")
            for r in rows
            if r["family"] == "moe_grouped" and r["part"] == "dense"
        }
        pairs = [(r, d[key]) for r in g if (key := (r["m"], r["k"], r["n"], r["experts"], r.get("source"))) in d]
        self.grouped_vs_dense = None
        if pairs:
            m, k, n, e, t = (np.array([f(r, c) for r, _ in pairs]) for c in ("m", "k", "n", "experts", "measured_s"))
            # by the expert block's shape alone: the measurements vary the expert count only with the shape
            coords = np.stack([_log2(m), _log2(k * n)], axis=1)
            self.grouped_vs_dense = _Residuals(coords, _log_ratio(t, np.array([x for _, x in pairs])))
            self.grouped_vs_dense_max_rows = float(np.max(m))
        p = [r for r in rows if r["family"] == "moe_permute"]
        self.permute = None
        if p:  # one gather of m token copies of k elements (`bytes` read + written), against the HBM roofline
            m, k, b, t = (np.array([f(r, c) for r in p]) for c in ("m", "k", "bytes", "measured_s"))
            self.permute = _Residuals(np.stack([_log2(m), _log2(k)], axis=1), _log_ratio(t, b / bw))
        a = [r for r in rows if r["family"] == "attention" and r["part"] == "decode"]
        self.decode_attention = None
        if a:
            b, kv, ctx, t = (np.array([f(r, c) for r in a]) for c in ("bytes", "kv_heads", "kv_seq", "measured_s"))
            fl = decode_attention_flops(
                np.array([f(r, "heads") for r in a]), ctx, np.array([f(r, "head_dim") for r in a])
            )
            base = decode_attention_physics_s(b, fl, bw, peak["bf16"])
            self.decode_attention = _Residuals(np.stack([_log2(kv), _log2(ctx)], axis=1), _log_ratio(t, base))
        for res in [
            *self.gemm_decode.values(),
            self.grouped,
            self.grouped_vs_dense,
            self.permute,
            self.decode_attention,
        ]:
            if res is not None and not (np.all(np.isfinite(res.values)) and np.all(np.isfinite(res.points))):
                raise ValueError("a decode-regime row with a blank, zero or negative size or time")


@dataclass(frozen=True)
class KernelTables:
    """The kernel tables one accelerator's model reads (loaded at the config edge,
    config/kernel_tables.py): its own table (None: the rule for accelerators without one) and the
    reference H100 table, on the reference accelerator's physics."""

    own: KernelTable | None
    reference: KernelTable


class KernelModel:
    """Kernel times on one accelerator (module docstring). Pure functions of arrays."""

    def __init__(self, hw, tables: KernelTables):
        spec = getattr(hw, "kernels", None)
        self.sms = float(getattr(spec, "sm_count", None) or REFERENCE_SM_COUNT)
        self.backend = getattr(spec, "attention_backend", None) or "cudnn"
        self.peak = {k: v * 1e12 for k, v in hw.peak_tflops.items()}
        self.hbm_bps = hw.hbm_bandwidth_gbps * 1e9
        self.reference = tables.reference
        self.own_table = tables.own is not None
        if (
            tables.own is None
        ):  # the documented rule: the reference accelerator's residuals on this accelerator's physics
            self.table = tables.reference
        elif self._incomplete(tables.own):
            self.table = self._completed(tables.own)
        else:
            self.table = tables.own
        self._decode_from(tables)
        # a serving engine's measured fused-MoE op (cost.fused_moe.FusedMoeTable), set by
        # config.kernel_tables.serving_kernel_model; None: MoE experts from grouped_gemm_s
        self.fused_moe: Any = None
        # a serving engine's measured linear layers (cost.engine_gemm.EngineGemmTable), set there too;
        # None: GEMMs from the kernel table
        self.engine_gemm: Any = None
        # a serving engine's measured MLA attention module in prefill (cost.mla_context.MlaContextTable),
        # set there too; None: the module's ops from the kernel model
        self.mla_context: Any = None

    def _decode_from(self, tables: KernelTables) -> None:
        """The decode regime's residuals: the own table's rows of each family, else the reference's
        (the rule for accelerators without a table). Skinny GEMMs: an own table with GEMM rows at
        m <= DECODE_GEMM_MAX_ROWS but no gemm_decode rows (aiconfigurator's, m from 1) keeps its own
        GEMM residuals there (they measure that regime on this accelerator)."""
        own, ref = tables.own, tables.reference
        if own is not None and own.gemm_decode:
            self.gemm_decode = own.gemm_decode
        elif own is not None and any(np.any(2.0 ** r.points[:, 0] <= DECODE_GEMM_MAX_ROWS) for r in own.gemm.values()):
            self.gemm_decode = {}
        else:
            self.gemm_decode = ref.gemm_decode
        self.grouped = (own.grouped if own is not None else None) or ref.grouped
        self.permute = (own.permute if own is not None else None) or ref.permute
        src = own if own is not None and own.grouped_vs_dense is not None else ref
        self.grouped_vs_dense = src.grouped_vs_dense
        self.grouped_vs_dense_max_rows = getattr(src, "grouped_vs_dense_max_rows", 1.0)
        self.decode_attention = (own.decode_attention if own is not None else None) or ref.decode_attention

    @staticmethod
    def _incomplete(t: KernelTable) -> bool:
        parts = {p for _, p in t.attention}
        return not (t.gemm and parts >= set(ATTENTION_PARTS) and t.has_hbm)

    def _completed(self, own: KernelTable) -> KernelTable:
        """A table that lacks a family (e.g. aiconfigurator's A100 tables: no attention backward, no
        HBM transfers; a profile from before attention blocks were timed: no non-causal blocks)
        takes that family from the reference H100 table (the rule for accelerators without a
        table), the rest from its own measurements. GEMMs come from the reference when the table
        has none, and per precision when it measured others (AMD's published MI300X GEMMs are fp8). A missing non-causal block of a backend is that backend's own causal
        residual plus the reference's block-minus-causal residual at the same shape (what the
        block saves over a causal kernel, on this table's causal times)."""
        import copy

        ref = self.reference
        t = copy.copy(own)
        t.gemm = dict(own.gemm) if own.gemm else dict(ref.gemm)
        if set(own.gemm) - {"fp32"}:  # tensor-core GEMMs measured: a precision it lacks from the reference
            t.gemm = {**ref.gemm, **own.gemm}  # (MI300X: fp8 published, bf16 not; a CPU fp32 table keeps its own)
        t.attention = dict(own.attention)
        own_parts = {p for _, p in own.attention}
        for (b, p), res in ref.attention.items():
            if p in ("fwd", "bwd") and p not in own_parts:
                t.attention[(b, p)] = res
        for b in sorted({b for b, _ in t.attention}):
            for causal, block in (("fwd", "fwd_block"), ("bwd", "bwd_block")):
                if (b, block) in t.attention or (b, causal) not in t.attention:
                    continue
                rb = b if (b, block) in ref.attention and (b, causal) in ref.attention else "cudnn"
                t.attention[(b, block)] = _ShiftedResiduals(
                    ref.attention[(rb, block)], ref.attention[(rb, causal)], t.attention[(b, causal)]
                )
        if not own.has_hbm:
            t.hbm_log_bytes, t.hbm_fraction, t.has_hbm = ref.hbm_log_bytes, ref.hbm_fraction, True
        return t

    def _attention_residuals(self, part: str, backend):
        """Residuals of an attention `part` for `backend` (flash3 reads cudnn's; a backend the table
        lacks reads cudnn's, else any backend's)."""
        backend = backend or self.backend
        att = self.table.attention
        key = ("cudnn" if backend == "flash3" else backend, part)
        return att.get(key) or att.get(("cudnn", part)) or next(v for (b, p), v in att.items() if p == part)

    def peak_flops(self, dtype):
        return self.peak.get(dtype, self.peak["bf16"])

    def gemm_s(self, m, k, n, dtype="bf16", part="fwd", weight_bytes=None):
        """Seconds of the `part` (fwd | dgrad | wgrad) kernel of a layer GEMM C[m,n] = A[m,k]·B[k,n]
        in `dtype` (bf16 | fp8 | fp4); dgrad and wgrad execute the same 2mkn FLOPs."""
        return self.gemm_parts_s(m, k, n, dtype, (part,), weight_bytes)[0]

    def gemm_parts_s(self, m, k, n, dtype="bf16", parts=GEMM_PARTS, weight_bytes=None) -> list:
        """`gemm_s` of each of `parts` on the same shapes (the physics once, one residual lookup).
        A forward kernel at m <= DECODE_GEMM_MAX_ROWS takes the decode regime's residual where this
        model has skinny-GEMM rows of `dtype` (module docstring). `weight_bytes`: per element of the
        weights when they are narrower than `dtype` (weight-only quantization; gemm_physics_s)."""
        gemm = self.table.gemm
        res = gemm.get(dtype) or gemm.get("bf16") or next(iter(gemm.values()))  # a CPU profile: fp32 only
        base = gemm_physics_s(m, k, n, dtype, self.peak_flops(dtype), self.hbm_bps, self.sms, weight_bytes)
        extras = [GEMM_PART_DISTANCE * GEMM_PARTS.index(p) for p in parts]
        skinny_res = self.gemm_decode.get(dtype) if "fwd" in parts else None
        skinny = None if skinny_res is None else np.asarray(m) <= DECODE_GEMM_MAX_ROWS
        if skinny_res is None or skinny is None or not np.any(skinny):
            return [base * np.exp(r) for r in res.at_extras((m, k, n), extras)]
        # the decode regime's residual on the skinny rows, the main one on the others (each looked up
        # only where it is used: a row's residual does not depend on the rows that share the call)
        shape = np.shape(base)
        M, K, N = (np.broadcast_to(np.asarray(x, dtype=np.float64), shape) for x in (m, k, n))
        skinny = np.broadcast_to(skinny, shape)
        out = []
        for e in extras:
            r = np.empty(shape)
            wide = ~skinny
            if np.any(wide):
                r[wide] = res.at_extras((M[wide], K[wide], N[wide]), [e])[0]
            if e == 0.0:  # the forward kernel
                r[skinny] = skinny_res(np.maximum(M[skinny], 1.0), K[skinny], N[skinny])
            else:
                r[skinny] = res.at_extras((M[skinny], K[skinny], N[skinny]), [e])[0]
            out.append(r)
        return [base * np.exp(r) for r in out]

    def grouped_gemm_s(self, rows, k, n, experts, dtype="bf16", weight_bytes=None, matrices=GROUPED_EXPERT_MATRICES):
        """Seconds of one grouped GEMM over `experts` experts, each C[rows,n] = A[rows,k]·B[k,n]
        holding `matrices` weight matrices side by side (module docstring, decode regime): the
        physics of rows × k × (n·experts), the residual of the moe_grouped rows at (rows, k·n /
        matrices, experts): the measured rows time gate, up and down together (3 matrices of
        hidden × FFN), so an op of the gate+up GEMM (2) or of the down GEMM (1) reads the residual
        at the size of one expert matrix, where its layer was measured."""
        rows = np.maximum(np.asarray(rows, dtype=np.float64), 1.0)
        e = np.maximum(np.asarray(experts, dtype=np.float64), 1.0)
        nn = np.asarray(n, dtype=np.float64) * e
        base = gemm_physics_s(rows, k, nn, dtype, self.peak_flops(dtype), self.hbm_bps, self.sms, weight_bytes)
        if self.grouped is None:  # a table without grouped rows: the GEMM rule at that shape
            return self.gemm_s(rows, k, nn, dtype) if weight_bytes is None else base
        return base * np.exp(self.grouped(rows, np.asarray(k, dtype=np.float64) * n / matrices, e))

    def grouped_ratio(self, rows, k, n, experts, matrices):
        """Seconds of one grouped kernel over `experts` expert blocks k × n (`matrices` expert
        matrices side by side: grouped_gemm_s), `rows` rows in all, over those of one dense GEMM
        rows × k × n of the same FLOPs (the large-GEMM assumption): the measured ratio of the two
        (moe_grouped rows, parts grouped and dense, timed in one run) at (rows per expert, one
        matrix's size): the expert block's shape; the measured layers vary the expert count only
        together with the shape, so it is not a coordinate. Interpolated like every residual; beyond
        the largest measured rows per expert (4096, where the ratios are 1.00-1.18) it falls to 1
        (the large-GEMM assumption) over GROUPED_RATIO_TAPER_DOUBLINGS doublings of the rows per
        expert, continuously: an extrapolation, not a measurement (each expert's block is then a
        GEMM of 8192+ rows, as large as the dense ones the table measures); 1 for one expert or a
        model without such rows.
        Training multiplies its dense kernels by it (forward, dgrad, wgrad; bf16 and fp8: no
        grouped backward or fp8 kernel is measured, so the forward's bf16 ratio stands for them)."""
        e = np.maximum(np.asarray(experts, dtype=np.float64), 1.0)
        if self.grouped_vs_dense is None:
            return np.ones(np.broadcast(rows, k, n, e, matrices).shape)
        per_expert = np.maximum(np.asarray(rows, dtype=np.float64) / e, 1.0)
        top = self.grouped_vs_dense_max_rows
        kn = np.asarray(k, dtype=np.float64) * n / matrices
        log_ratio = self.grouped_vs_dense(np.minimum(per_expert, top), kn)
        # beyond the measured rows per expert: to 1 over one doubling (GROUPED_RATIO_TAPER_DOUBLINGS)
        taper = np.clip(1.0 - np.log2(np.maximum(per_expert / top, 1.0)) / GROUPED_RATIO_TAPER_DOUBLINGS, 0.0, 1.0)
        return np.where(e > 1.0, np.exp(log_ratio * taper), 1.0)

    def permute_s(self, rows, width):
        """Seconds of one MoE token gather or scatter (permute into expert order, unpermute back) of
        `rows` token copies of `width` elements (bf16; bytes = 4·rows·width read + written): bytes /
        HBM bandwidth times the residual of the table's moe_permute rows over (rows, width)
        (index_select / index_add_, 20-30 % of HBM bandwidth on the H100); a model without such
        rows: the HBM copy rate (`memory_s`)."""
        rows = np.maximum(np.asarray(rows, dtype=np.float64), 1.0)
        width = np.maximum(np.asarray(width, dtype=np.float64), 1.0)
        nbytes = PERMUTE_RW_BYTES * rows * width
        if self.permute is None:
            return self.memory_s(nbytes)
        return nbytes / self.hbm_bps * np.exp(self.permute(rows, width))

    def decode_attention_s(self, kv_bytes, flops, streams, context):
        """Seconds of one-query attention reading `kv_bytes` of KV cache and executing `flops`:
        `streams` = sequences × KV heads on the GPU, `context` = key positions per sequence (module
        docstring, decode regime)."""
        base = decode_attention_physics_s(kv_bytes, flops, self.hbm_bps, self.peak_flops("bf16"))
        if self.decode_attention is None:
            return base
        return base * np.exp(self.decode_attention(np.maximum(streams, 1.0), np.maximum(context, 1.0)))

    def attention_s(self, flops, seq, heads, backward=False, backend=None):
        """Seconds of a causal fused attention executing `flops` (causal-halved, 2.5× in bwd), at
        query length `seq` with `heads` = heads per GPU × batch (module docstring)."""
        res = self._attention_residuals("bwd" if backward else "fwd", backend)
        base = attention_physics_s(flops, seq, heads, self.peak_flops("bf16"), self.sms)
        return base * np.exp(res(np.maximum(seq, 1.0), np.maximum(heads, 1.0)))

    def attention_block_s(self, flops, seq, kv_seq, heads, backward=False, backend=None):
        """Seconds of a NON-causal fused attention block executing `flops` (2.5× in bwd): `seq`
        query rows against `kv_seq` keys, `heads` = heads per GPU × batch (a context-parallel ring
        step; module docstring)."""
        res = self._attention_residuals("bwd_block" if backward else "fwd_block", backend)
        base = attention_physics_s(flops, seq, heads, self.peak_flops("bf16"), self.sms)
        return base * np.exp(res(np.maximum(seq, 1.0), np.maximum(kv_seq, 1.0), np.maximum(heads, 1.0)))

    def table_row_s(self, r) -> float:
        """The model's seconds for one kernel-table row (a row object with the table's columns)."""
        if r.family == "gemm":
            return float(self.gemm_s(r.m, r.k, r.n, r.dtype, r.part))
        if r.family == "gemm_decode":
            return float(self.gemm_s(r.m, r.k, r.n, r.dtype, "fwd"))
        if r.family == "moe_permute":
            return float(self.permute_s(r.m, r.k))
        if r.family == "moe_grouped" and r.part == "dense":  # the grouped kernel's time over the measured ratio
            g = self.grouped_gemm_s(r.m, r.k, GROUPED_EXPERT_MATRICES * r.n, r.experts, r.dtype)
            return float(g / self.grouped_ratio(r.m * r.experts, r.k, r.n, r.experts, 1.0))
        if r.family == "moe_grouped":
            return float(self.grouped_gemm_s(r.m, r.k, GROUPED_EXPERT_MATRICES * r.n, r.experts, r.dtype))
        if r.family == "attention" and r.part == "decode":
            fl = decode_attention_flops(r.heads, r.kv_seq, r.head_dim)
            return float(self.decode_attention_s(r.bytes, fl, r.kv_heads, r.kv_seq))
        if r.family == "attention" and r.part.endswith("_block"):
            fl = _table_row_flops(r)
            return float(self.attention_block_s(fl, r.seq, r.kv_seq, r.heads, r.part.startswith("bwd"), r.backend))
        if r.family == "attention":
            return float(self.attention_s(_table_row_flops(r), r.seq, r.heads, r.part == "bwd", r.backend))
        return float(self.memory_s(r.bytes))

    def hbm_fraction(self, nbytes):
        """Measured fraction of HBM bandwidth at a transfer of `nbytes` (the table's hbm rows,
        interpolated in log bytes, clamped at the ends)."""
        if not self.table.has_hbm:
            raise ValueError("this kernel table has no hbm rows (KernelModel completes it from the reference table)")
        lb = np.log(np.maximum(np.asarray(nbytes, dtype=np.float64), 1.0))
        return np.interp(lb, self.table.hbm_log_bytes, self.table.hbm_fraction)

    def memory_s(self, nbytes):
        """Seconds of a memory-bound kernel moving `nbytes` (read + write)."""
        nbytes = np.asarray(nbytes, dtype=np.float64)
        return nbytes / (self.hbm_bps * self.hbm_fraction(nbytes))


def _table_row_flops(r):
    """FLOPs of an attention row of a kernel table: a causal kernel, or a non-causal block."""
    bwd = r.part.startswith("bwd")
    if r.part.endswith("_block"):
        return block_attention_flops(r.seq, r.kv_seq, r.heads, r.head_dim, bwd)
    return causal_attention_flops(r.seq, r.heads, r.head_dim, bwd)
