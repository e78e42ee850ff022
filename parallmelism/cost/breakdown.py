"""Where one layout's step time goes: per-op and per-collective tables (plain data for `show`).

A group-by of the step time's own terms for one row: the per-op table lists the op list the step
time sums on the critical stage (`steptime.stage_ops`: the same sets, counts, kernel times and
casts), the per-collective and per-link tables the step time's link and exposed seconds per axis
and per link; bytes and call counts come from the functions the link times are computed with
(cost/comm.py). Times are per step on one GPU of the critical pipeline stage; the tables sum to
the row's time columns (tests/test_breakdown_sums.py).
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from ..specs import Bound, DPSharding
from .collectives import group_link
from .comm import (
    cp_chunk_bytes,
    cp_layer_transfers,
    ep_dispatch_bytes,
    ep_layer_calls,
    p2p_link,
    pp_hop_bytes,
    tp_collective_bytes,
    tp_layer_calls,
)
from .layout import TrainingLayout
from .links import scale_up_port_share
from .ops import OpKind
from .roofline import Rates
from .steptime import (
    AXES,
    FULL,
    LAYER_SETS,
    NONE,
    SELECTIVE,
    _stage_layout,
    _training_time,
    stage_ops,
    weight_casts_per_micro_batch,
)
from .shapes import dense_dp_size, dp_shard_ranks, tokens_per_rank
from .states import reduces_every_micro_batch

STAGES = ("first", "middle", "last")


def _f(x) -> float:
    return float(np.asarray(x).reshape(-1)[0])


def training_breakdown(cols: TrainingLayout | Mapping[str, np.ndarray], model, hw, wl, kernels) -> dict:
    """Explain the first row of `cols` (layout columns as arrays); `kernels`: the accelerator's
    KernelModel (config.kernel_tables.kernel_model). Returns
    {"summary": {...}, "ops": [records], "collectives": [records]}."""
    cols = TrainingLayout.of(cols).rows(1)
    out, ctx = _training_time(cols, model, hw, wl, kernels)
    crit = int(ctx["crit"][0])
    stage = STAGES[crit]
    rates: Rates = ctx["rates"]
    tp, cp, ep, dp, pp = (_f(x) for x in (cols.tp, cols.cp, cols.ep, cols.dp, cols.pp))
    b, m = _f(cols.micro_batch), _f(cols.num_micro_batches)
    sp = bool(cols.sequence_parallel[0])
    rc = int(cols.recompute[0])
    s = wl.seq_len
    n_layers = _stage_layout(cols, model.layers)[stage][0][:1]
    # the op list the step time sums on the critical stage (steptime.stage_ops), grouped by op:
    # transformer layers first (dense, dense kept in bf16, MoE), then the embedding and the head
    order = {name: i for i, name in enumerate(("dense", "dense16", "moe", "emb", "head"))}
    groups = sorted(stage_ops(cols, model, hw, wl, rates, stage), key=lambda g: order[g[0]])
    ops = []
    # fp8/fp4 weight casts per micro-batch, in the forward and backward (steptime; none in bf16)
    casts = weight_casts_per_micro_batch(cols, wl)
    cast_f, cast_b = (0.0, 0.0) if casts is None else (_f(casts[0]), _f(casts[1]))
    for set_name, count_, group, times in groups:
        count = _f(count_)
        if count == 0:
            continue
        for op, (f, bw, cb, _, _, cast, _, low) in zip(group, times):
            rerun = set_name in LAYER_SETS and (rc == FULL or (rc == SELECTIVE and op.selective))
            per_step = m * count
            f_mb, b_mb = _f(f) + _f(cast) * cast_f, _f(bw) + _f(cast) * cast_b
            ops.append(
                {
                    "op": op.name,
                    "kind": OpKind(op.kind).label,
                    "dtype": wl.precision if bool(np.asarray(low).reshape(-1)[0]) else "bf16",
                    "count": int(count) if float(count).is_integer() else count,
                    "flops_fwd": _f(op.flops),
                    "bytes_fwd": _f(op.bytes),
                    "time_fwd_ms": f_mb * 1e3,
                    "time_bwd_ms": b_mb * 1e3,
                    "time_recompute_ms": _f(f) * 1e3 if rerun else 0.0,
                    "time_step_s": per_step * (f_mb + b_mb + (_f(f) if rerun else 0.0)),
                    "bound": (Bound.COMPUTE if bool(np.asarray(cb).reshape(-1)[0]) else Bound.MEMORY).label,
                }
            )

    def link(size, stride, kind="ring"):
        bw_, lat = group_link(hw, size, stride, kind=kind)
        return _f(bw_), _f(lat)

    T = float(tokens_per_rank(s, b, cp))
    colls = []
    if tp > 1:
        bw_, _ = link(tp, 1)
        kinds = "all_gather + reduce_scatter" if sp else "all_reduce"
        n = sum(_f(c) for calls in tp_layer_calls(sp, rc == FULL).values() for c in calls)
        colls.append(
            {
                "axis": "tp",
                "collective": kinds,
                "group": int(tp),
                "bytes": float(tp_collective_bytes(model, T)),
                "per_layer_per_micro_batch": n,
                "bandwidth_gbps": bw_,
            }
        )
    if cp > 1:
        bw_, _ = (_f(x) for x in p2p_link(hw, cp * tp))
        gather = wl.cp_comm_type == "all_gather"
        colls.append(
            {
                "axis": "cp",
                "collective": "all_gather (K,V) fwd + bwd, reduce_scatter (dK,dV)"
                if gather
                else "send_recv (ring K,V)",
                "group": int(cp),
                "bytes": _f(cp_chunk_bytes(model, s, b, tp, cp)) * (cp if gather else 1),
                "per_layer_per_micro_batch": sum(_f(x) for x in cp_layer_transfers(cp, rc != NONE, wl.cp_comm_type)),
                "bandwidth_gbps": link(cp, tp)[0] if gather else bw_,
            }
        )
    if model.is_moe and ep > 1:
        bw_, _ = link(ep, tp, "all_to_all")
        colls.append(
            {
                "axis": "ep",
                "collective": "all_to_all (dispatch + combine)",
                "group": int(ep),
                "bytes": _f(ep_dispatch_bytes(model, T, tp, sp, wl.moe_imbalance)[1]),
                "per_layer_per_micro_batch": _f(ep_layer_calls(rc == FULL)),
                "bandwidth_gbps": bw_,
            }
        )
    dp_group = int(dense_dp_size(dp, cp))
    if dp_group > 1:
        bw_, _ = link(dp_group, tp)
        sh = DPSharding(int(cols.dp_sharding[0]))
        g = f"{wl.grad_reduce_dtype} grads"
        w = "fp8 params" if wl.fp8_param_gather else "bf16 params"
        names = {
            DPSharding.NO_OP: f"all_reduce ({g})",
            DPSharding.OPTIMIZER_STATES: f"reduce_scatter ({g}) + all_gather ({w})",
            DPSharding.OPTIMIZER_STATES_AND_GRADS: f"reduce_scatter ({g}) + all_gather ({w})",
            DPSharding.FULLY_SHARD: f"all_gather ({w}) fwd + bwd per micro-batch, reduce_scatter ({g})",
        }
        per_mb = bool(reduces_every_micro_batch(np.asarray([int(sh)]), wl.dp_grad_reduce)[0])
        when = "; grads reduced every micro-batch" if per_mb else "; grads reduced once, last micro-batch"
        shard = int(dp_shard_ranks(np.asarray([dp]), np.asarray([int(sh)]), wl.dp_shard_size)[0])
        if shard < dp:  # hybrid sharding: the group and link of the shard groups; replicas named
            dp_group = int(shard * cp)
            bw_, _ = link(dp_group, tp)
            when = f"; HSDP, then all_reduce of the shard over {int(dp // shard)} replicas" + when
        colls.append(
            {
                "axis": "dp",
                "collective": names[sh] + when,
                "group": dp_group,
                "bytes": float("nan"),
                "per_layer_per_micro_batch": float("nan"),
                "bandwidth_gbps": bw_,
            }
        )
    if pp > 1:
        bw_, _ = (_f(x) for x in p2p_link(hw, 2 * tp * cp * dp))
        colls.append(
            {
                "axis": "pp",
                "collective": "send_recv (activations, grads)",
                "group": 2,
                "bytes": _f(pp_hop_bytes(model, T, tp)),
                "per_layer_per_micro_batch": float("nan"),
                "bandwidth_gbps": bw_,
            }
        )
    for c in colls:
        c["time_link_s"] = _f(out[f"time_comm_{c['axis']}_s"])
        c["time_exposed_s"] = _f(out[f"time_comm_{c['axis']}_exposed_s"])

    links = link_records(hw, out, ctx["on_out"], scale_up_port_share(hw, tp, cp, dp, ep, pp))

    step = _f(out["time_step_s"])
    opt = _f(ctx["pick"]("opt"))
    parts = {
        "compute (ops)": _f(out["time_compute_s"]) - opt,
        "optimizer step": opt,
        "pipeline bubble": _f(out["time_bubble_s"]),
    }
    parts.update({f"exposed {ax.upper()} comm": _f(out[f"time_comm_{ax}_exposed_s"]) for ax in AXES})
    parts["named overheads (launch, comm contention, stragglers; cost/overheads.py)"] = _f(out["time_overhead_s"])
    summary = {
        "critical_stage": stage,
        "layers_on_stage": int(n_layers[0]),
        "micro_batches": int(m),
        "time_step_s": step,
        "bound": Bound(int(out["bound"][0])).label,
        "mfu": _f(out["mfu"]),
        "hfu": _f(out["hfu"]),
        "tokens_per_s": _f(out["tokens_per_s"]),
        "where_time_goes": {k: (v, v / step) for k, v in parts.items() if v > 0},
    }
    return {"summary": summary, "ops": ops, "collectives": colls, "links": links}


def link_records(hw, out, on_out, port_share=None) -> list[dict]:
    """Per physical link of one critical-stage GPU (cost/links.py): achievable bandwidth per
    direction, busy seconds per step, the part the overlap windows hide, the exposed part (an axis
    split over both links, hybrid sharding's DP, counts its share on each; on a mesh scale-up each
    axis counts its share of the port, port_share: `links.scale_up_port_share`), and the axes whose
    transfers it carries. on_out: the step time's NIC share per axis (its ctx["on_out"])."""
    recs = []
    tiers = [("scale_up", hw.scale_up.name or "scale-up", hw.scale_up.bandwidth_gbps * hw.efficiency.scale_up)]
    if hw.scale_out is not None:
        tiers.append(
            (
                "scale_out",
                (hw.scale_out.name or "scale-out") + " (this GPU's)",
                hw.scale_out.bandwidth_gbps * hw.efficiency.scale_out,
            )
        )
    for key, name, bw in tiers:
        port = {ax: 1.0 if key == "scale_out" else _f((port_share or {}).get(ax, 1.0)) for ax in AXES}
        share = {ax: _f(on_out[ax]) if key == "scale_out" else 1.0 - _f(on_out[ax]) for ax in AXES}
        axes = [ax for ax in AXES if share[ax] > 0 and _f(out[f"time_comm_{ax}_s"]) > 0]
        busy = _f(out[f"link_{key}_busy_s"])
        exposed = sum(share[ax] * port[ax] * _f(out[f"time_comm_{ax}_exposed_s"]) for ax in axes)
        recs.append(
            {
                "link": name,
                "bandwidth_gbps": float(bw),
                "busy_s": busy,
                "overlappable_s": busy - exposed,
                "exposed_s": exposed,
                "axes": ", ".join(axes) or "-",
            }
        )
    return recs
