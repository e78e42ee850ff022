"""cost/keys.py: distinct keys of layout columns, and terms evaluated once per key."""

from __future__ import annotations

import numpy as np

from parallmelism.config.kernel_tables import kernel_model
from parallmelism.config import load_option
from parallmelism.cost.flops import head_ops, layer_ops
from parallmelism.cost.keys import per_key, unique_rows
from parallmelism.cost.roofline import Rates, op_times, ops_times


def _columns(rng, n):
    """Columns shaped like layout axes: booleans, small codes, powers of two, wide integers."""
    kinds = [
        lambda: rng.integers(0, 2, n).astype(bool),
        lambda: rng.integers(0, 4, n).astype(np.int8),
        lambda: rng.choice([1, 2, 4, 8, 64, 1024, 4096], n),
        lambda: rng.integers(0, 3000, n),
    ]
    return [kinds[int(rng.integers(0, len(kinds)))]() for _ in range(int(rng.integers(1, 8)))]


def test_unique_rows_groups_rows_as_np_unique():
    rng = np.random.default_rng(3)
    for _ in range(100):
        cols = _columns(rng, int(rng.integers(1, 5000)))
        idx, inv = unique_rows(*cols)
        expected = np.unique(np.stack([c.astype(np.int64) for c in cols]), axis=1, return_inverse=True)[1].ravel()
        assert len(idx) == expected.max() + 1
        assert (inv == expected).all()  # keys in ascending lexicographic order
        for c in cols:
            assert (c[idx][inv] == c).all()  # the row kept per key holds that key


def test_per_key_equals_the_term_row_by_row():
    rng = np.random.default_rng(5)
    cols = {"a": rng.integers(1, 9, 3000), "b": rng.choice([1, 2, 4, 64], 3000), "c": rng.integers(0, 3, 3000)}

    def term(c, scale):
        return {"x": {"y": np.log2(c["a"] * scale) / c["b"] + 0.1 * c["a"]}}

    res, K, inv = per_key(term, ("a", "b"), cols, 3.0)
    assert K == len(np.unique(cols["a"] * 1000 + cols["b"]))
    assert np.array_equal(res["x"]["y"][inv], term(cols, 3.0)["x"]["y"])  # bit for bit


def test_ops_times_equals_op_times_op_by_op():
    model = load_option("model", "llama3.1-70b")
    b = np.array([1.0, 2.0, 4.0, 1.0])
    t = np.array([8.0, 4.0, 8.0, 2.0])
    cp = np.array([1.0, 2.0, 1.0, 1.0])
    sp = np.array([True, False, True, True])
    for precision in ("bf16", "fp8"):
        rates = Rates(
            load_option("hardware", "h100-sxm-80gb"), precision, kernel_model(load_option("hardware", "h100-sxm-80gb"))
        )
        ops = layer_ops(model, 8192, b, t, cp, sp, flash=True) + head_ops(model, 8192, b, t, cp, sp)
        for op, together in zip(ops, ops_times(ops, rates)):
            for a, one in zip(together, op_times(op, rates)):
                assert np.array_equal(np.broadcast_to(a, b.shape), np.broadcast_to(one, b.shape)), op.name


def test_per_key_on_a_layout_groups_as_unique_rows():
    # per_key on a typed layout keeps each column's rank codes on the layout (the cost terms'
    # keys share most columns) and groups the rows exactly as unique_rows does on the columns
    from parallmelism.cost.layout import TRAINING_FIELDS, TrainingLayout

    rng = np.random.default_rng(29)
    lay = TrainingLayout.of(
        {
            name: rng.choice([1, 2, 4, 8, 64, 1024], 4000) if name != "vpp" else rng.integers(0, 3000, 4000)
            for name in TRAINING_FIELDS
        }
    )
    for key in [("tp", "pp"), ("vpp", "tp", "dp"), ("dp", "tp", "pp", "vpp")]:
        res, K, inv = per_key(lambda c: {"x": c.tp * 1000 + c.pp}, key, lay)
        idx, expected = unique_rows(*(getattr(lay, k) for k in key))
        assert K == len(idx) and np.array_equal(inv, expected)
        assert np.array_equal(res["x"][inv], lay.tp * 1000 + lay.pp) or "pp" not in key


def test_op_sums_per_shape_key_and_recompute_mode_equal_ops_time_row_by_row():
    # cost/steptime.py evaluates each op set's sums once per shape key for every recompute mode
    # and gathers them at (mode, key): bit for bit the sums of `ops_time` on every row with its
    # own recompute choice (fp8: the recast variant and the weight casts; a MoE model: ep in the key)
    from parallmelism.cost.layout import TrainingLayout
    from parallmelism.cost.steptime import (
        NONE,
        RECAST,
        _op_sets,
        _op_times_of_sets,
        _ops_sums_at_rows,
        ops_time,
    )
    from parallmelism.grid import enumerate_training_layouts
    from parallmelism.specs import GridSpec, Recompute, TrainWorkload

    assert [int(r) for r in Recompute] == list(range(len(Recompute)))  # the modes' axis is indexed by code
    hw = load_option("hardware", "h100-sxm-80gb")
    for model_name, precision in (("llama3.1-8b", "fp8"), ("mixtral-8x7b", "bf16")):
        model = load_option("model", model_name)
        wl = TrainWorkload(seq_len=4096, global_batch=64, precision=precision, fp8_bf16_edge_layers=1)
        cols = enumerate_training_layouts(model, hw, wl, GridSpec(ngpus=[16, 32])).columns
        rows = TrainingLayout.of(cols)
        assert len({int(r) for r in rows.recompute}) == len(Recompute) and len(rows.tp) > 1000
        rates = Rates(hw, precision, kernel_model(hw))
        edge = 1 if precision == "fp8" else 0
        got = _ops_sums_at_rows(rows, model, hw, wl, rates, edge)
        sets = _op_sets(rows, model, wl)
        times = _op_times_of_sets(sets, rates, wl, edge)
        assert set(got) == set(times)
        for name, t in times.items():
            base = name.removesuffix(RECAST)
            rc = np.zeros_like(rows.recompute) + NONE if base in ("head", "emb") else rows.recompute
            want = ops_time(sets["dense" if base == "dense16" else base], t, rc)
            for k, v in want.items():
                assert np.array_equal(np.broadcast_to(got[name][k], np.shape(v)), v), (model_name, name, k)
