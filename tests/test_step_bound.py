"""The step-time lower bound (cost/step_bound.py) and the search that skips rows by it
(search/bounded.py).

- LB <= time_step_s on every row of random small grids over every shipped model, accelerator and
  training stack, the pipeline schedules, fp8 recipes, offloads, launch blocking, the CP kinds,
  exposed DP and hybrid sharding (hypothesis, bounded examples);
- the bound is not vacuous: within a few times the step on a known layout;
- a top-k search by step time keeps the same rows, byte for byte, with and without the bound, at
  one and two workers, and times fewer rows with it (a call too small for the bound: only the rows a
  collector keeps); collectors that keep every row turn it off;
- `best` prints the same table with and without the bound.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from parallmelism.config import load_option, load_run_configs
from parallmelism.config.kernel_tables import kernel_model
from parallmelism.cost.step_bound import step_time_lower_bound_s
from parallmelism.search import RowsCollector, TopKCollector, stream_runs
from parallmelism.search.best import near_miss, search_best

ROOT = Path(__file__).resolve().parents[1]
MODELS = sorted(p.stem for p in (ROOT / "models").glob("*.yaml"))
HARDWARE = sorted(p.stem for p in (ROOT / "hardware").glob("*.yaml"))
STACKS = sorted(p.stem for p in (ROOT / "conf" / "stack").glob("*.yaml"))
SETTINGS = settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


@st.composite
def runs(draw):
    model = draw(st.sampled_from(MODELS))
    seq = draw(st.sampled_from([1024, 4096]))
    seq = min(seq, load_option("model", model).max_position or seq)  # a learned position table bounds it
    overrides = [
        f"model={model}",
        f"hardware={draw(st.sampled_from(HARDWARE))}",
        f"stack={draw(st.sampled_from(STACKS))}",
        f"grid.ngpus=[{draw(st.sampled_from([16, 64, 256]))}]",
        f"workload.seq_len={seq}",
        f"workload.global_batch={draw(st.sampled_from([32, 128]))}",
        "grid.micro_batch=[1,2]",
        "grid.vpp=[1,2]",
        f"workload.schedule={draw(st.sampled_from(['1f1b', 'gpipe', 'zero_bubble']))}",
        f"workload.dp_shard_size={draw(st.sampled_from(['null', '2']))}",
    ]
    extra = {
        "workload.precision": st.sampled_from(["bf16", "fp8"]),
        "workload.low_precision_gemms": st.sampled_from(["all", "where_faster"]),
        "workload.fp8_bf16_edge_layers": st.sampled_from([0, 1]),
        "workload.activation_offload_layers": st.sampled_from([0, 2]),
        "workload.optimizer_offload": st.booleans(),
        "workload.launch_blocking": st.booleans(),
        "workload.compile": st.booleans(),
        "workload.cp_comm_type": st.sampled_from(["p2p", "all_gather", "a2a"]),
        "workload.param_offload": st.booleans(),
        "workload.overlap_dp_comm": st.booleans(),
    }
    for key, values in extra.items():
        if draw(st.booleans()):
            overrides.append(f"++{key}={str(draw(values)).lower()}")
    return overrides


def _table(overrides):
    """(run, every row's columns) of the overrides' run, or None where the combination is refused."""
    from parallmelism.errors import UserError

    try:
        run = load_run_configs(overrides)[0][1]
        res = stream_runs([run], [RowsCollector()], workers=1, derive=False)
    except (UserError, ValueError):
        return None
    return run, res.kept[0]


def _lower_bound(run, cols):
    hw = run.accelerator()
    return step_time_lower_bound_s(cols, run.model, hw, run.training_workload(), kernel_model(hw))


@SETTINGS
@given(runs())
def test_bound_never_exceeds_the_step(overrides):
    got = _table(overrides)
    assume(got is not None and bool(got[1]))  # a refused combination is not an example: ~2 in 3 are
    run, cols = got
    lb, step = _lower_bound(run, cols), cols["time_step_s"]
    assert np.isfinite(lb).all() and (lb > 0).all()
    bad = np.flatnonzero(lb > step)
    assert len(bad) == 0, {
        k: cols[k][bad[0]] for k in ("tp", "pp", "cp", "ep", "dp", "vpp", "micro_batch", "recompute")
    }


def test_bound_is_close_on_a_pipeline_free_layout():
    """Llama-3.1-8B on 8 H100, dp 8: no bubble and little communication, so the compute the bound
    keeps is most of the step (a vacuous bound, e.g. 0, would skip nothing)."""
    run = load_run_configs(["model=llama3.1-8b", "hardware=h100-sxm-80gb", "grid.ngpus=[8]"])[0][1]
    cols = stream_runs([run], [RowsCollector()], workers=1, derive=False).kept[0]
    lb, step = _lower_bound(run, cols), cols["time_step_s"]
    plain = (cols["tp"] == 1) & (cols["pp"] == 1) & (cols["cp"] == 1)
    assert plain.any()
    assert (lb[plain] / step[plain]).min() > 0.5


GRIDS = {
    "405b": [
        "model=llama3.1-405b",
        "hardware=h100-sxm-80gb",
        "workload.global_batch=256",
        "grid.ngpus=[256,512]",
        "grid.max_micro_batch=4",
    ],
    "mixtral-fp8": [
        "model=mixtral-8x7b",
        "hardware=h100-sxm-80gb",
        "workload.precision=fp8",
        "workload.global_batch=128",
        "grid.ngpus=[32,64]",
    ],
}


def _collectors():
    """What `best --top 5` keeps, and the two fastest of all layouts (bench_sweep's keep)."""
    return [
        TopKCollector(5, "time_step_s", group_by=["ngpus"], where="fits"),
        TopKCollector(2, "time_step_s", group_by=["ngpus"], where=near_miss),
        TopKCollector(2, "time_step_s", group_by=["ngpus"], where=None),
    ]


@pytest.mark.parametrize("grid", sorted(GRIDS))
@pytest.mark.parametrize("workers", [1, 2])
def test_bounded_search_keeps_the_same_rows(grid, workers):
    runs = [rc for _, rc in load_run_configs(GRIDS[grid])]
    plain, bounded = _collectors(), _collectors()
    a = stream_runs(runs, plain, workers=1, bound=False)
    b = stream_runs(runs, bounded, workers=workers, chunk_rows=4096)  # several calls: the limits carry over
    assert a.evaluated == b.evaluated and b.timed < a.timed == a.evaluated
    for x, y in zip(plain, bounded):
        kx, ky = x.result(), y.result()
        assert list(kx) == list(ky)
        for k in kx:
            assert kx[k].dtype == ky[k].dtype and kx[k].tobytes() == ky[k].tobytes(), k


def test_a_call_without_the_bound_times_only_the_rows_a_collector_keeps():
    """A call too small for the bound (search/bounded.py PROBE_MIN_ROWS), with nothing kept yet, times
    the rows some collector's `where` keeps (here: those that fit or miss memory by at most the margin)
    and no other, and keeps the same rows as timing every one."""
    runs = [rc for _, rc in load_run_configs(["model=llama3.1-70b", "hardware=h100-sxm-80gb", "grid.ngpus=[16]"])]
    every = stream_runs(runs, [RowsCollector()], workers=1, derive=False).kept[0]
    wanted = int((np.asarray(every["fits"], dtype=bool) | near_miss(every)).sum())
    plain, bounded = _collectors()[:2], _collectors()[:2]
    a = stream_runs(runs, plain, workers=1, bound=False)
    b = stream_runs(runs, bounded, workers=1)
    assert b.evaluated == a.timed == len(every["tp"]) and 0 < b.timed == wanted < b.evaluated
    for x, y in zip(plain, bounded):
        kx, ky = x.result(), y.result()
        assert list(kx) == list(ky) and all(kx[k].tobytes() == ky[k].tobytes() for k in kx)


def test_collectors_that_keep_every_row_time_every_row():
    runs = [rc for _, rc in load_run_configs(GRIDS["mixtral-fp8"])]
    res = stream_runs(runs, [TopKCollector(5, "time_step_s", group_by=["ngpus"]), RowsCollector()], workers=1)
    assert res.timed == res.evaluated
    by_tokens = TopKCollector(5, "tokens_per_s", group_by=["ngpus"], descending=True)
    assert stream_runs(runs, [by_tokens], workers=1).timed == res.evaluated


def test_best_table_is_the_same_with_and_without_the_bound():
    runs = [rc for _, rc in load_run_configs(GRIDS["405b"])]
    plain, _ = search_best(runs, 5, lambda rs, cs: stream_runs(rs, cs, workers=1, bound=False))
    bounded, _ = search_best(runs, 5, lambda rs, cs: stream_runs(rs, cs, workers=1))
    assert plain.columns == bounded.columns
    assert repr(plain.rows) == repr(bounded.rows)


def test_shape_op_sums_table_gives_the_sums_of_a_subset_of_its_keys():
    """The op sums the bound evaluates (steptime.ShapeOpSums) are those the step time would evaluate
    on any subset of the keys, byte for byte; a key outside the table is evaluated."""
    from parallmelism.cost import steptime
    from parallmelism.cost.keys import unique_rows
    from parallmelism.cost.layout import TrainingLayout
    from parallmelism.cost.roofline import Rates

    run = load_run_configs(GRIDS["mixtral-fp8"])[0][1]
    cols = stream_runs([run], [RowsCollector()], workers=1, derive=False).kept[0]
    hw, wl, model = run.accelerator(), run.training_workload(), run.model
    rates = Rates(hw, wl.precision, kernel_model(hw), wl.fp8_scaling)
    edge = steptime.bf16_edge_layers(wl)
    first, _ = unique_rows(*(cols[k] for k in steptime.shape_key(model)))
    keys = TrainingLayout.of(cols).take(first)
    table = steptime.ShapeOpSums.of(keys, model, steptime._ops_sums(keys, model, hw, wl, rates, edge), edge)
    some = keys.take(np.arange(len(first))[1::3])
    got, want = table.sums_of(some, model, hw, wl, rates, edge), steptime._ops_sums(some, model, hw, wl, rates, edge)
    assert table.keys_of(some) is not None and got.keys() == want.keys()
    for name in want:
        for k, v in want[name].items():
            assert np.array_equal(np.broadcast_to(v, np.shape(got[name][k])), got[name][k]), (name, k)
    outside = TrainingLayout.of({**{k: cols[k][:1] for k in cols}, "micro_batch": cols["micro_batch"][:1] + 1000})
    assert table.keys_of(outside) is None
