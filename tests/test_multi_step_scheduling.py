"""Multi-step scheduling (vLLM 0.6 --num-scheduler-steps, workload.scheduler_steps): decode iterations run
in runs of m per scheduler call and a new prompt is admitted only between runs, in the load simulation
(cost/serving_load.py) and in the steady-state mean TTFT (cost/inference_iteration.closed_loop)."""

from __future__ import annotations

import numpy as np
import pytest

from parallmelism.cost.inference_iteration import closed_loop
from parallmelism.cost.serving_load import IterationTimes, Scheduler, simulate

D = 0.01  # seconds: every iteration, whatever its tokens


def _two_requests(steps):
    """A (sent at 0, 10 prompt tokens, 30 out) then B (sent at 15 ms, 10 prompt, 2 out), prefill priority."""
    table = IterationTimes(np.array([0.0, 100.0]), np.full((5, 2), D))
    sched = Scheduler(4, 100, False, steps)
    return simulate(np.array([0.0, 0.015]), np.array([10, 10]), np.array([30, 2]), table, sched)


def test_a_prompt_waits_for_the_run_in_flight():
    """By hand: A's prefill ends at 10 ms. One step per call: B is admitted at the next iteration
    boundary (20 ms) and its prefill ends at 30 ms, TTFT 15 ms. Five steps: A's first run of five
    decode iterations takes 10-60 ms, B is admitted at 60 ms, first token at 70 ms, TTFT 55 ms."""
    assert _two_requests(1)["ttft_s"][1] == pytest.approx(0.015)
    assert _two_requests(5)["ttft_s"][1] == pytest.approx(0.055)
    assert _two_requests(5)["ttft_s"][0] == pytest.approx(0.010)  # an idle engine admits at once


def test_a_run_ends_when_its_sequences_finish():
    """One request of 3 output tokens with 10 steps a call: its run is cut short at its last token."""
    table = IterationTimes(np.array([0.0, 100.0]), np.full((2, 2), D))
    sim = simulate(np.array([0.0, 1.0]), np.array([10, 10]), np.array([3, 3]), table, Scheduler(1, 100, False, 10))
    assert sim["e2e_s"] == pytest.approx([0.03, 0.03])  # prefill + 2 decode iterations, each request


def test_the_mean_wait_counts_runs_of_m_decode_iterations():
    """W_iter = (r·t_mix² + rate_dec·m·t_dec²)/2 at the loop's own request rate (prefill priority)."""
    t_dec, t_mix, n_p, b, out = 0.02, 0.05, 1.0, 8.0, 200
    for m in (1, 10):
        s = closed_loop(np.array([t_dec]), np.array([t_mix]), np.array([n_p]), np.array([b]), out, 0.0, False, steps=m)
        lam = float(s["request_rate"][0])
        r = lam * (b - 1) / b * n_p
        rate_dec = 1 / (t_dec / (1 - r * t_mix))
        rho = r * t_mix
        expected = (r * t_mix**2 + rate_dec * m * t_dec**2) / 2 + rho * t_mix / (2 * (1 - rho))
        assert float(s["wait_s"][0]) == pytest.approx(expected, rel=1e-9)
    one = closed_loop(np.array([t_dec]), np.array([t_mix]), np.array([n_p]), np.array([b]), out, 0.0, False)
    ten = closed_loop(np.array([t_dec]), np.array([t_mix]), np.array([n_p]), np.array([b]), out, 0.0, False, steps=10)
    assert float(ten["ttft_s"][0]) > float(one["ttft_s"][0]) + 4 * t_dec  # about (m − 1)·t_dec/2 more
