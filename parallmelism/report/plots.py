"""Pictures (matplotlib, imported lazily; `pip install 'parallmelism[plot]'`), PNG or SVG.

memory     stacked bars of per-GPU memory (weights, grads, optimizer, FSDP buffers, activations,
           logits) for the best layouts, with the usable-HBM line
roofline   arithmetic intensity (FLOPs / HBM byte) vs attainable FLOP/s: the peak roof, the
           achievable roof (efficiency block), and one layer's ops of the best layout placed at
           the FLOP/s the training model gives them, FLOPs / kernel time (`roofline_points`: the
           kernel tables, cost.kernels, as `show` prints them) (Williams et al. 2009; JAX scaling
           book); forward ops of one micro-batch on one GPU (cost.flops.layer_ops)
pareto     every fitting layout (GPUs vs step time) and the non-dominated front
scaling    GPUs vs training throughput (tokens/s) of the fastest layout per GPU count, with the
           linear-scaling line through the smallest count
step-time  stacked step-time components (time_*_s columns) of the best layouts
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import UserError
from ..words import plural

COLORS = ["#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C", "#CCB974", "#64B5CD"]


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, out: Path) -> Path:
    """Save atomically (report/writer.atomic_write: temporary beside the target, then rename)."""
    from .writer import atomic_write

    out = Path(out)
    try:
        with atomic_write(out, "picture") as tmp:
            fig.savefig(tmp, format=out.suffix.lstrip(".").lower(), dpi=130, bbox_inches="tight")
    finally:
        _plt().close(fig)
    return out


def _label(r) -> str:
    parts = [f"tp{r['tp']}", f"pp{r['pp']}"]
    for k in ("cp", "ep", "vpp"):
        if k in r and r[k] != 1:
            parts.append(f"{k}{r[k]}")
    parts.append(f"dp{r['dp']}")
    parts.append(f"mb{r['micro_batch']}")
    short = {"NO_OP": "ddp", "OPTIMIZER_STATES": "zero1", "OPTIMIZER_STATES_AND_GRADS": "zero2", "FULLY_SHARD": "fsdp"}
    parts.append(short.get(str(r["dp_sharding"]), str(r["dp_sharding"])))
    if str(r["recompute"]) != "none":
        parts.append(f"rc-{str(r['recompute'])[:3]}")
    return " ".join(parts)


def _title(run, extra: str) -> str:
    return f"{run.model.name} on {run.hardware.name} — {extra}"


def _save_gpus_loglog(fig, ax, run, ylabel: str, title: str, out: Path) -> Path:
    """Finish a GPUs (log2) vs quantity (log) chart, as the pareto and scaling plots draw it, and save it."""
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("GPUs")
    ax.set_ylabel(ylabel)
    ax.set_title(_title(run, title), fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, which="both")
    return _save(fig, out)


def _evaluate(run):
    from ..search import evaluate_table

    if run.workload.kind != "train":
        raise UserError("plots draw training layouts; use workload=train")
    df, res = evaluate_table(run)
    if len(df) == 0:
        raise UserError(res.explain_empty())
    return df


def _best_rows(df, top: int):
    """Up to `top` distinct layouts: the best of each GPU count first, then the next best overall.

    Distinct = different (ngpus, tp, pp, cp, ep, dp_sharding, recompute): micro-batch and vpp
    variants of one layout would repeat the same bar.
    """
    from .rank import rank_rows

    ranked = rank_rows(df)
    ranked = ranked.drop_duplicates(["ngpus", "tp", "pp", "cp", "ep", "dp_sharding", "recompute"])
    firsts = ranked.groupby("ngpus", observed=True, sort=False).head(1)
    rest = ranked.drop(index=firsts.index)
    rows = firsts.head(top)
    if len(rows) < top:
        import pandas as pd

        rows = pd.concat([rows, rest.head(top - len(rows))])
    return rows.sort_values(["ngpus"], kind="stable")


def plot_memory(run, out: Path, top: int) -> Path:
    plt = _plt()
    rows = _best_rows(_evaluate(run), top)
    parts = [
        ("mem_weights_gib", "weights"),
        ("mem_grads_gib", "gradients"),
        ("mem_optimizer_gib", "optimizer"),
        ("mem_fsdp_gather_gib", "FSDP gather buffers"),
        ("_act", "activations"),
        ("mem_logits_gib", "logits"),
    ]
    rows = rows.assign(_act=rows["mem_activations_gib"] - rows["mem_logits_gib"])
    fig, ax = plt.subplots(figsize=(max(7, 1.1 * len(rows) + 3), 5))
    x = np.arange(len(rows))
    bottom = np.zeros(len(rows))
    for (col, name), color in zip(parts, COLORS):
        vals = rows[col].to_numpy(dtype=float)
        ax.bar(x, vals, bottom=bottom, color=color, label=name, width=0.7)
        bottom += vals
    hbm = float(rows["hbm_usable_gib"].iloc[0])
    ax.axhline(hbm, color="black", linestyle="--", linewidth=1)
    ax.text(len(rows) - 0.5, hbm, f" usable HBM {hbm:.1f} GiB", va="bottom", ha="right", fontsize=8)
    ax.set_xticks(
        x,
        [
            f"{int(r['ngpus'])} {plural(r['ngpus'], 'GPU')}\n" + _label(r).replace(" dp", "\ndp")
            for _, r in rows.iterrows()
        ],
        fontsize=7,
    )
    ax.set_ylabel("GiB per GPU (most-loaded stage)")
    ax.set_title(_title(run, f"memory of the {len(rows)} best layouts"), fontsize=10)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.grid(axis="y", alpha=0.3)
    return _save(fig, out)


def plot_pareto(run, out: Path, top: int) -> Path:
    from ..search.pareto import pareto_mask

    plt = _plt()
    df = _evaluate(run)
    fit = df[df["fits"]]
    if len(fit) == 0:
        raise UserError("no layout fits in memory: nothing to draw")
    ycol = "time_step_s" if "time_step_s" in fit.columns else None
    if ycol is None:
        raise UserError("the pareto plot (GPUs vs step time) needs the time model: column 'time_step_s' is missing")
    x, y = fit["ngpus"].to_numpy(float), fit[ycol].to_numpy(float)
    mask = pareto_mask(x, y)
    fig, ax = plt.subplots(figsize=(7, 5))
    rng = np.random.default_rng(0)
    idx = np.arange(len(x)) if len(x) <= 20000 else rng.choice(len(x), 20000, replace=False)
    jitter = np.exp(rng.uniform(-0.08, 0.08, len(idx)))
    ax.scatter(x[idx] * jitter, y[idx], s=4, alpha=0.25, color=COLORS[0], label="layouts that fit", rasterized=True)
    order = np.argsort(x[mask])
    fx, fy = x[mask][order], y[mask][order]
    ax.step(fx, fy, where="post", color=COLORS[3], linewidth=1.5)
    ax.scatter(fx, fy, s=30, color=COLORS[3], zorder=3, label="Pareto front")
    front = fit[mask].iloc[order]
    labelled: dict[tuple, list] = {}
    for (_, r), xi, yi in zip(front.iterrows(), fx, fy):
        labelled.setdefault((xi, yi), []).append(_label(r))
    for (xi, yi), labels in labelled.items():
        more = f" (+{len(labels) - 1} tied)" if len(labels) > 1 else ""
        ax.annotate(labels[0] + more, (xi, yi), textcoords="offset points", xytext=(6, 4), fontsize=7)
    return _save_gpus_loglog(fig, ax, run, "step time (s)", "GPUs vs step time", out)


def plot_scaling(run, out: Path, top: int) -> Path:
    plt = _plt()
    df = _evaluate(run)
    if "time_step_s" not in df.columns:
        raise UserError("the scaling plot needs the time model: column 'time_step_s' is missing")
    fit = df[df["fits"]]
    if len(fit) == 0:
        raise UserError("no layout fits in memory: nothing to draw")
    best = fit.sort_values(["ngpus", "time_step_s"], kind="stable").groupby("ngpus", observed=True).head(1)
    n = best["ngpus"].to_numpy(float)
    tps = (best["global_batch"] * best["seq_len"] / best["time_step_s"]).to_numpy(float)
    fig, ax = plt.subplots(figsize=(7, 5))
    ax.plot(n, tps, "o-", color=COLORS[0], label="fastest layout that fits")
    ax.plot(n, tps[0] * n / n[0], "--", color="gray", label=f"linear from {int(n[0])} {plural(n[0], 'GPU')}")
    for (_, r), xi, yi in zip(best.iterrows(), n, tps):
        eff = yi / (tps[0] * xi / n[0])
        ax.annotate(
            f"{_label(r)}\n{eff:.0%} of linear", (xi, yi), textcoords="offset points", xytext=(6, -14), fontsize=6
        )
    return _save_gpus_loglog(
        fig, ax, run, "training throughput (tokens/s)", f"scaling at global batch {run.workload.global_batch}", out
    )


def plot_step_time(run, out: Path, top: int) -> Path:
    plt = _plt()
    df = _evaluate(run)
    if "time_step_s" not in df.columns:
        raise UserError("the step-time plot needs the time model: column 'time_step_s' is missing")
    rows = _best_rows(df[df["fits"]] if df["fits"].any() else df, top)
    from ..search.explain import additive_time_parts

    parts = [c for c in additive_time_parts(rows.columns) if (rows[c] > 0).any()]
    fig, ax = plt.subplots(figsize=(max(7, 1.1 * len(rows) + 3), 5))
    x = np.arange(len(rows))
    bottom = np.zeros(len(rows))
    for i, col in enumerate(parts):
        vals = rows[col].to_numpy(dtype=float)
        ax.bar(x, vals, bottom=bottom, color=COLORS[i % len(COLORS)], label=col, width=0.7)
        bottom += vals
    ax.plot(x, rows["time_step_s"].to_numpy(float), "k_", markersize=30, label="time_step_s")
    ax.set_xticks(
        x,
        [
            f"{int(r['ngpus'])} {plural(r['ngpus'], 'GPU')}\n" + _label(r).replace(" dp", "\ndp")
            for _, r in rows.iterrows()
        ],
        fontsize=7,
    )
    ax.set_ylabel("seconds per step")
    ax.set_title(_title(run, "step-time breakdown of the best layouts"), fontsize=10)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.grid(axis="y", alpha=0.3)
    return _save(fig, out)


def _roofline_point(op, rates):
    """(arithmetic intensity FLOPs/B, FLOP/s) of one op: FLOPs over its forward kernel time
    (cost.roofline.op_times); FLOP/s 0 for an op without FLOPs."""
    from ..cost.roofline import op_times

    fl, by = float(np.asarray(op.flops)), float(np.asarray(op.bytes))
    fwd = float(np.asarray(op_times(op, rates)[0]))
    return fl / by, (fl / fwd if fl > 0 and fwd > 0 else 0.0)


def roofline_points(model, hw, wl, micro_batch: int, tp: int, cp: int, sp: bool):
    """[(op name, op kind, arithmetic intensity FLOPs/B, FLOP/s)] of one layer's forward ops on one
    GPU of a layout: FLOPs over the op's forward kernel time (cost.roofline.op_times, the numbers
    `show` prints), so each point sits where the training model runs it, at or under its roofs.
    Ops without FLOPs (norms, residual adds, activations) come with FLOP/s 0."""
    from ..cost import flops as F
    from ..config.kernel_tables import kernel_model
    from ..cost.roofline import Rates

    rates = Rates(hw, wl.precision, kernel_model(hw))
    ops = F.layer_ops(
        model,
        wl.seq_len,
        micro_batch,
        tp,
        cp,
        sp,
        wl.flash_attention,
        cp_comm_type=wl.cp_comm_type,
        cp_implementation=wl.cp_implementation or "transformer_engine",
    )
    return [(op.name, op.kind, *_roofline_point(op, rates)) for op in ops if float(np.asarray(op.bytes)) > 0]


def plot_roofline(run, out: Path, top: int) -> Path:
    from ..cost import flops as F
    from ..cost.ops import OpKind
    from ..config.kernel_tables import kernel_model
    from ..cost.roofline import Rates

    plt = _plt()
    df = _evaluate(run)
    r = _best_rows(df, 1).iloc[0]
    hw, wl, model = run.accelerator(), run.training_workload(), run.model
    rates = Rates(hw, wl.precision, kernel_model(hw))
    peak = hw.peak_flops(wl.precision)
    bw = hw.hbm_bandwidth_gbps * 1e9
    fig, ax = plt.subplots(figsize=(9, 5.5))
    ai = np.logspace(-1, 4, 200)
    ax.plot(ai, np.minimum(peak, ai * bw) / 1e12, color="black", linewidth=1.5, label="peak roof")
    ax.plot(
        ai,
        np.minimum(rates.gemm_peak, ai * rates.hbm) / 1e12,
        color="gray",
        linestyle="--",
        linewidth=1,
        label="achievable roof (efficiency block)",
    )
    ridge = peak / bw
    ax.axvline(ridge, color="gray", linewidth=0.5, linestyle=":")
    ax.text(ridge, peak / 1e12 * 1.1, f"ridge {ridge:.0f} FLOP/B", fontsize=7, ha="center")
    markers = {OpKind.MATMUL: "o", OpKind.ATTENTION: "s"}
    points = roofline_points(
        model, hw, wl, int(r["micro_batch"]), int(r["tp"]), int(r["cp"]), bool(r["sequence_parallel"])
    )
    elementwise = []
    for i, (name, kind, x, rate) in enumerate(points):
        if rate <= 0 or kind not in markers:
            elementwise.append(name)
            continue
        ax.scatter(
            [x],
            [rate / 1e12],
            marker=markers[kind],
            s=45,
            color=COLORS[i % len(COLORS)],
            zorder=3,
            label=f"{name} (kernel model)",
            edgecolor="black",
            linewidth=0.4,
        )
    if elementwise:
        # norms, residual adds, activation functions: ~0 FLOPs, bandwidth-bound
        ax.scatter(
            [0.25],
            [0.25 * rates.hbm / 1e12],
            marker="^",
            s=45,
            color="#555555",
            zorder=3,
            label="elementwise: " + ", ".join(elementwise[:4]) + ("..." if len(elementwise) > 4 else ""),
        )
    # The same GEMM shapes at decode-sized token counts (one token per sequence): memory-bound.
    h = model.hidden
    tp = int(r["tp"])
    for j, tokens in enumerate((1, 16, 256)):
        op = F._gemm("decode_mlp", float(tokens), float(h), float(model.ffn_hidden) / tp)
        x, y = _roofline_point(op, rates)
        ax.scatter(
            [x],
            [y / 1e12],
            marker="D",
            s=35,
            color="white",
            edgecolor=COLORS[3],
            linewidth=1.2,
            zorder=3,
            label="MLP up-projection at decode, 1/16/256 tokens" if j == 0 else None,
        )
        ax.annotate(f"{tokens} tok", (x, y / 1e12), textcoords="offset points", xytext=(6, -10), fontsize=7)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOPs per HBM byte)")
    ax.set_ylabel("attainable TFLOP/s")
    ax.set_title(_title(run, f"roofline, forward ops of one layer ({_label(r)}, {wl.precision})"), fontsize=9)
    ax.legend(fontsize=6.5, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.grid(alpha=0.3, which="both")
    return _save(fig, out)


DRAW = {
    "memory": plot_memory,
    "roofline": plot_roofline,
    "pareto": plot_pareto,
    "scaling": plot_scaling,
    "step-time": plot_step_time,
}


def draw(kind: str, runs: list, out: Path, top: int = 8) -> Path:
    if len(runs) != 1:
        raise UserError(
            "plot draws one configuration; remove the sweep (a,b) from the overrides (grid.ngpus=[...] lists are fine)"
        )
    return DRAW[kind](runs[0], Path(out), top)
