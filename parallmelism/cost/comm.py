"""Training communication per axis: bytes, link time and exposed time (Megatron-style step).

Groups in Megatron rank order (TP stride 1, CP stride t, DP stride t·c with EP inside DP×CP,
PP stride t·c·n_dp); links from `collectives.group_link`. T = (s/c)·b tokens per rank and
micro-batch, 2-byte activations, r = t with sequence parallelism.

Per layer and micro-batch (`formulas.md`, Communication volume):
  TP   no SP: 2 all-reduces of T·h forward and 2 backward (hidden under wgrad); with SP 2
       all-gathers + 2 reduce-scatters forward, and backward 2 all-gathers exposed plus 2 + 2
       hidden under the column-parallel dgrad/wgrad (`tp_layer_times_s`). Full recompute
       repeats the forward ones. With overlap_tp_comm: max(0, link − GEMM time of the layer).
  CP   ring attention: (c−1) send/recv hops of the local K and V chunk, 2·(s/c)·b·g_l·d·2 bytes,
       forward; K,V and dK,dV (2×) backward. Each hop hides under the mean ring step, 1/c of the
       attention core (one causal kernel and c−1 blocks; the causal step is the longer one, the
       blocks the shorter, not told apart here): exposed = (c−1)·max(0, hop − core/c). Or (workload.cp_comm_type=all_gather) K,V of the
       whole sequence all-gathered forward and backward, dK,dV reduce-scattered, all exposed. Or
       (cp_comm_type=a2a, Ulysses) all-to-alls of the rank's Q,K,V and output (forward) and their
       gradients (backward), exposed.
  EP   dispatch + combine all-to-all of (T/r)·k·load·h·2 bytes (busiest rank) forward and
       backward, not overlapped (they sit between the router and the experts); with SP an
       all-gather over TP after dispatch and a reduce-scatter before combine (`ep_layer_time_s`),
       counted on the TP axis. With the flex dispatcher (DeepEP, `ep_all_to_all_time_s`) a token
       crosses to each remote node once and NVLink fans it out to the experts there.
Per step:
  DP   dense parameters over the DP×CP group, experts over the expert-DP group (dp·c/e, stride
       t·e); gradients reduced in fp32 (Megatron main grads, 4 B), parameters gathered in bf16:
       NO_OP all-reduce(4P); OPTIMIZER_STATES(_AND_GRADS) reduce-scatter(4P) + all-gather(2P);
       FULLY_SHARD all-gather(2P) per micro-batch in forward and again in backward (and in the
       full-recompute forward), reduce-scatter(4P). The reduction runs once per step, or once per
       micro-batch where the gradients are sharded (OPTIMIZER_STATES_AND_GRADS, FULLY_SHARD;
       `states.reduces_every_micro_batch`, workload.dp_grad_reduce). Calls: buckets of
       max(40e6, 1e6·dp) parameters (Megatron-Core default, `workload.dp_bucket_params`) for the
       reduce and the ZeRO gather; one FSDP call per layer (unit) and pass; latency once per call.
       Hybrid sharding (workload.dp_shard_size): all of this inside shard groups, then the
       shards all-reduced across replicas (`hsdp_replica_reduce_s`). With overlap_dp_comm the
       reduce hides under the backward of the micro-batch(es) that issue it, the ZeRO all-gather
       under the first forward and the FSDP gathers under the whole compute: exposed =
       max(0, link − window).
  PP   send/recv of T·h·2/t per GPU per micro-batch per boundary, both directions: each TP rank
       sends its 1/t slice (sequence-parallel activations are sharded already; without SP
       Megatron's scatter-gather, Narayanan et al. 2021 §4.1, and DeepSpeed's partitioned pipe
       sends do the same and rebuild the tensor with an NVLink all-gather, not counted). The fill and drain
       chain crosses p−1 boundaries per chunk (×v interleaved): 2·(p−1)·v hops on other stages'
       links, counted in the bubble. With overlap_pp_comm (asynchronous P2P: Megatron-Core's
       overlap_p2p_comm, Llama 3) this stage's own steady-state transfers overlap compute; without
       it (blocking send/recv: Megatron-LM's 1F1B before 2023, DeepSpeed's pipeline engine) all
       of its 2·m·v transfers wait on the wire: exposed = link.
"""

from __future__ import annotations

import numpy as np

from .collective_ops import (
    ACT_BYTES,
    P2P_PAIR,
    CollectiveOp,
    collective,
    cp_chunk_bytes,
    ep_all_to_all_time_s,
    ep_dispatch_bytes,
    ep_distinct_nodes_per_token,
    p2p_link,
    pp_hop_bytes,
    tp_collective_bytes,
)
from .collectives import group_link
from .states import FS, GRAD_BYTES, NO_OP, WORKING_WEIGHT_BYTES
from .shapes import dense_dp_size, expert_dp_size, tokens_per_rank


# Collective calls per layer and micro-batch: the one place the schedule's counts live. The time
# model multiplies link times by them, and `show` (cost/breakdown.py) prints them.
EP_CALLS_PER_MOE_LAYER_FORWARD = 2  # the dispatch and the combine all-to-all
TP_COLLECTIVES_PER_LAYER_FORWARD = 2.0  # after attention's output projection and after the MLP (Megatron f/g)
TORCH_DKV_BYTES_PER_KV_BYTE = 2.0  # torch's ring passes dK,dV in fp32 (its accumulators): twice the bf16 K,V
CP_CHUNKS_PER_BACKWARD_HOP = 2.0  # a p2p ring's backward hop: the K,V chunk and the dK,dV accumulated so far
A2A_CALLS_PER_PASS = 2.0  # Ulysses CP (cp_comm_type a2a): Q,K,V in and the output back (forward; gradients backward)
# The column-parallel GEMMs' backward is a dgrad and a wgrad GEMM of equal FLOPs (2·T·k·n each):
# without SP the input-gradient all-reduce hides under the wgrad half (`tp_layer_times_s`)
WGRAD_SHARE_OF_BACKWARD = 0.5


def forward_passes(full_recompute):
    """Passes over a layer per micro-batch that issue its collectives: forward and backward (2),
    and the forward again under full recompute (3)."""
    return np.where(full_recompute, 3.0, 2.0)


def fsdp_gather_passes(full_recompute, wl):
    """FULLY_SHARD parameter gathers per unit per micro-batch: one per pass over the layer
    (`forward_passes`), but one for the whole micro-batch without reshard_after_forward (the forward's
    gather serves backward and recompute), and two under full recompute where the stack's recompute
    forward reuses the backward's gather (workload.fsdp_recompute_regather false: Megatron-FSDP,
    megatron_fsdp.py "gather parameters once for both the recomputation and backward computation").
    A workload not resolved under a stack (None) regathers."""
    if not wl.fsdp_reshard_after_forward:
        return 1.0
    regather = wl.fsdp_recompute_regather is not False
    return forward_passes(np.asarray(full_recompute, dtype=bool) & regather)


def tp_layer_calls(sp, full_recompute) -> dict[str, tuple]:
    """TP collectives per layer and micro-batch by kind: {kind: (forward, backward exposed,
    backward hidden)} (Megatron-LM schedule, `tp_layer_times_s`). Without SP 2 all-reduces forward
    (again under full recompute) and 2 hidden backward; with SP 2 all-gathers + 2 reduce-scatters
    forward (again under full recompute), 2 all-gathers exposed backward and 2 + 2 hidden."""
    sp = np.asarray(sp, dtype=bool)
    rerun = np.where(full_recompute, 2.0, 1.0)
    no_sp = np.where(sp, 0.0, TP_COLLECTIVES_PER_LAYER_FORWARD)
    with_sp = np.where(sp, TP_COLLECTIVES_PER_LAYER_FORWARD, 0.0)
    return {
        "all_reduce": (no_sp * rerun, 0.0 * no_sp, no_sp),
        "all_gather": (with_sp * rerun, with_sp, with_sp),
        "reduce_scatter": (with_sp * rerun, 0.0 * with_sp, with_sp),
    }


def cp_layer_transfers(cp, forward_rerun, comm_type="p2p"):
    """(forward, backward) CP transfers per layer and micro-batch (`cp_layer_times_s`).

    p2p: c − 1 K,V hops forward, repeated when the attention forward reruns (full or selective
    recompute), and 2(c − 1) chunk transfers backward (K,V then dK,dV): 3(c − 1), or 4(c − 1)
    under recompute. all_gather: one all-gather forward (two under recompute), one all-gather
    and one reduce-scatter backward. a2a: two all-to-alls forward (Q,K,V in, the output back; again
    under recompute), two backward (the output gradient in, dQ,dK,dV back)."""
    rc = np.where(forward_rerun, 1.0, 0.0)
    if comm_type == "all_gather":
        return 1.0 + rc, 2.0 + 0.0 * rc
    if comm_type == "a2a":
        return A2A_CALLS_PER_PASS * (1.0 + rc), A2A_CALLS_PER_PASS + 0.0 * rc
    hops = np.maximum(np.asarray(cp, dtype=np.float64) - 1.0, 0.0)
    return hops * (1 + rc), hops * CP_CHUNKS_PER_BACKWARD_HOP


def ep_layer_calls(full_recompute):
    """EP all-to-alls per MoE layer and micro-batch: dispatch + combine in every pass
    (`forward_passes`), 4, or 6 under full recompute."""
    return EP_CALLS_PER_MOE_LAYER_FORWARD * forward_passes(full_recompute)


def tp_layer_ops(hw, model, T, t, calls) -> list[CollectiveOp]:
    """The TP collectives of one layer and micro-batch, {kind: calls} (training: the forward,
    backward exposed and backward hidden calls of `tp_layer_calls` together; serving: its
    forward), each of S = 2·T·h over the t ranks, stride 1."""
    S = tp_collective_bytes(model, T)
    return [collective(hw, "tp", "tp", kind, S, t, 1, c) for kind, c in calls.items()]


def tp_layer_times_s(hw, model, T, t, sp, full_recompute, colpar_bwd, gemm_time, overlap_all: bool):
    """(link, exposed) seconds of one layer's TP collectives for one micro-batch.

    Megatron-LM's schedule (Korthikanti et al. 2022, section 4.2.2; `tensor_parallel/layers.py`):
      no SP  forward 2 all-reduces (exposed); backward 2 all-reduces of the column-parallel
             layers' input gradient, launched async and hidden under their weight-gradient GEMM.
      SP     forward 2 all-gathers + 2 reduce-scatters (exposed); backward 2 all-gathers of the
             row-parallel layers' output gradient (exposed), 2 all-gathers re-building the
             column-parallel input (hidden under dgrad) and 2 reduce-scatters of its input
             gradient (hidden under wgrad).
    Full recompute repeats the forward collectives. `colpar_bwd` is the backward time of the
    column-parallel GEMMs (QKV, fc1/gate_up): the window for the hidden ones (wgrad = half of it
    for the all-reduce). overlap_all (Megatron-Core tp_comm_overlap): every collective hides
    under the layer's GEMMs, exposed = max(0, link − GEMM time).
    """
    calls = tp_layer_calls(sp, full_recompute)
    ops = tp_layer_ops(hw, model, T, t, {kind: c[0] + c[1] + c[2] for kind, c in calls.items()})
    one = {op.kind: op.time_s for op in ops}
    fwd, bwd_exposed, bwd_hidden = (sum(calls[kind][i] * one[kind] for kind in calls) for i in range(3))
    window = np.where(sp, colpar_bwd, WGRAD_SHARE_OF_BACKWARD * colpar_bwd)
    link = fwd + bwd_exposed + bwd_hidden
    if overlap_all:
        return link, np.maximum(0.0, link - gemm_time)
    return link, fwd + bwd_exposed + np.maximum(0.0, bwd_hidden - window)


def tp_layer_nic_s(hw, model, T, t, sp, full_recompute):
    """Seconds of one layer's TP collectives (`tp_layer_times_s`'s link seconds) on the NIC for one
    micro-batch: Σ calls · `CollectiveOp.nic_s` (all of a call whose group leaves the domain, the
    inter-node phase of a hierarchical all-reduce; 0 inside it)."""
    calls = tp_layer_calls(sp, full_recompute)
    ops = tp_layer_ops(hw, model, T, t, {kind: c[0] + c[1] + c[2] for kind, c in calls.items()})
    return sum(op.calls * op.nic_s(hw) for op in ops)


def torch_cp_chunk_bytes(model, s, b, t, cp):
    """K and V of one CP chunk as torch's ring passes them under torchtitan: bf16, repeated to every
    query head before SDPA (torchtitan's Llama repeat_kv), 2·(s/cp)·b·q/t·2 B."""
    return tokens_per_rank(s, b, cp) * 2.0 * model.q_dim / np.asarray(t, dtype=np.float64) * ACT_BYTES


def torch_cp_layer_ops(hw, model, s, b, t, cp, forward_rerun, comm_type) -> list[CollectiveOp]:
    """torch's ring (`cp_layer_times_s`, implementation torch): [K,V transfers, dK,dV hops]. The
    all-gather rotater (comm_type all_gather) gathers the whole sequence's K,V once per attention
    forward (again under recompute) and once in backward; the all-to-all rotater (p2p) passes the
    chunk c − 1 times in each. Backward sends the fp32 dK,dV accumulators on around the ring, c hops
    (the last one home), each twice the chunk's bytes."""
    rc = np.where(forward_rerun, 1.0, 0.0)
    c = np.asarray(cp, dtype=np.float64)
    chunk = torch_cp_chunk_bytes(model, s, b, t, cp)
    if comm_type == "all_gather":
        kv = collective(hw, "cp", "cp", "all_gather", chunk * c, cp, t, 2.0 + rc)
    else:
        hops = np.maximum(c - 1.0, 0.0)
        kv = collective(hw, "cp", "cp", "send_recv", chunk, cp, t, hops * (2.0 + rc))
    dkv = collective(hw, "cp", "cp", "send_recv", TORCH_DKV_BYTES_PER_KV_BYTE * chunk, cp, t, c + 0.0 * rc)
    return [kv, dkv]


def cp_layer_ops(
    hw, model, s, b, t, cp, forward_rerun, comm_type="p2p", implementation="transformer_engine"
) -> list[CollectiveOp]:
    """The CP transfers of one layer and micro-batch (`cp_layer_transfers` calls): p2p, the ring's
    K,V chunk hops (send/recv over the cp-rank ring, stride t); all_gather, the whole sequence's
    K,V all-gathered (forward, again under recompute, and backward) and dK,dV reduce-scattered;
    torch's ring (`implementation` torch, not a2a): `torch_cp_layer_ops`."""
    if implementation == "torch" and comm_type != "a2a":
        return torch_cp_layer_ops(hw, model, s, b, t, cp, forward_rerun, comm_type)
    fwd, bwd = cp_layer_transfers(cp, forward_rerun, comm_type)
    chunk = cp_chunk_bytes(model, s, b, t, cp)
    if comm_type == "a2a":  # per rank: its tokens' Q,K,V (then dQ,dK,dV) and its output (then dO)
        out = tokens_per_rank(s, b, cp) * model.q_dim / np.asarray(t, dtype=np.float64) * ACT_BYTES
        per_kind = fwd / A2A_CALLS_PER_PASS + bwd / A2A_CALLS_PER_PASS
        return [
            collective(hw, "cp", "cp", "all_to_all", chunk + out, cp, t, per_kind),
            collective(hw, "cp", "cp", "all_to_all", out, cp, t, per_kind),
        ]
    if comm_type == "all_gather":
        full_kv = chunk * np.asarray(cp, dtype=np.float64)
        return [
            collective(hw, "cp", "cp", "all_gather", full_kv, cp, t, fwd + 1.0),
            collective(hw, "cp", "cp", "reduce_scatter", full_kv, cp, t, 1.0 + 0.0 * fwd),
        ]
    return [collective(hw, "cp", "cp", "send_recv", chunk, cp, t, fwd + bwd)]


def cp_layer_times_s(
    hw, model, s, b, t, cp, core_fwd, core_bwd, forward_rerun, comm_type="p2p", implementation="transformer_engine"
):
    """(link, exposed) seconds of one layer's CP communication for one micro-batch.

    core_fwd, core_bwd: (attention core seconds, its first ring step's seconds) of one micro-batch
    (cost.roofline.ring_steps_s); forward_rerun: the attention core's forward runs again in
    backward (full or selective recompute: Megatron checkpoints the core attention, and Transformer
    Engine's CP communication is inside it, so its forward communication repeats).

    p2p (Megatron --cp-comm-type p2p, Transformer Engine's ring, AttnFuncWithCPAndKVP2P), c − 1
    hops of the local K,V chunk each way, every send started just before a step computes, so it
    hides under that step (per hop exposed = max(0, hop − its step)):
      forward   step i computes while the K,V of step i+1 is in flight: hop 1 under step 0 (the
                causal kernel of the rank's own tokens), hops 2..c−1 under one block each; the last
                step sends nothing.
      backward  steps run in reverse (blocks first, the causal step last); step 0 sends K,V, steps
                1..c−2 send K,V with the dK,dV accumulated so far (2 chunks), step c−1 sends the
                dK,dV home (under the causal step): 2(c−1) chunks in all.
    all_gather (--cp-comm-type all_gather; Llama 3 §3.3.2): the K,V of the whole sequence,
    cp·chunk bytes, all-gathered over the CP group before the attention forward, gathered again
    for backward and dK,dV reduce-scattered after it; "the all-gather communication latency is
    exposed in the critical path" (Llama 3), so exposed = link.
    a2a (--cp-comm-type a2a; DeepSpeed-Ulysses, Jacobs et al. 2023): all-to-alls over the CP group
    turn the rank's s/c tokens of every head into all s tokens of 1/c of the heads before the
    attention kernel and back after it: the Q,K,V and the output forward (again under recompute),
    the output gradient and dQ,dK,dV backward; the attention waits on them, so exposed = link.
    torch (implementation torch: torch.distributed.tensor.experimental._attention, torch 2.5-2.6,
    `torch_cp_layer_ops`): each step's K,V is waited for after the previous step's kernel was
    launched, so the all-gather hides under step 0 (the causal kernel, forward and backward) and the
    all-to-all rotater's hops as p2p's forward hops do, in backward too; each dK,dV hop is sent after
    its step's accumulation and waited for after the next step's kernel, hiding under a block, and the
    last one, home after the loop, is exposed."""
    rc = np.where(forward_rerun, 1.0, 0.0)
    if implementation == "torch" and comm_type != "a2a":
        return _torch_cp_times_s(hw, model, s, b, t, cp, core_fwd, core_bwd, forward_rerun, comm_type)
    ops = cp_layer_ops(hw, model, s, b, t, cp, forward_rerun, comm_type)
    if comm_type == "a2a":
        qkv, out = (op.time_s for op in ops)
        link = (qkv + out) * (1.0 + rc) + (qkv + out)
        return link, link
    if comm_type == "all_gather":
        ag, rs = (op.time_s for op in ops)
        link = ag * (1 + rc) + ag + rs
        return link, link
    hop = ops[0].time_s
    hops = np.maximum(np.asarray(cp, dtype=np.float64) - 1.0, 0.0)
    n_fwd, n_bwd = cp_layer_transfers(cp, forward_rerun)
    causal_f, block_f = ring_step_windows_s(core_fwd[0], core_fwd[1], hops)
    causal_b, block_b = ring_step_windows_s(core_bwd[0], core_bwd[1], hops)
    ring = hops > 0
    middle = np.maximum(hops - 1.0, 0.0)  # c − 2: forward hops 2..c−1, backward steps 1..c−2
    fwd_exp = np.where(ring, np.maximum(0.0, hop - causal_f) + middle * np.maximum(0.0, hop - block_f), 0.0)
    bwd_exp = np.where(
        ring,
        np.maximum(0.0, hop - block_b)
        + middle * np.maximum(0.0, CP_CHUNKS_PER_BACKWARD_HOP * hop - block_b)
        + np.maximum(0.0, hop - causal_b),
        0.0,
    )
    return (n_fwd * hop + n_bwd * hop, fwd_exp * (1 + rc) + bwd_exp)


def _torch_cp_times_s(hw, model, s, b, t, cp, core_fwd, core_bwd, forward_rerun, comm_type):
    """(link, exposed) of torch's ring (`cp_layer_times_s`, torch)."""
    rc = np.where(forward_rerun, 1.0, 0.0)
    kv_op, dkv_op = torch_cp_layer_ops(hw, model, s, b, t, cp, forward_rerun, comm_type)
    kv, dkv = kv_op.time_s, dkv_op.time_s
    c = np.asarray(cp, dtype=np.float64)
    hops = np.maximum(c - 1.0, 0.0)
    causal_f, block_f = ring_step_windows_s(core_fwd[0], core_fwd[1], hops)
    causal_b, block_b = ring_step_windows_s(core_bwd[0], core_bwd[1], hops)
    middle = np.maximum(hops - 1.0, 0.0)
    if comm_type == "all_gather":
        link_kv = kv * (2.0 + rc)
        fwd_exp, bwd_exp = np.maximum(0.0, kv - causal_f), np.maximum(0.0, kv - causal_b)
    else:
        link_kv = hops * kv * (2.0 + rc)
        fwd_exp = np.maximum(0.0, kv - causal_f) + middle * np.maximum(0.0, kv - block_f)
        bwd_exp = np.maximum(0.0, kv - causal_b) + middle * np.maximum(0.0, kv - block_b)
    ring = hops > 0
    exposed = fwd_exp * (1.0 + rc) + bwd_exp + hops * np.maximum(0.0, dkv - block_b) + dkv
    return np.where(ring, link_kv + c * dkv, 0.0), np.where(ring, exposed, 0.0)


def ring_step_windows_s(core_s, causal_step_s, hops):
    """(causal step, each block step) seconds of a p2p ring's attention (cost.roofline.ring_steps_s):
    the blocks share what the causal step leaves of core_s, one per hop."""
    later = (np.asarray(core_s) - np.asarray(causal_step_s)) / np.maximum(np.asarray(hops, dtype=np.float64), 1.0)
    return np.asarray(causal_step_s), later


def ep_layer_time_s(
    hw, model, T, t, ep, moe_imbalance, full_recompute, sp=False, dispatcher: str = "alltoall", etp=None
):
    """(EP link, expert-TP link) seconds of one MoE layer's token dispatch + combine, one
    micro-batch; both exposed (they sit between the router and the experts).

    Megatron's alltoall dispatcher (`moe/token_dispatcher.py`): with sequence parallelism each TP
    rank routes its own T/t tokens, so the EP all-to-all carries (T/t)·k·load·h·2 bytes per rank,
    and an all-gather over the expert-TP group (output etp times that) hands every expert-TP rank
    the tokens of its experts; combine mirrors it (reduce-scatter, then the all-to-all). Expert TP
    etp = t (None) unless folded (workload.expert_tp): then the EP group is ep ranks etp apart
    (Megatron-Core's expert grid, order tp-ep-dp) and etp = 1 has no gather. Without SP every TP
    rank holds all T tokens and dispatches them (no TP step; the grid refuses folding there).
    Forward dispatch + combine, the same in backward, again in a full-recompute forward.
    dispatcher: `ep_all_to_all_time_s`."""
    sp = np.asarray(sp, dtype=bool)
    a2a, ag, rs = ep_layer_ops(hw, model, T, t, ep, moe_imbalance, full_recompute, sp, dispatcher, etp)
    return a2a.link_s, (ag.time_s + rs.time_s) * ag.calls


def ep_layer_ops(
    hw, model, T, t, ep, moe_imbalance, full_recompute, sp=False, dispatcher: str = "alltoall", etp=None
) -> list[CollectiveOp]:
    """The EP all-to-all (dispatch + combine, `ep_layer_calls`) of one MoE layer and micro-batch,
    and under sequence parallelism the expert-TP all-gather after the dispatch and reduce-scatter
    before the combine (role "tp moe", one each per pass; `ep_layer_time_s`); etp: expert TP
    (None: t)."""
    t = np.asarray(t, dtype=np.float64)
    sp = np.asarray(sp, dtype=bool)
    S_full, S_a2a = ep_dispatch_bytes(model, T, t, sp, moe_imbalance)
    if etp is None:
        e_tp, S_gather = t, S_full
    else:  # the etp ranks' dispatched shards gathered: etp · S_a2a (S_full where etp = t)
        e_tp = np.asarray(etp, dtype=np.float64)
        S_gather = np.where(e_tp == t, S_full, S_a2a * e_tp)
    a2a = ep_all_to_all_time_s(hw, model, S_a2a, ep, e_tp, dispatcher)
    gathers = sp if etp is None else sp | (t == 1)  # tp = 1: each rank routes all T tokens, etp gather them
    passes = np.where(gathers, forward_passes(full_recompute), 0.0)
    return [
        collective(hw, "ep", "ep", "all_to_all", S_a2a, ep, e_tp, ep_layer_calls(full_recompute), time_s=a2a),
        collective(hw, "tp", "tp moe", "all_gather", S_gather, e_tp, 1, passes),
        collective(hw, "tp", "tp moe", "reduce_scatter", S_gather, e_tp, 1, passes),
    ]


MEGATRON_BUCKET_MIN_PARAMS = 40_000_000  # Megatron-Core DistributedDataParallelConfig.bucket_size default:
MEGATRON_BUCKET_PARAMS_PER_RANK = 1_000_000  # max(40e6, 1e6·dp_size) parameters


def dp_bucket_params(bucket_params, group_size):
    """Parameters per gradient bucket: the workload's value, or Megatron-Core's default
    max(40e6, 1e6·dp_size) ("larger DP sizes need larger buckets" so the collectives stay
    bandwidth-bound; `distributed_data_parallel_config.py`)."""
    n = np.asarray(group_size, dtype=np.float64)
    if bucket_params is None:
        return np.maximum(MEGATRON_BUCKET_MIN_PARAMS, MEGATRON_BUCKET_PARAMS_PER_RANK * n)
    return np.full(n.shape, float(bucket_params))


def chunked_collective(hw, axis, role, kind, nbytes, size, stride, calls, scope="step") -> CollectiveOp:
    """`calls` calls (at least 1) of nbytes/calls each over one group: the bandwidth term once, the
    latency term (ring (n−1)·α per step, tree log n) once per call."""
    calls = np.maximum(np.asarray(calls, dtype=np.float64), 1.0)
    S = np.asarray(nbytes, dtype=np.float64) / calls
    return collective(hw, axis, role, kind, S, size, stride, calls, scope)


def dp_reduce_calls(P, n, sharding, fsdp_units, bucket_params):
    """(buckets, reduce calls) of P parameters reduced over an n-rank group: Megatron-Core buckets
    of `dp_bucket_params(bucket_params, n)` parameters, or one call per FSDP unit (FULLY_SHARD)."""
    buckets = np.ceil(np.asarray(P, dtype=np.float64) / dp_bucket_params(bucket_params, n))
    return buckets, np.where(np.asarray(sharding) == FS, fsdp_units, buckets)


def _over_dp_groups(one, dense_params, expert_params, n_dense, n_exp, tp, ep, etp=None):
    """one(P, n, stride) over the dense parameters' DP group (n_dense ranks, stride tp) plus the
    expert parameters' (n_exp ranks, stride etp·ep: Megatron-Core's expert grid, order
    tp-ep-dp, expert TP etp = tp unless folded), term by term for a tuple; a dense model's
    expert terms are 0 (x + 0 == x) and not computed."""
    dense = one(dense_params, n_dense, tp)
    if not np.any(expert_params):
        return dense
    experts = one(expert_params, n_exp, (tp if etp is None else etp) * ep)
    if isinstance(dense, tuple):
        return tuple(x + y for x, y in zip(dense, experts))
    return dense + experts


# dp_group_ops' records, in the order dp_step_times_s takes them
DP_OPS = ("all_reduce", "reduce_scatter", "zero_gather", "fsdp_gather")


def dp_group_ops(
    hw, P, n, stride, sharding, fsdp_units, bucket_params, grad_bytes, param_bytes
) -> dict[str, CollectiveOp]:
    """The DP collectives of P parameters over one n-rank group `stride` ranks apart
    (`dp_step_times_s`), each in its calls (`dp_reduce_calls`): the gradient all-reduce (no
    sharding) or reduce-scatter, calls per reduction; the distributed optimizer's parameter
    all-gather, calls per step; the FSDP gather, one call per unit and pass. The caller picks the
    ones its sharding issues."""
    buckets, reduce_calls = dp_reduce_calls(P, n, sharding, fsdp_units, bucket_params)
    G, W = grad_bytes * P, param_bytes * P
    return {
        "all_reduce": chunked_collective(hw, "dp", "dp grad reduce", "all_reduce", G, n, stride, reduce_calls),
        "reduce_scatter": chunked_collective(hw, "dp", "dp grad reduce", "reduce_scatter", G, n, stride, reduce_calls),
        "zero_gather": chunked_collective(hw, "dp", "dp param gather", "all_gather", W, n, stride, buckets),
        "fsdp_gather": chunked_collective(hw, "dp", "fsdp param gather", "all_gather", W, n, stride, fsdp_units),
    }


def hsdp_replica_op(hw, P, n_shard, stride, replicas, sharding, fsdp_units, grad_bytes, bucket_params) -> CollectiveOp:
    """Hybrid sharding's all-reduce of each rank's 1/n_shard gradient shard across `replicas`
    ranks `stride`·n_shard apart, in as many calls as the shard group's reduce-scatter
    (`hsdp_replica_reduce_s`), calls per reduction."""
    P = np.asarray(P, dtype=np.float64)
    _, calls = dp_reduce_calls(P, n_shard, sharding, fsdp_units, bucket_params)  # as the shard's reduce-scatter
    shard_bytes = grad_bytes * P / n_shard
    return chunked_collective(
        hw, "dp", "hsdp replica reduce", "all_reduce", shard_bytes, replicas, stride * n_shard, calls
    )


def dp_step_times_s(
    hw,
    dense_params,
    expert_params,
    sharding,
    tp,
    cp,
    dp,
    ep,
    m,
    full_recompute,
    fsdp_units=1.0,
    bucket_params=None,
    gather_passes=None,
    grad_bytes=GRAD_BYTES["fp32"],
    param_bytes=WORKING_WEIGHT_BYTES,
    etp=None,
):
    """Per-step DP link seconds by role: (reduce, zero_gather, fsdp_gather) over dense + expert groups.

    Calls counted as the frameworks issue them: gradient reduce (and the distributed optimizer's
    parameter all-gather) in buckets of `dp_bucket_params` parameters (Megatron-Core DDP);
    FULLY_SHARD gathers each of the stage's `fsdp_units` (layers, embedding, head: FSDP2 /
    Megatron FSDP wrap one layer per unit) once per micro-batch forward, again in backward (and
    in a full-recompute forward), and reduce-scatters each unit's gradient once per reduction
    (the caller multiplies by the reductions per step: `states.reduces_every_micro_batch`).
    gather_passes: FULLY_SHARD gathers per unit and micro-batch as the stack issues them
    (`fsdp_gather_passes`); None: one per pass (`forward_passes`). grad_bytes: bytes per gradient element reduced (4 fp32 main
    grads, 2 with grad_reduce_dtype=bf16 or fp16); param_bytes: bytes per parameter gathered (2 bf16,
    1 with fp8 parameters: `states.param_gather_bytes`); etp: expert TP (None: tp), whose
    expert-DP group is tp·dp·cp/(etp·ep) ranks (`shapes.expert_dp_size`)."""
    sharding = np.asarray(sharding)
    n_dense = dense_dp_size(dp, cp)
    n_exp = expert_dp_size(dp, cp, ep) if etp is None else expert_dp_size(dp, cp, ep, tp, etp)

    def one(P, n, stride):
        ops = dp_group_ops(hw, P, n, stride, sharding, fsdp_units, bucket_params, grad_bytes, param_bytes)
        ar, rs, ag_zero, ag_fsdp = (np.where(ops[k].nbytes > 0, ops[k].link_s, 0.0) for k in DP_OPS)
        reduce = np.where(sharding == NO_OP, ar, rs)
        zero_gather = np.where((sharding != NO_OP) & (sharding != FS), ag_zero, 0.0)
        passes = forward_passes(full_recompute) if gather_passes is None else gather_passes
        fsdp = np.where(sharding == FS, ag_fsdp * m * passes, 0.0)
        return reduce, zero_gather, fsdp

    return _over_dp_groups(one, dense_params, expert_params, n_dense, n_exp, tp, ep, etp)


def hsdp_replica_reduce_s(
    hw,
    dense_params,
    expert_params,
    sharding,
    tp,
    cp,
    dp,
    dp_shard,
    ep,
    fsdp_units=1.0,
    grad_bytes=GRAD_BYTES["fp32"],
    bucket_params=None,
    etp=None,
):
    """Per gradient reduction, seconds of hybrid sharding's all-reduce across replicas (HSDP:
    torchtitan / FSDP2 with a replicate dimension, FSDP HYBRID_SHARD, Megatron's distributed
    optimizer instances): after the reduce-scatter inside a shard group of dp_shard·cp ranks, each
    rank all-reduces its 1/(dp_shard·cp) gradient shard with the dp/dp_shard ranks that hold the
    same shard (stride t·cp·dp_shard), in as many calls as the shard group's reduce-scatter (one per
    FSDP unit, or per Megatron bucket). Zero
    where nothing is replicated (dp_shard = dp) and for NO_OP (its all-reduce spans all dp)."""
    sharding = np.asarray(sharding)
    dp, dp_shard = np.asarray(dp, dtype=np.float64), np.asarray(dp_shard, dtype=np.float64)
    replicas = np.where(sharding == NO_OP, 1.0, dp / dp_shard)

    def one(P, n_shard, stride):
        op = hsdp_replica_op(hw, P, n_shard, stride, replicas, sharding, fsdp_units, grad_bytes, bucket_params)
        return np.where(op.nbytes > 0, op.link_s, 0.0)

    n_dense = dense_dp_size(dp_shard, cp)
    n_exp = expert_dp_size(dp_shard, cp, ep) if etp is None else expert_dp_size(dp_shard, cp, ep, tp, etp)
    return _over_dp_groups(one, dense_params, expert_params, n_dense, n_exp, np.asarray(tp, dtype=np.float64), ep, etp)


def pp_hop_s(hw, model, T, tp, stride, pp):
    """Seconds of one send/recv of S = `pp_hop_bytes` to the neighbour stage, `stride` ranks away
    (training t·cp·dp, serving t·sp·dp: Megatron rank order, PP slowest); 0 without a pipeline.
    One function for both schedules, so a hop of the same tokens and layout costs the same."""
    return pp_hop_op(hw, model, T, tp, stride, pp).time_s


def pp_hop_op(hw, model, T, tp, stride, pp, calls=1.0, scope="stage") -> CollectiveOp:
    """One pipeline boundary's send/recv (`pp_hop_s`): a chain of 2 stages `stride` ranks apart,
    none (group 1, 0 s) without a pipeline."""
    group = np.where(np.asarray(pp) > 1, P2P_PAIR, 1.0)
    return collective(hw, "pp", "pp hop", "send_recv", pp_hop_bytes(model, T, tp), group, stride, calls, scope)


__all__ = [
    "EP_CALLS_PER_MOE_LAYER_FORWARD",
    "forward_passes",
    "fsdp_gather_passes",
    "tp_layer_calls",
    "cp_layer_transfers",
    "ep_layer_calls",
    "p2p_link",
    "tp_layer_times_s",
    "tp_layer_nic_s",
    "cp_layer_times_s",
    "ring_step_windows_s",
    "ep_layer_time_s",
    "ep_all_to_all_time_s",
    "ep_distinct_nodes_per_token",
    "dp_step_times_s",
    "hsdp_replica_reduce_s",
    "pp_hop_s",
    "pp_hop_op",
    "pp_hop_bytes",
    "tp_layer_ops",
    "cp_layer_ops",
    "ep_layer_ops",
    "chunked_collective",
    "dp_group_ops",
    "hsdp_replica_op",
    "DP_OPS",
    "ACT_BYTES",
    "CollectiveOp",
    "tp_collective_bytes",
    "cp_chunk_bytes",
    "ep_dispatch_bytes",
    "group_link",
]
