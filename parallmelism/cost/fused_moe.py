"""An engine's fused-MoE kernel from its measured table: one MoE layer's routed experts on one GPU.

A serving engine runs a MoE layer's experts as one fused op (routing, token permute, the grouped
gate+up and down GEMMs with their activation quantization, unpermute and top-k reduce). Where the
engine names a measured table of that op on the accelerator (`fused_moe_tables` in conf/engine/NAME.yaml,
e.g. TensorRT-LLM's CUTLASS fp8 MoE on H200, hardware/kernels/h200-sxm-141gb.trtllm-moe.csv),
the experts of a serving pass take its time:

    t(tokens) = exp(interp(log tokens, log t_measured))   per (routing, dtype, hidden, ffn, top_k, experts, moe_tp, moe_ep)

piecewise linear in log-log between measured token counts; beyond the largest, t grows in proportion to
tokens (a compute-bound kernel); below the smallest, the smallest's time. `tokens` are the tokens entering
the layer on the rank (with EP inside the TP group, the replica's tokens of the pass). A key the table
does not hold gives NaN: the caller keeps the kernel model's grouped GEMM (cost.kernels.grouped_gemm_s).
`routing` is workload.moe_routing, the table's routing of the tokens over the experts (aiconfigurator's
names: balanced, power_law_1.01, timed on the busiest EP rank); the caller uses the table only with
moe_imbalance 1 (the routing stands for the imbalance). Nothing here reads a file
(config.kernel_tables.fused_moe_table reads it).
"""

from __future__ import annotations

import numpy as np

KEY_COLUMNS = ("routing", "dtype", "hidden", "ffn", "top_k", "experts", "moe_tp", "moe_ep")


class FusedMoeTable:
    """Measured one-layer fused-MoE times (module docstring). `rows`: dicts with KEY_COLUMNS, `tokens`
    and `time_s` (the table file's columns)."""

    COLUMNS = KEY_COLUMNS + ("tokens", "time_s")

    def __init__(self, rows: list[dict], source: str = ""):
        self.source = source
        series: dict[tuple, list[tuple[float, float]]] = {}
        for r in rows:
            key = (str(r["routing"]), str(r["dtype"])) + tuple(int(float(r[c])) for c in KEY_COLUMNS[2:])
            series.setdefault(key, []).append((float(r["tokens"]), float(r["time_s"])))
        self._curves = {
            key: measured_curve(pts, f"{source}: fused-MoE rows of {key}", "tokens") for key, pts in series.items()
        }

    def covers(self, routing: str, dtype: str, hidden: int, ffn: int, top_k: int, experts: int) -> bool:
        """Whether the table holds this model shape in this dtype and routing (any layout)."""
        return any(k[:6] == (routing, dtype, hidden, ffn, top_k, experts) for k in self._curves)

    def layer_s(
        self, tokens, routing: str, dtype: str, hidden: int, ffn: int, top_k: int, experts: int, moe_tp, moe_ep
    ):
        """Seconds of one MoE layer's experts on one GPU at `tokens` tokens entering it (arrays
        broadcast; moe_tp, moe_ep per row); NaN where the table has no such layout."""
        tokens, moe_tp, moe_ep = np.broadcast_arrays(
            *(np.asarray(x, dtype=np.float64) for x in (tokens, moe_tp, moe_ep))
        )
        out = np.full(tokens.shape, np.nan)
        for tp_, ep_ in {(float(a), float(b)) for a, b in zip(moe_tp.ravel(), moe_ep.ravel())}:
            curve = self._curves.get((routing, dtype, hidden, ffn, top_k, experts, int(tp_), int(ep_)))
            if curve is None or tp_ != int(tp_) or ep_ != int(ep_):
                continue
            sel = (moe_tp == tp_) & (moe_ep == ep_)
            out[sel] = interp_log_log(tokens[sel], *curve)
        return out


def measured_curve(points, what: str, x_name: str) -> tuple:
    """(log x, log t) of measured (x, seconds) points, sorted by x, for `interp_log_log`; `what` and
    `x_name` word the one sentence a bad table gets (x and t must be positive, x distinct)."""
    x, t = np.array(sorted(points)).T
    if np.any(x <= 0) or np.any(t <= 0) or len(np.unique(x)) != len(x):
        raise ValueError(f"{what} need distinct positive {x_name} and times")
    return np.log(x), np.log(t)


def interp_log_log(tokens, log_tokens, log_t):
    """Piecewise log-log interpolation of a measured curve (module docstring): the smallest point's
    time below it, proportional to tokens beyond the largest."""
    x = np.log(np.maximum(np.asarray(tokens, dtype=np.float64), np.exp(log_tokens[0])))
    inside = np.exp(np.interp(x, log_tokens, log_t))
    beyond = np.exp(log_t[-1] + x - log_tokens[-1])
    return np.where(x > log_tokens[-1], beyond, inside)


def log_bracket(log_grid, log_x):
    """Indices i and weights w with log x = (1 - w) log grid[i] + w log grid[i + 1] (grid[i] <= x <=
    grid[i + 1]; i = 0, w = 0 on a one-point grid), from the logs of a sorted grid and of the points
    (arrays): the bracket of a log-space interpolation over a measured grid (cost/engine_gemm.py,
    cost/mla_context.py)."""
    log_x = np.asarray(log_x, dtype=np.float64)
    if len(log_grid) == 1:
        return np.zeros(log_x.shape, dtype=int), np.zeros(log_x.shape)
    i = np.minimum(np.searchsorted(log_grid, log_x, side="right") - 1, len(log_grid) - 2)
    return i, (log_x - log_grid[i]) / (log_grid[i + 1] - log_grid[i])
