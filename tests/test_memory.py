"""Whole-stage training memory: which stage is most loaded, fits, FSDP buffers, MoE imbalance."""

import pytest

from parallmelism.config import load_option
from parallmelism.engine import evaluate
from parallmelism.specs import GridSpec, RunConfig, TrainWorkload
from parallmelism.units import GIB


def run(model, ngpus, wl=None, **grid):
    base = dict(cp=[1], micro_batch=[1], vpp=[1], recompute=["none"], sequence_parallel=[True])
    base.update({k: (v if isinstance(v, list) else [v]) for k, v in grid.items()})
    r = RunConfig(
        stack=load_option("stack", "megatron-te"),
        model=load_option("model", model),
        hardware=load_option("hardware", "h100-sxm-80gb"),
        workload=wl or TrainWorkload(seq_len=8192, global_batch=2048),
        grid=GridSpec(ngpus=[ngpus], **base),
    )
    return evaluate(r)[0]


def test_llama3_405b_pp16_second_stage_is_most_loaded():
    # 7 layers x 16 in-flight micro-batches on the first stage < 8 layers x 15 on the second.
    df = run("llama3.1-405b", 8192, tp=8, pp=16, dp_sharding="OPTIMIZER_STATES_AND_GRADS")
    row = df.iloc[0]
    assert row["mem_stage"] == "second"
    # TP+SP: norms 4sbh, QKV input 2sbh, Q 2sbh, proj input 2sbh, fc1 input 2sbh, SwiGLU 6sbI, all /t;
    # K and V: one whole KV head per rank (8 KV heads on tp 8), 4·s·b·d; fp32 LSE 4·a·s·b/t
    per_layer_mb = 8192 * (12 * 16384 + 6 * 53248) / 8 + 4 * 8192 * 128 + 4 * 128 * 8192 / 8
    assert row["mem_activations_gib"] == pytest.approx(8 * 15 * per_layer_mb / GIB)


def test_fits_agrees_with_headroom():
    df = run("llama3.1-70b", 64, tp=[4, 8], pp=[1, 2], dp_sharding=["NO_OP", "FULLY_SHARD"])
    assert ((df["mem_headroom_gib"] >= 0) == df["fits"]).all()
    assert (df["mem_total_gib"] + df["mem_headroom_gib"]).round(6).eq(round(79.647, 6)).all()


def test_fsdp_gathers_two_layers_of_bf16_weights():
    df = run(
        "llama3.1-8b",
        8,
        tp=1,
        pp=1,
        dp_sharding="FULLY_SHARD",
        sequence_parallel=[False],
        wl=TrainWorkload(seq_len=4096, global_batch=8),
    )
    layer = 4096 * 4096 * 2 + 2 * 4096 * 1024 + 3 * 4096 * 14336 + 2 * 4096
    assert df["mem_fsdp_gather_gib"].iloc[0] == pytest.approx(2 * 2 * layer / GIB)


def test_moe_imbalance_raises_expert_activations():
    a = run(
        "mixtral-8x7b", 64, tp=1, pp=1, ep=8, sequence_parallel=[False], wl=TrainWorkload(seq_len=4096, global_batch=64)
    )
    b = run(
        "mixtral-8x7b",
        64,
        tp=1,
        pp=1,
        ep=8,
        sequence_parallel=[False],
        wl=TrainWorkload(seq_len=4096, global_batch=64, moe_imbalance=1.5),
    )
    assert (b["mem_activations_gib"] > a["mem_activations_gib"]).all()
    assert (b["mem_states_gib"] == a["mem_states_gib"]).all()


def test_memory_columns_at_rows_are_the_columns_at_those_rows():
    # search/chunks.py reads the per-key table columns only at the rows a search times
    # (MemoryColumns.at) and checks finiteness on the tables (to_check): the same numbers and
    # order as training_memory's columns gathered at those rows.
    import numpy as np

    from parallmelism.config import load_run_configs
    from parallmelism.cost.memory import memory_columns, training_memory
    from parallmelism.grid.layouts import enumerate_training_layouts

    rc = load_run_configs(["model=mixtral-8x7b", "grid.ngpus=[64]", "workload.optimizer_offload=true"])[0][1]
    cols = enumerate_training_layouts(rc.model, rc.hardware, rc.workload, rc.grid).columns
    full = training_memory(cols, rc.model, rc.hardware, rc.workload)
    lazy = memory_columns(cols, rc.model, rc.hardware, rc.workload)
    rows = np.random.default_rng(1).choice(len(cols["tp"]), 500, replace=False)
    at = lazy.at(rows)
    assert list(at) == list(full) == list(lazy) and "mem_weights_gib" in lazy and "tp" not in lazy
    for k, v in full.items():
        assert at[k].dtype == v.dtype and np.array_equal(at[k], v[rows]), k
        assert np.array_equal(lazy[k], v), k
    assert set(lazy.to_check()) == {k for k in full if k not in lazy.tables}  # every table is finite


def test_memory_columns_check_every_column_when_a_table_is_not_finite():
    import numpy as np

    from parallmelism.cost.memory import MemoryColumns

    rows = {"fits": np.array([True, False])}
    unused = MemoryColumns({"mem_weights_gib": (np.array([1.0, np.inf, 2.0]), np.array([0, 2]))}, rows)
    assert unused.to_check() is unused and np.isfinite(unused["mem_weights_gib"]).all()  # the inf is read by no row
    finite = MemoryColumns({"mem_weights_gib": (np.array([1.0, 3.0, 2.0]), np.array([0, 2]))}, rows)
    assert finite.to_check() is rows
