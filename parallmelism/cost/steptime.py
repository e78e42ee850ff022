"""Training step time: roofline compute per stage, exposed communication, pipeline schedule.

For each pipeline stage kind (first: embedding; middle; last: output head and loss; one stage
when pp = 1) with its layer count (`grid.stage_layer_split`):
  per micro-batch   T_mb = Σ ops (fwd + bwd + recompute fwd)           [flops.py, roofline.py]
                         + exposed TP + CP + EP time                      [comm.py]
  per stage         m·T_mb + exposed DP + optimizer step (Adam bytes ÷ HBM)
  step              max over stages + bubble + exposed PP send/recv
  bubble            rate·m·T_mb(slowest stage), rate = (p−1)/(v·m) (1F1B, interleaved),
                    (p−1)/m (GPipe), (p−1)/(3m) (ZB-H1)             [pipeline.bubble_rate]
which is (m + (p−1)/v)·T_mb for 1F1B: warm-up and cool-down run at the slowest stage's pace.

Columns (per row): time_* in seconds; `flops_model_per_step` and `flops_hardware_per_step` are
whole-job totals in the non-causal convention (flops.py); `tflops_per_gpu` = model FLOPs ÷
(time·ngpus) (Megatron's throughput convention); `mfu` and `hfu` divide model and hardware
FLOP/s per GPU by the bf16 dense peak (fp8 runs are also quoted against bf16);
`hbm_bytes_per_step` and `arithmetic_intensity` (executed FLOPs ÷ HBM bytes) are per GPU of the
critical stage; `bound` names the largest of: compute-bound op time, memory-bound op time,
exposed communication, bubble.
"""

from __future__ import annotations

import numpy as np

from ..grid import RECOMPUTE_CODE
from .comm import cp_layer_times_s, dp_step_times_s, ep_layer_time_s, pp_times_s, tp_layer_time_s
from .flops import (ATTENTION, embedding_ops, hardware_flops_per_step, head_ops, layer_ops, model_flops_per_step,
                    moe_layer_counts, optimizer_bytes_per_param)
from .params import params_per_gpu
from .pipeline import bubble_rate
from .roofline import Rates, op_times
from .states import NO_OP

FULL, SELECTIVE = RECOMPUTE_CODE["full"], RECOMPUTE_CODE["selective"]
BOUND_NAMES = ("compute", "memory", "communication", "bubble")
AXES = ("tp", "cp", "ep", "dp", "pp")


def ops_time(ops, rates, recompute):
    """Sum over ops of one micro-batch: seconds fwd, bwd, recompute, plus what overlap and `bound` need."""
    full = recompute == FULL
    sel = recompute == SELECTIVE
    acc = dict(fwd=0.0, bwd=0.0, rc=0.0, gemm=0.0, core_fwd=0.0, core_bwd=0.0, cbound=0.0, mbound=0.0,
               flops=0.0, bytes=0.0)
    for op in ops:
        f, b, cb = op_times(op, rates)
        rc_on = full | sel if op.selective else full
        rc = np.where(rc_on, f, 0.0)
        tot = f + b + rc
        acc["fwd"] = acc["fwd"] + f
        acc["bwd"] = acc["bwd"] + b
        acc["rc"] = acc["rc"] + rc
        if op.kind == ATTENTION or op.name.startswith("attention_"):
            acc["core_fwd"] = acc["core_fwd"] + f
            acc["core_bwd"] = acc["core_bwd"] + b
        elif op.dim is not None:
            acc["gemm"] = acc["gemm"] + tot
        acc["cbound"] = acc["cbound"] + np.where(cb, tot, 0.0)
        acc["mbound"] = acc["mbound"] + np.where(cb, 0.0, tot)
        n_f = 1.0 + np.where(rc_on, 1.0, 0.0)
        acc["flops"] = acc["flops"] + np.asarray(op.flops) * (n_f + op.bwd_flops)
        acc["bytes"] = acc["bytes"] + np.asarray(op.bytes) * n_f + op.backward_bytes()
    return acc


def _combine(parts):
    """Σ count·acc over (count, acc) pairs."""
    out = {}
    for count, acc in parts:
        for k, v in acc.items():
            out[k] = out.get(k, 0.0) + count * v
    return out


def training_time(cols: dict[str, np.ndarray], model, hw, wl) -> dict[str, np.ndarray]:
    """Step-time columns for every layout row (module docstring)."""
    return _training_time(cols, model, hw, wl)[0]


def _training_time(cols, model, hw, wl):
    tp, pp, cp, ep, dp = (np.asarray(cols[k], dtype=np.float64) for k in ("tp", "pp", "cp", "ep", "dp"))
    b, m, vpp = (np.asarray(cols[k], dtype=np.float64) for k in ("micro_batch", "num_micro_batches", "vpp"))
    sp = np.asarray(cols["sequence_parallel"], dtype=bool)
    rc = np.asarray(cols["recompute"])
    sh = np.asarray(cols["dp_sharding"])
    s, L = wl.seq_len, model.layers
    full = rc == FULL
    rates = Rates(hw, wl.precision)
    T = (s / cp) * b

    kw = dict(model=model, s=s, b=b, t=tp, cp=cp, sp=sp, flash=wl.flash_attention)
    dense = ops_time(layer_ops(**kw), rates, rc)
    moe = ops_time(layer_ops(moe_layer=True, moe_imbalance=wl.moe_imbalance, **kw), rates, rc) if model.is_moe else None
    head = ops_time(head_ops(model, s, b, tp, cp, sp), rates, np.zeros_like(rc))
    emb = ops_time(embedding_ops(model, s, b, tp, cp, sp), rates, np.zeros_like(rc))

    # Communication per layer per micro-batch.
    tp_layer = tp_layer_time_s(hw, model, T, tp, sp, full)

    def layer_comm(acc, is_moe):
        tp_exp = np.maximum(0.0, tp_layer - acc["gemm"]) if wl.overlap_tp_comm else tp_layer
        cp_link, cp_exp = cp_layer_times_s(hw, model, s, b, tp, cp, acc["core_fwd"], acc["core_bwd"], full)
        ep_link = ep_layer_time_s(hw, model, T, tp, ep, wl.moe_imbalance, full) if is_moe else 0.0
        return {"tp": tp_layer, "tp_exp": tp_exp, "cp": cp_link, "cp_exp": cp_exp, "ep": ep_link, "ep_exp": ep_link}

    dense_comm = layer_comm(dense, False)
    moe_comm = layer_comm(moe, True) if moe is not None else None

    first_n = np.asarray(cols["layers_first_stage"], dtype=np.int64)
    mid_n = np.asarray(cols["layers_per_stage"], dtype=np.int64)
    last_n = np.asarray(cols["layers_last_stage"], dtype=np.int64)
    single = pp == 1
    stages = {
        "first": (first_n, np.zeros_like(first_n), True, single),
        "middle": (mid_n, first_n, False, False),
        "last": (last_n, L - last_n, single, True),
    }
    pp_link, pp_exp = pp_times_s(hw, model, T, tp, sp, tp, cp, dp, pp, vpp, m)
    results = {}
    for name, (n_layers, lo, has_emb, has_head) in stages.items():
        n_dense, n_moe = moe_layer_counts(model, lo, n_layers)
        parts = [(n_dense, dense)]
        comm_parts = [(n_dense, dense_comm)]
        if moe is not None:
            parts.append((n_moe, moe))
            comm_parts.append((n_moe, moe_comm))
        has_emb_a = np.broadcast_to(np.asarray(has_emb), tp.shape)
        has_head_a = np.broadcast_to(np.asarray(has_head), tp.shape)
        parts += [(np.where(has_emb_a, 1.0, 0.0), emb), (np.where(has_head_a, 1.0, 0.0), head)]
        c = _combine(parts)
        k = _combine(comm_parts)
        compute_mb = c["fwd"] + c["bwd"] + c["rc"]
        t_mb = compute_mb + k["tp_exp"] + k["cp_exp"] + k["ep_exp"]

        p = params_per_gpu(model, tp.astype(np.int64), ep.astype(np.int64), n_layers, lo, has_emb_a, has_head_a)
        reduce, zero_gather, fsdp = dp_step_times_s(hw, p["dense"], p["experts"], sh, tp, cp, dp, ep, m, full)
        if wl.overlap_dp_comm:
            dp_exp = (np.maximum(0.0, reduce - (c["bwd"] + c["rc"])) + np.maximum(0.0, zero_gather - c["fwd"])
                      + np.maximum(0.0, fsdp - m * compute_mb))
        else:
            dp_exp = reduce + zero_gather + fsdp
        shard_d = np.where(sh == NO_OP, 1.0, dp * cp)
        shard_e = np.where(sh == NO_OP, 1.0, np.maximum(dp * cp / ep, 1.0))
        opt_bytes = optimizer_bytes_per_param(wl.precision == "fp8") * (p["dense"] / shard_d + p["experts"] / shard_e)
        opt = opt_bytes / rates.hbm
        total = m * t_mb + dp_exp + opt
        if name == "middle":
            total = np.where(pp > 2, total, 0.0)  # no middle stage
        results[name] = dict(c=c, k=k, compute_mb=compute_mb, t_mb=t_mb, dp_link=reduce + zero_gather + fsdp,
                             dp_exp=dp_exp, opt=opt, opt_bytes=opt_bytes, total=total)

    order = ("first", "middle", "last")
    totals = np.stack([results[n]["total"] for n in order])
    crit = np.argmax(totals, axis=0)
    pick = lambda f: np.choose(crit, [np.broadcast_to(f(results[n]), tp.shape) for n in order])
    t_mb_max = np.max(np.stack([np.where((n != "middle") | (pp > 2), results[n]["t_mb"], 0.0) for n in order]), 0)

    rate = bubble_rate(pp, vpp, m, wl.schedule)
    bubble = rate * m * t_mb_max
    step = np.max(totals, axis=0) + bubble + pp_exp

    compute = pick(lambda r: m * r["compute_mb"] + r["opt"])
    comm = {ax: pick(lambda r, ax=ax: m * r["k"][ax]) for ax in ("tp", "cp", "ep")}
    comm_exp = {ax: pick(lambda r, ax=ax: m * r["k"][ax + "_exp"]) for ax in ("tp", "cp", "ep")}
    comm["dp"], comm_exp["dp"] = pick(lambda r: r["dp_link"]), pick(lambda r: r["dp_exp"])
    comm["pp"], comm_exp["pp"] = pp_link, pp_exp
    exposed = sum(comm_exp.values())

    B = wl.global_batch
    n = len(tp)
    ngpus = np.asarray(cols["ngpus"], dtype=np.float64)
    f_model = np.full(n, float(model_flops_per_step(model, B, s)))
    f_hw = hardware_flops_per_step(model, B, s, rc) * np.ones(n)
    peak = hw.peak_flops("bf16")
    flops_gpu = pick(lambda r: m * r["c"]["flops"])
    bytes_gpu = pick(lambda r: m * r["c"]["bytes"] + r["opt_bytes"])
    cbound = pick(lambda r: m * r["c"]["cbound"])
    mbound = pick(lambda r: m * r["c"]["mbound"] + r["opt"])
    bound = np.argmax(np.stack([cbound, mbound, exposed, bubble]), axis=0).astype(np.int8)

    out = {
        "time_step_s": step,
        "time_compute_s": compute,
        "time_bubble_s": bubble,
        "time_comm_exposed_s": exposed,
    }
    for ax in AXES:
        out[f"time_comm_{ax}_s"] = np.broadcast_to(comm[ax], tp.shape).astype(np.float64)
    for ax in AXES:
        out[f"time_comm_{ax}_exposed_s"] = np.broadcast_to(comm_exp[ax], tp.shape).astype(np.float64)
    out.update({
        "tokens_per_s": B * s / step,
        "tokens_per_s_per_gpu": B * s / step / ngpus,
        "tflops_per_gpu": f_model / (step * ngpus) / 1e12,
        "mfu": f_model / (step * ngpus * peak),
        "hfu": f_hw / (step * ngpus * peak),
        "flops_model_per_step": f_model,
        "flops_hardware_per_step": f_hw,
        "hbm_bytes_per_step": bytes_gpu,
        "arithmetic_intensity": flops_gpu / bytes_gpu,
        "bound": bound,
    })
    return out, dict(results=results, crit=crit, rates=rates, dense=dense, moe=moe, bubble=bubble)
