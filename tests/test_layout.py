"""cost/layout.py: the typed serving layout the serving cost model reads (issue 27, item 4)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from parallmelism.config import load_option
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
    from_cols = inference_columns(dict(COLS), model, hw, wl)
    again = inference_columns(dict(COLS), model, hw, wl)
    assert all(np.array_equal(from_cols[k], again[k]) for k in from_cols)
    a, b = decode_terms(model, hw, wl, COLS), decode_terms(model, hw, wl, ServingLayout.of(COLS))
    assert np.array_equal(a["stage_s"], b["stage_s"]) and np.array_equal(a["comm_s"], b["comm_s"])
