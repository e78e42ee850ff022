"""One serving recommendation (search/serve_recommend.py): the rule on hand-built plans, the
binding sentences, and `plan serve`'s CSV with one row per deployment."""

from __future__ import annotations

import pandas as pd
import pytest

from parallmelism.search.serve_recommend import (
    COLOCATED,
    DISAGGREGATED,
    SERVE_PLANS_COLUMNS,
    Deployment,
    colocated_deployment,
    disaggregated_deployment,
    recommend,
)
from parallmelism.specs.plan import PlanSpec
from tests.conftest import invoke

COLO = Deployment(COLOCATED, 40, "10 replicas x 4 GPUs", "ITL 30 ms binds at 10 replicas x 4 GPUs", (("ITL", 0.05),))
DIS = Deployment(
    DISAGGREGATED,
    20,
    "4 prefill + 16 decode GPUs",
    "prefill pool: TTFT 1000 ms binds at 4 x 1 GPU; decode pool: the request rate (50 requests/s) binds at 4 x 4 GPUs",
    (("TTFT", 0.4), ("ITL", 0.2)),
)


def test_fewer_gpus_wins_and_the_line_names_it_its_gpus_and_what_binds():
    rec = recommend(COLO, DIS)
    assert rec.pick is DIS
    assert rec.line == (
        "Recommended: disaggregated prefill/decode on 20 GPUs (4 prefill + 16 decode GPUs); prefill pool: "
        "TTFT 1000 ms binds at 4 x 1 GPU; decode pool: the request rate (50 requests/s) binds at 4 x 4 GPUs; "
        "20 fewer GPUs than colocated (40)."
    )
    assert "\n" not in rec.line


def test_an_infeasible_deployment_is_never_picked_and_its_reason_is_said():
    none = Deployment(DISAGGREGATED, None, binding="no layout meets the decode pool's ITL 30 ms")
    rec = recommend(COLO, none)
    assert rec.pick is COLO
    assert rec.line == (
        "Recommended: colocated on 40 GPUs (10 replicas x 4 GPUs); ITL 30 ms binds at 10 replicas x 4 GPUs; "
        "the only deployment meeting every target (disaggregated prefill/decode: no layout meets the decode "
        "pool's ITL 30 ms)."
    )
    nothing = recommend(Deployment(COLOCATED, None, binding="no layout meets ITL 30 ms"), none)
    assert nothing.pick is None and nothing.line.startswith("Recommended: none; no deployment meets every target")


def test_a_tie_goes_to_more_headroom_on_the_tightest_target_then_to_colocated():
    tight = Deployment(DISAGGREGATED, 40, "8 prefill + 32 decode GPUs", "b", (("TTFT", 0.5), ("ITL", 0.01)))
    rec = recommend(COLO, tight)  # colocated's tightest: ITL 5 %; disaggregated's: ITL 1 %
    assert rec.pick is COLO
    assert rec.line.endswith(
        "as many GPUs as disaggregated prefill/decode, more headroom on its tightest target (ITL 5% vs ITL 1%)."
    )
    roomy = Deployment(DISAGGREGATED, 40, "8 prefill + 32 decode GPUs", "b", (("rate", 0.3), ("ITL", 0.2)))
    assert recommend(COLO, roomy).pick is roomy  # 20 % > 5 %
    same = Deployment(DISAGGREGATED, 40, "p", "b", (("ITL", 0.05),))
    rec = recommend(same, COLO)  # order of the arguments does not matter
    assert rec.pick is COLO and "colocated is one pool to run" in rec.line


def test_colocated_binding_and_headroom_from_counts():
    plan = PlanSpec(qps=50, ttft_ms=1000, tpot_ms=30, load=0.8)
    c = pd.Series(
        {"replicas": 15, "replica_gpus": 4, "replica_rps": 4.2, "total_gpus": 60, "ttft_ms": 250.0, "tpot_ms": 29.1}
    )
    d = colocated_deployment(c, {"both": 60, "free": 36, "ttft": 36, "tpot": 60}, plan, 50.0)
    assert d.binding == "ITL 30 ms binds at 15 replicas x 4 GPUs" and d.gpus == 60
    h = dict(d.headroom)
    assert h["TTFT"] == pytest.approx(0.75) and h["ITL"] == pytest.approx(0.03)
    assert h["rate"] == pytest.approx(15 * 4.2 * 0.8 / 50 - 1)  # 0.008: just above the planned 80 % busy
    assert d.tightest() == ("rate", pytest.approx(0.008))
    free = colocated_deployment(c, {"both": 60, "free": 60, "ttft": 60, "tpot": 60}, plan, 50.0)
    assert free.binding == "the request rate (50 requests/s) binds at 15 replicas x 4 GPUs"
    both = colocated_deployment(c, {"both": 60, "free": 36, "ttft": 40, "tpot": 44}, plan, 50.0)
    assert both.binding == "TTFT 1000 ms and ITL 30 ms together bind at 15 replicas x 4 GPUs"
    none = colocated_deployment(None, None, plan, 50.0)
    assert none.gpus is None and none.binding == "no layout meets TTFT 1000 ms and ITL 30 ms"


def test_disaggregated_deployment_from_the_pools():
    plan = PlanSpec(qps=16, ttft_ms=500, tpot_ms=12, load=0.8)
    p = pd.Series({"pool_gpus": 2, "pool_rps": 20.0})
    d = pd.Series({"pool_gpus": 1, "pool_rps": 32.0})
    dis = {"prefill": p, "decode": d, "total_gpus": 3, "ttft_ms": 300.0, "itl_ms": 10.0}
    got = disaggregated_deployment(dis, ("TTFT 500 ms binds at 2 x 1 GPU", "rate"), plan, 16.0)
    assert got.gpus == 3 and got.pools == "2 prefill + 1 decode GPUs"
    assert got.binding == "prefill pool: TTFT 500 ms binds at 2 x 1 GPU; decode pool: rate"
    # the smaller pool capacity (prefill, 20 prompts/s) at 80 % busy serves 16/s: headroom 0
    assert dict(got.headroom) == pytest.approx({"rate": 0.0, "TTFT": 0.4, "ITL": 1 / 6})
    missing = disaggregated_deployment({"prefill": None, "decode": d}, ("", ""), plan, 16.0)
    assert missing.gpus is None and missing.binding == "no layout meets the prefill pool's TTFT 500 ms"
    link = disaggregated_deployment({"no_link": "x has no scale-out link"}, ("", ""), plan, 16.0)
    assert link.binding == "not planned, x has no scale-out link"


def test_plan_serve_csv_holds_both_plans_and_marks_the_recommended_one(tmp_path):
    out = tmp_path / "p.csv"
    code, text = invoke(
        "plan", "serve", "model=llama3.1-8b", "qps=20", "ttft_ms=500", "itl_ms=20", "grid.ngpus=[1,2]", "--out", out
    )
    assert code == 0, text
    t = pd.read_csv(out)
    assert list(t.columns) == [*SERVE_PLANS_COLUMNS, "tool_version", "schema_version"]
    assert t["deployment"].tolist() == ["colocated", "disaggregated"]
    assert t["recommended"].sum() == 1
    pick = t[t["recommended"]].iloc[0]
    assert pick["total_gpus"] == t["total_gpus"].min()
    dis = t.iloc[1]
    assert dis["total_gpus"] == dis["prefill_gpus"] + dis["decode_gpus"]
    assert dis["prefill_gpus"] == dis["prefill_replicas"] * dis["prefill_replica_gpus"]
    assert dis["decode_gpus"] == dis["decode_replicas"] * dis["decode_replica_gpus"]
    colo = t.iloc[0]
    assert colo["total_gpus"] == colo["replicas"] * colo["replica_gpus"]
    assert pd.isna(colo["prefill_gpus"]) and pd.isna(dis["replicas"])
    assert all(isinstance(b, str) and " binds at " in b for b in t["binding_constraint"])
    line = next(x for x in text.splitlines() if x.startswith("Recommended: "))
    assert f"on {int(pick['total_gpus']):,} GPUs" in line
    summary = (tmp_path / "p.summary.md").read_text()
    assert line.split(";")[0] in summary


def test_plans_frame_schema_is_the_same_whichever_deployment_has_a_plan():
    from types import SimpleNamespace

    from parallmelism.search.serve_recommend import plans_frame

    hw = SimpleNamespace(name="h", cost_per_gpu_hour_usd=2.0)
    wl = SimpleNamespace(input_len=100, output_len=11)
    plan = PlanSpec(qps=5, tpot_ms=30, load=0.8)
    c = pd.Series({"replica_gpus": 4, "tp": 4, "pp": 1, "dp": 1, "batch": 8, "replicas": 2, "ttft_ms": 50.0})
    colo = Deployment(COLOCATED, 8, "2 replicas x 4 GPUs", "ITL 30 ms binds at 2 replicas x 4 GPUs")
    none = Deployment(DISAGGREGATED, None, binding="no layout meets the decode pool's ITL 30 ms")
    a = plans_frame("m", hw, wl, plan, 5.0, c, None, [colo, none], colo)
    b = plans_frame("m", hw, wl, plan, 5.0, None, None, [Deployment(COLOCATED, None, binding="x"), none], None)
    assert list(a.columns) == list(b.columns) == SERVE_PLANS_COLUMNS
    assert a.dtypes.tolist() == b.dtypes.tolist()
    assert a["recommended"].tolist() == [True, False] and b["recommended"].tolist() == [False, False]
    assert a["chosen"].tolist() == [True, False] and not b["chosen"].any()  # the colocated plan, if any
    assert a.loc[0, "total_gpus"] == 8 and a.loc[0, "tp"] == 4 and pd.isna(a.loc[0, "sp"])
    assert a["binding_constraint"].tolist() == [colo.binding, none.binding]
    assert pd.isna(a.loc[1, "total_gpus"]) and pd.isna(b.loc[0, "ttft_ms"])


def test_summary_heads_with_the_recommendation_even_without_a_colocated_plan():
    from types import SimpleNamespace

    from parallmelism.report.plan_summary import serve_summary

    run = SimpleNamespace(
        hardware=SimpleNamespace(name="h"),
        model=SimpleNamespace(name="m"),
        workload=SimpleNamespace(input_len=100, output_len=11),
    )
    line = "Recommended: disaggregated prefill/decode on 6 GPUs (2 prefill + 4 decode GPUs); b."
    text = serve_summary(pd.DataFrame(), run, PlanSpec(qps=5), "- disaggregated prefill/decode: ...", line)
    assert text.splitlines()[:5] == [
        "# Serving plan: m on h, 5 requests/s of 100 in / 11 out tokens",
        "",
        line,
        "",
        "No colocated layout meets the limits.",
    ]
    assert "Recommended" not in serve_summary(pd.DataFrame(), run, PlanSpec(qps=5))
