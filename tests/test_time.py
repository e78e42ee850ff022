"""Step time responds to every knob in the direction the physics says (issue 3 directional tests)."""

import numpy as np
import pytest

from conftest import stacked
from parallmelism.config.kernel_tables import kernel_model
from parallmelism.config import load_option
from parallmelism.cost.steptime import training_time
from parallmelism.engine import evaluate
from parallmelism.grid import enumerate_training_layouts
from parallmelism.specs import GridSpec, RunConfig, TrainWorkload

H100 = stacked(load_option("hardware", "h100-sxm-80gb"))


def frame(model="llama3.1-70b", ngpus=64, hw=H100, wl=None, **grid):
    base = dict(
        cp=[1],
        ep=[1],
        micro_batch=[1],
        vpp=[1],
        recompute=["selective"],
        sequence_parallel=[True],
        dp_sharding=["OPTIMIZER_STATES"],
    )
    base.update(
        {k: (v if isinstance(v, list) or v is None or k == "max_micro_batch" else [v]) for k, v in grid.items()}
    )
    r = RunConfig(
        stack=load_option("stack", "megatron-te"),
        model=load_option("model", model),
        hardware=hw,
        workload=wl or TrainWorkload(seq_len=4096, global_batch=256),
        grid=GridSpec(ngpus=[ngpus], **base),
    )
    return evaluate(r)[0]


def one(**kw):
    df = frame(**kw)
    assert len(df) == 1, df[["tp", "pp", "dp"]]
    return df.iloc[0]


def test_more_pp_at_fixed_micro_batches_raises_bubble():
    # dp = 2 and micro_batch = 1 in both: m = 128 micro-batches per pipeline.
    r2 = one(ngpus=32, tp=8, pp=2)
    r4 = one(ngpus=64, tp=8, pp=4)
    assert r2["num_micro_batches"] == r4["num_micro_batches"]
    assert r4["time_bubble_s"] > r2["time_bubble_s"] > 0


def test_interleaving_lowers_bubble():
    plain = one(tp=8, pp=4, vpp=1)
    inter = one(tp=8, pp=4, vpp=2)
    assert inter["time_bubble_s"] < plain["time_bubble_s"]
    assert inter["time_step_s"] < plain["time_step_s"]


def test_fully_shard_adds_dp_traffic_over_optimizer_states():
    os_ = one(tp=8, pp=1, dp_sharding="OPTIMIZER_STATES")
    fs = one(tp=8, pp=1, dp_sharding="FULLY_SHARD")
    assert fs["time_comm_dp_s"] > os_["time_comm_dp_s"] > 0
    noop = one(tp=8, pp=1, dp_sharding="NO_OP")
    assert noop["time_comm_dp_s"] > 0


def test_tp_group_leaving_nvlink_slows_down():
    model = load_option("model", "llama3.1-70b")
    wl = TrainWorkload(seq_len=4096, global_batch=256)
    grid = GridSpec(
        ngpus=[64],
        tp=[8],
        pp=[1],
        cp=[1],
        ep=[1],
        micro_batch=[1],
        vpp=[1],
        dp_sharding=["OPTIMIZER_STATES"],
        recompute=["none"],
        sequence_parallel=[True],
    )
    cols = enumerate_training_layouts(model, H100, wl, grid).columns
    small = H100.model_copy(update={"scale_up": H100.scale_up.model_copy(update={"domain_size": 4})})
    inside = training_time(cols, model, H100, wl, kernel_model(H100))
    outside = training_time(cols, model, small, wl, kernel_model(small))
    # two domains of 4: rail rings at min(360, 4·47) GB/s instead of 360 GB/s NVLink
    assert outside["time_comm_tp_s"][0] > 1.8 * inside["time_comm_tp_s"][0]
    assert outside["time_step_s"][0] > inside["time_step_s"][0]


@pytest.mark.parametrize("flag", ["overlap_dp_comm", "overlap_tp_comm", "overlap_pp_comm"])
def test_overlap_never_increases_exposed_time(flag):
    grid = dict(
        tp=None,
        pp=None,
        micro_batch=None,
        vpp=None,
        dp_sharding=None,
        recompute=None,
        sequence_parallel=None,
        max_micro_batch=2,
    )
    on = frame(model="llama3.1-8b", wl=TrainWorkload(seq_len=4096, global_batch=256, **{flag: True}), **grid)
    off = frame(model="llama3.1-8b", wl=TrainWorkload(seq_len=4096, global_batch=256, **{flag: False}), **grid)
    assert len(on) > 100
    # the step and the time not computing (exposed + bubble) never grow; the flag's own axis never
    # exposes more (another axis on the same link may take a larger share of the busiest-link bound,
    # cost/links.py; on a link-bound row a shorter bubble leaves the step at the link's busy time, so
    # the bubble's saving reappears as exposed communication)
    own = {"overlap_dp_comm": "dp", "overlap_tp_comm": "tp", "overlap_pp_comm": "pp"}[flag]
    for frame_ in (on, off):
        frame_["idle_s"] = frame_["time_comm_exposed_s"] + frame_["time_bubble_s"]
    for col in ("idle_s", f"time_comm_{own}_exposed_s", "time_step_s"):
        assert (on[col].to_numpy() <= off[col].to_numpy() * (1 + 1e-12) + 1e-12).all(), col


def test_fp8_lowers_compute_not_communication():
    bf = one(tp=8, pp=2, wl=TrainWorkload(seq_len=4096, global_batch=256, precision="bf16"))
    f8 = one(tp=8, pp=2, wl=TrainWorkload(seq_len=4096, global_batch=256, precision="fp8"))
    assert f8["time_compute_s"] < 0.85 * bf["time_compute_s"]
    assert f8["time_compute_s"] > 0.5 * bf["time_compute_s"]  # attention and elementwise stay bf16
    for ax in ("tp", "cp", "ep", "dp", "pp"):
        assert f8[f"time_comm_{ax}_s"] == pytest.approx(bf[f"time_comm_{ax}_s"])


def test_step_identity_and_units():
    r = one(tp=8, pp=4, vpp=2)
    exposed = sum(r[f"time_comm_{ax}_exposed_s"] for ax in ("tp", "cp", "ep", "dp", "pp"))
    assert r["time_comm_exposed_s"] == pytest.approx(exposed)
    assert r["tokens_per_s"] == pytest.approx(256 * 4096 / r["time_step_s"])
    assert r["mfu"] == pytest.approx(r["tflops_per_gpu"] * 1e12 / 989e12)
    assert 0 < r["mfu"] < r["hfu"] < 1
    assert r["time_step_s"] >= r["time_compute_s"]
    assert r["bound"] in ("compute", "memory", "communication", "bubble")


def test_moe_imbalance_and_ep_cost_time():
    wl1 = TrainWorkload(seq_len=4096, global_batch=256)
    wl2 = TrainWorkload(seq_len=4096, global_batch=256, moe_imbalance=1.5)
    a = one(model="mixtral-8x7b", tp=2, pp=1, ep=8, wl=wl1)
    b = one(model="mixtral-8x7b", tp=2, pp=1, ep=8, wl=wl2)
    assert a["time_comm_ep_s"] > 0
    assert b["time_comm_ep_s"] > a["time_comm_ep_s"] and b["time_step_s"] > a["time_step_s"]


def test_context_parallel_pays_ring_traffic():
    r = one(model="llama3.1-8b", tp=2, pp=1, cp=4, wl=TrainWorkload(seq_len=32768, global_batch=64))
    assert r["time_comm_cp_s"] > 0
    assert 0 <= r["time_comm_cp_exposed_s"] <= r["time_comm_cp_s"]


def test_breakdown_adds_up_and_show_prints_it():
    from conftest import invoke

    from parallmelism.cost.breakdown import training_breakdown

    model = load_option("model", "gpt3-175b")
    wl = TrainWorkload(seq_len=2048, global_batch=64, flash_attention=False)
    grid = GridSpec(
        ngpus=[64],
        tp=[8],
        pp=[8],
        cp=[1],
        ep=[1],
        micro_batch=[1],
        vpp=[3],
        dp_sharding=["NO_OP"],
        recompute=["selective"],
        sequence_parallel=[True],
    )
    cols = enumerate_training_layouts(model, load_option("hardware", "a100-sxm-80gb"), wl, grid).columns
    hw = stacked(load_option("hardware", "a100-sxm-80gb"))
    bd = training_breakdown(cols, model, hw, wl, kernel_model(hw))
    row = training_time(cols, model, hw, wl, kernel_model(hw))
    ops_total = sum(r["time_step_s"] for r in bd["ops"])
    parts = bd["summary"]["where_time_goes"]
    assert ops_total == pytest.approx(parts["compute (ops)"][0], rel=1e-9)
    assert sum(v for v, _ in parts.values()) == pytest.approx(row["time_step_s"][0], rel=1e-9)
    assert {c["axis"] for c in bd["collectives"]} == {"tp", "pp"}
    code, out = invoke(
        "show",
        "model=gpt3-175b",
        "hardware=a100-sxm-80gb",
        "workload.seq_len=2048",
        "workload.global_batch=64",
        "workload.flash_attention=false",
        "grid.ngpus=[64]",
        "grid.tp=8",
        "grid.pp=8",
        "grid.vpp=3",
        "grid.micro_batch=1",
        "grid.recompute=selective",
        "grid.sequence_parallel=true",
        "grid.dp_sharding=NO_OP",
        "grid.cp=1",
    )
    assert code == 0, out
    assert "where the step goes" in out and "per-op roofline" in out and "attention_scores" in out


def test_schedules_order_the_bubble():
    """GPipe and 1F1B share the (p-1)/m bubble (formulas.md); ZB-H1 fills two thirds of it."""
    rows = {}
    for sched in ("1f1b", "gpipe", "zero_bubble"):
        rows[sched] = one(tp=8, pp=4, wl=TrainWorkload(seq_len=4096, global_batch=256, schedule=sched))
    assert rows["gpipe"]["time_bubble_s"] == pytest.approx(rows["1f1b"]["time_bubble_s"])
    # the fill/drain chain's 2·(p−1) P2P hops (8 MiB over a 47 GB/s NIC + 5 us + the 4.83 us
    # collective launch every NCCL call pays, hardware/h100-sxm-80gb.yaml) stay in every schedule
    chain = 2 * 3 * (4096 * 8192 * 2 / 8 / 47e9 + 5e-6 + 4.83e-6)
    assert rows["zero_bubble"]["time_bubble_s"] - chain == pytest.approx((rows["1f1b"]["time_bubble_s"] - chain) / 3)
    # 1F1B bubble = (p-1)/m of m micro-batch times: (p-1) micro-batch times of a middle stage
    r = rows["1f1b"]
    steady = r["time_step_s"] - r["time_bubble_s"] - r["time_comm_pp_exposed_s"] - r["time_comm_dp_exposed_s"]
    assert r["time_bubble_s"] / r["pp_bubble_rate"] == pytest.approx(steady, rel=0.1)  # m x stage time


def test_recompute_costs_time_in_order():
    t = {rc: one(tp=8, pp=2, recompute=rc)["time_step_s"] for rc in ("none", "selective", "full")}
    assert t["none"] < t["selective"] < t["full"]


def test_blocking_pipeline_send_recv_puts_every_transfer_on_the_critical_path():
    """Llama-70B, tp 8, pp 4 (stride 64: the pipeline hops leave the node), s 4096, b 1, SP:
    one hop = T·h·2/t = 4096·8192·2/8 = 8 MiB at 47 GB/s (+5 us NIC latency + 4.83 us collective
    launch, hardware/h100-sxm-80gb.yaml). The fill/drain chain's
    2·(p−1) hops are part of the bubble either way; blocking P2P adds every steady-state
    transfer of the stage, 2·m hops (its whole link time), asynchronous P2P none of them."""
    hop = 4096 * 8192 * 2 / 8 / 47e9 + 5e-6 + 4.83e-6
    wl = dict(seq_len=4096, global_batch=256)
    r_async = one(tp=8, pp=4, wl=TrainWorkload(**wl))
    r_block = one(tp=8, pp=4, wl=TrainWorkload(**wl, overlap_pp_comm=False))
    m = r_async["num_micro_batches"]
    assert m == 128
    assert r_async["time_comm_pp_s"] == pytest.approx(2 * m * hop, rel=1e-6)
    assert r_async["time_comm_pp_exposed_s"] == 0.0
    assert r_block["time_comm_pp_exposed_s"] == pytest.approx(2 * m * hop, rel=1e-6)
    assert r_block["time_bubble_s"] == pytest.approx(r_async["time_bubble_s"], rel=1e-9)
    idle = r_async["pp_bubble_rate"] * (
        r_async["time_step_s"] - r_async["time_bubble_s"] - r_async["time_comm_dp_exposed_s"]
    )
    assert r_async["time_bubble_s"] - 2 * 3 * hop == pytest.approx(idle, rel=0.1)
    # The straggler overhead scales the whole step: (1 + x·log2(ngpus / 8)) (cost/overheads.py).
    stragglers = 1 + H100.overheads.straggler_per_doubling * np.log2(r_async["ngpus"] / 8)
    assert r_block["time_step_s"] - r_async["time_step_s"] == pytest.approx(2 * m * hop * stragglers, rel=1e-6)


def test_exposed_never_exceeds_link_time_per_axis():
    """Few micro-batches per pipeline (m = 4 < p − 1 = 7, GPipe and 1F1B) used to expose 2·(p−1)
    hops against a link time of 2·m: up to 15x the link in sweeps."""
    for sched in ("1f1b", "gpipe"):
        for overlap in (True, False):
            df = frame(
                ngpus=128,
                tp=[2, 8],
                pp=[8, 16],
                cp=[1, 2],
                wl=TrainWorkload(seq_len=4096, global_batch=16, schedule=sched, overlap_pp_comm=overlap),
            )
            assert len(df) > 0
            for ax in ("tp", "cp", "ep", "dp", "pp"):
                assert (df[f"time_comm_{ax}_exposed_s"] <= df[f"time_comm_{ax}_s"] * (1 + 1e-12)).all(), ax


def test_attention_core_takes_the_measured_kernel_times():
    """Flash core, one Llama-70B layer shard (tp 8, s 4096, b 1): 4·T·s·q/t·½ FLOPs forward, and the
    op takes the cuDNN kernel times measured on an H100 at 8 heads per GPU (h100_kernels_measured.csv:
    93.7 us forward, 285.3 us backward), not a flat fraction of peak."""
    from parallmelism.cost.flops import layer_ops
    from parallmelism.cost.roofline import Rates, op_times

    model = load_option("model", "llama3.1-70b")
    core = [op for op in layer_ops(model, 4096, 1, 8, 1, True, True) if op.name == "attention_core"][0]
    flops = 4 * 4096 * 4096 * 8192 / 8 * 0.5
    assert float(core.flops) == pytest.approx(flops)
    fwd, bwd = op_times(core, Rates(H100, "bf16", kernel_model(H100)))[:2]
    assert float(fwd) == pytest.approx(93.728e-6, rel=0.05)
    assert float(bwd) == pytest.approx(285.344e-6, rel=0.05)
