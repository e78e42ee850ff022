"""plan serve by service-level targets: binding constraint, tokens/s load, itl_ms alias, and the
one-sentence failure that says how close the best layout came (numbers by hand)."""

from __future__ import annotations

import pandas as pd
import pytest

from parallmelism.config import load_option
from parallmelism.errors import UserError
from parallmelism.search.plan import plan_qps, serve_binding, serve_plan_failure, serve_plan_table
from parallmelism.specs.plan import PlanSpec
from tests.conftest import invoke

HW = load_option("hardware", "h100-sxm-80gb")


class WL:
    input_len, output_len, batching = 900, 101, "static"


# Two replica layouts of 1 GPU each (dp 1). Request latency = e2e_latency_ms/1000 (here ttft + 100·tpot):
#   A: batch 40, ttft 1000, tpot 40 -> 5 s -> 8 req/s per replica     (cheap, slow)
#   B: batch 10, ttft 200, tpot 20  -> 2.2 s -> 4.545 req/s per replica (fast)
ROWS = pd.DataFrame(
    {
        "ngpus": [1, 1],
        "dp": [1, 1],
        "tp": [1, 1],
        "pp": [1, 1],
        "batch": [40, 10],
        "ttft_ms": [1000.0, 200.0],
        "tpot_ms": [40.0, 20.0],
        "e2e_latency_ms": [5000.0, 2200.0],
        "fits": [True, True],
    }
)


def test_binding_constraint_names_the_limit_that_adds_gpus():
    plan = PlanSpec(qps=32, tpot_ms=30, load=1.0)
    # A alone: ceil(32/8) = 4 GPUs; B: ceil(32/4.545) = 8 GPUs; TPOT 30 ms rules A out
    table = serve_plan_table(ROWS, WL, HW, plan)
    assert table.iloc[0]["total_gpus"] == 8
    text = serve_binding(ROWS, WL, HW, plan)
    assert text.startswith("Binding constraint: TPOT/ITL") and "4 GPUs" in text
    loose = serve_binding(ROWS, WL, HW, PlanSpec(qps=32, tpot_ms=50, load=1.0))
    assert "the request rate" in loose


def test_tokens_per_s_is_output_tokens_over_output_len():
    assert plan_qps(PlanSpec(tokens_per_s=3232), WL) == pytest.approx(32)
    a = serve_plan_table(ROWS, WL, HW, PlanSpec(tokens_per_s=3232, load=1.0))
    b = serve_plan_table(ROWS, WL, HW, PlanSpec(qps=32, load=1.0))
    assert a["total_gpus"].tolist() == b["total_gpus"].tolist()
    with pytest.raises(UserError, match="exactly one of qps"):
        plan_qps(PlanSpec(qps=1, tokens_per_s=5), WL)


def test_failure_says_how_close_the_best_layout_came():
    text = serve_plan_failure(ROWS, "m", "h100-sxm-80gb", PlanSpec(qps=1, ttft_ms=100, tpot_ms=10))
    # B misses TTFT by 2x and TPOT by 2x; A by 10x and 4x: B is closest, at 2.00x
    assert "batch 10" in text and "TTFT 200.0 ms" in text and "2.00x" in text and "\n" not in text


def test_plan_serve_cli_target_no_layout_meets_is_one_sentence_exit_2():
    code, text = invoke("plan", "serve", "model=llama3.1-8b", "qps=5", "ttft_ms=1", "itl_ms=0.5", "grid.ngpus=[1]")
    assert code == 2 and "closest" in text and "x the limit it misses most" in text and "Traceback" not in text


def test_plan_serve_cli_itl_alias_and_binding_line(tmp_path):
    out = tmp_path / "p.csv"
    code, text = invoke(
        "plan",
        "serve",
        "model=llama3.1-8b",
        "tokens_per_s=20000",
        "ttft_ms=200",
        "itl_ms=10",
        "grid.ngpus=[1,2,4]",
        "--out",
        out,
    )
    assert code == 0, text
    t = pd.read_csv(out)  # one row per deployment (tests/test_serve_recommend.py)
    for _, plan in t[t["total_gpus"].notna()].iterrows():
        assert plan["tpot_ms"] <= 10 and plan["ttft_ms"] <= 200
    assert t["qps"].tolist() == pytest.approx([20000 / 256] * 2)  # default output_len 256
    assert "Binding constraint" in (tmp_path / "p.summary.md").read_text()
