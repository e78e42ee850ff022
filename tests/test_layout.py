"""cost/layout.py: the typed layouts the serving and training cost models read (issue 27, item 4)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from conftest import stacked
from parallmelism.config import load_option
from parallmelism.config.kernel_tables import kernel_model
from parallmelism.cost.inference import decode_terms, inference_columns
from parallmelism.cost.layout import ServingLayout
from parallmelism.specs import InferenceWorkload

COLS = {
    "ngpus": np.array([8, 16]),
    "tp": np.array([8, 8]),
    "pp": np.array([1, 2]),
    "sp": np.array([1, 1]),
    "ep": np.array([1, 1]),
    "dp": np.array([1, 1]),
    "batch": np.array([4, 16]),
    "kv_replication": np.array([1, 1]),
    "layers_per_stage": np.array([80, 40]),
}


def test_a_layout_is_frozen_typed_and_made_once():
    lay = ServingLayout.of(COLS)
    assert ServingLayout.of(lay) is lay
    assert lay.first_layer is None and len(lay) == 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        lay.tp = np.array([1, 1])  # type: ignore[misc]
    one = lay.rows(1)
    assert [int(x[0]) for x in (one.tp, one.pp, one.batch)] == [8, 1, 4] and len(one) == 1
    with pytest.raises(KeyError):
        ServingLayout.of({k: v for k, v in COLS.items() if k != "batch"})


def test_the_serving_model_reads_the_same_numbers_from_a_layout_or_columns():
    model, hw = load_option("model", "llama3.1-70b"), load_option("hardware", "h100-sxm-80gb")
    wl = InferenceWorkload(batch=4)
    from_cols = inference_columns(dict(COLS), model, hw, wl, kernel_model(hw), load_option("engine", "trtllm"))
    again = inference_columns(dict(COLS), model, hw, wl, kernel_model(hw), load_option("engine", "trtllm"))
    assert all(np.array_equal(from_cols[k], again[k]) for k in from_cols)
    # the cost terms take the typed layout; its first row alone costs what it costs among the rows
    lay = ServingLayout.of(COLS)
    a, b = (
        decode_terms(model, hw, wl, lay, km=kernel_model(hw)),
        decode_terms(model, hw, wl, lay.rows(1), km=kernel_model(hw)),
    )
    assert np.array_equal(a["stage_s"][:1], b["stage_s"]) and np.array_equal(a["comm_s"][:1], b["comm_s"])


def test_the_training_model_reads_a_typed_layout_keyed_like_the_columns():
    """TrainingLayout: the layout columns of a grid (its cost columns left out), frozen; the step
    time and memory of a layout equal those of its columns, row for row, also after `take`."""
    from parallmelism.config.kernel_tables import kernel_model
    from parallmelism.cost.layout import TRAINING_FIELDS, TrainingLayout
    from parallmelism.cost.memory import training_memory
    from parallmelism.cost.steptime import training_time
    from parallmelism.grid import enumerate_training_layouts
    from parallmelism.specs import GridSpec, TrainWorkload

    model, hw = load_option("model", "mixtral-8x7b"), stacked(load_option("hardware", "h100-sxm-80gb"))
    wl = TrainWorkload(seq_len=4096, global_batch=256)
    cols = dict(enumerate_training_layouts(model, hw, wl, GridSpec(ngpus=[64])).columns)
    cols["time_step_s"] = np.zeros(len(cols["tp"]))  # a cost column beside the layout: not a field
    lay = TrainingLayout.of(cols)
    assert TrainingLayout.of(lay) is lay and len(lay) == len(cols["tp"]) > 10
    assert not hasattr(lay, "time_step_s") and set(TRAINING_FIELDS) <= set(cols)
    with pytest.raises(dataclasses.FrozenInstanceError):
        lay.tp = np.array([1])  # type: ignore[misc]
    with pytest.raises(KeyError):
        TrainingLayout.of({k: v for k, v in cols.items() if k != "vpp"})
    km = kernel_model(hw)
    a, b = training_time(cols, model, hw, wl, km), training_time(lay, model, hw, wl, km)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    idx = np.array([7, 0, 3])
    sub = training_time(lay.take(idx), model, hw, wl, km)
    assert np.array_equal(sub["time_step_s"], a["time_step_s"][idx])
    m_a, m_b = training_memory(cols, model, hw, wl), training_memory(lay.rows(5), model, hw, wl)
    assert np.array_equal(m_a["mem_total_gib"][:5], m_b["mem_total_gib"])


def test_taken_rows_gather_a_column_when_first_read():
    """`take` defers each column's gather to its first read (cost/keys.py per_key's sub-layouts
    read a few columns): the values are those of the rows taken, a column not read is never
    gathered, and the taken layout is as frozen as its source."""
    from parallmelism.cost.layout import TRAINING_FIELDS, TrainingLayout

    rng = np.random.default_rng(27)
    lay = TrainingLayout.of({name: rng.integers(1, 64, 50) for name in TRAINING_FIELDS})
    idx = np.array([4, 4, 0, 49])
    sub = lay.take(idx)
    assert isinstance(sub, TrainingLayout) and len(sub) == 4  # len reads tp
    assert "pp" not in vars(sub) and "tp" in vars(sub)
    for name in TRAINING_FIELDS:
        assert np.array_equal(getattr(sub, name), getattr(lay, name)[idx])
    assert np.array_equal(sub.take(np.array([3, 0])).dp, lay.dp[[49, 4]])
    with pytest.raises(dataclasses.FrozenInstanceError):
        sub.tp = np.array([1])  # type: ignore[misc]
    with pytest.raises(AttributeError):
        sub.time_step_s  # type: ignore[attr-defined]  # noqa: B018
