"""validate's inference kind: a row above concurrency 1 whose closed-loop benchmark is stated (`requests`,
`random_range_ratio`) predicts TTFT as the mean of the request-level simulation of that benchmark
(validate/inference_cases.py); without them the steady state's TTFT stays."""

import numpy as np
import pytest

from parallmelism.validate import inference_cases


@pytest.mark.parametrize("length", [128, 1024, 8192])
def test_range_ratio_lengths_are_bench_servings(monkeypatch, length):
    """bench_serving --random-range-ratio r draws each length uniformly from the integers int(r·L)..L
    (np.random.randint(int(L * r), L + 1)); the simulated requests cover the same integers, each end within
    one token (the simulation draws its uniform lengths around their mean)."""
    from parallmelism.cost.serving_load import drawn_requests
    from parallmelism.specs import InferenceWorkload

    seen = {}

    def fake(row, ctx):
        seen.update(row)
        return {"ttft_mean_ms": 1.0}

    monkeypatch.setattr("parallmelism.validate.loaded_cases.loaded_prediction", fake)
    row = {"case": "x", "input_len": length, "output_len": length, "concurrency": 8, "random_range_ratio": 0.8}
    assert inference_cases.closed_loop_ttft_ms(row, None) == 1.0
    wl = InferenceWorkload(
        input_len=seen["input_len"],
        output_len=seen["output_len"],
        length_dist=seen["length_dist"],
        length_spread=seen["length_spread"],
    )
    drawn = drawn_requests(wl, 4000, 0).input_len
    lo, hi = int(length * 0.8), length  # bench_serving's ends
    assert abs(int(drawn.min()) - lo) <= 1 and abs(int(drawn.max()) - hi) <= 1
    assert np.mean(drawn) == pytest.approx((lo + hi) / 2, rel=0.01)
    assert seen["load_stat"] == "mean"


def test_only_stated_closed_loops_are_simulated(monkeypatch):
    monkeypatch.setattr(inference_cases, "closed_loop_ttft_ms", lambda row, ctx: 123.0)
    pred = {"ttft_ms": 50.0, "tpot_ms": 9.0}
    base = {"case": "x", "input_len": 1024, "output_len": 1024, "measured_ttft_ms": 80.0}
    stated = {**base, "concurrency": 4, "requests": 40}
    assert inference_cases.predicted_quantities(stated, pred, None) == {"ttft_ms": 123.0, "itl_ms": 9.0}
    for row in ({**base, "concurrency": 4}, {**stated, "concurrency": 1}, {**stated, "measured_ttft_ms": None}):
        assert inference_cases.predicted_quantities(row, pred, None) == {"ttft_ms": 50.0, "itl_ms": 9.0}


def test_range_ratio_outside_zero_one_is_one_sentence():
    from parallmelism.errors import UserError

    with pytest.raises(UserError, match="random_range_ratio=1.5 is not in"):
        inference_cases.closed_loop_ttft_ms(
            {"case": "x", "input_len": 8, "output_len": 8, "random_range_ratio": 1.5}, None
        )
