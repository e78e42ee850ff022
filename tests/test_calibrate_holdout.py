"""The overhead fit's leave-one-source-out check (validate/calibrate.py --holdout) and its use of the
scaling series' growth, on a stand-in model whose step time is linear in the four terms (the real
model takes a minute; this checks the bookkeeping: which rows each fit sees and which it predicts)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from parallmelism.validate import calibrate

TRUE = {"layer_launch_us": 100.0, "comm_contention": 0.2, "step_fixed_ms": 50.0, "straggler_per_doubling": 0.008}


def _linear_rows(n_per_source, rng):
    """Runs whose step = base + coef · terms, from three sources that agree on TRUE."""
    runs, cases = [], []
    for src in ("alpha", "beta", "gamma"):
        for i in range(n_per_source):
            coef = {
                "layer_launch_us": rng.uniform(1e-4, 4e-3),  # s per us: 100-4000 layer passes
                "comm_contention": rng.uniform(0.0, 0.5),  # s of hidden comm
                "step_fixed_ms": 1e-3,
                "straggler_per_doubling": rng.uniform(0.0, 12.0),  # doublings x step s
            }
            runs.append(SimpleNamespace(base=rng.uniform(0.5, 5.0), coef=coef))
            cases.append(f"{src}-{i}")
    return cases, runs


def _fake_predict(runs, terms):
    return np.array([r.base + sum(r.coef[t] * terms.get(t, 0.0) for t in calibrate.TERMS) for r in runs])


@pytest.fixture
def linear_model(monkeypatch):
    monkeypatch.setattr(calibrate, "_predict", _fake_predict)


def test_source_of_is_the_name_up_to_the_first_dash():
    assert calibrate.source_of("mcore-h100-32b") == "mcore"
    assert calibrate.source_of("korthikanti-530b-dp8-selective") == "korthikanti"
    assert calibrate.source_of("bloom") == "bloom"


def test_sources_that_agree_predict_each_other(linear_model):
    cases, runs = _linear_rows(6, np.random.default_rng(0))
    measured = _fake_predict(runs, TRUE)
    terms_all, out = calibrate.holdout(cases, runs, measured)
    assert list(out) == ["alpha", "beta", "gamma"]
    for src, (e_in, e_out, terms) in out.items():
        assert len(e_in) == len(e_out) == 6
        # the grid holds TRUE, so every fit lands within a grid step of it and predicts the
        # left-out source to well under 1 %
        assert e_out.max() < 1.0, src
    assert e_in.max() < 1.0


def test_a_source_the_others_do_not_explain_shows_only_when_left_out(linear_model):
    cases, runs = _linear_rows(6, np.random.default_rng(1))
    measured = _fake_predict(runs, TRUE)
    odd = np.array([c.startswith("gamma") for c in cases])
    measured[odd] *= 1.3  # gamma's runs were 30 % slower than the shared terms say
    _, out = calibrate.holdout(cases, runs, measured)
    e_in, e_out, _ = out["gamma"]
    # fitted with gamma the terms lean towards it; without it, gamma's rows sit at the full 23 %
    # (1 - 1/1.3) that no term the other sources support can explain
    assert e_out.mean() == pytest.approx(100 * (1 - 1 / 1.3), abs=1.0)
    assert e_out.mean() > e_in.mean()
    assert out["alpha"][1].mean() > out["alpha"][0].mean() - 1e-9  # held-out never beats in-sample here


def test_growth_series_pin_the_straggler_term_the_levels_cannot(linear_model):
    """Rows whose straggler and fixed-time coefficients are proportional fit every (fixed,
    straggler) pair on one line equally well; the scaling series' growth from their smallest to
    their largest GPU count is what tells them apart (calibrate module docstring)."""
    rng = np.random.default_rng(2)
    cases, runs = _linear_rows(6, rng)
    for r in runs:  # 0.004 per doubling costs what 10 ms per step costs, on every row
        r.coef["straggler_per_doubling"] = 2.5
    measured = _fake_predict(runs, TRUE)
    series = []
    for k in range(4):
        base = rng.uniform(1.0, 5.0)
        ends = []
        for doublings in (3.0, 8.0):  # 64 and 2,048 GPUs of an 8-GPU domain
            coef = {**runs[0].coef, "straggler_per_doubling": doublings * base}
            run = SimpleNamespace(base=base, coef=coef)
            ends.append((f"s{k}-{doublings}", float(_fake_predict([run], TRUE)[0]), run))
        series.append((f"s{k}", ends))
    growth = calibrate.growth_terms(series)
    terms, _, _ = calibrate.fit(cases, runs, measured, growth=growth)
    assert terms["straggler_per_doubling"] == pytest.approx(TRUE["straggler_per_doubling"])
    assert terms["step_fixed_ms"] == pytest.approx(TRUE["step_fixed_ms"])
    # without the series the levels alone pick another point of the line (parsimony: less fixed time)
    alone, _, _ = calibrate.fit(cases, runs, measured)
    assert alone["straggler_per_doubling"] != pytest.approx(TRUE["straggler_per_doubling"])


def test_calibrate_refuses_an_unknown_flag(capsys):
    assert calibrate.main(["--hold"]) == 2
    assert "usage" in capsys.readouterr().err
