"""An engine's MLA attention module in prefill from its measured table: one layer's attention on one GPU.

Where a serving engine names a measured table of its multi-head latent attention module on the
accelerator (`mla_context_tables` in conf/engine/NAME.yaml, e.g. SGLang's DeepseekV2AttentionMLA on H200,
hardware/kernels/h200-sxm-141gb.sglang-mla-context.csv), a prompt pass's module ops (`Op.mla_module`:
the latent norms, q_b and kv_b projections, the prefill attention and o_proj, cost.inference_mla) take its time:

    log t(batch, isl) = bilinear interpolation of log t_measured in (log batch, log isl)

per (dtype, model shape, heads on the GPU), over the measured grid of `batch` fresh prompts of `isl`
tokens each. A query outside the grid, or whose bracketing cells were not all measured, gives NaN: the
caller keeps the kernel model's ops. Nothing here reads a file (config.kernel_tables.mla_context_table
reads it).
"""

from __future__ import annotations

import numpy as np

from .fused_moe import log_bracket

SHAPE_COLUMNS = ("hidden", "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")


def mla_shape(model) -> tuple[int, ...]:
    """The model's (hidden, q_lora_rank, kv_lora_rank, qk_nope, qk_rope, v_head_dim): a table row's shape."""
    m = model.require_mla()
    return (model.hidden, m.q_lora_rank or 0, m.kv_lora_rank, m.qk_nope_head_dim, m.qk_rope_head_dim, m.v_head_dim)


class MlaContextTable:
    """Measured one-layer MLA module times in prefill (module docstring). `rows`: dicts with dtype,
    SHAPE_COLUMNS, heads, batch, isl and time_s (the table file's columns)."""

    COLUMNS = ("dtype",) + SHAPE_COLUMNS + ("heads", "batch", "isl", "time_s")

    def __init__(self, rows: list[dict], source: str = ""):
        self.source = source
        cells: dict[tuple, dict[tuple[float, float], float]] = {}
        for r in rows:
            key = (str(r["dtype"]),) + tuple(int(float(r[c])) for c in SHAPE_COLUMNS) + (int(float(r["heads"])),)
            b, s, t = float(r["batch"]), float(r["isl"]), float(r["time_s"])
            if b <= 0 or s <= 0 or t <= 0 or (b, s) in cells.get(key, {}):
                raise ValueError(f"{source}: MLA module rows of {key} need distinct positive batch, isl and times")
            cells.setdefault(key, {})[(b, s)] = t
        self._grids = {}
        for key, pts in cells.items():
            bs = np.array(sorted({b for b, _ in pts}))
            ss = np.array(sorted({s for _, s in pts}))
            log_t = np.full((len(bs), len(ss)), np.nan)  # unmeasured cells stay NaN
            for (b, s), t in pts.items():
                log_t[np.searchsorted(bs, b), np.searchsorted(ss, s)] = np.log(t)
            self._grids[key] = (np.log(bs), np.log(ss), log_t)

    def covers(self, dtype: str, shape: tuple[int, ...]) -> bool:
        """Whether the table holds this model shape in this dtype (any head count)."""
        return any(k[:-1] == (dtype, *shape) for k in self._grids)

    def layer_s(self, batch, isl, heads, dtype: str, shape: tuple[int, ...]):
        """Seconds of one layer's module on one GPU for `batch` prompts of `isl` tokens (arrays broadcast;
        heads per row); NaN outside the measured grid."""
        batch, isl, heads = np.broadcast_arrays(*(np.asarray(x, dtype=np.float64) for x in (batch, isl, heads)))
        out = np.full(batch.shape, np.nan)
        for a in {float(x) for x in heads.ravel()}:
            grid = self._grids.get((dtype, *shape, int(a))) if a == int(a) else None
            if grid is None:
                continue
            sel = heads == a
            out[sel] = _bilinear_log(
                np.log(np.maximum(batch[sel], 1e-300)), np.log(np.maximum(isl[sel], 1e-300)), *grid
            )
        return out


def _bilinear_log(x, y, xs, ys, log_t):
    """exp of the bilinear interpolation of log_t over (xs, ys) at (x, y); NaN outside [xs], [ys] or where a
    cell with weight is unmeasured."""
    out = np.full(np.shape(x), np.nan)
    inside = (x >= xs[0]) & (x <= xs[-1]) & (y >= ys[0]) & (y <= ys[-1])
    if not np.any(inside):
        return out
    i, wx = log_bracket(xs, x[inside])
    j, wy = log_bracket(ys, y[inside])
    acc = np.zeros(len(i))
    for di, w_i in ((0, 1.0 - wx), (1, wx)):
        for dj, w_j in ((0, 1.0 - wy), (1, wy)):
            w = w_i * w_j
            v = log_t[np.minimum(i + di, len(xs) - 1), np.minimum(j + dj, len(ys) - 1)]
            acc = acc + np.where(w > 0, w * v, 0.0)  # an unmeasured cell with weight gives NaN
    out[inside] = np.exp(acc)
    return out
