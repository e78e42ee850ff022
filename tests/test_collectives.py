"""Collective cost model against nccl-tests conventions and the measured busbw points."""

import csv
from pathlib import Path

import numpy as np
import pytest

from parallmelism.config import load_option
from parallmelism.cost.collectives import (
    KINDS,
    busbw_factor,
    busbw_gbps,
    collective_time_s,
    group_collective_time_s,
    group_link,
    hierarchical_all_reduce_time_s,
)

from conftest import shared_reference


@pytest.fixture(scope="module")
def h100():
    return load_option("hardware", "h100-sxm-80gb")


def test_ring_closed_forms():
    S, n, bw, lat = 1e9, 8, 100.0, 2.0
    a, b = 2e-6, 1e9 / 100e9
    assert collective_time_s("all_reduce", S, n, bw, lat) == pytest.approx(2 * 7 * a + 2 * 7 / 8 * b)
    for k in ("all_gather", "reduce_scatter", "all_to_all"):
        assert collective_time_s(k, S, n, bw, lat) == pytest.approx(7 * a + 7 / 8 * b)
    assert collective_time_s("send_recv", S, 2, bw, lat) == pytest.approx(a + b)
    assert collective_time_s("broadcast", S, n, bw, lat) == pytest.approx(b + 7 * a)
    assert collective_time_s("reduce", S, n, bw, lat, "tree") == pytest.approx(3 * (a + b))
    assert collective_time_s("all_reduce", S, n, bw, lat, "tree") == pytest.approx(2 * 3 * a + 2 * b)
    assert collective_time_s("parameter_server", S, n, bw, lat) == pytest.approx(2 * a + 2 * 8 * b)
    for k in ("all_reduce", "all_gather", "send_recv", "parameter_server"):
        assert collective_time_s(k, S, 1, bw, lat) == 0.0


def test_busbw_equals_link_bandwidth_for_large_rings():
    """nccl-tests: a bandwidth-bound ring reaches busbw = per-rank link bandwidth for every n."""
    for kind in ("all_reduce", "all_gather", "reduce_scatter"):
        for n in (2, 8, 64):
            t = collective_time_s(kind, 1e12, n, 123.0, 0.0)
            assert busbw_gbps(kind, 1e12, n, t) == pytest.approx(123.0)
    assert busbw_factor("all_reduce", 8) == pytest.approx(1.75)


def test_hierarchical_all_reduce_closed_form():
    S, n, k = 8e9, 64, 8
    t = hierarchical_all_reduce_time_s(S, n, k, 400.0, 0.0, 50.0, 0.0)
    expect = 2 * (7 / 8) * S / 400e9 + 2 * (7 / 8) * (S / 8) / 50e9
    assert t == pytest.approx(expect)
    assert collective_time_s(
        "all_reduce", S, n, 50.0, 0.0, "hierarchical", local_size=k, inner_bandwidth_gbps=400.0, inner_latency_us=0.0
    ) == pytest.approx(expect)


def test_cross_node_all_reduce_by_hand(h100):
    """TP16 over two H100 nodes (stride 1: k = 8 ranks per node, N = 2 nodes), by hand from the
    hardware file (450 GB/s NVLink x 0.8, 0.583 us per NVLink step, 4.83 us launch; 50 GB/s NIC x
    0.94, 5 us per NIC step) and the nccl-tests busbw rules: reduce-scatter over the node
    ((k-1)/k of S on NVLink), all-reduce of the S/k shard over the nodes (2(N-1)/N of it on each
    rank's own NIC; ring and tree tie on latency at N = 2, the ring moves less), all-gather."""
    from parallmelism.cost.collectives import cross_domain_all_reduce_split_s, cross_domain_all_reduce_time_s

    up, up_step, launch = 450e9 * 0.8, 0.583e-6, 4.83e-6
    nic, nic_step = 50e9 * 0.94, 5e-6
    for S in (2 * 7168.0, 64 * 2**20):  # one decode token of DeepSeek-V3 (bf16 hidden), a 64 MiB prefill
        intra = 7 * up_step + 7 / 8 * S / up
        inter = 2 * 1 * nic_step + 2 * (1 / 2) * (S / 8) / nic
        hand = launch + intra + inter + intra
        assert float(cross_domain_all_reduce_time_s(h100, S, 16, 1)) == pytest.approx(hand, rel=1e-9)
    # a decode-sized all-reduce: ~23 us hierarchically, where the flat ring pays 30 NIC steps
    small = 2 * 7168.0
    flat = float(group_collective_time_s(h100, "all_reduce", small, 16, 1))
    tp = float(group_collective_time_s(h100, "all_reduce", small, 16, 1, hierarchical=True))
    assert tp == pytest.approx(float(cross_domain_all_reduce_split_s(h100, small, 16, 1)[0]))
    # in LL (the base latencies at half of both tiers' bandwidth: protocols.ll_bandwidth_fraction)
    assert tp * 1e6 == pytest.approx(
        4.83 + 2 * 7 * 0.583 + 2 * 5.0 + (2 * 7 / 8 * small / up * 1e6 + small / 8 / nic * 1e6) / 0.5
    )
    assert tp < flat
    # bandwidth-bound, the flat ring (NVLink-bound at min(360, 8 x 47) GB/s) is faster: NCCL's tuner keeps it
    big = 8 * 2**30
    ring = float(group_collective_time_s(h100, "all_reduce", big, 16, 1))
    assert float(group_collective_time_s(h100, "all_reduce", big, 16, 1, hierarchical=True)) == pytest.approx(ring)
    assert busbw_gbps("all_reduce", big, 16, ring) == pytest.approx(min(up, 8 * nic) / 1e9, rel=0.01)
    # inside one node the option changes nothing
    assert float(group_collective_time_s(h100, "all_reduce", small, 8, 1, hierarchical=True)) == pytest.approx(
        float(group_collective_time_s(h100, "all_reduce", small, 8, 1))
    )


def test_group_link_placement(h100):
    bw, _ = group_link(h100, np.array([8, 2, 16, 8, 4]), np.array([1, 4, 1, 8, 2]))
    up, out = 450 * 0.8, 50 * 0.94
    # TP8 and CP2 after TP4 stay on NVLink; TP16 spans two nodes with 8 rails; DP8 after TP8 has one rail.
    assert bw.tolist() == pytest.approx([up, up, min(up, 8 * out), out, up])
    a2a, _ = group_link(h100, 16, 1, kind="all_to_all")
    assert a2a == pytest.approx(out * 15 / 8)


def _measured():
    with open(shared_reference("collectives_measured.csv")) as f:
        return [r for r in csv.DictReader(f) if r["accelerator"] == "h100-sxm-80gb" and r["message_bytes"]]


def test_calibration_error_against_nccl_tests(h100):
    """Errors stated in cost/collectives.py: non-NVLS 360 GB/s within 2 % (Simple's 32 us of latency
    on a 1 GiB all-gather), the 8 MiB all-reduce within 5 % (LL128; +52 % before the protocols), IB
    64-GPU within 6.5 / 9 %, latency floor within 2 %; NVLS all-reduce (in-switch reduction, `nvls_all_reduce_time_s`)
    within 2-5 % from 64 MiB to 8 GiB (the ring alone: 13-24 % too slow)."""
    errs = {}
    for r in _measured():
        S, n = float(r["message_bytes"]), int(r["ranks"])
        t = group_collective_time_s(h100, r["collective"], S, n, 1)
        if r["busbw_gbps"]:
            errs[r["case"]] = busbw_gbps(r["collective"], S, n, t) / float(r["busbw_gbps"]) - 1
        else:
            errs[r["case"]] = t * 1e6 / float(r["time_us"]) - 1
    assert abs(errs["dgxh100-ag-large"]) < 0.02
    assert abs(errs["dgxh100-ar-small"]) < 0.02
    assert abs(errs["dgxh100-ar-8MiB"]) < 0.05
    assert abs(errs["h100-64gpu-ib-ar-1GiB"]) < 0.065  # -5.9 % (Simple's 14 us NET steps; -4.1 % with LL's 5)
    assert abs(errs["h100-64gpu-ib-ar-8GiB"]) < 0.09
    # NVLS (scale_up.nvls: NCCL's nvlsEfficiency 0.85, launch fitted on aiconfigurator's 32-512 MiB points, not
    # on these): 64 MiB -15 %, 128 MiB -13 %, 1 GiB -22 %, 8 GiB -24 % with the ring alone
    for case, bound in (("dgxh100-ar-64MiB", 0.02), ("dgxh100-ar-128MiB", 0.05), ("dgxh100-ar-1GiB", 0.02)):
        assert abs(errs[case]) < bound, (case, errs[case])
    assert abs(errs["dgxh100-ar-8GiB"]) < 0.02


# 2-rank small all-reduce on HGX 8xH100, NCCL 2.20.5, CUDA graphs, NVLSTree, 128 B to 64 KB:
# "When I run with 2 GPUs the latency is approximately 6us" (NVIDIA/nccl issue 1259, description).
# Not in ../shared/reference/collectives_measured.csv (read-only to this project), so it lives here.
TWO_RANK_SMALL_ALL_REDUCE_US = 6.0


@pytest.mark.parametrize("nbytes", [8.0, 128.0, 4096.0])
def test_small_all_reduce_meets_both_measured_h100_points(h100, nbytes):
    """alpha(n) = collective_launch_us + latency_us · 2(n-1) reproduces the 2-rank ~6 us (issue
    1259) and the 8-rank 13 us (dgxh100-ar-small) small all-reduces on NVLink4/NVSwitch within
    2 %; the per-step latency alone (no launch) gave 2 us at 2 ranks."""
    rows = list(csv.DictReader(open(shared_reference("collectives_measured.csv"))))
    eight_us = next(float(r["time_us"]) for r in rows if r["case"] == "dgxh100-ar-small")
    two = float(group_collective_time_s(h100, "all_reduce", nbytes, 2, 1)) * 1e6
    eight = float(group_collective_time_s(h100, "all_reduce", nbytes, 8, 1)) * 1e6
    assert two == pytest.approx(TWO_RANK_SMALL_ALL_REDUCE_US, rel=0.02)
    assert eight == pytest.approx(eight_us, rel=0.02)


def test_launch_is_paid_once_per_call_of_every_kind():
    """The launch adds to every kind once (a hierarchical all-reduce once, not per tier) and a
    group of 1 stays free."""
    base = dict(nbytes=1e6, size=8, bandwidth_gbps=100.0, latency_us=1.0)
    for kind in KINDS:
        for algorithm in ("ring", "tree", "auto"):
            bare = collective_time_s(kind, algorithm=algorithm, **base)
            assert collective_time_s(kind, algorithm=algorithm, launch_us=5.0, **base) == pytest.approx(bare + 5e-6)
        assert collective_time_s(kind, 1e6, 1, 100.0, 1.0, launch_us=5.0) == 0.0
    kw = dict(local_size=4, inner_bandwidth_gbps=400.0, inner_latency_us=0.5)
    bare = collective_time_s("all_reduce", 1e6, 16, 50.0, 5.0, "hierarchical", **kw)
    got = collective_time_s("all_reduce", 1e6, 16, 50.0, 5.0, "hierarchical", launch_us=5.0, **kw)
    assert got == pytest.approx(bare + 5e-6)


def test_per_nic_ring_busbw(h100):
    """A DP ring with one rank per node rides one NIC: busbw = 0.94 · 50 ≈ 47 GB/s (issue 290)."""
    t = group_collective_time_s(h100, "all_reduce", 8 * 2**30, 16, 8, algorithm="ring")
    assert busbw_gbps("all_reduce", 8 * 2**30, 16, t) == pytest.approx(47.0, rel=0.02)


def test_same_scale_up_fabric_has_the_same_latency():
    """H100 SXM and H200 SXM both sit on NVLink4 + NVSwitch3 (HGX H100/H200 baseboards): one fabric,
    one per-step latency (the 8-GPU 8-byte all-reduce floor, 13 us on DGX H100). A different value
    made H200 decode slower than H100's at the same layout."""
    h100, h200 = load_option("hardware", "h100-sxm-80gb"), load_option("hardware", "h200-sxm-141gb")
    assert h200.scale_up.name == h100.scale_up.name
    assert h200.scale_up.latency_us == h100.scale_up.latency_us
    assert h200.scale_up.collective_launch_us == h100.scale_up.collective_launch_us
    assert h200.scale_up.bandwidth_gbps == h100.scale_up.bandwidth_gbps


def test_pat_all_gather_latency_is_logarithmic_with_one_rank_per_node(h100):
    """NCCL 2.23+ PAT (all-gather / reduce-scatter, one GPU per node): ceil(log2 n) latency steps
    instead of the ring's n−1; same bytes. 48 ranks 8 apart (tp 8): 6 NET steps, not 47, plus the
    launch once, in the fastest protocol (module docstring: a group spanning domains runs each)."""
    S = 192e6  # bandwidth-bound: Simple (8.4 us launch, NCCL's 14 us NET step, the whole bandwidth)
    t = group_collective_time_s(h100, "reduce_scatter", S, 48, 8)
    assert float(t) == pytest.approx(8.4e-6 + 6 * 14e-6 + 47 / 48 * S / 47e9, rel=1e-9)
    # two ranks per node (stride 4): PAT does not apply, the ring pays 47 steps: 24 cross a NIC, 23 stay on NVLink
    t4 = group_collective_time_s(h100, "reduce_scatter", S, 48, 4)
    bw = min(360.0, 2 * 47.0) * 1e9
    rings = {  # launch + NIC steps x NET step + NVLink steps x step + bytes at the protocol's fraction
        "LL": 4.83e-6 + 23 * 5e-6 + 24 * 0.583e-6 + 47 / 48 * S / (0.5 * bw),
        "LL128": 14e-6 + 23 * 4e-6 + 24 * 1.9e-6 + 47 / 48 * S / (0.92 * bw),
        "Simple": 8.4e-6 + 23 * 14e-6 + 24 * 3.4e-6 + 47 / 48 * S / bw,
    }
    assert min(rings, key=rings.get) == "LL128"
    assert float(t4) == pytest.approx(rings["LL128"], rel=1e-9)


# nccl-tests times across message sizes on one 8-GPU NVSwitch node (aiconfigurator's tables; the file's
# header says how they were measured). Mean |time error| of the 256 KiB-32 MiB all-reduce, all-gather and
# reduce-scatter points, the bound asserted and, in the comment, the single-protocol model's error.
NCCL_SIZES_BOUNDS = {  # accelerator: (8 ranks, 2-8 ranks)
    "h100-sxm-80gb": (0.11, 0.17),  # was 28 %, 34 %
    "h200-sxm-141gb": (0.13, 0.17),  # was 30 %, 33 %
    "b200-180gb": (0.18, 0.24),  # was 22 %, 31 %
    # was 46 %, 52 %; 27 %, 38 % with protocols on H100's small-message latencies (now A100's own: 14 %, 27 %);
    # 0.8 x 300 GB/s still over-states A100's large busbw (222 measured at 512 MiB)
    "a100-sxm-80gb": (0.16, 0.29),
}


def _nccl_table(name: str) -> list[dict]:
    """Rows of tests/data/collectives_nccl_<name>.csv (aiconfigurator's nccl-tests points), comments skipped."""
    path = Path(__file__).parent / "data" / f"collectives_nccl_{name}.csv"
    with open(path) as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def _scale_up_without(hw, field: str):
    """The accelerator with one scale_up block (protocols, all_to_all) unset: the model before it."""
    return hw.model_copy(update={"scale_up": hw.scale_up.model_copy(update={field: None})})


@pytest.mark.parametrize("name", sorted(NCCL_SIZES_BOUNDS))
def test_mid_size_collectives_against_measured_nccl_tests(name):
    """NCCL's protocol choice (LL, LL128, Simple; cost/collectives.py `protocol_ring_time_s`) against
    nccl-tests at 256 KiB-32 MiB: within the stated mean error, and closer than the one-protocol model
    (LL's latency with Simple's bandwidth), which was too fast across this range (by 14-58 % on average)."""
    hw = load_option("hardware", name)
    rows = [r for r in _nccl_table("sizes") if r["accelerator"] == name]
    assert len(rows) == 72  # 3 collectives x 2, 4, 8 ranks x 8 sizes

    def errors(model, ranks):
        picked = [r for r in rows if int(r["ranks"]) in ranks]
        t = [
            float(group_collective_time_s(model, r["collective"], float(r["message_bytes"]), int(r["ranks"]), 1))
            for r in picked
        ]
        return np.array(t) * 1e6 / np.array([float(r["time_us"]) for r in picked]) - 1

    bound8, bound_all = NCCL_SIZES_BOUNDS[name]
    for ranks, bound in (((8,), bound8), ((2, 4, 8), bound_all)):
        new, old = errors(hw, ranks), errors(_scale_up_without(hw, "protocols"), ranks)
        assert np.mean(np.abs(new)) < bound, (ranks, np.mean(np.abs(new)))
        assert np.mean(np.abs(new)) < np.mean(np.abs(old)) - 0.04, (ranks, np.mean(np.abs(old)))
        assert np.mean(old) < -0.1  # the old model was too fast on the whole


@pytest.mark.parametrize(
    "case, protocol",
    [
        ("aic-h100-allreduce-8r-1024KiB", "LL"),
        ("aic-h100-allreduce-8r-8192KiB", "LL128"),
        ("aic-h100-allreduce-8r-32768KiB", "NVLS"),
        ("aic-h100-allgather-8r-8192KiB", "LL128"),
        ("aic-h100-reducescatter-8r-8192KiB", "LL128"),
    ],
)
def test_h100_protocol_choice_by_hand(h100, case, protocol):
    """8-rank H100 points by hand from the hardware file: launch_p + steps·step_p + factor·S/(fraction_p·360
    GB/s), the fastest protocol (LL 4.83 + 0.583/step at half bandwidth, LL128 14.0 + 1.9/step at 0.92,
    Simple 8.4 + 3.4/step at 1; NCCL's tuning.cc), within 15 % of the measured time (1 MiB all-reduce:
    25.4 us measured, 23.2 modelled, 18.1 before; 8 MiB: 78.9, 84.9, 53.8; 32 MiB: 199.8, 201.8 in NVLS (217.9 in
    LL128), 176.1)."""
    r = next(r for r in _nccl_table("sizes") if r["case"] == case)
    S, kind = float(r["message_bytes"]), r["collective"]
    steps, factor = (14, 1.75) if kind == "all_reduce" else (7, 0.875)
    by_hand = {
        p: launch + steps * step + factor * S / (frac * 360e3)
        for p, (launch, step, frac) in {
            "LL": (4.83, 0.583, 0.5),
            "LL128": (14.0, 1.9, 0.92),
            "Simple": (8.4, 3.4, 1.0),
        }.items()
    }
    if kind == "all_reduce":  # NVLS: 78.4 us + (1 + 1/8) S at 0.85 of 360 GB/s (hardware file, scale_up.nvls)
        by_hand["NVLS"] = 78.4 + 1.125 * S / (0.85 * 360e3)
    assert min(by_hand, key=by_hand.get) == protocol
    t_us = float(group_collective_time_s(h100, kind, S, 8, 1)) * 1e6
    assert t_us == pytest.approx(by_hand[protocol], rel=1e-9)
    assert t_us == pytest.approx(float(r["time_us"]), rel=0.15)


def test_protocols_leave_other_fabrics_alone(h100):
    """A fabric without `protocols` (AMD's xGMI: RCCL's constants are not NCCL's) keeps the base protocol
    at full bandwidth."""
    from parallmelism.cost.collectives import collective_time_s

    S = 8 * 2**20
    mi300x = load_option("hardware", "mi300x-192gb")
    assert mi300x.scale_up.protocols is None
    bw, lat = group_link(mi300x, 8, 1)
    assert float(group_collective_time_s(mi300x, "all_reduce", S, 8, 1)) == pytest.approx(
        float(collective_time_s("all_reduce", S, 8, bw, lat, launch_us=mi300x.scale_up.collective_launch_us)), rel=1e-12
    )


# A100 SXM4 80GB, aiconfigurator's nccl-tests table (ai-dynamo/aiconfigurator 095f58a5, systems/data/a100_sxm/
# comm/nccl/2.27.3/nccl_perf.parquet, NCCL 2.27.3, half): the small all-reduce floors (us)
A100_SMALL_ALL_REDUCE_US = {2: 10.0, 4: 14.2, 8: 21.5}  # 512 B to 8 KiB


@pytest.mark.parametrize("name", ["a100-sxm-80gb", "a100-sxm-40gb"])
def test_a100_small_all_reduce_meets_the_measured_floors(name):
    """launch 8.08 us + 0.958 us per ring step (hardware/a100-sxm-80gb.yaml, fitted on the 2- and 8-rank
    floors) meets all three measured floors within 5 % (4 ranks is the check, not the fit); the H100
    constants carried over before (4.83 + 0.583) gave 6.0 / 13.0 us, 40 % fast."""
    hw = load_option("hardware", name)
    for ranks, measured_us in A100_SMALL_ALL_REDUCE_US.items():
        t_us = float(group_collective_time_s(hw, "all_reduce", 4096.0, ranks, 1)) * 1e6
        ll_bandwidth_term_us = 2 * (ranks - 1) / ranks * 4096 / (0.5 * 0.8 * 300e3)  # LL: half of 240 GB/s
        assert t_us == pytest.approx(8.08 + 2 * (ranks - 1) * 0.958 + ll_bandwidth_term_us, rel=1e-9)
        assert t_us == pytest.approx(measured_us, rel=0.05)


# Blackwell small all-reduce floors (us, 512 B to 8 KiB), aiconfigurator's nccl-tests tables (ai-dynamo/aiconfigurator
# 095f58a5, systems/data/<system>/comm/nccl/2.29.2/nccl_perf.parquet, NCCL 2.29.2, half); GB200/GB300 hold 2, 4 ranks
BLACKWELL_SMALL_ALL_REDUCE_US = {
    "b200-180gb": {2: 10.2, 4: 15.0, 8: 25.1},
    "b300-288gb": {2: 9.6, 4: 14.3, 8: 24.6},
    "gb200-nvl72": {2: 10.9, 4: 15.6},
    "gb300-nvl72": {2: 9.4, 4: 15.1},
}


@pytest.mark.parametrize("name", sorted(BLACKWELL_SMALL_ALL_REDUCE_US))
def test_blackwell_small_all_reduce_meets_the_measured_floors(name):
    """One launch + per-step fit per NVLink5 fabric (B200/B300: 7.41 + 1.246 us a step from the two tables' 2- and
    8-rank floors; GB200/GB300: 7.55 + 1.3 from their 2- and 4-rank floors; the hardware files) meets every floor
    within 8.5 %, where the unsourced 2.0 us a step with H100's 4.83 us launch carried before read 8.8 us at 2 ranks
    and 32.8 at 8 (-13 % / +31 % on B200)."""
    hw = load_option("hardware", name)
    old = hw.model_copy(
        update={"scale_up": hw.scale_up.model_copy(update={"latency_us": 2.0, "collective_launch_us": 4.83})}
    )
    new_err, old_err = [], []
    for ranks, measured_us in BLACKWELL_SMALL_ALL_REDUCE_US[name].items():
        t_us = float(group_collective_time_s(hw, "all_reduce", 1024.0, ranks, 1)) * 1e6
        new_err.append(t_us / measured_us - 1)
        old_err.append(float(group_collective_time_s(old, "all_reduce", 1024.0, ranks, 1)) * 1e6 / measured_us - 1)
    assert np.max(np.abs(new_err)) < 0.085, new_err
    assert np.mean(np.abs(new_err)) < np.mean(np.abs(old_err)) - 0.03, (new_err, old_err)


def test_nvlink_bridge_runs_the_nvlink_protocols(h100):
    """H100 NVL's bridge is NCCL's NVLINK hardware class, as NVSwitch is: the same LL128 / Simple constants (tuning.cc
    hwLatencies[NVLINK]), so a TP2 8 MiB all-reduce costs what the protocol model gives, not LL's latency at the
    whole bandwidth (22 % less before)."""
    nvl = load_option("hardware", "h100-nvl-94gb")
    assert nvl.scale_up.protocols == h100.scale_up.protocols
    S = 8.0 * 2**20
    t = float(group_collective_time_s(nvl, "all_reduce", S, 2, 1))
    one = float(group_collective_time_s(_scale_up_without(nvl, "protocols"), "all_reduce", S, 2, 1))
    assert one < 0.85 * t


# all-to-all inside the node: hardware scale_up.all_to_all (cost/collectives.py all_to_all_time_s), fitted on
# these points; the bound on mean |time error| over 256 KiB-512 MiB at 2, 4, 8 ranks, and (comment) before
A2A_BOUNDS = {
    "h100-sxm-80gb": 0.07,  # was 33 % (every point too fast: n-1 ring steps at the whole 360 GB/s)
    "h200-sxm-141gb": 0.08,  # was 31 %
    "b200-180gb": 0.10,  # was 36 %
    "a100-sxm-80gb": 0.15,  # was 35 %
}


@pytest.mark.parametrize("name", sorted(A2A_BOUNDS))
def test_all_to_all_against_measured_nccl_tests(name):
    """NCCL's all-to-all as one grouped send/recv (one latency, Simple above 16 KiB per peer at the fitted
    fraction) against alltoall_perf at 256 KiB-512 MiB: within the stated mean error, unbiased within 5 %,
    and at least 20 points closer than the ring of n-1 steps at the whole bandwidth it replaced."""
    hw = load_option("hardware", name)
    rows = [r for r in _nccl_table("alltoall") if r["accelerator"] == name]
    assert len(rows) == 36  # 2, 4, 8 ranks x 12 sizes

    def errors(model):
        t = [
            float(group_collective_time_s(model, "all_to_all", float(r["message_bytes"]), int(r["ranks"]), 1))
            for r in rows
        ]
        return np.array(t) * 1e6 / np.array([float(r["time_us"]) for r in rows]) - 1

    new, old = errors(hw), errors(_scale_up_without(hw, "all_to_all"))
    assert np.mean(np.abs(new)) < A2A_BOUNDS[name], np.mean(np.abs(new))
    assert abs(np.mean(new)) < 0.05, np.mean(new)
    assert np.mean(np.abs(new)) < np.mean(np.abs(old)) - 0.2, np.mean(np.abs(old))


def test_h100_all_to_all_by_hand(h100):
    """8-rank H100, 8 MiB (1 MiB per peer, above the 16 KiB threshold): 13.1 us + (7/8) S / (0.77 x 360 GB/s)
    = 39.6 us against 41.4 measured (alltoall_perf); 8 KiB (1 KiB per peer): the base protocol, 4.83 + 7 x
    0.583 us + the bandwidth term, as before."""
    S = 8 * 2**20
    t_us = float(group_collective_time_s(h100, "all_to_all", S, 8, 1)) * 1e6
    assert t_us == pytest.approx(13.1 + 0.875 * S / (0.77 * 360e3), rel=1e-9)
    r = next(r for r in _nccl_table("alltoall") if r["case"] == "aic-h100-alltoall-8r-8192KiB")
    assert t_us == pytest.approx(float(r["time_us"]), rel=0.06)
    small = float(group_collective_time_s(h100, "all_to_all", 8192.0, 8, 1)) * 1e6
    assert small == pytest.approx(4.83 + 7 * 0.583 + 0.875 * 8192 / 360e3, rel=1e-9)


def test_all_to_all_twice_the_link_halves_its_bandwidth_term(h100):
    """What-if: twice the NVLink bandwidth halves the bandwidth term of the all-to-all (S at 2 beta costs
    what S/2 cost at beta, where both are above the threshold)."""
    fast = h100.model_copy(update={"scale_up": h100.scale_up.model_copy(update={"bandwidth_gbps": 900})})
    for S in (1 * 2**20, 64 * 2**20):
        base = float(group_collective_time_s(h100, "all_to_all", S / 2, 8, 1))
        assert float(group_collective_time_s(fast, "all_to_all", S, 8, 1)) == pytest.approx(base, rel=1e-12)


# NVLS (scale_up.nvls): 8-rank all-reduce at 32 MiB-512 MiB against aiconfigurator's nccl-tests points, the bound
# asserted and, in the comment, the error of the ring alone (LL / LL128 / Simple, no in-switch reduction)
NVLS_BOUNDS = {"h100-sxm-80gb": 0.03, "h200-sxm-141gb": 0.01}  # ring alone: 20 %, 23 % too slow


@pytest.mark.parametrize("name", sorted(NVLS_BOUNDS))
def test_nvls_all_reduce_against_measured_nccl_tests(name):
    """8-rank all-reduce where NCCL runs NVLS (32-512 MiB): within the stated mean |time error|, where the ring
    alone is 9-31 % too slow at every point; 2- and 4-rank calls are unchanged by it ((1 + 1/n) S of traffic
    against the ring's 2(n-1)/n S: NVLS loses at 2 ranks and ties at 4, whose measured busbw levels off at the
    ring's 350-360 GB/s)."""
    hw = load_option("hardware", name)
    ring = _scale_up_without(hw, "nvls")
    rows = [r for r in _nccl_table("large") + _nccl_table("sizes") if r["accelerator"] == name]
    rows = [r for r in rows if r["collective"] == "all_reduce" and float(r["message_bytes"]) >= 32 * 2**20]
    assert len(rows) == 15  # 32 MiB (sizes) + 64-512 MiB (large), at 2, 4, 8 ranks

    def errors(model, ranks):
        return np.array(
            [
                float(group_collective_time_s(model, "all_reduce", float(r["message_bytes"]), ranks, 1))
                * 1e6
                / float(r["time_us"])
                - 1
                for r in rows
                if int(r["ranks"]) == ranks
            ]
        )

    assert np.mean(np.abs(errors(hw, 8))) < NVLS_BOUNDS[name], errors(hw, 8)
    assert np.all(errors(ring, 8) > 0.09) and np.mean(errors(ring, 8)) > 0.18
    for ranks in (2, 4):
        assert errors(hw, ranks) == pytest.approx(errors(ring, ranks), abs=1e-12)


def test_nvls_by_hand_and_dgx_h100_large_all_reduce(h100):
    """8-rank H100 NVLS by hand, 78.4 us + (1 + 1/8) · S / (0.85 · 360 GB/s), and NVIDIA's dgxc-benchmarking
    busbw at 1 GiB and 8 GiB (466.3, 480.2 GB/s; not used in the fit): 466.7 and 474.8."""
    for S, busbw in ((2**30, 466.33), (8 * 2**30, 480.16)):
        t = float(group_collective_time_s(h100, "all_reduce", float(S), 8, 1))
        assert t * 1e6 == pytest.approx(78.4 + 1.125 * S / (0.85 * 360e3), rel=1e-9)
        assert float(busbw_gbps("all_reduce", S, 8, t)) == pytest.approx(busbw, rel=0.015)


def test_engine_without_nvls_keeps_the_ring(h100):
    """SGLang sets NCCL_NVLS_ENABLE=0 (conf/engine/sglang.yaml nccl_nvls false): its NCCL TP all-reduces of a
    serving pass are the ring's; vLLM keeps NCCL's default and gets NVLS above its custom kernel's 8 MiB."""
    from parallmelism.cost.collective_ops import collective, engine_tp_all_reduce_ops

    S = 64.0 * 2**20
    ar = collective(h100, "tp", "tp", "all_reduce", np.array([S]), np.array([8]), np.array([1]))
    ring = float(group_collective_time_s(_scale_up_without(h100, "nvls"), "all_reduce", S, 8, 1))
    nvls = float(group_collective_time_s(h100, "all_reduce", S, 8, 1))
    assert nvls < 0.9 * ring
    for engine, expected in (("sglang", ring), ("vllm", nvls)):
        ops = engine_tp_all_reduce_ops(h100, ar, load_option("engine", engine))
        nccl = next(op for op in ops if op.role == "tp")
        assert float(nccl.time_s[0]) == pytest.approx(expected, rel=1e-12), engine


def test_spanning_group_is_never_faster_than_the_same_call_inside_a_node(h100):
    """A 16-rank H100 all-reduce over two nodes (TP16, hierarchical or not) reads no more busbw than the 8-rank one
    inside a node, 1 MiB to 1 GiB: each protocol's fraction and NCCL's NET step latencies apply across nodes too
    (before: LL's latency at the whole bandwidth, 144 / 183 / 228 GB/s at 4 / 8 / 16 MiB against 137 / 173 / 227)."""
    for mib in (1, 2, 4, 8, 16, 32, 64, 256, 1024):
        S = mib * 2.0**20
        inside = float(busbw_gbps("all_reduce", S, 8, group_collective_time_s(h100, "all_reduce", S, 8, 1)))
        for hierarchical in (False, True):
            t = group_collective_time_s(h100, "all_reduce", S, 16, 1, hierarchical=hierarchical)
            assert float(busbw_gbps("all_reduce", S, 16, t)) < inside, (mib, hierarchical)
