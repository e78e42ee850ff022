"""Why a runner-up loses: additive step-time parts and the component that grew the most."""

from __future__ import annotations

import pandas as pd
import pytest

from parallmelism.search.explain import additive_time_parts, why_slower

COLUMNS = [
    "time_step_s",
    "time_compute_s",
    "time_bubble_s",
    "time_comm_exposed_s",
    "time_comm_tp_s",
    "time_comm_dp_s",
    "time_comm_tp_exposed_s",
    "time_comm_dp_exposed_s",
    "mem_total_gib",
]


def test_additive_parts_leave_out_link_times_and_the_exposed_total():
    assert additive_time_parts(COLUMNS) == [
        "time_compute_s",
        "time_bubble_s",
        "time_comm_tp_exposed_s",
        "time_comm_dp_exposed_s",
    ]


def test_additive_parts_reproduce_the_step_time_of_the_engine():
    from parallmelism.config import load_run_configs
    from parallmelism.engine import evaluate

    df, _ = evaluate(load_run_configs(["model=llama3.1-8b", "grid.ngpus=[16]", "grid.max_micro_batch=2"])[0][1])
    assert "time_step_s" in df.columns
    parts = additive_time_parts(df.columns)
    assert (df[parts].sum(axis=1) - df["time_step_s"]).abs().max() <= 1e-9 * df["time_step_s"].max()


def _row(step, compute, bubble, tp, dp, fits=True):
    return pd.Series(
        {
            "time_step_s": step,
            "time_compute_s": compute,
            "time_bubble_s": bubble,
            "time_comm_tp_exposed_s": tp,
            "time_comm_dp_exposed_s": dp,
            "fits": fits,
            "mem_total_gib": 90.0 if not fits else 60.0,
            "hbm_usable_gib": 79.5,
        }
    )


def test_runner_up_loses_on_the_component_that_grew_most():
    parts = additive_time_parts(COLUMNS)
    winner = _row(10.0, 8.0, 1.0, 0.5, 0.5)
    kind, why, delta = why_slower(winner, _row(10.5, 8.0, 1.4, 0.6, 0.5), parts)
    assert (kind, delta) == ("bubble", pytest.approx(0.5)) and "time_bubble_s (+400.0 ms)" in why
    kind, _, _ = why_slower(winner, _row(10.9, 8.1, 1.0, 0.5, 1.3), parts)
    assert kind == "comm"
    kind, why, _ = why_slower(winner, _row(9.0, 7.0, 1.0, 0.5, 0.5, fits=False), parts)
    assert kind == "memory" and "needs 90.0 GiB of 79.5" in why
    assert why_slower(winner, _row(10.0, 8.0, 1.0, 0.5, 0.5), parts)[0] == "tie"
