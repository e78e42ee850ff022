"""Links as shared resources: which physical link each axis's transfers use, busy time per link,
and the bound a step cannot beat.

One GPU of the critical stage has two links (per direction):
  scale_up   its NVLink/NVSwitch port (one NVL72 domain on GB200), domain_size GPUs;
  scale_out  its own NIC (rail-optimized clusters: one NIC per GPU, DGX H100 8x NDR400).
Groups in Megatron rank order (`collectives.group_link`): an axis's group stays on the scale-up
port iff the consecutive ranks it spans fit in one domain, else its transfers wait on the NIC
(the slowest hop of a ring or all-to-all sets the pace, so the NIC is busy for the whole call):
  tp  t ranks, stride 1            span t
  cp  ring over cp·t ranks          span cp·t
  ep  all-to-all, stride t          span ep·t (folded MoE: stride etp, span ep·etp)
  dp  dense DP×CP group, stride t   span dp·cp·t (the expert-DP group spans the same ranks)
  pp  neighbour stage t·cp·dp away  span 2·t·cp·dp
A TP all-reduce over domains run hierarchically (`collectives.cross_domain_all_reduce_time_s`)
is the exception: only its inter-node phase waits on the NIC, its reduce-scatter and all-gather
run on the scale-up port (`CollectiveOp.nic_s`), so TP's NIC share is a fraction (`out_share`).
Busy time of a link = Σ link seconds (`time_comm_<axis>_s`) of the axes placed on it. On a mesh
scale-up (fully connected links, `collectives.scale_up_group_gbps`) an axis whose group has m
members in the domain runs on m − 1 of the domain_size − 1 links, so it keeps that share of the
port busy (`scale_up_port_share`; 1 on a switch): the port's busy time is its bytes over its
whole bandwidth, a bound the separate links can only raise.

The bound: a GPU cannot finish a step before its busiest link has carried every transfer, so
  step >= max(busy_scale_up, busy_scale_out)   (and step >= compute, which the schedule gives).
The per-axis overlap windows (`comm.py`, `steptime.py`) are each checked alone; several axes
hiding under the same compute on the same link (FSDP gathers under forward and backward, the
gradient reduce-scatter under backward, the PP transfers, the CP ring) can claim more hiding
than the link has time for. When the link bound exceeds the step, the difference d becomes
exposed: it is spread over the axes on that link in proportion to their hidden seconds
(link − exposed), so each axis stays exposed <= link, the step stays the sum of its parts
(compute + bubble + Σ exposed), and the step equals the busy time of that link.
"""

from __future__ import annotations

import numpy as np

LINKS = ("scale_up", "scale_out")
AXES = ("tp", "cp", "ep", "dp", "pp")


def axis_spans(tp, cp, dp, ep, pp, etp=None):
    """Consecutive ranks each axis's group spans in Megatron order (module docstring); pp is 0
    when there is no pipeline (no transfer). etp: expert TP under MoE parallel folding (the EP
    group is ep ranks etp apart, span ep·etp); None: tp."""
    tp, cp, dp, ep, pp = (np.asarray(x, dtype=np.float64) for x in (tp, cp, dp, ep, pp))
    e_tp = tp if etp is None else np.asarray(etp, dtype=np.float64)
    return {
        "tp": tp,
        "cp": cp * tp,
        "ep": ep * e_tp,
        "dp": dp * cp * tp,
        "pp": np.where(pp > 1, 2.0 * tp * cp * dp, 0.0),
    }


def axes_on_scale_out(hw, tp, cp, dp, ep, pp, etp=None):
    """{axis: share of its link seconds on the NIC}: 1.0 where the axis's group leaves the scale-up
    domain, else 0.0 (a float array, so a split axis can hold a fraction: `out_share`)."""
    spans = axis_spans(tp, cp, dp, ep, pp, etp)
    if hw.scale_out is None:
        return {ax: np.zeros(np.shape(s)) for ax, s in spans.items()}
    return {ax: (s > hw.scale_up.domain_size).astype(np.float64) for ax, s in spans.items()}


def scale_up_port_share(hw, tp, cp, dp, ep, pp, etp=None):
    """{axis: share of the GPU's scale-up port its transfers occupy}: 1.0 on a switch; on a mesh
    the group's links over the port's, with m members of the group in one domain (module
    docstring; a pipeline hop is a pair of GPUs)."""
    if hw.scale_up.topology == "switch":
        return {ax: 1.0 for ax in AXES}
    from .collectives import scale_up_group_gbps

    tp, cp, dp, ep, pp = (np.asarray(x, dtype=np.float64) for x in (tp, cp, dp, ep, pp))
    domain = hw.scale_up.domain_size
    e_tp = tp if etp is None else np.asarray(etp, dtype=np.float64)
    groups = {"tp": (tp, 1.0), "cp": (cp, tp), "ep": (ep, e_tp), "dp": (dp * cp, tp), "pp": (2.0, tp * cp * dp)}
    port = hw.scale_up.bandwidth_gbps * hw.efficiency.scale_up
    share = {}
    for ax, (size, stride) in groups.items():
        members = np.clip(np.floor(domain / stride), 1.0, np.maximum(size, 1.0))
        share[ax] = scale_up_group_gbps(hw, members) / port
    return share


def out_share(on_out, ax):
    """The share of axis `ax`'s link seconds on the NIC: on_out holds a bool (the whole group on one
    link) or, for an axis split over both (hybrid sharding's DP: shard groups on NVLink, the replica
    all-reduce on the NIC), the fraction on the NIC."""
    return np.asarray(on_out[ax], dtype=np.float64)


def link_busy_s(comm, on_out, axes=AXES, port_share=None):
    """{link: busy seconds per step}: Σ of the link seconds of the axes each link carries (a split
    axis contributes its share to each; on the scale-up port each axis counts its
    `scale_up_port_share`, port_share, 1 where not given). axes: the axes counted (all of them
    unless a caller adds the busy seconds of the others itself; AXES order, so the sums round the
    same)."""
    share = {ax: out_share(on_out, ax) for ax in axes}
    port = port_share or {}
    out = sum(share[ax] * comm[ax] for ax in axes)
    up = sum((1.0 - share[ax]) * comm[ax] * port.get(ax, 1.0) for ax in axes)
    return {"scale_up": up, "scale_out": out}


def bind_to_links(step, comm, comm_exp, on_out, busy=None):
    """(step, exposed per axis) after the busiest-link bound (module docstring).

    comm / comm_exp: {axis: link / exposed seconds per step}; step = compute + bubble + Σ
    exposed; busy: `link_busy_s(comm, on_out)` when the caller has it. The links are applied in
    turn (scale-out, then scale-up on the raised step), so the result satisfies both bounds."""
    shape = np.broadcast(np.asarray(step), *[np.asarray(comm[ax]) for ax in AXES]).shape
    step = np.array(np.broadcast_to(step, shape), dtype=np.float64)
    busy = link_busy_s(comm, on_out) if busy is None else busy

    def at_rows(rows):
        return (
            {ax: np.broadcast_to(comm[ax], shape)[rows] for ax in AXES},
            {ax: np.broadcast_to(comm_exp[ax], shape)[rows] for ax in AXES},
            {ax: np.broadcast_to(out_share(on_out, ax), shape)[rows] for ax in AXES},
        )

    updates = bind_rows(step, {k: np.broadcast_to(v, shape) for k, v in busy.items()}, at_rows)
    exp = {ax: np.array(np.broadcast_to(comm_exp[ax], shape), dtype=np.float64) for ax in AXES}
    for rows, values in updates:
        for ax in AXES:
            exp[ax][rows] = values[ax]
    return step, exp


def hidden_on_link(link: str, comm, comm_exp, on_out) -> dict:
    """{axis: link seconds it hides on `link`}: its link seconds less its exposed seconds, times
    its share on that link (`out_share` on the NIC, the rest on the scale-up port)."""
    nic = {ax: out_share(on_out, ax) for ax in comm}
    on = {ax: nic[ax] if link == "scale_out" else 1.0 - nic[ax] for ax in comm}
    return {ax: on[ax] * np.maximum(comm[ax] - comm_exp[ax], 0.0) for ax in comm}


def bind_rows(step, busy, at_rows, hidden_at=None) -> list:
    """`bind_to_links` on the rows the bound changes alone: the other rows' exposed seconds stand,
    so a caller with many rows and few of them link-bound gathers its columns on those rows only.

    step: a float64 array of its own, raised in place; busy: {link: busy seconds per row};
    at_rows(rows) -> (comm, comm_exp, on_out) of those rows as `bind_to_links` takes them.
    hidden_at(rows, link) -> (comm_exp, `hidden_on_link`) of rows no earlier link raised, as new
    float64 arrays, when the caller has them cheaper (per distinct key, gathered); default: from
    at_rows. Returns the updates [(rows, {axis: exposed seconds on those rows})], in the order
    they apply (a row of a later entry takes that entry's values)."""
    updates: list = []
    for link in ("scale_out", "scale_up"):
        short = np.flatnonzero(busy[link] > step)  # rows whose link outlasts the step
        if len(short) == 0:
            continue  # nothing to expose on this link: the step and the exposed times stand
        # Only those rows change (elsewhere the share is 0): the same formulas on them alone.
        if hidden_at is not None and not updates:
            exp, hidden = hidden_at(short, link)
        else:
            cm, exp, on_out = at_rows(short)
            exp = {ax: np.array(exp[ax], dtype=np.float64) for ax in AXES}
            for rows, values in updates:  # rows the scale-out pass already raised: its exposed seconds
                pos = np.minimum(np.searchsorted(rows, short), len(rows) - 1)
                hit = np.flatnonzero(rows[pos] == short)
                for ax in AXES:
                    exp[ax][hit] = values[ax][pos[hit]]
            hidden = hidden_on_link(link, {ax: cm[ax] for ax in AXES}, exp, on_out)
        total_hidden = sum(hidden.values())
        deficit = np.maximum(busy[link][short] - step[short], 0.0)
        share = np.where(total_hidden > 0, deficit / np.where(total_hidden > 0, total_hidden, 1.0), 0.0)
        share = np.minimum(share, 1.0)
        updates.append((short, {ax: exp[ax] + hidden[ax] * share for ax in AXES}))
        step[short] = step[short] + total_hidden * share
    return updates


__all__ = [
    "LINKS",
    "axis_spans",
    "axes_on_scale_out",
    "scale_up_port_share",
    "out_share",
    "link_busy_s",
    "bind_to_links",
    "bind_rows",
    "hidden_on_link",
]
