"""The communication half of the op inventory (issue 27): what each collective and point-to-point
transfer moves, over which group and link, and what one call costs. Training's schedule
(cost/comm.py, cost/steptime.py) and serving's (cost/inference.py) build their transfers as
`CollectiveOp` records with the functions here and time every one with the one link model
(`collectives.group_collective_time_s`; point-to-point hops over `p2p_link`); where a transfer
hides is the schedule's business, and `show`'s per-collective and per-link tables group these
records (cost/breakdown.py).

Bytes convention (`CollectiveOp.nbytes`): S of one call as nccl-tests reports "size" and
`collectives.py` takes it: the all-reduced tensor, an all-gather's gathered output, a
reduce-scatter's input, one rank's buffer before an all-to-all; a send/recv's bytes one rank
sends one way. The bytes one rank puts on its link each way are `wire_bytes` = S · busbw factor
(nccl-tests PERFORMANCE.md: 2(n−1)/n for an all-reduce, (n−1)/n for all-gather, reduce-scatter
and all-to-all, 1 for a send/recv).

Groups in Megatron rank order (`collectives.group_link`): `group` ranks `stride` apart span
group·stride consecutive ranks; a transfer leaves the scale-up domain iff that span exceeds it
(cost/links.py places an axis the same way). A send/recv's group is its ring or chain (the CP
ring's cp ranks, a pipeline boundary's 2 stages); each hop is one pair.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..units import GB, US
from .collectives import (
    cross_domain_all_reduce_split_s,
    busbw_factor,
    collective_time_s,
    CUSTOM_AR_MAX_RANKS,
    custom_all_reduce_time_s,
    custom_all_reduce_wire_factor,
    group_collective_time_s,
    group_link,
    scale_up_group_gbps,
)
from .ops import ACT_BYTES
from .shapes import kv_width_per_rank, moe_token_load, sp_divisor, tokens_per_rank

CUSTOM_ALL_REDUCE = "custom_all_reduce"  # a record kind: an engine's all-reduce kernel, not an NCCL collective
P2P_PAIR = 2.0  # ranks of one send/recv: a hop of a ring or chain is one pair

# what a record's `role` names: the transfer, the axis whose group runs it (tp, cp, ep, dp, pp;
# serving's prompt sharding sp), and what calls count per
ROLES = {
    "tp": "TP activations (all-reduce, or SP all-gather / reduce-scatter), per layer",
    "tp custom": "serving: TP activations all-reduced by the engine's own kernel (one-shot / two-shot over NVLink "
    "P2P; engine.tp_all_reduce), per layer",
    "tp moe": "expert-TP all-gather after the MoE dispatch, reduce-scatter before the combine (SP; over the TP "
    "group, or the workload.expert_tp ranks under MoE parallel folding), per MoE layer",
    "ep": "EP dispatch + combine all-to-all, per MoE layer (ranks expert-TP apart)",
    "cp": "CP K,V ring hops, or K,V all-gather and dK,dV reduce-scatter, per layer",
    "dp grad reduce": "DP gradient all-reduce (no sharding) or reduce-scatter (sharded), per reduction",
    "dp param gather": "distributed optimizer's parameter all-gather, per step",
    "fsdp param gather": "FSDP parameter all-gather per unit, per micro-batch pass",
    "hsdp replica reduce": "hybrid sharding's all-reduce of the gradient shard across replicas, per reduction",
    "pp hop": "activations (forward) or their gradients (backward) to the neighbour stage",
    "sp kv gather": "serving prefill: the prompt's K,V all-gathered over the SP ranks, per layer",
    "sp attention merge": "serving decode: partial attention outputs all-gathered over the SP ranks, per layer",
}


@dataclass(frozen=True)
class CollectiveOp:
    """One collective or point-to-point transfer of the inventory; arrays broadcast over layout rows.

    axis, role  the parallel axis whose group runs it and what it moves (ROLES)
    kind        collectives.KINDS: all_reduce | all_gather | reduce_scatter | all_to_all | send_recv; or
                CUSTOM_ALL_REDUCE, a serving engine's own all-reduce kernel (`engine_tp_all_reduce_ops`)
    nbytes      S of one call (module docstring)
    group       ranks of the group (a send/recv: of its ring or chain)
    stride      ranks apart in Megatron order
    time_s      seconds of one call on its link (`transfer_time_s`)
    calls       calls per scope
    scope       what `calls` count per: "layer" (layer and micro-batch; serving: layer and pass),
                "stage" (serving: one pass through the stage), "step" (training: one step of one GPU)
    exposed_s   seconds per scope the schedule leaves on the critical path; None: not placed
    """

    axis: str
    role: str
    kind: str
    nbytes: Any
    group: Any
    stride: Any
    time_s: Any
    calls: Any = 1.0
    scope: str = "layer"
    exposed_s: Any = None

    @property
    def link_s(self):
        """Seconds its calls keep the link busy per scope: calls · time_s."""
        return self.calls * self.time_s

    @property
    def wire_bytes(self):
        """Bytes one rank sends (and receives) on its link per call: S · nccl-tests busbw factor (a
        custom all-reduce: S · what its one-shot or two-shot reads, `custom_all_reduce_wire_factor`)."""
        S = np.asarray(self.nbytes, dtype=np.float64)
        if self.kind == CUSTOM_ALL_REDUCE:
            return S * custom_all_reduce_wire_factor(S, self.group)
        return S * busbw_factor(self.kind, self.group)

    def link(self, hw):
        """(achievable GB/s per rank per direction, latency us per step) of its link."""
        if self.kind == "send_recv":
            return p2p_link(hw, np.asarray(self.group, dtype=np.float64) * self.stride)
        return group_link(hw, self.group, self.stride, kind="all_to_all" if self.kind == "all_to_all" else "ring")

    def on_scale_out(self, hw):
        """Whether its group leaves the scale-up domain (its calls wait on the NIC): cost/links.py's rule."""
        span = np.asarray(self.group, dtype=np.float64) * np.asarray(self.stride, dtype=np.float64)
        return (span > hw.scale_up.domain_size) & (hw.scale_out is not None)

    def nic_s(self, hw):
        """Seconds of one call on the NIC: all of time_s when its group leaves the domain (the
        slowest hop paces a ring or all-to-all), but for a TP all-reduce run hierarchically (its
        time is `cross_domain_all_reduce_time_s`, the faster) only the inter-node phase
        (`cross_domain_all_reduce_nic_s`); 0 inside the domain."""
        on = np.asarray(self.on_scale_out(hw), dtype=bool)
        t = np.asarray(self.time_s, dtype=np.float64)
        nic = np.where(on, t, 0.0)
        if self.kind != "all_reduce" or self.axis not in TP_HIERARCHICAL or hw.scale_out is None or not np.any(on):
            return nic
        hier, inter = cross_domain_all_reduce_split_s(hw, self.nbytes, self.group, self.stride)
        return np.where(on & (hier <= t), inter, nic)


def transfer_time_s(hw, kind: str, nbytes, group, stride, hierarchical: bool = False):
    """Seconds of one call: `collectives.group_collective_time_s` for a collective, a send/recv of
    one pair over `p2p_link(group·stride)` (0 for a group of 1). hierarchical: a cross-domain
    all-reduce may run as `collectives.cross_domain_all_reduce_time_s` (TP_HIERARCHICAL)."""
    if kind == "send_recv":
        n = np.asarray(group, dtype=np.float64)
        bw, lat = p2p_link(hw, n * np.asarray(stride, dtype=np.float64))
        launch = hw.scale_up.collective_launch_us
        return collective_time_s("send_recv", nbytes, np.minimum(n, P2P_PAIR), bw, lat, launch_us=launch)
    return group_collective_time_s(hw, kind, nbytes, group, stride, hierarchical=hierarchical)


# Axes whose cross-domain all-reduce may run hierarchically (intra-node reduce-scatter, inter-node
# all-reduce of the 1/k shard, intra-node all-gather; `collectives.cross_domain_all_reduce_time_s`).
# Only TP: its group leaves the domain only when asked (grid.cross_node_tp), and its per-layer
# all-reduces are latency-bound in decode, where the flat ring's 2(n−1) NIC steps are what NCCL's
# tree avoids. DP, CP and EP groups keep the ring / tree / PAT choice fitted on nccl-tests
# (collectives.py): adding the candidate there lowers small-bucket gradient all-reduces by up to
# 6 % (tests/golden/mixtral-8x7b_h100_64.csv), a recalibration of its own.
TP_HIERARCHICAL = ("tp",)


def collective(hw, axis: str, role: str, kind: str, nbytes, group, stride, calls=1.0, scope="layer", time_s=None):
    """A `CollectiveOp` timed by `transfer_time_s` (or the given per-call `time_s`: the EP dispatch,
    `ep_all_to_all_time_s`, which is the same collective with DeepEP's node-limited routing)."""
    if time_s is None:
        time_s = transfer_time_s(hw, kind, nbytes, group, stride, hierarchical=axis in TP_HIERARCHICAL)
    return CollectiveOp(axis, role, kind, nbytes, group, stride, time_s, calls, scope)


def engine_tp_all_reduce_ops(hw, ar: CollectiveOp, engine) -> list[CollectiveOp]:
    """A serving pass's TP all-reduces `ar` (NCCL, role "tp") as the engine runs them: with
    engine.tp_all_reduce == "custom" the calls whose message fits engine.custom_all_reduce_max_bytes,
    whose group has at most CUSTOM_AR_MAX_RANKS ranks and stays in one scale-up domain (the kernel
    maps its peers' memory over NVLink)
    become a role "tp custom" record timed by `collectives.custom_all_reduce_time_s`; the rest stay
    NCCL's. Two records, the calls split by row; engine None or "nccl": `ar` alone. Each call of
    either record takes engine.tp_all_reduce_call_overhead_us on top of its kernel's time
    (`with_call_overhead`); engine None (training, tools that pass none): none. An engine with nccl_nvls false
    (it sets NCCL_NVLS_ENABLE=0) times its NCCL calls without the switch's NVLS (`collectives.nvls_all_reduce_time_s`)."""
    if engine is None:
        return [ar]
    if not engine.nccl_nvls and hw.scale_up.nvls is not None:  # the engine sets NCCL_NVLS_ENABLE=0: the ring
        ar = replace(
            ar,
            time_s=transfer_time_s(
                hw.without_nvls(), ar.kind, ar.nbytes, ar.group, ar.stride, ar.axis in TP_HIERARCHICAL
            ),
        )
    if engine.tp_all_reduce == "nccl":
        return [with_call_overhead(ar, engine)]
    S = np.asarray(ar.nbytes, dtype=np.float64)
    span = np.asarray(ar.group, dtype=np.float64) * np.asarray(ar.stride, dtype=np.float64)
    n = np.asarray(ar.group, dtype=np.float64)
    fits = (S <= engine.custom_all_reduce_max_bytes) & (span <= hw.scale_up.domain_size) & (n <= CUSTOM_AR_MAX_RANKS)
    t = custom_all_reduce_time_s(
        hw,
        S,
        ar.group,
        engine.custom_all_reduce_one_shot_latency_us,
        engine.custom_all_reduce_two_shot_latency_us,
        engine.custom_all_reduce_link_efficiency,
    )
    custom = CollectiveOp(ar.axis, "tp custom", CUSTOM_ALL_REDUCE, S, ar.group, ar.stride, t, ar.calls * fits, ar.scope)
    return [with_call_overhead(custom, engine), with_call_overhead(replace(ar, calls=ar.calls * ~fits), engine)]


def with_call_overhead(op: CollectiveOp, engine) -> CollectiveOp:
    """`op` with engine.tp_all_reduce_call_overhead_us added to each call's time (a serving TP
    all-reduce's excess beyond its kernel: specs/engine.py), 0 for a group of one rank (no all-reduce);
    an overhead of 0 returns `op` itself."""
    if not engine.tp_all_reduce_call_overhead_us:
        return op
    extra_s = np.where(np.asarray(op.group, dtype=np.float64) > 1, engine.tp_all_reduce_call_overhead_us * US, 0.0)
    return replace(op, time_s=np.asarray(op.time_s, dtype=np.float64) + extra_s)


def p2p_link(hw, span):
    """Point-to-point link of a ring or chain whose ranks extend over `span` consecutive ranks:
    scale-up when span <= domain_size (on a mesh the one link between the two GPUs), else one NIC
    per rank (the boundary hop sets the pace)."""
    span = np.asarray(span, dtype=np.float64)
    up = scale_up_group_gbps(hw, np.full(span.shape, P2P_PAIR))  # two GPUs: one link of a mesh
    if hw.scale_out is None:
        return np.full(span.shape, up), np.full(span.shape, hw.scale_up.latency_us)
    inside = span <= hw.scale_up.domain_size
    out = hw.scale_out.bandwidth_gbps * hw.efficiency.scale_out
    return np.where(inside, up, out), np.where(inside, hw.scale_up.latency_us, hw.scale_out.latency_us)


def tp_collective_bytes(model, T):
    """2·T·h: the bf16 activations of the micro-batch's T tokens on a rank, the payload S of each
    TP all-reduce, all-gather and reduce-scatter (Korthikanti et al. 2022 §4.2.2)."""
    return ACT_BYTES * T * model.hidden


def cp_chunk_bytes(model, s, b, t, cp):
    """K and V of one CP chunk in bf16, 2·(s/cp)·b·kv_width: what each ring hop passes on."""
    return tokens_per_rank(s, b, cp) * kv_width_per_rank(model, t) * ACT_BYTES


def ep_dispatch_bytes(model, T, t, sp, moe_imbalance):
    """(TP-group bytes, EP all-to-all bytes per rank) of one MoE dispatch: the routed copies
    2·T·k·load·h, and that divided by t under sequence parallelism (each TP rank routes its own
    T/t tokens; ep_layer_time_s)."""
    moe = model.require_moe()
    full = ACT_BYTES * T * moe.top_k * moe_token_load(moe, moe_imbalance) * model.hidden
    return full, full / sp_divisor(t, sp)


def ep_distinct_nodes_per_token(top_k: int, nodes, max_nodes=None):
    """D, the expected number of distinct nodes a token's k routed copies land on when experts are
    spread evenly over `nodes` nodes: N·(1 − (1 − 1/N)^k) for uniform routing, at most the model's
    node limit (node-limited routing: DeepSeek-V3 sends a token to at most 4 nodes, §2.1.2)."""
    N = np.maximum(np.asarray(nodes, dtype=np.float64), 1.0)
    D = N * (1.0 - (1.0 - 1.0 / N) ** top_k)
    return D if max_nodes is None else np.minimum(D, float(max_nodes))


def ep_all_to_all_time_s(hw, model, S_a2a, ep, t, dispatcher: str = "alltoall"):
    """Seconds of one EP dispatch (or combine) of S_a2a bytes per rank (k routed copies).

    alltoall (Megatron's alltoall dispatcher): every copy is its own message; across nodes each
      rank's NIC carries the (n−k_loc)/n of S that leaves its node (`collectives.group_link`).
    flex (Megatron-Core's flex dispatcher over DeepEP): a token crosses to each remote node it is
      routed to once (RDMA), and NVLink forwards it to that node's experts. Per rank, with N EP
      nodes of k_loc EP ranks each and D distinct nodes per token (`ep_distinct_nodes_per_token`):
        NIC     (S/k)·D·(N−1)/N / scale_out + (N−1)·α_out
        NVLink  S·(k_loc−1)/k_loc / scale_up + (k_loc−1)·α_up
      the two run at once: time = max(NIC, NVLink). DeepEP's kernels synchronise over NVSHMEM, not
      NCCL, so scale_up.collective_launch_us (fitted on nccl-tests all-reduces) is not added here: no
      published DeepEP latency floor is on file. Inside one domain both are the all-to-all."""
    a2a = group_collective_time_s(hw, "all_to_all", S_a2a, ep, t)
    if dispatcher == "alltoall" or hw.scale_out is None:
        return a2a
    moe = model.require_moe()
    ep, t = np.asarray(ep, dtype=np.float64), np.asarray(t, dtype=np.float64)
    domain = hw.scale_up.domain_size
    k_loc = np.clip(np.floor(domain / t), 1.0, np.maximum(ep, 1.0))
    nodes = ep / k_loc
    remote = ep_distinct_nodes_per_token(moe.top_k, nodes, moe.max_nodes_per_token) * (nodes - 1.0) / nodes
    S = np.asarray(S_a2a, dtype=np.float64)
    out_bw = hw.scale_out.bandwidth_gbps * hw.efficiency.scale_out * GB
    up_bw = scale_up_group_gbps(hw, k_loc) * GB
    nic = S / moe.top_k * remote / out_bw + (nodes - 1.0) * hw.scale_out.latency_us * US
    nvl = S * (k_loc - 1.0) / k_loc / up_bw + (k_loc - 1.0) * hw.scale_up.latency_us * US
    flex = np.maximum(nic, nvl)
    return np.where(ep * t > domain, flex, a2a)


# DeepEP's low-latency kernels (decode): one dispatch or combine call costs a fixed part and the
# bytes (`deepep_low_latency_times_s`). The fixed part is fitted once on DeepEP's published table
# (github.com/deepseek-ai/DeepEP docs/legacy.md, "Low-latency kernels with pure RDMA": H800, CX7
# 400 Gb/s InfiniBand, 128 tokens per rank, hidden 7168, top-8, FP8 dispatch, BF16 combine; EP 8-256:
# dispatch 77/118/155/173/192/194 us, combine 114/195/273/314/369/360 us): the median of the
# 12 residuals after the bytes term on h800-sxm-80gb (32-41 us, 57 and 76 us for the combine at EP
# 128/256) is 38 us: kernel launch, the IBGDA doorbells and the per-expert receive-count handshake.
# No NCCL call is involved (scale_up.collective_launch_us is not added). Measured on CX7 InfiniBand
# only: other NICs take the same constant (tests/test_cross_node.py holds the table and the errors).
DEEPEP_LL_FIXED_US = 38.0
DEEPEP_FP8_SCALE_BYTES_PER_ELEMENT = 4.0 / 128  # one fp32 scale per 128 channels of an FP8 token (DeepEP)


def deepep_low_latency_times_s(hw, S_bf16, ep, t):
    """(dispatch, combine) seconds of one DeepEP low-latency call each, S_bf16 the bf16 bytes of a
    rank's routed copies (`ep_dispatch_bytes`; dispatch sends them in FP8 with per-128 scales,
    combine returns them in bf16).

    Each copy goes straight to its expert's rank (no node-limited forwarding): of an EP group of
    n ranks with k_loc in this rank's domain, (n − k_loc)/n of the bytes leave on the rank's own
    NIC and (k_loc − 1)/n ride NVLink, at once:
      t = DEEPEP_LL_FIXED_US + max((n − k_loc)/n · S / β_out, (k_loc − 1)/n · S / β_up(k_loc))
    β_out = scale_out · eff.scale_out, β_up = `scale_up_group_gbps`. Reproduces DeepEP's table
    within 11 % at EP 8-256 (h800-sxm-80gb: 160 GB/s NVLink, 47 GB/s NIC)."""
    S = np.asarray(S_bf16, dtype=np.float64)
    ep, t = np.asarray(ep, dtype=np.float64), np.asarray(t, dtype=np.float64)
    k_loc = np.clip(np.floor(hw.scale_up.domain_size / t), 1.0, np.maximum(ep, 1.0))
    n = np.maximum(ep, 1.0)
    up_bw = scale_up_group_gbps(hw, k_loc) * GB
    out_bw = (hw.scale_out.bandwidth_gbps * hw.efficiency.scale_out if hw.scale_out is not None else 1.0) * GB
    remote, local = (n - k_loc) / n, (k_loc - 1.0) / n

    def call(nbytes):
        return np.where(
            ep > 1, DEEPEP_LL_FIXED_US * US + np.maximum(remote * nbytes / out_bw, local * nbytes / up_bw), 0.0
        )

    fp8 = S / ACT_BYTES * (1.0 + DEEPEP_FP8_SCALE_BYTES_PER_ELEMENT)
    return call(fp8), call(S)


def pp_hop_bytes(model, T, t):
    """Bytes one GPU sends across a pipeline boundary per micro-batch (training) or pass (serving)
    and direction: 2·T·h/t, each TP rank its 1/t slice of the T tokens' bf16 hidden states.

    Training: Megatron's scatter-gather optimisation (Narayanan et al. 2021 §4.1; with sequence
    parallelism the activations are sharded already). Serving: vLLM's send-allgather, the same
    split (`vllm/v1/worker/gpu_worker.py` execute_model: `get_pp_group().send_tensor_dict(
    output.tensors, all_gather_group=get_tp_group())`; `vllm/distributed/parallel_state.py`
    GroupCoordinator.send_tensor_dict: "send-allgather: send only a slice, then do allgather",
    `tensor.reshape(all_gather_size, -1)[all_gather_rank]`). The receiver's NVLink all-gather
    that rebuilds the tensor is not counted, in either schedule."""
    return ACT_BYTES * T * model.hidden / np.asarray(t, dtype=np.float64)


__all__ = [
    "ACT_BYTES",
    "P2P_PAIR",
    "ROLES",
    "CollectiveOp",
    "CUSTOM_ALL_REDUCE",
    "engine_tp_all_reduce_ops",
    "collective",
    "transfer_time_s",
    "p2p_link",
    "tp_collective_bytes",
    "cp_chunk_bytes",
    "ep_dispatch_bytes",
    "ep_distinct_nodes_per_token",
    "ep_all_to_all_time_s",
    "DEEPEP_LL_FIXED_US",
    "deepep_low_latency_times_s",
    "pp_hop_bytes",
]
