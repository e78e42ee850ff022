"""Latency under load (cost/serving_load.py, cost/iteration_table.py, search/serve_load.py): the
simulated queue against queueing theory (Lindley's recursion and the Pollaczek-Khinchine M/D/1
mean wait), determinism, monotone percentiles, the closed loop of one client against the iteration
table, and the CLI's answers and refusals."""

from __future__ import annotations

import numpy as np
import pytest

from parallmelism.config import load_option
from parallmelism.config.kernel_tables import kernel_model
from parallmelism.cost.iteration_table import iteration_times
from parallmelism.cost.layout import ServingLayout
from parallmelism.cost.serving_load import (
    IterationTimes,
    Scheduler,
    load_summary,
    poisson_arrivals_s,
    simulate,
    weighted_percentile,
)
from parallmelism.errors import UserError
from parallmelism.cost.serving_load import drawn_requests
from parallmelism.search.serve_load import loaded_point, replica_capacity_rps
from parallmelism.specs import InferenceWorkload

from conftest import REPO, run_app

D = 0.01  # s, the toy's constant iteration time


def _constant(d_max=1):
    return IterationTimes(np.array([0.0, 100.0]), np.full((d_max + 1, 2), D))


@pytest.mark.parametrize("rho, tol", [(0.2, 0.06), (0.8, 0.10)])
def test_one_sequence_at_a_time_is_an_md1_queue(rho, tol):
    """max_batch 1, one-token requests whose prompt fits one iteration of constant D: each request
    is served in one iteration, FCFS, so the engine is an M/D/1 queue. Every request's wait is
    Lindley's W_{i+1} = max(0, W_i + D − A_{i+1}) on the same arrivals (exactly), and the mean wait
    is Pollaczek-Khinchine's ρD/(2(1−ρ)) (to the sampling error of 20,000 requests: the spread over
    seeds is about ±3 % at ρ = 0.2 and ±7 % at ρ = 0.8), and P(no wait) = 1 − ρ."""
    n = 20_000
    arr = poisson_arrivals_s(rho / D, n, seed=0)
    sim = simulate(arr, np.full(n, 10), np.full(n, 1), _constant(), Scheduler(1, 100, True))
    wait = sim["ttft_s"] - D
    gaps = np.diff(arr)
    lindley = np.zeros(n)
    for i in range(1, n):
        lindley[i] = max(0.0, lindley[i - 1] + D - gaps[i - 1])
    np.testing.assert_allclose(wait, lindley, atol=1e-9)
    assert wait.mean() == pytest.approx(rho * D / (2 * (1 - rho)), rel=tol)
    assert np.mean(wait < 1e-12) == pytest.approx(1 - rho, abs=0.02)


def test_closed_loop_of_one_client_is_the_table():
    """One client: each request's prompt (≤ the budget) is one prompt-only iteration, then each
    further token one decode iteration of one sequence; TTFT also pays the request overhead."""
    table = IterationTimes(np.array([0.0, 512.0]), np.array([[0.03, 0.05], [0.02, 0.07]]))
    n = 5
    sim = simulate(None, np.full(n, 256), np.full(n, 11), table, Scheduler(4, 512, True), 0.004, concurrency=1)
    np.testing.assert_allclose(sim["ttft_s"], 0.004 + 0.04)  # half-way between 0.03 and 0.05
    np.testing.assert_allclose(sim["itl_s"], 0.02)
    np.testing.assert_allclose(np.diff(sim["sent_s"]), 0.004 + 0.04 + 10 * 0.02)  # the next goes at the finish


def test_prefill_priority_stalls_the_decodes():
    """chunked_prefill=False: an iteration with prompt tokens waiting carries no decode tokens, so
    a sequence decoding while another prompt arrives waits a whole prefill iteration."""
    # decode 10 ms; a prompt's iteration 100 ms with or without the decode tokens riding in it
    table = IterationTimes(np.array([0.0, 512.0]), np.array([[0.1, 0.1]] + [[0.01, 0.1]] * 4))
    arr = np.array([0.0, 0.105])  # the second arrives while the first decodes
    args = (arr, np.full(2, 512), np.full(2, 20), table)
    fused = simulate(*args, Scheduler(4, 1024, True))
    stalled = simulate(*args, Scheduler(4, 1024, False))
    assert stalled["itl_s"][0] > fused["itl_s"][0]
    # stalled: 19 decode gaps of 0.01 s and one prefill iteration of 0.1 s in between
    assert stalled["itl_s"][0] == pytest.approx((18 * 0.01 + 0.1 + 0.01) / 19)
    # per token: every gap after a first token, once; the stall is one gap of 0.11 s
    for sim in (fused, stalled):
        assert sim["token_gap_weight"].sum() == 2 * 19
    assert stalled["token_gap_s"].max() == pytest.approx(0.11)


P, P4, DEC = 0.1, 0.3, 0.01  # s: a one-prompt pass, a four-prompt pass, a decode iteration (any batch)


def _burst_table():
    """A prompt of 256 tokens: 256 prompt tokens take P, 1,024 (four prompts) P4; decodes DEC."""
    prompt_row = [P, P, P4]
    return IterationTimes(np.array([0.0, 256.0, 1024.0]), np.array([prompt_row] + [[DEC, P, P4]] * 4))


@pytest.mark.parametrize("overlap", [False, True])
def test_a_start_up_burst_queues_behind_the_prefills_ahead(overlap):
    """Four clients send identical 256-token prompts at once into an empty engine (a closed loop's
    start, prefill priority). A budget of one prompt per pass prefills them one pass each, so the
    k-th prompt's TTFT is overhead + k·P; a budget that holds all four runs one pass of 1,024
    tokens and every TTFT is overhead + P4. With overlap scheduling each first token is sent when
    the next iteration ends: the k-th prompt's after the (k+1)-th pass, the last prompt's after the
    first decode iteration, and the ITL is unchanged (counted from when the tokens were computed)."""
    oh = 0.004
    args = (None, np.full(4, 256), np.full(4, 5), _burst_table())
    one_each = simulate(*args, Scheduler(4, 256, False, overlap=overlap), oh, concurrency=4)
    k = np.arange(1, 5)
    late = np.array([P, P, P, DEC]) if overlap else np.zeros(4)  # the next iteration after each prompt's pass
    np.testing.assert_allclose(one_each["ttft_s"], oh + k * P + late)
    together = simulate(*args, Scheduler(4, 1024, False, overlap=overlap), oh, concurrency=4)
    np.testing.assert_allclose(together["ttft_s"], oh + P4 + (DEC if overlap else 0.0))
    np.testing.assert_allclose(together["itl_s"], DEC)
    assert np.all(together["e2e_s"] >= together["ttft_s"])


def test_overlap_sends_a_lone_prompts_first_token_after_the_next_decode():
    """One client: the next iteration after its prompt's pass is its own first decode iteration,
    so overlap scheduling adds one decode iteration to TTFT and nothing to the ITL. A one-token
    request leaves nothing to launch: its token goes out at once."""
    table = IterationTimes(np.array([0.0, 512.0]), np.array([[0.03, 0.05], [0.02, 0.07]]))
    reqs = (None, np.full(3, 256), np.full(3, 11), table)
    plain = simulate(*reqs, Scheduler(4, 512, True), 0.004, concurrency=1)
    over = simulate(*reqs, Scheduler(4, 512, True, overlap=True), 0.004, concurrency=1)
    np.testing.assert_allclose(over["ttft_s"], plain["ttft_s"] + 0.02)
    np.testing.assert_allclose(over["itl_s"], plain["itl_s"])
    lone = simulate(None, np.full(2, 256), np.full(2, 1), table, Scheduler(4, 512, True, overlap=True), 0.0, 1)
    np.testing.assert_allclose(lone["ttft_s"], 0.04)
    np.testing.assert_allclose(lone["e2e_s"], 0.04)


def test_loaded_rows_take_the_budget_and_load_their_source_ran():
    """InferenceX's rows (benchmarks/build_loaded_cases.py): 10 prompts per client, lengths uniform on
    [int(0.8 L), L] (mean 922, ±11.1 %), SGLang's 32,768-token chunked-prefill budget."""
    import pandas as pd

    from parallmelism.validate.runner import shipped_case_files

    src = shipped_case_files()[0].parent / "loaded" / "inference_loaded.csv"
    df = pd.read_csv(src, dtype=str, keep_default_na=False)
    ix = df[df["case"].str.startswith("ix870-")]
    assert len(ix) == 8
    assert (ix["requests"].astype(int) == 10 * ix["concurrency"].astype(int)).all()
    assert set(ix["input_len"]) == set(ix["output_len"]) == {"922"} and set(ix["length_spread"]) == {"0.111"}
    assert set(ix["prefill_chunk_tokens"]) == {"32768"}
    # the drawn lengths stay inside benchmark_serving's [819, 1024] with its mean (921.5)
    wl = InferenceWorkload(input_len=922, output_len=922, length_dist="uniform", length_spread=0.111)
    reqs = drawn_requests(wl, 640, 0)
    for lengths in (reqs.input_len, reqs.output_len):
        assert 819 <= lengths.min() and lengths.max() <= 1024
        assert lengths.mean() == pytest.approx(921.5, abs=5)


def test_weighted_percentile_is_the_inverted_cdf_of_the_repeats():
    rng = np.random.default_rng(3)
    v = rng.random(50)
    w = rng.integers(0, 5, 50)
    for p in (1, 50, 90, 99, 100):
        assert weighted_percentile(v, w, p) == np.percentile(np.repeat(v, w), p, method="inverted_cdf")


MODEL, HW = "llama3.1-8b", "h100-sxm-80gb"
ENGINE = load_option("engine", "trtllm")


def _setup(batch=32, **wl):
    model, hw = load_option("model", MODEL), load_option("hardware", HW)
    work = InferenceWorkload(input_len=1024, output_len=128, **wl)
    one = {k: np.array([v]) for k, v in dict(tp=1, pp=1, sp=1, ep=1, dp=1, batch=batch).items()}
    one["layers_per_stage"] = np.array([model.layers])
    return model, hw, work, ServingLayout.of(one), kernel_model(hw)


def _point(rate, seed=0, n=300, **wl):
    model, hw, work, lay, km = _setup(**wl)
    reqs = drawn_requests(work, n, seed)
    return loaded_point(
        model, hw, work, lay, km, ENGINE, reqs, rate_per_replica=rate, seed=seed, ttft_slo_ms=300.0, itl_slo_ms=15.0
    )


def test_same_seed_same_answer():
    a, b = _point(12.0, length_dist="uniform"), _point(12.0, length_dist="uniform")
    assert a == b
    assert _point(12.0, seed=1, length_dist="uniform") != a


def test_percentiles_grow_with_load():
    model, hw, work, lay, km = _setup()
    cap = replica_capacity_rps(model, hw, work, lay, km, ENGINE)
    points = [_point(f * cap) for f in (0.2, 0.5, 0.8)]
    for key in ("ttft_p50_ms", "ttft_p90_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p90_ms", "itl_p99_ms"):
        vals = [p[key] for p in points]
        assert vals == sorted(vals), key
    assert points[0]["ttft_p50_ms"] <= points[0]["ttft_p90_ms"] <= points[0]["ttft_p99_ms"]
    goodput_share = [p["goodput_requests_per_s"] / p["throughput_requests_per_s"] for p in points]
    assert goodput_share == sorted(goodput_share, reverse=True)


def test_a_rate_at_capacity_is_refused():
    model, hw, work, lay, km = _setup()
    cap = replica_capacity_rps(model, hw, work, lay, km, ENGINE)
    with pytest.raises(UserError, match="unstable"):
        _point(cap * 1.01)


def test_the_table_is_the_iteration_model():
    """The table's decode-only entry at b sequences is the closed-loop model's decode iteration
    (decode_step_ms of the same layout at batch b); a prompt chunk never shortens an iteration
    (`pipeline.mixed_iteration_s`), and a full budget of prompt tokens costs more than a few."""
    from parallmelism.engine import evaluate
    from parallmelism.specs import GridSpec, RunConfig

    model, hw, work, lay, km = _setup()
    table = iteration_times(model, hw, work, lay, km, ENGINE, 32, work.prefill_chunk_tokens)
    run = RunConfig(
        model=model,
        hardware=hw,
        workload=work,
        grid=GridSpec(ngpus=[1], tp=[1], pp=[1], sp=[1], batch=[32]),
        engine=ENGINE,
    )
    row = evaluate(run)[0].iloc[0]
    assert table.seconds[32, 0] * 1e3 == pytest.approx(row["decode_step_ms"], rel=1e-9)
    assert (table.seconds[1:, 1:] >= table.seconds[1:, :1]).all()
    assert (table.seconds[:, -1] > 5 * table.seconds[:, 1]).all()


def test_summary_goodput_counts_both_slos():
    sim = {
        "ttft_s": np.array([0.1, 0.3, 0.1]),
        "itl_s": np.array([0.01, 0.01, 0.05]),
        "sent_s": np.array([0.0, 0.0, 0.0]),
        "finish_s": np.array([1.0, 1.0, 2.0]),
        "token_gap_s": np.array([0.01, 0.05]),
        "token_gap_weight": np.array([18, 9]),
    }
    s = load_summary(sim, np.array([10, 10, 10]), ttft_slo_s=0.2, itl_slo_s=0.02)
    assert s["goodput_requests_per_s"] == pytest.approx(1 / 2.0)
    assert s["throughput_requests_per_s"] == pytest.approx(3 / 2.0)
    assert s["ttft_p50_ms"] == pytest.approx(100.0)
    assert s["itl_token_p50_ms"] == pytest.approx(10.0) and s["itl_token_p90_ms"] == pytest.approx(50.0)


def _cli(*args):
    """The CLI in this process (conftest.run_app: same exit code, stdout and stderr)."""
    return run_app(*args, cwd=REPO)


SHOW = [
    "show",
    "workload=inference",
    f"model={MODEL}",
    "grid.ngpus=[1]",
    "grid.tp=[1]",
    "grid.batch=[32]",
    "workload.input_len=1024",
    "workload.output_len=128",
    "workload.load_requests=200",
]


@pytest.mark.parametrize(
    "arg, words",
    [
        ("workload.request_rate=-3", "workload.request_rate"),
        ("workload.request_rate=1000", "unstable"),
        ("workload.length_trace=/no/such/trace.csv", "does not exist"),
    ],
)
def test_bad_load_is_one_sentence(arg, words):
    r = _cli(*SHOW, arg)
    assert r.returncode == 2
    assert words in r.stderr and "Traceback" not in r.stderr
    assert r.stdout.strip() == ""  # refused before any table is printed


def test_trace_sends_and_lengths(tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("arrival_s,input_len,output_len\n0,512,64\n0.5,1024,32\n1.0,256,128\n")
    r = _cli(*SHOW, f"workload.length_trace={trace}", "plan.ttft_ms=300", "plan.tpot_ms=15")
    assert r.returncode == 0, r.stderr
    assert "under load" in r.stdout and "3 requests" in r.stdout and "trace" in r.stdout
    assert "p99" in r.stdout and "goodput" in r.stdout


def test_loaded_points_reproduce_the_published_itl_percentiles(tmp_path):
    """validate's `loaded` kind (validate/loaded_cases.py) on the SGLang DeepSeek-R1 H200 rows of
    cases/loaded/inference_loaded.csv (SemiAnalysis InferenceX issue 870: closed loop of 8-64
    clients, 1k/1k): the simulated mean and p99 ITL within 15 % of the published ones (3.3 % and 2.9 %
    mean |error|, benchmarks/serving_loaded_points.py)."""
    import pandas as pd

    from parallmelism.validate.runner import run_validation, shipped_case_files

    src = shipped_case_files()[0].parent / "loaded" / "inference_loaded.csv"
    df = pd.read_csv(src, dtype=str, keep_default_na=False)
    part = tmp_path / "ix870.csv"
    df[df["case"].str.startswith("ix870-")].to_csv(part, index=False)
    table = run_validation([part], [], None)
    itl = table[table["quantity"].isin(["itl_mean_ms", "itl_p99_ms"])]
    assert len(itl) == 8
    assert (itl["error_pct"].abs() <= 15).all(), itl


def test_a_loaded_row_can_say_its_engine_version_ran_without_overlap(tmp_path):
    """overlap_scheduler=false on a row overrides the engine file's overlap scheduling (SGLang 0.3.0
    before the overlap schedule: its first tokens go out as their pass ends, an earlier TTFT); a
    value other than true/false is one sentence."""
    import pandas as pd

    from parallmelism.validate.runner import run_validation, shipped_case_files

    src = shipped_case_files()[0].parent / "loaded" / "inference_loaded.csv"
    df = pd.read_csv(src, dtype=str, keep_default_na=False)
    row = df[df["case"] == "sglrepo060-sglang-l31-70b-h100-tp4-sharegpt-rps4"]
    assert list(row["overlap_scheduler"]) == ["false"]
    ttft = {}
    for flag in ("false", ""):  # "": the engine file's (sglang: overlap)
        part = tmp_path / f"r{flag}.csv"
        row.assign(overlap_scheduler=flag, requests="200").to_csv(part, index=False)
        t = run_validation([part], [], None)
        ttft[flag] = float(t.loc[t["quantity"] == "ttft_p50_ms", "predicted"].iloc[0])
    assert ttft["false"] < ttft[""]
    bad = tmp_path / "bad.csv"
    row.assign(overlap_scheduler="maybe").to_csv(bad, index=False)
    with pytest.raises(UserError, match="overlap_scheduler='maybe' is not true or false"):
        run_validation([bad], [], None)


def test_plan_serve_prints_and_writes_the_colocated_plan_under_load(tmp_path):
    import pandas as pd

    out = tmp_path / "plan.csv"
    r = _cli(
        "plan", "serve", f"model={MODEL}", "qps=20", "ttft_ms=500", "tpot_ms=40", "load_percentiles=true",
        "workload.load_requests=300", "--out", out,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "colocated plan under load" in r.stdout and "goodput" in r.stdout
    df = pd.read_csv(out)
    row = df[df["deployment"] == "colocated"].iloc[0]
    assert row["ttft_p50_ms"] <= row["ttft_p90_ms"] <= row["ttft_p99_ms"]
    assert 0 < row["goodput_requests_per_s"] <= row["throughput_requests_per_s"]
    assert "colocated plan under load" in (tmp_path / "plan.summary.md").read_text()


def test_a_trace_is_dealt_round_robin_over_the_replicas():
    from parallmelism.cost.serving_load import Requests, replica_share

    reqs = Requests(np.arange(1, 8), np.arange(11, 18), np.arange(7.0))
    one = replica_share(reqs, 3)
    assert list(one.input_len) == [1, 4, 7] and list(one.arrival_s) == [0.0, 3.0, 6.0]
    drawn = Requests(np.arange(1, 8), np.arange(11, 18))
    assert replica_share(drawn, 3) is drawn  # already one replica's sample


def test_sweep_says_it_does_not_simulate_the_load(tmp_path):
    r = _cli(
        "sweep", "workload=inference", f"model={MODEL}", "grid.ngpus=[1]", "workload.request_rate=3",
        f"output.path={tmp_path / 'x.csv'}",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "warning: sweep reports the fixed-concurrency means" in r.stderr


def test_the_iteration_table_takes_the_requests_mean_lengths():
    """A trace of short requests is timed at its own lengths, not workload.input_len's: the same
    requests give the same answer whatever workload.input_len/output_len say."""
    from parallmelism.cost.serving_load import Requests

    model, hw, work, lay, km = _setup()
    reqs = Requests(np.full(200, 256), np.full(200, 32), np.arange(200) * 0.1)
    kw = dict(rate_per_replica=None, seed=0, ttft_slo_ms=None, itl_slo_ms=None)
    a = loaded_point(model, hw, work, lay, km, ENGINE, reqs, **kw)
    b = loaded_point(
        model, hw, work.model_copy(update={"input_len": 8000, "output_len": 900}), lay, km, ENGINE, reqs, **kw
    )
    assert a == b
