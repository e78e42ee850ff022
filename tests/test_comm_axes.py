"""Per-axis training communication against the frameworks' schedules (Megatron-LM alltoall MoE
dispatcher, pipeline P2P) and the exposed <= link invariant."""

import pytest

from parallmelism.config import load_option
from parallmelism.cost.collectives import collective_time_s
from parallmelism.cost.comm import ep_layer_time_s

H100 = load_option("hardware", "h100-sxm-80gb")
GROK = load_option("model", "grok-1")
LAUNCH_US = H100.scale_up.collective_launch_us  # once per collective call (cost/collectives.py)
# A group with one rank per node runs each of NCCL's protocols over its NICs (cost/collectives.py, Protocols): (launch
# us, NET step us, bandwidth fraction) of LL (the base), LL128 and Simple (tuning.cc hwLatencies[NET][Ring]), H100 file
NIC_PROTOCOLS = ((LAUNCH_US, 5.0, 0.5), (14.0, 4.0, 0.92), (8.4, 14.0, 1.0))


def _over_nics(kind, nbytes, n, algorithms, bw=50 * 0.94):
    """Seconds of one call over n ranks one node apart, as NCCL's tuner takes it: the fastest algorithm in the
    fastest protocol (every step crosses a NIC)."""
    return min(
        collective_time_s(kind, nbytes, n, bw * frac, step, alg, launch_us=launch)
        for launch, step, frac in NIC_PROTOCOLS
        for alg in algorithms
    )


def test_alltoall_dispatch_sends_the_sequence_parallel_shard():
    # Grok-1, s = 8192, b = 1, tp 4 with SP, ep 8: each TP rank routes its s/tp = 2048 tokens,
    # top-2, h = 6144, bf16: 2048·2·6144·2 B per rank over EP. EP ranks are tp = 4 apart, so the
    # 8-rank group spans 32 GPUs: 2 members per 8-GPU node, each on its own NDR NIC (47 GB/s);
    # all-to-all over NICs moves (n-k)/n of the buffer: bandwidth 47·7/6 per rank.
    s, t, e, h, k = 8192, 4, 8, 6144, 2
    a2a_bytes = (s / t) * k * h * 2
    bw = 50 * 0.94 * (e - 1) / (e - 2)
    a2a = collective_time_s("all_to_all", a2a_bytes, e, bw, 5.0, launch_us=LAUNCH_US)
    # then an all-gather over TP of all s·k routed tokens (NVLink, 360 GB/s), a reduce-scatter before combine;
    # 201 MB run in NCCL's Simple protocol (8.4 us + 3.4 us per step at the whole 360 GB/s; hardware file)
    simple = H100.scale_up.protocols
    tp_ag = collective_time_s(
        "all_gather", s * k * h * 2, t, 360.0, simple.simple_step_us, launch_us=simple.simple_launch_us
    )
    ep_link, tp_link = ep_layer_time_s(H100, GROK, float(s), float(t), float(e), 1.0, False, True)
    assert float(ep_link) == pytest.approx(2 * 2 * a2a, rel=1e-9)  # dispatch + combine, fwd + bwd
    assert float(tp_link) == pytest.approx(2 * 2 * tp_ag, rel=1e-9)
    # without SP every TP rank dispatches all s tokens: tp times the bytes
    ep_nosp, tp_nosp = ep_layer_time_s(H100, GROK, float(s), float(t), float(e), 1.0, False, False)
    assert float(ep_nosp) == pytest.approx(
        2 * 2 * collective_time_s("all_to_all", s * k * h * 2, e, bw, 5.0, launch_us=LAUNCH_US)
    )
    assert float(tp_nosp) == 0.0


def test_dp_gradient_reduce_is_issued_in_megatron_buckets():
    """8e9 parameters over a 1024-rank DP group one NIC per rank (stride 8): Megatron-Core's
    bucket max(40e6, 1e6·1024) = 1.024e9 parameters -> 8 all-reduces of 4 GB / 8 (fp32 grads),
    each paying its own latency (NCCL tuner: the faster of ring 2(n−1)·α and tree 2·log2(n)·α)."""
    from parallmelism.cost.comm import dp_step_times_s
    from parallmelism.cost.states import NO_OP

    P, n = 8e9, 1024
    one = _over_nics("all_reduce", 4 * P / 8, n, ("ring", "tree"))
    reduce, zg, fs = dp_step_times_s(H100, P, 0.0, NO_OP, 8.0, 1.0, float(n), 1.0, 1.0, False)
    assert float(reduce) == pytest.approx(8 * one, rel=1e-9)
    # a user bucket of 1e8 parameters: 80 calls, the latency term 80 times
    reduce80, _, _ = dp_step_times_s(H100, P, 0.0, NO_OP, 8.0, 1.0, float(n), 1.0, 1.0, False, bucket_params=1e8)
    one80 = _over_nics("all_reduce", 4 * P / 80, n, ("ring", "tree"))
    assert float(reduce80) == pytest.approx(80 * one80, rel=1e-9)
    assert float(reduce80) > float(reduce)


def test_fsdp_gathers_each_layer_in_forward_and_backward():
    """FULLY_SHARD over 1024 ranks (one NIC each): 63 units, 2 micro-batches: 2·2·63 all-gathers of one
    unit's bf16 parameters and 63 reduce-scatters of its fp32 gradients; one rank per node, so
    NCCL's PAT pays log2(1024) = 10 latency steps per call, not the ring's 1023."""
    from parallmelism.cost.comm import dp_step_times_s
    from parallmelism.cost.states import FS

    P, n, bw, lat, units, m = 6.4e9, 1024, 50 * 0.94, 5.0, 63, 2
    _, _, fsdp = dp_step_times_s(H100, P, 0.0, FS, 8.0, 1.0, float(n), 1.0, float(m), False, fsdp_units=units)
    ag = collective_time_s("all_gather", 2 * P / units, n, bw, lat, "pat", launch_us=LAUNCH_US)
    assert ag == pytest.approx((LAUNCH_US + 10 * lat) * 1e-6 + (n - 1) / n * 2 * P / units / (bw * 1e9))
    # in the fastest protocol (Simple at these sizes: 8.4 us + 10 NET steps of 14 us, the whole bandwidth)
    assert float(fsdp) == pytest.approx(2 * m * units * _over_nics("all_gather", 2 * P / units, n, ("pat",)), rel=1e-9)
    reduce, _, _ = dp_step_times_s(H100, P, 0.0, FS, 8.0, 1.0, float(n), 1.0, float(m), False, fsdp_units=units)
    assert float(reduce) == pytest.approx(units * _over_nics("reduce_scatter", 4 * P / units, n, ("pat",)), rel=1e-9)


def test_ep_overlap_hides_the_all_to_all_under_the_layer_compute_and_needs_experts():
    from conftest import invoke
    from parallmelism.engine import evaluate
    from parallmelism.specs import GridSpec, RunConfig, TrainWorkload

    def frame(overlap):
        r = RunConfig(
            stack=load_option("stack", "megatron-te"),
            model=load_option("model", "mixtral-8x7b"),
            hardware=H100,
            workload=TrainWorkload(seq_len=4096, global_batch=128, overlap_ep_comm=overlap),
            grid=GridSpec(
                ngpus=[64],
                tp=[1, 2],
                pp=[1, 2],
                cp=[1],
                ep=[8],
                vpp=[1],
                micro_batch=[1],
                recompute=["selective"],
                sequence_parallel=[True],
                dp_sharding=["OPTIMIZER_STATES"],
            ),
        )
        return evaluate(r)[0]

    on, off = frame(True), frame(False)
    assert len(on) == len(off) > 0
    assert (on["time_comm_ep_s"].to_numpy() == off["time_comm_ep_s"].to_numpy()).all()
    assert (off["time_comm_ep_exposed_s"] == off["time_comm_ep_s"]).all()  # on the critical path
    assert (on["time_comm_ep_exposed_s"] < off["time_comm_ep_exposed_s"]).all()
    assert (on["time_step_s"].to_numpy() <= off["time_step_s"].to_numpy()).all()
    code, text = invoke("best", "model=llama3.1-8b", "grid.ngpus=[64]", "workload.overlap_ep_comm=true")
    assert code == 2 and "has no experts" in text and "Traceback" not in text


def _grad_policy_frame(sharding, policy, m=4):
    from conftest import pinned_row
    from parallmelism.specs import TrainWorkload

    wl = TrainWorkload(seq_len=4096, global_batch=8 * m, dp_grad_reduce=policy)
    return pinned_row("llama3.1-8b", H100, wl, 64, tp=[8], dp_sharding=[sharding])


def test_sharded_gradients_are_reduced_every_micro_batch():
    """ZeRO-2 keeps only its 1/n gradient shard, so each of the m micro-batches' gradients is
    reduce-scattered (Rajbhandari et al. 2020 §5.2; DeepSpeed, FSDP2): the DP link carries m
    reduce-scatters, (m−1) more than with local accumulation (per_step), which must keep the full
    fp32 gradient buffer instead (4 bytes per parameter, not 4/n). 8B on tp8 x dp8: the DP group is
    one GPU per node (stride 8), 8 ranks on their own NICs; each reduce-scatter is one Megatron
    bucket (1.004e9/8 parameters per rank > 40e6: ceil(P / 40e6) calls)."""
    import math

    from parallmelism.cost.params import params_per_gpu

    m, n = 4, 8
    auto = _grad_policy_frame("OPTIMIZER_STATES_AND_GRADS", "auto", m)
    once = _grad_policy_frame("OPTIMIZER_STATES_AND_GRADS", "per_step", m)
    P = float(params_per_gpu(load_option("model", "llama3.1-8b"), 8, 1, 32, 0, True, True)["dense"])
    calls = math.ceil(P / 40e6)
    rs = calls * _over_nics("reduce_scatter", 4 * P / calls, n, ("ring", "tree", "pat"))
    assert auto["time_comm_dp_s"] - once["time_comm_dp_s"] == pytest.approx((m - 1) * rs, rel=1e-9)
    assert once["mem_grads_gib"] == pytest.approx(4 * P / 2**30, rel=1e-9)
    assert auto["mem_grads_gib"] == pytest.approx(4 * P / n / 2**30, rel=1e-9)
    # the distributed optimizer (ZeRO-1) accumulates in its full buffer and reduces once: auto = per_step
    zero1 = _grad_policy_frame("OPTIMIZER_STATES", "auto", m)
    zero1_once = _grad_policy_frame("OPTIMIZER_STATES", "per_step", m)
    assert zero1["time_comm_dp_s"] == zero1_once["time_comm_dp_s"]
    forced = _grad_policy_frame("OPTIMIZER_STATES", "per_micro_batch", m)
    assert forced["time_comm_dp_s"] - zero1["time_comm_dp_s"] == pytest.approx((m - 1) * rs, rel=1e-9)
    for row in (auto, once, zero1, forced):  # exposed never exceeds what the link carries
        assert row["time_comm_dp_exposed_s"] <= row["time_comm_dp_s"] + 1e-12


def test_reduces_every_micro_batch_follows_the_sharding():
    from parallmelism.cost.states import FS, NO_OP, OS, OSG, reduces_every_micro_batch

    codes = [NO_OP, OS, OSG, FS]
    assert reduces_every_micro_batch(codes).tolist() == [False, False, True, True]
    assert reduces_every_micro_batch(codes, "per_step").tolist() == [False] * 4
    assert reduces_every_micro_batch(codes, "per_micro_batch").tolist() == [True] * 4


def test_flex_dispatch_sends_a_token_once_per_remote_node():
    """DeepEP (flex dispatcher) on DeepSeek-V3, EP 64 at stride 1 (8 nodes of 8 EP ranks), top-8 with
    node-limited routing to 4 nodes: D = min(8·(1 − (7/8)^8), 4) = 4 distinct nodes, 4·7/8 = 3.5
    cross the NIC per token, against the alltoall dispatcher's 8·7/8 = 7 copies; NVLink fans the 8
    copies out inside each node at the same time: time = max(NIC, NVLink), with no NCCL collective
    launch (DeepEP synchronises over NVSHMEM; the launch is fitted on nccl-tests)."""
    from parallmelism.cost.comm import ep_all_to_all_time_s, ep_distinct_nodes_per_token

    ds = load_option("model", "deepseek-v3")
    assert ds.require_moe().max_nodes_per_token == 4
    assert float(ep_distinct_nodes_per_token(8, 8)) == pytest.approx(8 * (1 - (7 / 8) ** 8))
    assert float(ep_distinct_nodes_per_token(8, 8, 4)) == 4.0
    tokens, h = 4096, 7168
    S = tokens * 8 * h * 2  # k routed copies per rank, bf16
    nic = tokens * h * 2 * 3.5 / (50 * 0.94e9) + 7 * 5e-6
    nvl = S * 7 / 8 / (450 * 0.8e9) + 7 * H100.scale_up.latency_us * 1e-6
    flex = ep_all_to_all_time_s(H100, ds, S, 64, 1, "flex")
    assert float(flex) == pytest.approx(max(nic, nvl), rel=1e-12)
    a2a = ep_all_to_all_time_s(H100, ds, S, 64, 1, "alltoall")
    assert float(a2a) == pytest.approx(
        collective_time_s("all_to_all", S, 64, 50 * 0.94 * 63 / 56, 5.0, launch_us=LAUNCH_US), rel=1e-12
    )
    assert float(flex) < 0.55 * float(a2a)
    # inside one NVLink domain both dispatchers are the same all-to-all
    assert float(ep_all_to_all_time_s(H100, ds, S, 8, 1, "flex")) == float(
        ep_all_to_all_time_s(H100, ds, S, 8, 1, "alltoall")
    )


def _hsdp_row(shard, sharding="FULLY_SHARD", m=2):
    from conftest import pinned_row
    from parallmelism.specs import TrainWorkload

    wl = TrainWorkload(seq_len=4096, global_batch=64 * m, dp_shard_size=shard)
    return pinned_row("llama3.1-8b", H100, wl, 64, recompute=["selective"], dp_sharding=[sharding])


def test_hybrid_sharding_shards_inside_a_node_and_all_reduces_the_shard_across_nodes():
    """HSDP (torchtitan dp_shard 8 x dp_replicate 8; FSDP HYBRID_SHARD) of Llama 3.1 8B on 64 H100,
    tp 1: the states are sharded over the 8 GPUs of a node (weights 4/8, grads 4/8, Adam 8/8 bytes
    per parameter); the per-layer gathers and reduce-scatters run over those 8 on NVLink; each
    layer's 1/8 gradient shard is then all-reduced with the 7 other nodes' copies over the NIC
    (stride 8, one rank per node, so NCCL's ring or tree on one NIC each), once per micro-batch."""
    from parallmelism.cost.comm import dp_step_times_s
    from parallmelism.cost.params import params_per_gpu
    from parallmelism.cost.states import FS

    m, units = 2, 34
    P = float(params_per_gpu(load_option("model", "llama3.1-8b"), 1, 1, 32, 0, True, True)["dense"])
    hsdp, full = _hsdp_row(8), _hsdp_row(None)
    assert hsdp["mem_states_gib"] * 2**30 == pytest.approx(P * (4 + 4 + 8) / 8, rel=1e-9)
    assert full["mem_states_gib"] * 2**30 == pytest.approx(P * (4 + 4 + 8) / 64, rel=1e-9)
    red8, _, fsdp8 = dp_step_times_s(H100, P, 0.0, FS, 1.0, 1.0, 8.0, 1.0, 1.0, False, fsdp_units=units)
    shard_bytes = 4 * P / units / 8
    ar = _over_nics("all_reduce", shard_bytes, 8, ("ring", "tree"))
    replica = m * units * ar
    assert hsdp["time_comm_dp_s"] == pytest.approx(float(m * red8 + m * fsdp8 + replica), rel=1e-9)
    # the shard group's traffic on NVLink, the replicas' all-reduce on the NIC
    assert hsdp["link_scale_out_busy_s"] == pytest.approx(replica, rel=1e-9)
    assert hsdp["link_scale_up_busy_s"] == pytest.approx(float(m * red8 + m * fsdp8), rel=1e-9)
    assert full["link_scale_up_busy_s"] == 0.0  # plain FSDP over 64 ranks: all of it on the NIC
    # the point of HSDP: less traffic on the NIC (the 64-rank FSDP rings run over the node's pooled
    # NICs at ~360 GB/s, so at tp 1 HSDP's per-micro-batch shard all-reduce, one NIC each, costs more step)
    assert hsdp["link_scale_out_busy_s"] < full["link_scale_out_busy_s"]
    # NO_OP has nothing to shard: the same all-reduce over all 64 ranks with or without HSDP
    assert _hsdp_row(8, "NO_OP")["time_comm_dp_s"] == _hsdp_row(None, "NO_OP")["time_comm_dp_s"]


def test_hybrid_sharding_needs_whole_shard_groups():
    from conftest import invoke

    code, text = invoke(
        "show",
        "model=llama3.1-8b",
        "grid.ngpus=[64]",
        "grid.tp=8",
        "grid.pp=1",
        "grid.dp_sharding=FULLY_SHARD",
        "workload.dp_shard_size=3",
    )
    assert code == 2 and "workload.dp_shard_size" in text and "Traceback" not in text, text


def test_all_gather_context_parallelism_exposes_the_whole_sequence_kv():
    """Llama 3's all-gather CP (§3.3.2) for 405B at 128k on tp 8 x cp 16: each rank holds one of the 8
    KV heads (GQA), so the whole sequence's K,V is 131072 · 2 · 128 · 2 B = 64 MiB; it is all-gathered
    over 16 ranks one node apart (one NIC each; NCCL's PAT: ceil(log2 16) = 4 latency steps) before
    the forward and again for backward, and dK,dV are reduce-scattered: 3 collectives per layer and
    micro-batch, all exposed (the ring hides its hops under attention)."""
    from parallmelism.cost.comm import cp_layer_times_s

    model = load_option("model", "llama3.1-405b")
    S = 131072 * 2 * 128 * 2
    one = 8.4e-6 + 4 * 14e-6 + 15 / 16 * S / (50 * 0.94e9)  # in Simple (its launch, 4 NET steps of 14 us)
    assert one == pytest.approx(_over_nics("all_gather", S, 16, ("ring", "tree", "pat")), rel=1e-12)
    link, exposed = cp_layer_times_s(H100, model, 131072, 1, 8, 16, (1.0, 1 / 16), (2.5, 2.5 / 16), False, "all_gather")
    assert float(link) == pytest.approx(3 * one, rel=1e-12) and float(exposed) == float(link)
    ring_link, ring_exposed = cp_layer_times_s(H100, model, 131072, 1, 8, 16, (1.0, 1 / 16), (2.5, 2.5 / 16), False)
    assert float(ring_exposed) == 0.0 < float(ring_link)  # each hop hides under 1/16 of a long attention
    full_link, _ = cp_layer_times_s(H100, model, 131072, 1, 8, 16, (1.0, 1 / 16), (2.5, 2.5 / 16), True, "all_gather")
    assert float(full_link) == pytest.approx(4 * one, rel=1e-12)  # the recomputed forward gathers again


def test_ring_hops_hide_step_by_step():
    """Transformer Engine's p2p ring (AttnFuncWithCPAndKVP2P) starts each send just before a step
    computes. Forward: hop 1 under the causal step 0, hops 2..c−1 under one block each. Backward
    (reverse order, causal step last): K,V under block 0, K,V + dK,dV under blocks 1..c−2, dK,dV
    home under the causal step. Hand numbers at c = 4: a 1.0 ms hop; forward a 1.6 ms causal
    step and 0.6 ms blocks (3.4 ms): hop 1 hides, hops 2, 3 show 0.4 ms each = 0.8 ms (the mean
    step, 0.85 ms, would have shown 0.45 ms). Backward 3.0 ms causal and 1.5 ms blocks (7.5 ms):
    K,V hides, the two double hops show 0.5 ms each, dK,dV hides = 1.0 ms."""
    from parallmelism.cost.collectives import collective_time_s
    from parallmelism.cost.comm import cp_chunk_bytes, cp_layer_times_s, p2p_link

    model = load_option("model", "llama3.1-70b")
    s, b, t, cp = 131072, 1, 8, 4
    bw, lat = p2p_link(H100, cp * t)
    hop = float(collective_time_s("send_recv", cp_chunk_bytes(model, s, b, t, cp), 2, bw, lat, launch_us=LAUNCH_US))
    k = 1.0e-3 / hop  # scale the windows so that the hop is 1.0 ms in the docstring's units
    link, exposed = cp_layer_times_s(
        H100, model, s, b, t, cp, (3.4e-3 / k, 1.6e-3 / k), (7.5e-3 / k, 3.0e-3 / k), False
    )
    assert float(exposed) * k == pytest.approx(0.8e-3 + 1.0e-3, rel=1e-9)
    assert float(link) == pytest.approx(9 * hop, rel=1e-12)  # 3 hops forward, 6 chunks backward
    # c = 2: one hop each way, forward under the causal step, backward K,V under the block and
    # dK,dV under the causal step
    link2, exposed2 = cp_layer_times_s(H100, model, s, b, t, 2, (1.0, 0.9), (1.0, 0.3), False)
    hop2 = float(link2) / 3
    assert float(exposed2) == pytest.approx(max(0, hop2 - 0.9) + max(0, hop2 - 0.7) + max(0, hop2 - 0.3), abs=1e-15)


def test_selective_recompute_repeats_the_rings_forward_hops():
    """Megatron's selective recompute checkpoints the core attention, and Transformer Engine's CP
    communication runs inside it: the recomputed forward sends its K,V hops again (as full
    recompute does). Llama 3.1 70B at 128k on tp 8 × cp 4, one micro-batch: the hop is a
    32768-token K,V chunk of one KV head (32768 · 2 · 128 · 2 B = 16 MiB), forward 3 hops,
    backward 3 double hops, and 3 more with recompute: 12 hop times instead of 9."""
    from parallmelism.cost.comm import cp_layer_times_s

    model = load_option("model", "llama3.1-70b")
    core = (1.0, 0.25)  # long enough to hide every hop
    plain, _ = cp_layer_times_s(H100, model, 131072, 1, 8, 4, core, core, False)
    rerun, exposed = cp_layer_times_s(H100, model, 131072, 1, 8, 4, core, core, True)
    assert float(rerun) / float(plain) == pytest.approx(12 / 9, rel=1e-12) and float(exposed) == 0.0
