"""Links as shared resources (cost/links.py): placement of each axis on the GPU's scale-up port or
its own NIC, busy time per link, and the step >= busiest link bound."""

import numpy as np
import pytest

from conftest import invoke
from parallmelism.config import load_option
from parallmelism.cost.links import axes_on_scale_out, bind_to_links, link_busy_s
from parallmelism.engine import evaluate
from parallmelism.specs import GridSpec, RunConfig, TrainWorkload

H100 = load_option("hardware", "h100-sxm-80gb")
AXES = ("tp", "cp", "ep", "dp", "pp")


def test_placement_follows_megatron_rank_order():
    # Llama 3 405B's 8k layout on 16384 H100s: tp 8, cp 1, pp 16, dp 128. TP fills the node; DP
    # (stride 8) and PP (stride 1024) leave it and wait on the GPU's own NIC.
    on = axes_on_scale_out(H100, 8, 1, 128, 1, 16)
    assert {ax: bool(v) for ax, v in on.items()} == {"tp": False, "cp": False, "ep": False, "dp": True, "pp": True}
    # tp 2 cp 4 fills the node (span 8); cp 8 with tp 2 leaves it
    assert not bool(axes_on_scale_out(H100, 2, 4, 1, 1, 1)["cp"])
    assert bool(axes_on_scale_out(H100, 2, 8, 1, 1, 1)["cp"])


def test_bound_moves_the_deficit_onto_the_hidden_axes_of_the_busy_link():
    # NIC carries dp 6 s (5 of them hidden) and pp 1 s (all hidden); scale-up tp 2 s exposed.
    # compute 3 s + exposed 1 + 2 = step 6 s < NIC busy 7 s: 1 s more is exposed, split 5:1.
    comm = {"tp": np.array([2.0]), "cp": np.zeros(1), "ep": np.zeros(1), "dp": np.array([6.0]), "pp": np.array([1.0])}
    exp = {"tp": np.array([2.0]), "cp": np.zeros(1), "ep": np.zeros(1), "dp": np.array([1.0]), "pp": np.zeros(1)}
    on_out = {
        "tp": np.array([False]),
        "cp": np.array([False]),
        "ep": np.array([False]),
        "dp": np.array([True]),
        "pp": np.array([True]),
    }
    step, new = bind_to_links(np.array([6.0]), comm, exp, on_out)
    assert float(step[0]) == pytest.approx(7.0)
    assert float(new["dp"][0]) == pytest.approx(1.0 + 5.0 / 6.0)
    assert float(new["pp"][0]) == pytest.approx(1.0 / 6.0)
    assert float(new["tp"][0]) == 2.0
    busy = link_busy_s(comm, on_out)
    assert float(busy["scale_out"][0]) == 7.0 and float(busy["scale_up"][0]) == 2.0


def test_fsdp_at_large_dp_is_no_faster_than_its_nic():
    """The issue's row: 405B, 16384 H100s, tp 2 pp 2 cp 4 dp 1024 FULLY_SHARD used to come out at
    5.32 s per step with 6.68 s of DP traffic on one NIC."""
    r = RunConfig(
        stack=load_option("stack", "megatron-te"),
        model=load_option("model", "llama3.1-405b"),
        hardware=H100,
        workload=TrainWorkload(seq_len=8192, global_batch=2048),
        grid=GridSpec(
            ngpus=[16384],
            tp=[2],
            pp=[2],
            cp=[4],
            ep=[1],
            vpp=[1],
            micro_batch=[1],
            recompute=["full"],
            sequence_parallel=[True],
            dp_sharding=["FULLY_SHARD"],
        ),
    )
    df = evaluate(r)[0]
    assert len(df) == 1
    row = df.iloc[0]
    assert row["time_step_s"] >= row["time_comm_dp_s"] + row["time_comm_pp_s"] - 1e-9
    assert row["time_step_s"] >= row["link_scale_out_busy_s"] - 1e-9
    for ax in AXES:
        assert row[f"time_comm_{ax}_exposed_s"] <= row[f"time_comm_{ax}_s"] + 1e-12
    parts = (
        row["time_compute_s"]
        + row["time_bubble_s"]
        + row["time_overhead_s"]
        + sum(row[f"time_comm_{ax}_exposed_s"] for ax in AXES)
    )
    assert row["time_step_s"] == pytest.approx(parts, rel=1e-9)


def test_show_prints_the_per_link_table():
    """`show` on the issue's FSDP row: the GPU's NIC carries DP (4096 ranks, 4 per node: 4 NICs pooled
    by the rail rings, 4·47 GB/s) and PP; NVLink carries TP and CP. busy = overlappable + exposed."""
    import re

    from conftest import invoke

    code, text = invoke(
        "show",
        "model=llama3.1-405b",
        "grid.ngpus=[16384]",
        "workload.global_batch=2048",
        "grid.tp=[2]",
        "grid.pp=[2]",
        "grid.cp=[4]",
        "grid.dp_sharding=[FULLY_SHARD]",
        "grid.recompute=[full]",
        "grid.micro_batch=[1]",
        "grid.vpp=[1]",
    )
    assert code == 0, text
    assert "per link of one critical-stage GPU" in text
    nic = next(line for line in text.splitlines() if "(this GPU's)" in line)
    cells = [c.strip() for c in nic.split("│") if c.strip()]
    bw, busy, hidden, exposed = (float(c.replace(",", "")) for c in cells[1:5])
    assert bw == pytest.approx(47.0) and cells[5] == "dp, pp"
    assert busy == pytest.approx(hidden + exposed, abs=2e-3)
    up = next(line for line in text.splitlines() if "NVLink4" in line and "│" in line)
    assert re.search(r"tp, cp", up)


def _fsdp_8b_row(stack="megatron-te", recompute="selective", **workload):
    """The one row of Llama-3.1-8B on 64 H100s, FULLY_SHARD, no TP/PP/CP, micro-batch 1 (2 micro-batches)."""
    r = RunConfig(
        stack=load_option("stack", stack),
        model=load_option("model", "llama3.1-8b"),
        hardware=H100,
        workload=TrainWorkload(seq_len=4096, global_batch=128, **workload),
        grid=GridSpec(
            ngpus=[64],
            tp=[1],
            pp=[1],
            cp=[1],
            ep=[1],
            vpp=[1],
            micro_batch=[1],
            recompute=[recompute],
            sequence_parallel=[False],
            dp_sharding=["FULLY_SHARD"],
        ),
    )
    df = evaluate(r)[0]
    assert len(df) == 1
    return df.iloc[0]


def _fsdp_8b_dp_by_hand():
    """(reduce-scatter seconds per micro-batch, one all-gather of every unit: 32 layers + embedding +
    head) of `_fsdp_8b_row`, from cost.comm.dp_step_times_s on the layers' parameters, and those
    parameters per GPU (cost.params.params_per_gpu)."""
    from parallmelism.cost.comm import dp_step_times_s
    from parallmelism.cost.params import params_per_gpu
    from parallmelism.cost.states import FS

    p = params_per_gpu(
        load_option("model", "llama3.1-8b"), *(np.array([v]) for v in (1, 1, 32, 0)), np.array([True]), np.array([True])
    )
    red, _, g1 = dp_step_times_s(H100, p["dense"], 0.0, FS, 1.0, 1.0, 64.0, 1.0, 1.0, False, fsdp_units=34)
    return float(red[0]), float(g1[0]) / 2, p  # g1: forward + backward gathers of one micro-batch


def test_fsdp_without_reshard_after_forward_gathers_once_and_holds_the_stage():
    """FSDP2 reshard_after_forward=False: one all-gather per layer and micro-batch (forward; backward
    reuses it), and the stage's bf16 weights stay gathered: 2 B x params of every layer on the stage."""
    on, off = _fsdp_8b_row(fsdp_reshard_after_forward=True), _fsdp_8b_row(fsdp_reshard_after_forward=False)
    # m = 2 micro-batches, 32 layers + embedding + head units; the reduce-scatter runs every micro-batch
    # (sharded gradients: FSDP2's default, workload.dp_grad_reduce=auto) and does not depend on resharding
    red, per_gather, p = _fsdp_8b_dp_by_hand()
    assert on["time_comm_dp_s"] == pytest.approx(2 * red + 2 * 2 * per_gather, rel=1e-9)
    assert off["time_comm_dp_s"] == pytest.approx(2 * red + 2 * per_gather, rel=1e-9)
    layer = (p["attention"] + p["mlp"])[0] / 32
    assert on["mem_fsdp_gather_gib"] * 2**30 == pytest.approx(2 * 2 * layer, rel=1e-9)
    assert off["mem_fsdp_gather_gib"] * 2**30 == pytest.approx(32 * 2 * layer, rel=1e-9)
    assert off["time_step_s"] <= on["time_step_s"]


def test_megatron_fsdp_gathers_once_for_recompute_and_backward():
    """Under full recompute FSDP gathers a layer's parameters in forward and before backward; torch FSDP
    and Megatron-Core's DDP path gather again for the recompute forward (3 per micro-batch), Megatron-FSDP
    gathers once for the recompute and the backward (2: megatron_fsdp.py's shard-aware recompute,
    conf/stack/megatron-fsdp.yaml collectives.fsdp_recompute_regather false; the workload overrides it)."""

    def dp_comm(stack, regather=None):
        return float(_fsdp_8b_row(stack, "full", fsdp_recompute_regather=regather)["time_comm_dp_s"])

    red, per_gather, _ = _fsdp_8b_dp_by_hand()
    assert dp_comm("megatron-te") == pytest.approx(2 * red + 2 * 3 * per_gather, rel=1e-9)
    assert dp_comm("megatron-fsdp") == pytest.approx(2 * red + 2 * 2 * per_gather, rel=1e-9)
    assert dp_comm("megatron-te", regather=False) == pytest.approx(dp_comm("megatron-fsdp"), rel=1e-9)
    assert dp_comm("megatron-fsdp", regather=True) == pytest.approx(dp_comm("megatron-te"), rel=1e-9)


def test_torchtitan_fsdp2_recompute_reuses_the_pre_backward_unshard():
    """torchtitan wraps each block in checkpoint_wrapper and then fully_shard; torch FSDP2's _pre_forward
    returns at once in TrainingState.PRE_BACKWARD ("the pre-backward hook is responsible for the unshard"),
    so the recompute forward runs on the backward's gather: 2 all-gathers per unit and micro-batch under
    full recompute, not 3 (conf/stack/torchtitan.yaml collectives.fsdp_recompute_regather false); 1
    without reshard_after_forward (torchtitan's PP rows), whatever the recompute."""

    def dp_comm(regather=None, recompute="full", reshard=True):
        row = _fsdp_8b_row(
            "torchtitan", recompute, fsdp_recompute_regather=regather, fsdp_reshard_after_forward=reshard
        )
        return float(row["time_comm_dp_s"])

    red, per_gather, _ = _fsdp_8b_dp_by_hand()
    m = 2  # micro-batches: 128 sequences over 64 ranks at micro-batch 1
    assert dp_comm() == pytest.approx(m * red + m * 2 * per_gather, rel=1e-9)
    assert dp_comm(regather=True) == pytest.approx(m * red + m * 3 * per_gather, rel=1e-9)
    assert dp_comm(recompute="selective") == pytest.approx(dp_comm(), rel=1e-9)
    assert dp_comm(reshard=False) == pytest.approx(m * red + m * 1 * per_gather, rel=1e-9)


@pytest.mark.parametrize(
    "override, words",
    [
        ("hardware.scale_sideways.bandwidth_gbps=100", "unknown key 'hardware.scale_sideways'"),  # no such link
        ("+hardware.links.ib=1", "hardware.links: unknown key"),
        ("hardware.scale_out.bandwidth_gbps=-1", "hardware.scale_out.bandwidth_gbps=-1"),
        ("workload.dp_bucket_params=-5", "workload.dp_bucket_params=-5"),  # negative bucket size
        ("workload.overlap_ep_comm=true", "has no experts"),  # an overlap on an axis the model lacks
    ],
)
def test_bad_link_and_overlap_input_is_one_sentence(override, words):
    """Issue 10's bad input: a link that does not exist, a negative bucket, an overlap option on an
    axis that has none: one sentence (no stray leading ': '), exit 2."""
    code, text = invoke("show", "model=llama3.1-8b", "grid.ngpus=[8]", override)
    assert code == 2 and words in text and "Traceback" not in text, text
    assert "error: :" not in text


def test_a_mesh_scale_up_gives_a_group_only_its_own_links():
    """MI300X's Infinity Fabric is fully connected, no switch: each GPU has 7 xGMI links of 64 GB/s
    per direction (128 GB/s bidirectional; AMD's 896 GB/s aggregate), one to each peer. A TP pair
    talks over one link: 64 · 0.707 (scale_up efficiency from RCCL's measured 316.8 of 448 GB/s
    bus bandwidth, hardware/mi300x-192gb.yaml) = 45.248 GB/s, not the port's 316.736; a group of 4
    over 3 links (135.744); all 8 over all 7 (316.736). A pipeline or CP ring hop
    between two GPUs of the node is one link. On the port, a pair's transfers occupy 1/7 of it."""
    from parallmelism.cost.collectives import group_link
    from parallmelism.cost.comm import p2p_link
    from parallmelism.cost.links import scale_up_port_share

    mi = load_option("hardware", "mi300x-192gb")
    assert mi.scale_up.topology == "mesh" and H100.scale_up.topology == "switch"
    one_link_gbps = 64.0 * 0.707
    bw, _ = group_link(mi, np.array([2.0, 4.0, 8.0]), 1.0)
    assert bw == pytest.approx([one_link_gbps, 3 * one_link_gbps, 7 * one_link_gbps], rel=1e-12)
    assert float(p2p_link(mi, 8.0)[0]) == pytest.approx(one_link_gbps, rel=1e-12)
    # two members per node of a group spanning nodes (stride 4): one link each, below 2 NICs
    assert float(group_link(mi, 16.0, 4.0)[0]) == pytest.approx(one_link_gbps, rel=1e-12)
    assert group_link(H100, np.array([2.0, 8.0]), 1.0)[0] == pytest.approx([360.0, 360.0], rel=1e-12)
    share = scale_up_port_share(mi, 2.0, 1.0, 4.0, 1.0, 1.0)
    assert float(share["tp"]) == pytest.approx(1 / 7) and float(share["dp"]) == pytest.approx(3 / 7)
    busy = link_busy_s({"tp": 7.0, "dp": 7.0}, {"tp": 0.0, "dp": 0.0}, ("tp", "dp"), share)
    assert float(busy["scale_up"]) == pytest.approx(1.0 + 3.0)  # its bytes over the whole port


def test_hierarchical_tp_all_reduce_splits_its_busy_seconds_between_the_links():
    """A TP16 all-reduce over two 8xH100 nodes run hierarchically (decode-sized S, latency-bound):
    its NVLink busy seconds are its two intra-node phases and the launch, its NIC busy seconds the
    inter-node all-reduce of S/8 over 2 nodes, by hand from the H100 file. Bandwidth-bound the flat
    ring is faster and waits on the NIC for all of its time."""
    from dataclasses import replace

    from parallmelism.cost.breakdown import link_table
    from parallmelism.cost.collective_ops import collective
    from parallmelism.cost.collectives import scale_up_group_gbps

    hw = load_option("hardware", "h100-sxm-80gb")
    S, k = 2.0 * 7168 * 8, 8  # 8 tokens of DeepSeek-V3's hidden in bf16
    op = collective(hw, "tp", "tp", "all_reduce", S, 16, 1)
    op = replace(op, exposed_s=op.link_s)
    up = float(scale_up_group_gbps(hw, np.array([8.0]))[0]) * 1e9  # B/s per rank
    out = 50.0 * 0.94 * 1e9
    # in LL: the base latencies at half of both tiers' bandwidth (protocols.ll_bandwidth_fraction 0.5)
    inter = 2 * 1 * 5.0e-6 + 2 * (1 / 2) * (S / k) / (0.5 * out)  # ring over N = 2 nodes (tree: 2·log2 2 α + 2 S/k/β)
    intra = 2 * ((k - 1) * 0.583e-6 + (k - 1) / k * S / (0.5 * up)) + 4.83e-6  # reduce-scatter + all-gather + launch
    assert float(op.time_s) == pytest.approx(intra + inter, rel=1e-9)
    assert float(op.nic_s(hw)) == pytest.approx(inter, rel=1e-9)
    links = {row["link"].split(" (")[0]: row["busy_s"] for row in link_table(hw, [op])}
    assert links["InfiniBand/Ethernet NIC per GPU"] == pytest.approx(inter, rel=1e-9)
    assert links["NVLink4 + NVSwitch3"] == pytest.approx(intra, rel=1e-9)
    big = collective(hw, "tp", "tp", "all_reduce", 2.0**30, 16, 1)  # 1 GiB: the flat ring wins
    big = replace(big, exposed_s=big.link_s)
    assert float(big.nic_s(hw)) == float(big.time_s)
    assert {row["link"].split(" (")[0]: row["busy_s"] for row in link_table(hw, [big])}["NVLink4 + NVSwitch3"] == 0


def _bind_one_row(step, comm, exp, nic, busy):
    """The busiest-link bound of one row in plain floats, link after link (cost/links.py docstring)."""
    exp, passes = dict(exp), 0
    for link in ("scale_out", "scale_up"):
        if not busy[link] > step:
            continue
        passes += 1
        on = {ax: nic[ax] if link == "scale_out" else 1.0 - nic[ax] for ax in AXES}
        hidden = {ax: on[ax] * max(comm[ax] - exp[ax], 0.0) for ax in AXES}
        total = 0.0
        for ax in AXES:
            total = total + hidden[ax]
        share = min((max(busy[link] - step, 0.0) / total) if total > 0 else 0.0, 1.0)
        exp = {ax: exp[ax] + hidden[ax] * share for ax in AXES}
        step = step + total * share
    return step, exp, passes


def test_bound_row_by_row_on_both_links():
    # rows bound by the NIC, by the scale-up port, by both in turn (the scale-up pass starts from
    # what the scale-out pass exposed) and by neither: bind_to_links, which evaluates only the rows
    # a link raises (links.bind_rows), gives each row's own numbers to the last bit
    rng = np.random.default_rng(29)
    n = 400
    comm = {ax: rng.uniform(0.0, 4.0, n) for ax in AXES}
    exp = {ax: comm[ax] * rng.uniform(0.0, 1.0, n) for ax in AXES}
    nic = {ax: rng.choice([0.0, 1.0, 0.3], n) for ax in AXES}
    busy = link_busy_s(comm, nic)
    step = rng.uniform(0.5, 8.0, n)
    got_step, got_exp = bind_to_links(step, comm, exp, nic, busy)
    both = 0
    for i in range(n):
        row = lambda d: {ax: float(d[ax][i]) for ax in AXES}  # noqa: E731
        b = {k: float(v[i]) for k, v in busy.items()}
        want_step, want_exp, passes = _bind_one_row(float(step[i]), row(comm), row(exp), row(nic), b)
        assert float(got_step[i]) == want_step
        assert row(got_exp) == want_exp
        both += passes == 2
    assert both > 10  # rows raised by both links are exercised


def test_bound_with_per_key_hidden_seconds_matches_row_by_row():
    # steptime hands bind_rows the first link's hidden seconds per distinct key, gathered
    # (`hidden_at`): the rows come out as the row-by-row bound gives them, to the last bit
    from parallmelism.cost.links import bind_rows, hidden_on_link

    rng = np.random.default_rng(33)
    K, n = 40, 400
    inv = rng.integers(0, K, n)
    comm = {ax: rng.uniform(0.0, 4.0, K) for ax in AXES}
    exp = {ax: comm[ax] * rng.uniform(0.0, 1.0, K) for ax in AXES}
    nic = {ax: rng.choice([0.0, 1.0, 0.3], K) for ax in AXES}
    rows_of = lambda d: {ax: d[ax][inv] for ax in AXES}  # noqa: E731
    busy = link_busy_s(rows_of(comm), rows_of(nic))
    step = rng.uniform(0.5, 8.0, n)

    def at_rows(rows):
        return (
            {ax: comm[ax][inv[rows]] for ax in AXES},
            {ax: exp[ax][inv[rows]] for ax in AXES},
            {ax: nic[ax][inv[rows]] for ax in AXES},
        )

    def hidden_at(rows, link):
        per_key = hidden_on_link(link, comm, exp, nic)
        return {ax: exp[ax][inv[rows]] for ax in AXES}, {ax: per_key[ax][inv[rows]] for ax in AXES}

    got_step = step.copy()
    updates = bind_rows(got_step, busy, at_rows, hidden_at)
    got_exp = rows_of(exp)
    for rows, values in updates:
        for ax in AXES:
            got_exp[ax][rows] = values[ax]
    passes_seen = set()
    for i in range(n):
        row = lambda d: {ax: float(d[ax][inv[i]]) for ax in AXES}  # noqa: E731
        b = {k: float(v[i]) for k, v in busy.items()}
        want_step, want_exp, passes = _bind_one_row(float(step[i]), row(comm), row(exp), row(nic), b)
        assert float(got_step[i]) == want_step
        assert {ax: float(got_exp[ax][i]) for ax in AXES} == want_exp
        passes_seen.add(passes)
    assert {1, 2} <= passes_seen  # rows raised by one link and by both are exercised
