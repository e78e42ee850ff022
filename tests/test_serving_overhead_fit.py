"""The serving overheads in conf/engine/NAME.yaml are what benchmarks/fit_serving_overhead.py
fits on that engine's shipped serving rows: neither grid neighbour of each shipped value gives a smaller mean
|error| on that value's rows. A change to the serving model that moves an optimum fails here, so the
YAML is refitted (run the script) instead of drifting (moe_layer_overhead_us sat at an older 45 us
while the model's optimum had moved to 57.5)."""

import importlib.util

import pytest

from conftest import REPO


@pytest.fixture(scope="module")
def fit():
    spec = importlib.util.spec_from_file_location(
        "fit_serving_overhead", REPO / "benchmarks" / "fit_serving_overhead.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize(
    "engine, field",
    [
        ("nim", "iteration_overhead_ms"),
        ("nim", "request_overhead_ms"),
        ("nim", "tp_all_reduce_call_overhead_us"),
        ("sglang", "moe_layer_overhead_us"),
        ("trtllm", "iteration_overhead_ms"),
        ("trtllm", "moe_layer_overhead_us"),
        ("trtllm", "request_overhead_ms"),
        ("vllm", "iteration_overhead_ms"),
        ("vllm", "request_overhead_ms"),
    ],
)
def test_shipped_serving_overhead_is_the_fit(fit, engine, field):
    ctx = fit._context([], [])
    parts = {
        f: (rows, grid, which)
        for f, rows, grid, which in fit.fit_parts(fit.rows_by_engine(None, ctx)[engine], ctx[0], engine)
    }
    rows, grid, which = parts[field]
    assert rows
    step = float(grid[1] - grid[0])
    shipped_engine = ctx[3](engine)
    values = {f: getattr(shipped_engine, f) for f in fit.FIELDS}
    shipped = values[field]

    def score(v):
        return fit.mean_abs(fit.errors(rows, fit.predict(rows, ctx, None, {**values, field: v}))[which])

    here = score(shipped)
    # neighbours on the fit's grid (an overhead is not negative: at the grid's lower end, 0, only the one above)
    neighbours = [v for v in (shipped - step, shipped + step) if grid[0] <= v <= grid[-1]]
    assert all(here <= score(v) for v in neighbours), (field, shipped)


def test_all_reduce_call_overhead_is_fitted_only_for_all_reduce_fitted_engines(fit):
    """NIM's serving TP all-reduce excess per call beyond the kernel is fitted on its light-load rows with a TP
    all-reduce (tp > 1, concurrency <= 8); no other engine's is, and no engine's kernel latency is fitted on
    end-to-end ITL (those fields are kernel measurements the YAML cites)."""
    ctx = fit._context([], [])
    by_engine = fit.rows_by_engine(None, ctx)
    field = "tp_all_reduce_call_overhead_us"
    for engine, rows in by_engine.items():
        parts = {f: part for f, part, _, _ in fit.fit_parts(rows, ctx[0], engine)}
        assert (field in parts) == (engine in fit.ALL_REDUCE_FITTED), engine
        assert not [f for f in parts if f.startswith("custom_all_reduce")], engine
        if engine not in fit.ALL_REDUCE_FITTED:
            assert ctx[3](engine).tp_all_reduce_call_overhead_us == 0, engine
    nim = {f: part for f, part, _, _ in fit.fit_parts(by_engine["nim"], ctx[0], "nim")}[field]
    assert nim and all(int(r["tp"]) > 1 and float(r["concurrency"]) <= fit.LIGHT_LOAD for r in nim)
    # the 70B TP2 rows at concurrency 1 and 5 of both NIM sources (10 + 1)
    assert len(nim) == 11 and len({r["source"] for r in nim}) == 2
