"""Where one layout's step time goes: per-op and per-collective tables (plain data for `show`).

A group-by of the step time's own terms for one row: the per-op table lists the op list the step
time sums on the critical stage (`steptime.stage_ops`: the same sets, counts, kernel times and
casts), the per-collective and per-link tables the step time's link and exposed seconds per axis
and per link; bytes and call counts come from the functions the link times are computed with
(cost/comm.py). Times are per step on one GPU of the critical pipeline stage; the tables sum to
the row's time columns (tests/test_breakdown_sums.py).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping

import numpy as np

from ..specs import Bound
from .collective_ops import CollectiveOp
from .comm import (
    cp_layer_ops,
    dp_group_ops,
    ep_layer_ops,
    fsdp_gather_passes,
    hsdp_replica_op,
    pp_hop_op,
    tp_layer_calls,
    tp_layer_ops,
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
    _dp_reductions,
    _dp_terms,
    _micro_batch_terms,
    _stage_layout,
    _training_time,
    bf16_edge_layers,
    dp_role_exposed_s,
    stage_op_counts,
    stage_ops,
    weight_casts_per_micro_batch,
)
from .shapes import dense_dp_size, expert_dp_size, expert_tp_size, tokens_per_rank
from .states import FS, GRAD_BYTES, NO_OP, param_gather_bytes

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
    m = _f(cols.num_micro_batches)
    rc = int(cols.recompute[0])
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

    records = training_collectives(cols, model, hw, wl, out, ctx, stage)
    colls = collective_table(hw, records, payloads(wl))
    etp = None if wl.expert_tp is None else expert_tp_size(tp, wl.expert_tp)
    links = link_table(hw, records, scale_up_port_share(hw, tp, cp, dp, ep, pp, etp))

    step = _f(out["time_step_s"])
    opt = _f(ctx["pick"]("opt"))
    parts = {
        "compute (ops)": _f(out["time_compute_s"]) - opt,
        "optimizer step": opt,
        "pipeline bubble": _f(out["time_bubble_s"]),
    }
    parts.update({f"exposed {ax.upper()} comm": _f(out[f"time_comm_{ax}_exposed_s"]) for ax in AXES})
    parts["named overheads (launch, comm contention, stragglers; cost/overheads.py)"] = _f(out["time_overhead_s"])
    if "time_offload_exposed_s" in out:
        parts["exposed activation offload (host link; cost/offload.py)"] = _f(out["time_offload_exposed_s"])
    if "time_param_offload_s" in out:
        parts["parameter offload (shard fetches not hidden; cost/offload.py)"] = _f(out["time_param_offload_s"])
    if "time_optimizer_offload_s" in out:
        parts["optimizer offload (CPU Adam, exposed host copies; cost/offload.py)"] = _f(
            out["time_optimizer_offload_s"]
        )
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


def training_collectives(cols: TrainingLayout, model, hw, wl, out, ctx, stage: str) -> list[CollectiveOp]:
    """The collectives one GPU of the critical `stage` issues in a step (first row of `cols`), as
    the inventory's records (cost/collective_ops.py) built by the step time's own functions
    (cost/comm.py): calls per step, link seconds per call, and the exposed seconds per step.

    Exposure: the step time decides it per axis (cost/steptime.py: overlap windows, then the
    busiest-link bound, `links.bind_to_links`). A record's own part is what the schedule never
    hides (TP forward and exposed backward calls, the MoE dispatch's TP gather and scatter, a CP
    all-gather, EP without overlap_ep_comm, every call without its overlap option or under
    launch_blocking) or, for a DP role, that role's exposure under its own window
    (`steptime.dp_role_exposed_s`); what the axis exposes beyond the parts is spread over its
    records in proportion to their hideable seconds (link − own part), as the link bound spreads
    its deficit over the axes. The records of an axis so sum to its time columns."""
    one = cols.rows(1)
    tp, cp, ep, dp, pp, vpp = (
        np.asarray(x, dtype=np.float64) for x in (one.tp, one.cp, one.ep, one.dp, one.pp, one.vpp)
    )
    b, m = np.asarray(one.micro_batch, dtype=np.float64), _f(one.num_micro_batches)
    sp = bool(one.sequence_parallel[0])
    rc = int(one.recompute[0])
    full = rc == FULL
    s = wl.seq_len
    T = tokens_per_rank(s, b, cp)
    counts = dict(stage_op_counts(one, model, bf16_edge_layers(wl))[stage])
    layers = sum(_f(counts.get(name, 0.0)) for name in LAYER_SETS)  # the layers on the stage
    n_moe = _f(counts.get("moe", 0.0))
    blocking = wl.launch_blocking
    placed: list[tuple[CollectiveOp, float]] = []  # (record with calls per step, own exposed seconds)

    def per_step(op: CollectiveOp, times: float, own_exposed: bool):
        """op's calls per layer and micro-batch over `times` layer-micro-batches of the step."""
        step = replace(op, calls=_f(op.calls) * times, time_s=_f(op.time_s), scope="step")
        placed.append((step, _f(step.link_s) if own_exposed else 0.0))

    # TP: the layer's collectives; the forward and exposed backward calls are exposed, the hidden
    # backward calls (or all of them under overlap_tp_comm) hide (comm.tp_layer_times_s)
    calls = tp_layer_calls(sp, full)
    hides_all = wl.hides("tp")
    for op in tp_layer_ops(hw, model, T, tp, {k: c[0] + c[1] + c[2] for k, c in calls.items()}):
        c = calls[op.kind]
        own = 0.0 if hides_all else _f(c[0] + c[1]) * m * layers * _f(op.time_s)
        step = replace(op, calls=_f(op.calls) * m * layers, time_s=_f(op.time_s), scope="step")
        placed.append((step, _f(step.link_s) if blocking else own))
    if model.is_moe:  # EP all-to-all (hidden only under overlap_ep_comm) and its TP gather and scatter
        etp = None if wl.expert_tp is None else expert_tp_size(tp, wl.expert_tp)
        for op in ep_layer_ops(hw, model, T, tp, ep, wl.moe_imbalance, full, sp, wl.moe_dispatcher, etp):
            per_step(op, m * n_moe, op.axis == "tp" or not wl.hides("ep"))
    cp_impl = wl.cp_implementation or "transformer_engine"
    for op in cp_layer_ops(hw, model, s, b, tp, cp, rc != NONE, wl.cp_comm_type, cp_impl):
        # TE's all-gather and a2a wait on their transfers; torch's ring hides even its all-gather
        per_step(op, m * layers, blocking or (op.kind != "send_recv" and cp_impl != "torch"))
    placed += _dp_collectives(one, model, hw, wl, ctx, stage, m)
    hop = pp_hop_op(hw, model, T, tp, tp * cp * dp, pp)  # 2·m·v transfers per step (pipeline.pp_times_s)
    placed.append((replace(hop, calls=_f(2.0 * m * vpp), time_s=_f(hop.time_s), scope="step"), 0.0))

    records = []
    for ax in AXES:
        mine = [(op, own) for op, own in placed if op.axis == ax and _f(op.link_s) > 0]
        total = _f(out[f"time_comm_{ax}_exposed_s"])
        rest = total - sum(own for _, own in mine)
        hideable = [_f(op.link_s) - own for op, own in mine]
        weights = hideable if sum(hideable) > 0 else [_f(op.link_s) for op, _ in mine]
        for (op, own), w in zip(mine, weights):
            records.append(replace(op, exposed_s=own + rest * w / sum(weights)))
    return records


def _dp_collectives(one: TrainingLayout, model, hw, wl, ctx, stage, m) -> list[tuple[CollectiveOp, float]]:
    """The DP records of the critical stage, calls per step, with each role's own exposure: the
    gradient reduce (per reduction), the distributed optimizer's gather, the FSDP gathers (per unit,
    micro-batch and pass), hybrid sharding's replica all-reduce, each over the dense and the
    expert parameters' groups (comm.dp_group_ops, comm.hsdp_replica_op; steptime._dp_terms)."""
    rates = ctx["rates"]
    sh = int(one.dp_sharding[0])
    d = _dp_terms(one, model, hw, wl, rates)[stage]
    r = _micro_batch_terms(one, model, hw, wl, rates)[stage]
    reductions = _f(_dp_reductions(d, m))
    passes = _f(fsdp_gather_passes(np.asarray(one.recompute) == FULL, wl))
    tp, cp, ep, dp = (np.asarray(x, dtype=np.float64) for x in (one.tp, one.cp, one.ep, one.dp))
    role_link = {"reduce": _f(d["reduce"]) * reductions, "zero": _f(d["zero_gather"]), "fsdp": _f(d["fsdp_per_mb"]) * m}
    if wl.hides("dp"):
        role_exp = dict(zip(("reduce", "zero", "fsdp"), (_f(x) for x in dp_role_exposed_s(d, r, m, reductions))))
    else:
        role_exp = dict(role_link)
    grad, param = GRAD_BYTES[wl.grad_reduce_dtype], param_gather_bytes(wl)
    out = []
    for group in ("dense", "experts"):
        g = _dp_terms(one, model, hw, wl, rates, group=group)[stage]
        P = g["params"]
        if not np.any(P):
            continue
        dp_s = g["dp_shard"]
        if group == "dense":
            n, stride = dense_dp_size(dp_s, cp), tp
        else:  # the expert grid: etp·ep·edp over the same ranks (shapes.expert_dp_size)
            etp = tp if wl.expert_tp is None else expert_tp_size(tp, wl.expert_tp)
            n, stride = expert_dp_size(dp_s, cp, ep, tp, etp), etp * ep
        ops = dp_group_ops(hw, P, n, stride, sh, g["units"], wl.dp_bucket_params, grad, param)
        picked = [(ops["all_reduce" if sh == NO_OP else "reduce_scatter"], reductions, "reduce")]
        if sh == FS:
            picked.append((ops["fsdp_gather"], m * passes, "fsdp"))
        elif sh != NO_OP:
            picked.append((ops["zero_gather"], 1.0, "zero"))
        if wl.dp_shard_size is not None and sh != NO_OP:
            replicas = dp / dp_s
            picked.append(
                (
                    hsdp_replica_op(hw, P, n, stride, replicas, sh, g["units"], grad, wl.dp_bucket_params),
                    reductions,
                    "reduce",
                )
            )
        for op, times, role in picked:
            name = op.role if group == "dense" else op.role + " (experts)"  # the expert parameters' group
            step = replace(op, role=name, calls=_f(op.calls) * times, time_s=_f(op.time_s), scope="step")
            link = _f(step.link_s)
            share = link / role_link[role] if role_link[role] > 0 else 0.0
            out.append((step, role_exp[role] * share))
    return out


# one row of `show`'s per-collective table per distinct (axis, role, kind, group, stride)
COLLECTIVE_KEY = ("axis", "role", "kind", "group", "stride")


def payloads(wl) -> dict[str, str]:
    """What each role's bytes are, in the dtype they travel in (comm.ACT_BYTES; the gradient
    reduce in workload.grad_reduce_dtype, the parameter gathers in fp8 with fp8_param_gather)."""
    grads = f"{wl.grad_reduce_dtype} grads"
    params = "fp8 params" if wl.fp8_param_gather else "bf16 params"
    act = "bf16 activations, grads"
    cp = "bf16 Q,K,V and output (gradients)" if wl.cp_comm_type == "a2a" else "bf16 K,V (dK,dV)"
    if wl.cp_comm_type != "a2a" and wl.cp_implementation == "torch":
        cp = "bf16 K,V repeated to every query head (fp32 dK,dV)"
    out = {"tp": act, "tp moe": "bf16 routed tokens", "cp": cp, "ep": "bf16 routed tokens"}
    out.update({"dp grad reduce": grads, "hsdp replica reduce": grads, "dp param gather": params})
    out.update({"fsdp param gather": params, "pp hop": act})
    return out


def collective_table(hw, records: list[CollectiveOp], payload: Mapping[str, str]) -> list[dict]:
    """`show`'s per-collective table: the records grouped by COLLECTIVE_KEY, calls, link and
    exposed seconds per step summed; what moves (payload by role, `payloads`), bytes per call (S,
    nccl-tests size) and on the wire per rank and direction (S · busbw factor), the link."""
    rows: dict[tuple, dict] = {}
    for op in records:
        key = (op.axis, op.role, op.kind, int(_f(op.group)), int(_f(op.stride)))
        bw, _lat = op.link(hw)
        row = rows.setdefault(
            key,
            {
                "axis": op.axis,
                "role": op.role,
                "collective": op.kind,
                "payload": payload[op.role.removesuffix(" (experts)")],
                "group": key[3],
                "stride": key[4],
                "bytes": _f(op.nbytes),
                "wire_bytes": _f(op.wire_bytes),
                "calls_per_step": 0.0,
                "link": "scale_out" if bool(np.asarray(op.on_scale_out(hw)).reshape(-1)[0]) else "scale_up",
                "bandwidth_gbps": _f(bw),
                "time_link_s": 0.0,
                "time_exposed_s": 0.0,
            },
        )
        row["calls_per_step"] += _f(op.calls)
        row["time_link_s"] += _f(op.link_s)
        row["time_exposed_s"] += _f(op.exposed_s)
    return list(rows.values())


def _link_share(hw, op: CollectiveOp, link: str) -> float:
    """The share of a record's seconds on `link`: its NIC seconds (`CollectiveOp.nic_s`: all of a
    call whose group leaves the domain, the inter-node phase of a hierarchical TP all-reduce) over
    its time; the rest on the scale-up port."""
    t = _f(op.time_s)
    nic = _f(op.nic_s(hw)) / t if t > 0 else float(bool(np.asarray(op.on_scale_out(hw)).reshape(-1)[0]))
    return nic if link == "scale_out" else 1.0 - nic


def _scaled(x: float, share: float) -> float:
    """x on a link that carries `share` of it (x itself for a whole record: no rounding)."""
    return x if share == 1.0 else x * share


def link_table(hw, records: list[CollectiveOp], port_share=None) -> list[dict]:
    """`show`'s per-link table, a group-by of the records by the link each runs on (cost/links.py):
    achievable bandwidth per direction, busy seconds per step (on a mesh scale-up an axis counts
    its share of the port, port_share: `links.scale_up_port_share`), the part the overlap windows
    hide, the exposed part, and the axes it carries."""
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
        share = [_link_share(hw, op, key) for op in records]
        carried = [(op, f) for op, f in zip(records, share) if f > 0.0]
        port = {ax: 1.0 if key == "scale_out" else _f((port_share or {}).get(ax, 1.0)) for ax in AXES}
        busy = sum(_scaled(port[op.axis] * _f(op.link_s), f) for op, f in carried)
        exposed = sum(_scaled(port[op.axis] * _f(op.exposed_s), f) for op, f in carried)
        on = [op for op, _ in carried]
        axes = [ax for ax in AXES if any(op.axis == ax for op in on)]
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
