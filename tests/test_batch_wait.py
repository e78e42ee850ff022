"""TensorRT-LLM's batch waiting (cost/batch_wait.py) in the request-level simulation
(cost/serving_load.py): a hand-worked trace gives the iteration each held prompt is released in; the
token-ratio release, either knob at 0, the closed form's mean hold against its window rule, the
engine fields' and case columns' bounds (one sentence, exit 2)."""

from __future__ import annotations

import numpy as np
import pytest

from parallmelism.cost.batch_wait import mean_hold_s, release
from parallmelism.cost.serving_load import IterationTimes, Scheduler, simulate
from parallmelism.errors import UserError

from conftest import REPO, run_app

D = 0.01  # s: every iteration of the toy takes 10 ms, whatever it carries


def _trace(iters: int, ratio: float, arrivals=(0.0, 0.035), prompts=(4, 4), outputs=(100, 3), draft=0):
    times = IterationTimes(np.array([0.0, 100.0]), np.full((4, 2), D))
    sched = Scheduler(max_batch=3, token_budget=100, batch_wait_iters=iters, batch_wait_ratio=ratio, draft_tokens=draft)
    return simulate(np.array(arrivals), np.array(prompts), np.array(outputs), times, sched)


def test_a_prompt_arriving_while_others_decode_is_held_timeout_iterations():
    """Worked by hand, 10 ms iterations, timeout 3, ratio 0.5 of a 100-token budget (50 tokens: never
    reached by 4 + 1). A (4 tokens) arrives at 0: nothing decodes, so its prompt runs at once, first
    token at 10 ms. A decodes in iterations ending 20, 30, 40 ms; B (4 tokens) arrives at 35 ms and is
    admitted at 40 ms. Iterations ending 50, 60, 70 ms hold it (count 0, 1, 2 < 3: A decodes alone);
    the one ending 80 ms finds count 3 and runs B's prompt: TTFT 80 − 35 = 45 ms (15 ms without the
    wait). A's tokens keep coming every 10 ms through the hold."""
    held = _trace(3, 0.5)
    np.testing.assert_allclose(held["ttft_s"], [0.010, 0.045], atol=1e-12)
    off = _trace(0, 0.0)
    np.testing.assert_allclose(off["ttft_s"], [0.010, 0.015], atol=1e-12)
    # A: 100 tokens, one per 10 ms iteration from 10 ms on, B's pass included
    assert held["finish_s"][0] == pytest.approx(0.010 + 99 * D)
    # B: first token at 80 ms, then 2 more
    assert held["finish_s"][1] == pytest.approx(0.080 + 2 * D)


def test_prompts_arriving_during_a_hold_join_it_and_run_together():
    """C arrives at 55 ms, admitted at 60 ms while B is held (count 2 after the 60 ms iteration): the
    one counter releases both in the iteration ending 80 ms: B waits 45 ms, C 25 ms."""
    sim = _trace(3, 0.5, arrivals=(0.0, 0.035, 0.055), prompts=(4, 4, 4), outputs=(100, 3, 3))
    np.testing.assert_allclose(sim["ttft_s"], [0.010, 0.045, 0.025], atol=1e-12)


def test_the_token_ratio_releases_at_once_and_either_knob_at_zero_holds_nothing():
    """ratio 0.05 of 100 = 5 tokens: B's 4 prompt tokens + A's decode token reach it, so B runs in the
    iteration it is admitted in (TTFT 15 ms); ratio 0.06 (6 tokens) holds it. timeout 0 or ratio 0:
    TensorRT-LLM's release test passes at once (count ≥ 0, tokens ≥ 0)."""
    assert _trace(3, 0.05)["ttft_s"][1] == pytest.approx(0.015)
    assert _trace(3, 0.06)["ttft_s"][1] == pytest.approx(0.045)
    for iters, ratio in ((0, 0.5), (3, 0.0)):
        assert _trace(iters, ratio)["ttft_s"][1] == pytest.approx(0.015)
    assert release(0, 0, 0.0, 0.9, 16384) and release(0, 20, 0.0, 0.0, 16384)
    assert not release(19, 20, 14745.0, 0.9, 16384) and release(19, 20, 14746.0, 0.9, 16384)


def test_an_iteration_that_gives_no_prompt_tokens_is_not_asked():
    """TensorRT-LLM asks only in iterations with context requests. Budget 1 token, worked by hand: A
    (1 prompt token, 5 out) runs at once, first token at 10 ms, decodes at 20..50 ms. B (4 tokens)
    arrives at 35 ms, admitted at 40 ms; in the iteration ending 50 ms A's decode fills the budget,
    B gets nothing and the counter stays (the simulation had counted it). From 50 ms nothing
    decodes: B's 4 one-token chunks end at 60, 70, 80, 90 ms: TTFT 55 ms, with or without waiting
    (a zero-budget iteration's decodes reach any ratio, so the old count was reset, not raised:
    the same trace; the rule now is TensorRT-LLM's)."""
    times = IterationTimes(np.array([0.0, 100.0]), np.full((4, 2), D))
    for iters, ratio in ((3, 0.5), (0, 0.0)):
        sched = Scheduler(max_batch=3, token_budget=1, batch_wait_iters=iters, batch_wait_ratio=ratio)
        sim = simulate(np.array([0.0, 0.035]), np.array([1, 4]), np.array([5, 1]), times, sched)
        np.testing.assert_allclose(sim["ttft_s"], [0.010, 0.055], atol=1e-12)
        np.testing.assert_allclose(sim["finish_s"], [0.050, 0.090], atol=1e-12)


def test_a_decoding_sequence_counts_one_plus_its_draft_tokens():
    """TensorRT-LLM counts 1 + draft tokens per generation request (module docstring, `tokens`). With
    3 draft tokens A's decode counts 4: B's 4 prompt tokens + 4 = 8 reach ratio 0.08 of 100, so B runs
    in the iteration it is admitted in (TTFT 15 ms); without drafts 4 + 1 = 5 < 8 holds it (45 ms).
    The closed form the same: 999 others x 4 + 1024 = 5020 ≥ 0.3 x 16384 = 4915.2 holds nothing,
    999 + 1024 = 2023 holds."""
    assert _trace(3, 0.08, draft=3)["ttft_s"][1] == pytest.approx(0.015)
    assert _trace(3, 0.08)["ttft_s"][1] == pytest.approx(0.045)
    b = np.array([1000.0])
    assert mean_hold_s(20, 0.3, 16384, 1024, 3, b, 0.01, 4.0)[0] == 0
    assert mean_hold_s(20, 0.3, 16384, 1024, 0, b, 0.01, 4.0)[0] > 0


def test_closed_form_mean_hold_is_the_window_rule():
    """A window of W = timeout·t_dec opened by a prompt and joined by Poisson arrivals at λ: the mean
    hold W(1 + λW/2)/(1 + λW) against a direct simulation of that rule; 0 at one sequence in flight,
    where the ratio is reached, and with either knob at 0."""
    lam, t_dec, k = 4.0, 0.01, 20
    w = k * t_dec
    arrivals = np.cumsum(np.random.default_rng(0).exponential(1 / lam, 200_000))
    waits, end = np.empty(len(arrivals)), -1.0
    for i, a in enumerate(arrivals):
        end = a + w if a > end else end
        waits[i] = end - a
    got = mean_hold_s(k, 0.9, 16384, 1024, 0, np.array([4.0]), t_dec, lam)
    assert got[0] == pytest.approx(waits.mean(), rel=0.01)
    assert mean_hold_s(k, 0.9, 16384, 1024, 0, np.array([1.0]), t_dec, lam)[0] == 0
    assert mean_hold_s(k, 0.9, 2048, 1024, 0, np.array([1000.0]), t_dec, lam)[0] == 0  # 999 + 1024 ≥ 1843
    assert mean_hold_s(0, 0.9, 16384, 1024, 0, np.array([4.0]), t_dec, lam)[0] == 0


@pytest.mark.parametrize(
    "override, words",
    [
        (
            "engine.batch_wait_timeout_iters=-1",
            "engine.batch_wait_timeout_iters=-1: Input should be greater than or equal to 0",
        ),
        (
            "engine.batch_wait_max_tokens_ratio=1.5",
            "engine.batch_wait_max_tokens_ratio=1.5: Input should be less than or equal to 1",
        ),
    ],
)
def test_bad_engine_batch_wait_is_one_sentence(override, words):
    r = run_app("show", "model=llama3.1-8b", "grid.tp=[1]", "workload=inference", override, cwd=REPO)
    assert r.returncode == 2
    assert words in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_a_case_row_with_a_bad_batch_wait_column_is_one_sentence(tmp_path):
    import pandas as pd

    from parallmelism.validate.runner import run_validation

    df = pd.read_csv(REPO / "parallmelism" / "cases" / "inference_engines.csv", dtype=str, keep_default_na=False)
    row = df[df["case"] == "aic-trtllm-l31-70b-h200-tp4-1024-1024-c4"]
    bad = tmp_path / "bad.csv"
    row.assign(batch_wait_timeout_iters="2.5").to_csv(bad, index=False)
    with pytest.raises(UserError, match="aic-trtllm-l31-70b-h200-tp4-1024-1024-c4.*batch_wait_timeout_iters"):
        run_validation([bad], [], None)


def test_the_serving_model_passes_the_draft_tokens_to_the_hold():
    """DeepSeek-V3 on TensorRT-LLM (H200, TP8, 300 in flight, 1024-token prompts, budget 2048: ratio
    0.9 -> 1843.2 tokens): without speculation 299 + 1024 = 1323 tokens hold the prompt (TTFT wait
    longer under batch waiting); MTP with 3 draft tokens 299 x 4 + 1024 = 2220 reach the ratio: no hold."""
    from conftest import stacked
    from parallmelism.config import load_option
    from parallmelism.config.kernel_tables import kernel_model
    from parallmelism.cost.inference import inference_columns
    from parallmelism.grid.inference import enumerate_inference_layouts
    from parallmelism.specs import GridSpec, InferenceWorkload

    hw, model = stacked(load_option("hardware", "h200-sxm-141gb")), load_option("model", "deepseek-v3")
    base = load_option("engine", "trtllm")
    wait = base.model_copy(update={"batch_wait_timeout_iters": 20, "batch_wait_max_tokens_ratio": 0.9})
    hold = {}
    for spec in ("none", "mtp"):
        wl = InferenceWorkload(
            batch=300, batching="continuous", input_len=1024, prefill_chunk_tokens=2048, spec_method=spec, spec_tokens=3
        )
        cols = enumerate_inference_layouts(model, hw, wl, GridSpec(ngpus=[8], tp=[8])).columns
        one = {k: np.asarray(v)[:1] for k, v in cols.items()}
        ms = [inference_columns(one, model, hw, wl, kernel_model(hw), e)["ttft_wait_ms"][0] for e in (wait, base)]
        hold[spec] = ms[0] - ms[1]
    assert hold["none"] > 1.0 and hold["mtp"] == 0.0
