"""best, pareto, plan train|serve, merge, plot: numbers against hand computations and full-table pandas."""

from __future__ import annotations

import pandas as pd
import pytest

from parallmelism.config import load_option, load_run_configs
from parallmelism.engine import evaluate
from parallmelism.errors import UserError
from parallmelism.search import pareto_mask
from parallmelism.search.plan import serve_plan_table, train_plan_table
from parallmelism.specs.plan import PlanSpec

from conftest import invoke, run_app, run_cli

SMALL = ["model=llama3.1-8b", "grid.ngpus=[8,16]", "grid.max_micro_batch=2"]


@pytest.fixture(scope="module")
def small_table():
    df, _ = evaluate(load_run_configs(SMALL)[0][1])
    assert "time_step_s" in df.columns  # the time model is part of every training sweep
    return df


# ----------------------------------------------------------------------------- plan formulas by hand


class _HW:
    tdp_w = 500.0
    cost_per_gpu_hour_usd = 2.0


def test_train_plan_numbers_by_hand():
    # 1000 sequences x 1000 tokens per 10 s step = 1e5 tokens/s; at 90% goodput 7.776e10 tokens take
    # 7.776e10 / 9e4 = 864,000 s = 10 days; 100 GPUs x 240 h = 24,000 GPU-hours = $48,000;
    # 100 x 500 W x 240 h x PUE 1.2 = 14.4 MWh.
    best = pd.DataFrame(
        {"ngpus": [100], "global_batch": [1000], "seq_len": [1000], "time_step_s": [10.0], "tp": [8], "pp": [1]}
    )
    t = train_plan_table(best, 7.776e10, _HW, PlanSpec(utilization=0.9, pue=1.2)).iloc[0]
    assert t["tokens_per_s"] == pytest.approx(1e5)
    assert t["days"] == pytest.approx(10.0)
    assert t["gpu_hours"] == pytest.approx(24_000.0)
    assert t["cost_usd"] == pytest.approx(48_000.0)
    assert t["energy_mwh"] == pytest.approx(14.4)
    assert t["steps"] == pytest.approx(77_760.0)
    assert bool(t["chosen"])


def test_train_plan_picks_fewest_gpus_meeting_days_and_fastest_within_budget():
    best = pd.DataFrame(
        {"ngpus": [64, 128, 256], "global_batch": 1000, "seq_len": 1000, "time_step_s": [40.0, 21.0, 11.0]}
    )
    by_days = train_plan_table(best, 1e12, _HW, PlanSpec(days=200))
    # days = 1e12 / (1e6/t · 0.9) / 86400: 514.4, 270.1, 141.5
    assert by_days["days"].tolist() == pytest.approx([1e12 / (1e6 / t * 0.9) / 86400 for t in (40, 21, 11)])
    assert by_days.loc[by_days["chosen"], "ngpus"].tolist() == [256]
    costs = by_days["cost_usd"].to_numpy()
    by_budget = train_plan_table(best, 1e12, _HW, PlanSpec(budget_usd=float(costs[1]) + 1))
    assert by_budget.loc[by_budget["chosen"], "ngpus"].tolist() == [128]  # 64 and 128 affordable; 128 faster


def test_train_plan_without_time_model_is_one_sentence():
    with pytest.raises(UserError, match="needs the time model"):
        train_plan_table(pd.DataFrame({"ngpus": [8]}), 1e12, _HW, PlanSpec())


def test_serve_plan_numbers_by_hand():
    class WL:
        input_len, output_len, batching = 900, 101, "static"

    # request latency 0.5 s + 100 x 20 ms = 2.5 s; batch 10 -> 4 requests/s per replica; at 80% load
    # 50 requests/s need ceil(50 / 3.2) = 16 replicas of 8/2 = 4 GPUs = 64 GPUs = $128/h;
    # $128 / (50 x 101 x 3600) x 1e6 = $7.0407 per million output tokens.
    rows = pd.DataFrame(
        {
            "ngpus": [8, 8],
            "dp": [2, 2],
            "tp": [4, 4],
            "pp": [1, 1],
            "batch": [10, 10],
            "ttft_ms": [500.0, 500.0],
            "tpot_ms": [20.0, 40.0],
            "e2e_latency_ms": [2500.0, 4500.0],  # ttft + 100·tpot (no send delay)
            "fits": [True, True],
        }
    )
    t = serve_plan_table(rows, WL, _HW, PlanSpec(qps=50, tpot_ms=30, load=0.8))
    assert len(t) == 1  # the 40 ms row misses the TPOT limit
    r = t.iloc[0]
    assert r["request_latency_s"] == pytest.approx(2.5)
    assert r["replicas"] == 16 and r["replica_gpus"] == 4 and r["total_gpus"] == 64
    assert r["usd_per_million_output_tokens"] == pytest.approx(128 / (50 * 101 * 3600) * 1e6)
    assert r["usd_per_million_tokens"] == pytest.approx(128 / (50 * 1001 * 3600) * 1e6)


def test_plan_serve_cli_sizes_the_fleet():
    code, text = invoke(
        "plan", "serve", "model=llama3.1-8b", "qps=20", "ttft_ms=2000", "tpot_ms=50", "grid.ngpus=[1,2]"
    )
    assert code == 0, text
    assert "total GPUs" in text and "per million output tokens" in text


# ----------------------------------------------------------------------------- commands end to end


def test_plan_train_cli_matches_fastest_fitting_layout(small_table, tmp_path):
    out = tmp_path / "plan.csv"
    code, text = invoke("plan", "train", *SMALL, "tokens=2e11", "-q", "--out", out)
    assert code == 0, text
    plan = pd.read_csv(out)
    hw = load_option("hardware", "h100-sxm-80gb")
    fit = small_table[small_table["fits"]]
    for _, row in plan.iterrows():
        fastest = fit[fit["ngpus"] == row["ngpus"]]["time_step_s"].min()
        assert row["time_step_s"] == pytest.approx(fastest, rel=1e-12)
        tokens_per_s = 512 * 8192 / fastest
        days = 2e11 / (tokens_per_s * 0.9) / 86400
        assert row["days"] == pytest.approx(days)
        assert row["gpu_hours"] == pytest.approx(row["ngpus"] * days * 24)
        assert row["cost_usd"] == pytest.approx(row["ngpus"] * days * 24 * hw.cost_per_gpu_hour_usd)
        assert row["energy_mwh"] == pytest.approx(row["ngpus"] * hw.tdp_w * days * 24 * 1.2 / 1e6)
    summary = (tmp_path / "plan.summary.md").read_text()
    assert "utilization (goodput) 90%" in summary and "PUE 1.2" in summary
    assert "kernel table" in summary and "named overheads" in summary  # what the training step is made of


def test_plan_train_errors_are_one_sentence_and_write_nothing(tmp_path):
    out = tmp_path / "plan.csv"
    # in this process (run_app): exit code, stderr and files are the command's, not the interpreter's
    r = run_app("plan", "train", *SMALL, "--out", out, cwd=tmp_path)
    assert r.returncode == 2 and "tokens=15e12" in r.stderr and "Traceback" not in r.stderr
    r = run_app("plan", "train", *SMALL, "tokens=1e13", "days=1", "-q", "--out", out, cwd=tmp_path)
    if "needs the time model" not in r.stderr:
        assert r.returncode == 2 and "plan.days=1" in r.stderr
    assert not out.exists()


def test_an_empty_plan_list_is_one_sentence(tmp_path):
    """plan.serve_batch=[] was a ZeroDivisionError traceback (the grid crossed an empty batch axis),
    plan.default_ngpus=[] "no layout to evaluate" and plan.ngpus=[] quietly the default counts: as
    grid.ngpus=[] is, each is refused in one sentence naming the key."""
    for key in ("ngpus", "default_ngpus", "serve_batch"):
        with pytest.raises(ValueError, match=f"{key}\n.*an empty list selects nothing; give at least one value"):
            PlanSpec(**{key: []})
    r = run_app("plan", "serve", "model=llama3.1-8b", "qps=5", "plan.serve_batch=[]", "-q", cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip() == "error: plan.serve_batch=[]: an empty list selects nothing; give at least one value"


def test_best_equals_pandas_on_the_full_table(small_table, tmp_path):
    out = tmp_path / "best.csv"
    code, text = invoke("best", *SMALL, "--top", "3", "-q", "--out", out)
    assert code == 0, text
    best = pd.read_csv(out)
    fit = small_table[small_table["fits"]]
    for n, grp in best[best["rank"] > 0].groupby("ngpus"):
        want = fit[fit["ngpus"] == n]["time_step_s"].sort_values(kind="stable").head(3).to_numpy()
        assert grp.sort_values("rank")["time_step_s"].to_numpy() == pytest.approx(want, rel=1e-12)
        assert grp["why"].iloc[0] == "fastest that fits"
    # rank 0: faster layouts that lose on memory
    lost = best[best["rank"] == 0]
    assert (~lost["fits"]).all() and (lost["loses_on"] == "memory").all()


def test_best_lists_the_faster_near_misses_not_only_the_fastest_of_all(tmp_path):
    """Llama-3.1-70B on 64 H100: the fastest layouts of all need 1.4-1.8 TiB (no near misses), but
    dozens within 25 % of the memory beat the winner (e.g. tp2 pp8 cp2 sharding the optimizer
    states only). `best` used to keep the fastest of all and then drop them all by the margin."""
    from parallmelism.search.best import NEAR_MISS_MEMORY_MARGIN

    out = tmp_path / "best.csv"
    code, text = invoke("best", "model=llama3.1-70b", "grid.ngpus=[64]", "-q", "--out", out)
    assert code == 0, text
    best = pd.read_csv(out)
    winner = best[best["rank"] == 1].iloc[0]
    lost = best[best["rank"] == 0]
    assert len(lost) > 0
    assert (lost["time_step_s"] < winner["time_step_s"]).all()
    assert (~lost["fits"]).all()
    usable = lost["mem_total_gib"] + lost["mem_headroom_gib"]
    assert (lost["mem_total_gib"] <= (1 + NEAR_MISS_MEMORY_MARGIN) * usable).all()


def test_pareto_cli_front_is_the_non_dominated_set_of_the_full_table(small_table, tmp_path):
    out = tmp_path / "front.csv"
    code, text = invoke("pareto", *SMALL, "-q", "--out", out)
    assert code == 0, text
    front = pd.read_csv(out)
    fit = small_table[small_table["fits"]]
    pts = fit[["ngpus", "time_step_s"]].to_numpy(float)
    fpts = front[["ngpus", "time_step_s"]].to_numpy(float)
    # no fitting layout dominates a front row
    for p in fpts:
        assert not ((pts <= p).all(axis=1) & (pts < p).any(axis=1)).any()
    # every fitting row off the front is dominated by a front row
    on = pareto_mask(pts[:, 0], pts[:, 1])
    for p in pts[~on]:
        assert ((fpts <= p).all(axis=1) & (fpts < p).any(axis=1)).any()
    assert len(front) == int(on.sum())


def test_merge_combines_multirun_parts(tmp_path):
    a, b = tmp_path / "a.csv", tmp_path / "b.parquet"
    for path, ov in ((a, "model=llama3.1-8b"), (b, "model=mixtral-8x7b")):
        code, text = invoke("sweep", ov, "grid.ngpus=[8]", "grid.max_micro_batch=1", f"output.path={path}", "-q")
        assert code == 0, text
    out = tmp_path / "merged.csv"
    code, text = invoke("merge", a, b, "--out", out)
    assert code == 0, text
    merged = pd.read_csv(out)
    pa_, pb = pd.read_csv(a), pd.read_parquet(b)
    assert len(merged) == len(pa_) + len(pb)
    assert set(merged["model"]) == {"llama3.1-8b", "mixtral-8x7b"}
    assert merged["mem_total_gib"].sum() == pytest.approx(pa_["mem_total_gib"].sum() + pb["mem_total_gib"].sum())
    r = run_app("merge", tmp_path / "nope.csv", "--out", tmp_path / "m2.csv", cwd=tmp_path)
    assert r.returncode == 2 and "does not exist" in r.stderr and not (tmp_path / "m2.csv").exists()


def test_quiet_prints_no_progress(tmp_path):
    r = run_cli("best", *SMALL, "-q", "--out", tmp_path / "b.csv")
    assert r.returncode in (0, 2)
    assert r.stderr == "" or "error" in r.stderr
    assert "evaluating" not in r.stdout and "searching" not in r.stdout


def test_no_progress_bar_on_a_pipe(tmp_path):
    """Without a terminal the bar drew nothing and left a lone newline on stderr: a blank line before
    an error's one sentence, and stderr never empty for a run that went well."""
    r = run_cli("sweep", *SMALL, f"output.path={tmp_path / 's.csv'}")
    assert r.returncode == 0 and r.stderr == "", repr(r.stderr)
    r = run_cli("sweep", *SMALL, "grid.tp=3", f"output.path={tmp_path / 'e.csv'}")
    assert r.returncode == 2 and r.stderr.startswith("error: "), repr(r.stderr)


@pytest.mark.parametrize("kind", ["memory", "pareto", "scaling", "step-time", "roofline"])
def test_plot_writes_png_and_svg(kind, small_table, tmp_path):
    pytest.importorskip("matplotlib")
    png, svg = tmp_path / f"{kind}.png", tmp_path / f"{kind}.svg"
    code, text = invoke("plot", kind, *SMALL, "--out", png)
    assert code == 0, text
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    code, text = invoke("plot", kind, *SMALL, "--out", svg)
    assert code == 0, text
    assert b"<svg" in svg.read_bytes()[:2000]


def test_plot_bad_input_is_one_sentence(tmp_path):
    r = run_app("plot", "pie", *SMALL, "--out", tmp_path / "x.png", cwd=tmp_path)
    assert r.returncode == 2 and "unknown plot 'pie'" in r.stderr
    r = run_app("plot", "memory", *SMALL, "--out", tmp_path / "x.jpg", cwd=tmp_path)
    assert r.returncode == 2 and ".png or .svg" in r.stderr
    assert list(tmp_path.iterdir()) == []


def test_readme_search_commands_run(tmp_path, monkeypatch, small_table):
    """Every command of README's "Search and capacity planning" block runs as written (the multirun
    and merge lines are run by tests/test_launchers.py with the same launcher arguments)."""
    import re
    import shlex

    from conftest import REPO

    text = (REPO / "README.md").read_text()
    section = text[text.index("## Search and capacity planning") :]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    commands = [line.split("  #")[0].strip() for line in block.splitlines() if line.startswith("parallmelism ")]
    assert len(commands) >= 6
    monkeypatch.chdir(tmp_path)
    for cmd in commands:
        args = shlex.split(cmd)[1:] + ["--quiet"]
        code, out = invoke(*args)
        assert code == 0, f"{cmd}\n{out}"


def test_full_output_streams_every_row_to_a_parquet_dataset(small_table, tmp_path):
    full = tmp_path / "all"
    code, text = invoke("pareto", *SMALL, "-q", "--full-output", full, "--out", tmp_path / "front.csv")
    assert code == 0, text
    back = pd.read_parquet(full)
    assert len(back) == len(small_table)
    assert back["time_step_s"].sum() == pytest.approx(small_table["time_step_s"].sum(), rel=1e-12)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["all", "front.csv"]


def test_merge_reads_a_full_output_dataset(small_table, tmp_path):
    full = tmp_path / "all"
    code, text = invoke("pareto", *SMALL, "-q", "--full-output", full)
    assert code == 0, text
    code, text = invoke("merge", full, "--out", tmp_path / "m.csv")
    assert code == 0, text
    merged = pd.read_csv(tmp_path / "m.csv")
    assert len(merged) == len(small_table)
    assert list(merged.columns[:4]) == ["model", "hardware", "workload", "ngpus"]  # schema order restored
