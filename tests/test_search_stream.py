"""The evaluation driver, its collectors and sinks, and Pareto fronts: chunked, parallel results
equal one-shot pandas answers on the whole grid enumerated and evaluated in one call (without
the driver)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from parallmelism.config import load_run_configs
from parallmelism.engine import evaluate, evaluate_training_columns, to_frame
from parallmelism.grid import enumerate_training_layouts
from parallmelism.search import (
    Collector,
    ParetoCollector,
    ParquetDatasetSink,
    RowsCollector,
    TableSink,
    TopKCollector,
    pareto_mask,
    stream_runs,
)

GPT3 = ["model=gpt3-175b", "hardware=a100-sxm-80gb", "workload.seq_len=2048", "workload.global_batch=1536"]


def _runs(overrides):
    return [rc for _, rc in load_run_configs(overrides)]


def _dominated_by(points, i, j):
    return bool(np.all(points[j] <= points[i]) and np.any(points[j] < points[i]))


@pytest.mark.parametrize("k_obj", [2, 3])
def test_pareto_rows_are_non_dominated_and_cover_every_dominated_row(k_obj):
    rng = np.random.default_rng(7)
    # integer-valued objectives so ties (equal points) happen often
    pts = rng.integers(0, 12, size=(400, k_obj)).astype(float)
    mask = pareto_mask(*pts.T)
    front = np.flatnonzero(mask)
    assert len(front) > 0
    for i in front:
        assert not any(_dominated_by(pts, i, j) for j in range(len(pts)))
    for i in np.flatnonzero(~mask):
        assert any(_dominated_by(pts, i, j) for j in front)


def test_pareto_2d_hand_example():
    # (gpus, time): (8, 10) and (16, 6) and (32, 6) -> (32, 6) is dominated by (16, 6); (8, 12) by (8, 10)
    x = np.array([8, 16, 32, 8, 64])
    y = np.array([10.0, 6.0, 6.0, 12.0, 5.0])
    assert pareto_mask(x, y).tolist() == [True, True, False, False, True]


def one_shot(run):
    """The whole grid in one enumeration and one cost-model call (no partitions, no chunks),
    rows in partition order (GPU count, then micro-batch, then the enumeration's order)."""
    grid = enumerate_training_layouts(run.model, run.hardware, run.workload, run.grid)
    df = to_frame(evaluate_training_columns(grid.columns, run), run)
    return df.sort_values(["ngpus", "micro_batch"], kind="stable").reset_index(drop=True), grid


@pytest.fixture(scope="module")
def gpt3_two_counts():
    runs = _runs(GPT3 + ["grid.ngpus=[256,512]", "grid.max_micro_batch=4"])
    df, _ = one_shot(runs[0])
    return runs, df


@pytest.fixture(scope="module")
def gpt3_five_counts():
    """Five GPU counts at micro-batch 1: five partitions in two tasks (as the fixture above: two
    workers both work), a third of its rows (39k, many chunks of 3,001), for the tests whose property
    (bytes, pruning) holds for any grid of several tasks and chunks."""
    runs = _runs(GPT3 + ["grid.ngpus=[16,32,64,128,256]", "grid.max_micro_batch=1"])
    df, _ = one_shot(runs[0])
    return runs, df


def _assert_same_rows(a, b):
    assert list(a.columns) == list(b.columns) and len(a) == len(b)
    for c in a.columns:  # column by column: assert_frame_equal takes ~10 s on 100k x 70 categoricals
        x, y = a[c], b[c]
        if isinstance(x.dtype, pd.CategoricalDtype):
            x, y = x.astype(str), y.astype(str)
        assert np.array_equal(x.to_numpy(), y.to_numpy()), c


@pytest.mark.parametrize("chunk_rows, workers", [(997, 1), (1 << 18, 1), (997, 2)])
def test_topk_per_group_equals_pandas_sort_groupby(gpt3_two_counts, chunk_rows, workers):
    runs, df = gpt3_two_counts
    res = stream_runs(
        runs,
        [TopKCollector(7, "mem_total_gib", group_by=["ngpus"], where="fits")],
        chunk_rows=chunk_rows,
        workers=workers,
    )
    got = res.frame(0).drop(columns=["usd_per_step"], errors="ignore")  # derived by the driver
    want = (
        df[df["fits"]]
        .sort_values(["ngpus", "mem_total_gib"], kind="stable")
        .groupby("ngpus", observed=True)
        .head(7)
        .reset_index(drop=True)
    )
    pd.testing.assert_frame_equal(got, want)
    assert res.evaluated == len(df)


@pytest.mark.parametrize("chunk_rows, workers", [(7919, 1), (7919, 2)])
def test_streamed_chunks_equal_one_shot_evaluation(gpt3_two_counts, chunk_rows, workers):
    """Every row, same numbers, same order as the whole grid evaluated at once."""
    runs, df = gpt3_two_counts
    res = stream_runs(runs, [RowsCollector()], chunk_rows=chunk_rows, workers=workers, derive=False)
    _assert_same_rows(res.frame(0), df)


def test_engine_evaluate_is_the_driver(gpt3_two_counts):
    runs, df = gpt3_two_counts
    got, grid = evaluate(runs[0])
    _assert_same_rows(got, df)
    assert len(grid) == len(df) and int(grid.columns["tp"].sum()) == int(df["tp"].sum())


@pytest.mark.parametrize("workers", [1, 2])
def test_stream_counts_match_grid(gpt3_two_counts, workers):
    runs, df = gpt3_two_counts
    _, grid = one_shot(runs[0])
    res = stream_runs(runs, [TopKCollector(1, "mem_total_gib")], chunk_rows=5000, workers=workers)
    assert res.considered == grid.considered and res.evaluated == len(df)
    assert {k: v for k, v in res.dropped().items() if v} == {k: v for k, v in grid.dropped.items() if v}


@pytest.mark.parametrize("workers", [1, 2])
def test_pareto_collector_equals_front_of_full_table(gpt3_two_counts, workers):
    runs, df = gpt3_two_counts
    res = stream_runs(
        runs,
        [ParetoCollector([("ngpus", "min"), ("mem_total_gib", "min")], group_by=[])],
        chunk_rows=3000,
        workers=workers,
    )
    got = res.frame(0)
    fit = df[df["fits"]].reset_index(drop=True)
    want = fit[pareto_mask(fit["ngpus"].to_numpy(), fit["mem_total_gib"].to_numpy())]
    assert sorted(map(tuple, got[["ngpus", "mem_total_gib"]].to_numpy())) == sorted(
        map(tuple, want[["ngpus", "mem_total_gib"]].to_numpy())
    )


@pytest.mark.parametrize("workers", [1, 2])
def test_parquet_dataset_sink_writes_every_row_as_a_partitioned_dataset(gpt3_two_counts, tmp_path, workers):
    runs, df = gpt3_two_counts
    out = tmp_path / "full"
    res = stream_runs(runs, [ParquetDatasetSink(out, runs)], chunk_rows=20_000, workers=workers)
    back = pd.read_parquet(out)
    assert len(back) == len(df) == res.evaluated
    assert set(back["model"].astype(str)) == {"gpt3-175b"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["full"]  # no temporary folder left
    assert back["mem_total_gib"].sum() == pytest.approx(df["mem_total_gib"].sum(), rel=1e-12)


def test_parquet_sink_leaves_nothing_on_failure(tmp_path):
    runs = _runs(GPT3 + ["grid.ngpus=[256]", "grid.max_micro_batch=2"])

    class Boom(TopKCollector):
        def update(self, cols):
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        stream_runs(runs, [ParquetDatasetSink(tmp_path / "full", runs), Boom(1, "mem_total_gib")])
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_table_sink_bytes_do_not_depend_on_chunks_or_workers(gpt3_five_counts, tmp_path, fmt):
    """One file streamed chunk by chunk: the same bytes serial or parallel; CSV the same bytes for
    any chunk size too (a Parquet row group is a chunk, so there only the content is the same);
    the rows of the one-shot evaluation, in its order."""
    runs, df = gpt3_five_counts
    written = []
    for chunk_rows, workers in [(1 << 18, 1), (3001, 1), (3001, 2)]:
        path = tmp_path / f"t{chunk_rows}-{workers}.{fmt}"
        res = stream_runs(runs, [TableSink(path, fmt, runs)], chunk_rows=chunk_rows, workers=workers, derive=False)
        assert res.kept[0] == len(df)
        written.append(path.read_bytes())
    assert written[1] == written[2]
    if fmt == "csv":
        assert written[0] == written[1]
    else:
        a, b = pd.read_parquet(tmp_path / f"t262144-1.{fmt}"), pd.read_parquet(path)
        pd.testing.assert_frame_equal(a, b)
    back = pd.read_csv(path) if fmt == "csv" else pd.read_parquet(path)
    assert len(back) == len(df)
    assert np.array_equal(back["time_step_s"].to_numpy(), df["time_step_s"].to_numpy())  # exact, same order
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f"t{c}.{fmt}" for c in ("262144-1", "3001-1", "3001-2"))


@pytest.mark.parametrize("workers", [1, 2])
def test_table_sink_leaves_nothing_on_failure(tmp_path, workers):
    runs = _runs(GPT3 + ["grid.ngpus=[256,512]", "grid.max_micro_batch=2"])
    (tmp_path / "t.csv").write_text("old\n")

    class Boom(TopKCollector):
        def merge(self, result):
            raise RuntimeError("boom")

        def update(self, cols):
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        stream_runs(runs, [TableSink(tmp_path / "t.csv", "csv", runs), Boom(1, "mem_total_gib")], workers=workers)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.csv"]
    assert (tmp_path / "t.csv").read_text() == "old\n"


@pytest.mark.parametrize("fmt,workers", [("csv", 1), ("parquet", 1), ("parquet", 2)])
def test_table_sink_write_failing_on_its_thread_is_one_sentence(tmp_path, monkeypatch, fmt, workers):
    """The sink writes one chunk behind the evaluation, on a thread of its own: a disk that fills up
    at the second chunk is still the one sentence, the earlier file stays and no temporary is left."""
    import errno
    import threading

    import pyarrow.csv
    import pyarrow.parquet

    from parallmelism.errors import UserError

    runs = _runs(GPT3 + ["grid.ngpus=[16,32,64,128,256]", "grid.max_micro_batch=1"])
    target = tmp_path / f"t.{fmt}"
    target.write_bytes(b"old contents")
    calls, threads = [], set()
    real = pyarrow.csv.write_csv if fmt == "csv" else pyarrow.parquet.ParquetWriter.write_table

    def fill_up(*args, **kwargs):
        threads.add(threading.current_thread().name)
        calls.append(1)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(*args, **kwargs)

    if fmt == "csv":
        monkeypatch.setattr(pyarrow.csv, "write_csv", fill_up)
    else:
        monkeypatch.setattr(pyarrow.parquet.ParquetWriter, "write_table", fill_up)
    with pytest.raises(UserError, match="no space left on the device") as info:
        stream_runs(runs, [TableSink(target, fmt, runs)], chunk_rows=3001, workers=workers, derive=False)
    assert "\n" not in str(info.value)
    assert all(name.startswith("table-sink") for name in threads), threads  # written off the main thread
    assert target.read_bytes() == b"old contents"
    assert [p.name for p in tmp_path.iterdir()] == [target.name]


def test_missing_time_column_is_one_sentence():
    from parallmelism.errors import UserError

    runs = _runs(GPT3 + ["grid.ngpus=[256]", "grid.max_micro_batch=1"])
    with pytest.raises(UserError, match="needs the column 'no_such_s'"):
        stream_runs(runs, [TopKCollector(1, "no_such_s")])


@pytest.mark.parametrize("workers", [1, 2])
def test_pruning_unfit_rows_keeps_the_same_answer(gpt3_five_counts, workers):
    runs, df = gpt3_five_counts
    make = lambda: [
        TopKCollector(4, "mem_total_gib", group_by=["ngpus"], where="fits"),  # noqa: E731
        ParetoCollector([("ngpus", "min"), ("mem_activations_gib", "min")], where="fits"),
    ]
    full = stream_runs(runs, make(), chunk_rows=2000, workers=workers, prune_unfit=False)
    pruned = stream_runs(runs, make(), chunk_rows=2000, workers=workers, prune_unfit=True)
    for i in range(2):
        pd.testing.assert_frame_equal(pruned.frame(i), full.frame(i))
    assert pruned.evaluated == full.evaluated == len(df)
    assert pruned.timed == int(df["fits"].sum()) < full.timed == len(df)


def test_topk_with_ties_and_nan_equals_a_full_sort():
    """The collector sorts only rows whose first key can be among the k best: ties at the k-th
    value and NaN keys still give the rows of a stable sort of the whole chunk."""
    rng = np.random.default_rng(11)
    n = 2000
    for nan_share in (0.0, 0.5, 0.999):
        t = rng.integers(0, 40, n).astype(float)  # many ties
        t[rng.random(n) < nan_share] = np.nan
        cols = {
            "_run": np.zeros(n, dtype=np.int32),
            "_row": np.arange(n, dtype=np.int64),
            "ngpus": np.full(n, 64),
            "time_step_s": t,
            "mfu": rng.random(n),
        }
        for k in (1, 5, 50):
            c = TopKCollector(k, [("time_step_s", "min"), ("mfu", "max")])
            c.update(cols)
            df = pd.DataFrame({**cols, "neg_mfu": -cols["mfu"]})
            expected = df.sort_values(["time_step_s", "neg_mfu", "_row"], kind="stable").head(k)["_row"]
            assert c.result()["_row"].tolist() == expected.tolist(), (nan_share, k)


def test_topk_fed_chunk_by_chunk_equals_a_full_sort():
    """Fed in chunks, a chunk's rows no better than the k already kept in their group are passed
    over (the kept k-th key bounds the shortlist): ties at that key and NaN keys on either side,
    ascending or descending, still give the rows of a stable sort of everything."""
    rng = np.random.default_rng(29)
    n = 3000
    for nan_share in (0.0, 0.3, 0.999):
        for by, sort_cols, ascending in (
            ([("time_step_s", "min"), ("mfu", "max")], ["time_step_s", "neg_mfu", "_row"], True),
            ([("mfu_int", "max")], ["neg_mfu_int", "_row"], True),
        ):
            t = rng.integers(0, 40, n).astype(float)  # many ties
            t[rng.random(n) < nan_share] = np.nan
            cols = {
                "_run": np.zeros(n, dtype=np.int32),
                "_row": np.arange(n, dtype=np.int64),
                "ngpus": np.full(n, 64),
                "time_step_s": t,
                "mfu": rng.random(n),
                "mfu_int": np.where(np.isnan(t), np.nan, 40.0 - t),
            }
            df = pd.DataFrame({**cols, "neg_mfu": -cols["mfu"], "neg_mfu_int": -cols["mfu_int"]})
            for k in (1, 5, 50):
                c = TopKCollector(k, by)
                for lo in range(0, n, 400):
                    c.update({name: v[lo : lo + 400] for name, v in cols.items()})
                expected = df.sort_values(sort_cols, kind="stable", ascending=ascending).head(k)["_row"]
                assert c.result()["_row"].tolist() == expected.tolist(), (nan_share, by, k)


class _Chunks(Collector):
    """Collector keeping each chunk as it arrives."""

    def __init__(self):
        self.chunks: list = []

    def update(self, cols):
        if cols and len(cols["_row"]):
            self.chunks.append(cols)

    def spawn(self):
        return self

    def merge(self, result):
        pass

    def result(self):
        return self.chunks


@pytest.mark.parametrize(
    "overrides",
    [
        ["model=mixtral-8x7b", "grid.ngpus=[64]"],
        ["model=llama3.1-8b", "grid.ngpus=[8]", "grid.micro_batch=[1]"],
        ["workload=inference", "model=llama3.1-70b"],
    ],
)
def test_arrow_chunks_and_row_dicts_equal_the_dataframe_path(overrides):
    """sweep's record batches (arrow_of_run, no pandas) are the table arrow_table builds from the
    DataFrame (values, types, schema metadata: the written bytes follow), --full-output's
    (dataset_arrow_of_run) the table pyarrow builds from it, and best's row dicts
    (records_of_kept) are the DataFrame's rows (issue 29)."""
    import pyarrow as pa

    from parallmelism.report.writer import arrow_table
    from parallmelism.search.frames import (
        arrow_of_run,
        dataset_arrow_of_run,
        frame_of_kept,
        frame_of_run,
        records_of_kept,
    )

    runs = _runs(overrides)
    res = stream_runs(runs, [_Chunks()], chunk_rows=4096, workers=1)
    assert res.kept[0]
    for cols in res.kept[0]:
        run = runs[int(cols["_run"][0])]
        mine, theirs = arrow_of_run(run, cols), arrow_table(frame_of_run(run, cols))
        assert mine.schema.equals(theirs.schema, check_metadata=True)
        assert mine.equals(theirs)
        # --full-output's files: the table pyarrow builds from the frame less the partition columns
        frame = frame_of_run(run, cols).drop(columns=["model", "hardware", "workload"])
        mine, theirs = dataset_arrow_of_run(run, cols), pa.Table.from_pandas(frame, preserve_index=False)
        assert mine.schema.equals(theirs.schema, check_metadata=True)
        assert mine.equals(theirs)
    cols = res.kept[0][0]
    rows = records_of_kept(runs, cols, keep_index_columns=True)
    frame = frame_of_kept(runs, cols, keep_index_columns=True)
    expected = [r.to_dict() for _, r in frame.iterrows()]
    assert [list(r) for r in rows] == [list(r) for r in expected]
    for a, b in zip(rows, expected):
        assert all(a[k] == b[k] or (a[k] != a[k] and b[k] != b[k]) for k in a)
        assert [type(v) for v in a.values()] == [type(v) for v in b.values()]


def test_default_workers_rule_at_its_edges():
    """Issue 29: the default never runs more workers than cores free of other work (a loaded
    2-core box gets one process), counts as busy the larger of the 1-minute load average and the
    processes running now (the average lags a job that just started), and needs
    MIN_TASKS_PER_WORKER (4) tasks per worker (GPT-3 175B @ 4096, 5 tasks, was slower on 2 workers
    than on one)."""
    from parallmelism.search.workers import MIN_TASKS_PER_WORKER, default_workers, free_cores

    assert MIN_TASKS_PER_WORKER == 4
    # free cores: cores less the busier signal, rounded half up, between 1 and the cores
    assert free_cores(4, 0.2) == 4 and free_cores(4, 0.5) == 4 and free_cores(4, 0.51) == 3
    assert free_cores(2, 1.49) == 1 and free_cores(2, 0.49) == 2 and free_cores(2, 9.0) == 1
    assert free_cores(2, 0.0, running_others=1) == 1  # idle on average, but another job runs now
    assert free_cores(2, 1.0, running_others=0) == 1 and free_cores(4, None) == 4 and free_cores(1, 0.0) == 1
    # tasks: two workers need eight tasks; then one worker per four
    assert default_workers(7, 4, 0.0) == 1 and default_workers(8, 4, 0.0) == 2
    assert default_workers(12, 4, 0.2) == 3 and default_workers(100, 4, 0.2) == 4
    assert default_workers(0, 4, 0.0) == 1 and default_workers(100, 1, 0.0) == 1
    # load: a 2-core box with one core's work elsewhere runs one process; 1.4 busy of 4 leaves 3
    assert default_workers(100, 2, 1.0) == 1 and default_workers(100, 2, 0.4) == 2
    assert default_workers(100, 4, 2.6) == 1 and default_workers(100, 4, 1.4) == 3
    assert default_workers(100, 2, 0.1, running_others=1) == 1
    assert default_workers(100, 4, None) == 4  # no load average: every core counts as free


def test_requested_workers_are_lowered_with_one_sentence(monkeypatch):
    """An explicit count is kept within the limits and lowered to the tasks there are (and, from
    the CLI, to the cores), with the sentence saying so; the default reads the machine's load."""
    from parallmelism.search import workers

    monkeypatch.setattr(workers, "available_cores", lambda: 4)
    monkeypatch.setattr(workers, "machine_load", lambda: (0.2, 0))
    assert workers.worker_count(None, 100) == (4, None)
    monkeypatch.setattr(workers, "machine_load", lambda: (2.6, 3))
    assert workers.worker_count(None, 100) == (1, None)
    assert workers.worker_count(3, 100) == (3, None)  # an explicit count within limits stays
    n, why = workers.worker_count(8, 100, cap_to_cores=True)
    assert n == 4 and why == "using 4 workers, not 8: 4 cores available to this process"
    n, why = workers.worker_count(8, 2)
    assert n == 2 and why.startswith("using 2 workers, not 8: the grid has 2 tasks")
    assert workers.worker_count(1, 0) == (1, None)
    load, running = workers.machine_load()  # this machine: a load average (Linux) and a count
    assert (load is None or load >= 0.0) and running >= 0


def test_cli_says_when_it_lowered_workers(tmp_path):
    """`--workers 64` on a one-count grid: one line on stderr, the same file as one worker."""
    import subprocess
    import sys

    from conftest import REPO

    args = ["sweep", "-q", "model=llama3.1-8b", "grid.ngpus=[8]", "grid.micro_batch=[1]"]
    outs = []
    for j in ("64", "1"):
        out = tmp_path / f"s{j}.csv"
        r = subprocess.run(
            [sys.executable, "-m", "parallmelism", *args, "--workers", j, "--out", str(out)],
            capture_output=True,
            text=True,
            cwd=REPO,
            env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        )
        assert r.returncode == 0, r.stderr
        outs.append((r.stderr, out.read_bytes()))
    lowered = [line for line in outs[0][0].splitlines() if "not 64" in line]
    assert len(lowered) == 1 and lowered[0].startswith("note: using 1 worker, not 64: "), outs[0][0]
    assert "not 1" not in outs[1][0] and outs[0][1] == outs[1][1]


def test_the_driver_lets_go_of_a_calls_output_before_the_next_call(gpt3_five_counts, monkeypatch):
    """Issue 29 (peak RSS): no evaluated column of a cost-model call is alive when the next call starts,
    also where a call ends inside a task (chunks of 3,001 rows, tasks of ~20k): the driver's loop kept
    the last chunk of such a call (views of all of the call's arrays) through the next evaluation."""
    import weakref

    from parallmelism.search import chunks

    def root(a):
        while isinstance(a.base, np.ndarray):
            a = a.base
        return a

    real, previous, alive = chunks.evaluate_chunks, [], []

    def watched(run, layout, *args, **kwargs):
        alive.append(sum(ref() is not None for ref in previous))
        out = real(run, layout, *args, **kwargs)
        inputs = {id(root(v)) for cols, _ in layout for v in cols.values() if isinstance(v, np.ndarray)}
        computed = {id(root(v)): root(v) for c in out if c for v in c[0].values() if isinstance(v, np.ndarray)}
        previous[:] = [weakref.ref(a) for i, a in computed.items() if i not in inputs]
        return out

    monkeypatch.setattr(chunks, "evaluate_chunks", watched)

    class Nothing(Collector):
        def update(self, cols):
            pass

        def result(self):
            return None

    runs, _ = gpt3_five_counts
    stream_runs(runs, [Nothing()], chunk_rows=3001, workers=1, derive=False)
    assert len(alive) > 5 and previous and alive == [0] * len(alive), alive
