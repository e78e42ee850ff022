"""Kernel model (cost.kernels) against the kernels measured on one H100 SXM (tests/data/reference:
the project's copy of ../shared/reference)."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import shared_reference
from parallmelism.config.compose import load_option
from parallmelism.config.kernel_tables import kernel_model, load_table
from parallmelism.cost.kernels import causal_attention_flops

MEASURED = shared_reference("h100_kernels_measured.csv")
CURVES = shared_reference("h100_kernel_curves.csv")
H100 = load_option("hardware", "h100-sxm-80gb")


def _predict_measured(km, df):
    """Model seconds for every row of h100_kernels_measured.csv (its own column conventions)."""
    out = []
    for r in df.itertuples():
        if r.family == "gemm":
            out.append(km.gemm_s(r.m, r.k, r.n, "fp8" if r.dtype.startswith("fp8") else "bf16", r.part))
        elif r.family == "attention_causal":
            backend = {"cudnn_attention": "cudnn", "flash_attention": "flash2"}[r.backend]
            out.append(km.attention_s(r.flops, r.seq, r.heads, r.part == "bwd", backend))
        else:
            out.append(km.memory_s(r.bytes))
    return np.array([float(x) for x in out])


def _predict_curves(km, df):
    """(measured, model) seconds for every timing in h100_kernel_curves.csv (attention: fwd and bwd)."""
    meas, pred = [], []
    for r in df.itertuples():
        if r.family == "gemm":
            meas.append(r.measured_s)
            pred.append(km.gemm_s(r.m, r.k, r.n, r.dtype))
        elif r.family == "attention_causal":
            for bwd, t in ((False, r.measured_s), (True, r.measured_bwd_s)):
                meas.append(t)
                pred.append(km.attention_s(causal_attention_flops(r.seq, r.heads, 128, bwd), r.seq, r.heads, bwd))
        else:
            meas.append(r.measured_s)
            pred.append(km.memory_s(r.bytes_moved))
    return np.array(meas), np.array([float(x) for x in pred])


def test_h100_model_reproduces_every_measured_kernel():
    """Issue bar: every row of both shared kernel files, median |error| <= 5 %, max <= 15 %."""
    km = kernel_model(H100)
    m = pd.read_csv(MEASURED, comment="#")
    err_m = np.abs(_predict_measured(km, m) / m.measured_s.to_numpy() - 1)
    meas, pred = _predict_curves(km, pd.read_csv(CURVES, comment="#"))
    err_c = np.abs(pred / meas - 1)
    for err in (err_m, err_c):
        assert np.median(err) <= 0.05
        assert err.max() <= 0.15
    assert len(err_m) == 186 and len(err_c) == 351  # every row (and both attention directions) checked


def test_llama_shapes_predicted_from_the_curves_alone(tmp_path):
    """Held out: a table built from the size curves only predicts the Llama-layer kernels of the other
    file (shapes it never saw: other (k, n), dgrad/wgrad parts) within median 8 %, max 30 %;
    cuDNN attention within median 3 %, max 10 %."""
    from parallmelism.validate.kernel_table import build

    path = tmp_path / "curves.csv"
    build([CURVES], path)
    km = kernel_model(H100)
    km.table = load_table(path, H100.peak_tflops, H100.hbm_bandwidth_gbps, 132, False)
    m = pd.read_csv(MEASURED, comment="#")
    m = m[(m.family == "gemm") | (m.backend == "cudnn_attention")]
    err = np.abs(_predict_measured(km, m) / m.measured_s.to_numpy() - 1)
    gemm = (m.family == "gemm").to_numpy()
    assert np.median(err[gemm]) <= 0.08 and err[gemm].max() <= 0.30
    assert np.median(err[~gemm]) <= 0.03 and err[~gemm].max() <= 0.10


def test_large_gemm_and_hbm_fractions_are_physical():
    """Large bf16 GEMMs reach 0.65-0.85 of the 989 TFLOP/s peak; fp8 runs faster than bf16 but less
    than 2x (the curves: ~1.7x); large copies reach 0.8-0.92 of 3.35 TB/s, 2 MB ones under half."""
    km = kernel_model(H100)
    m = k = n = 8192.0
    t16 = float(km.gemm_s(m, k, n, "bf16"))
    t8 = float(km.gemm_s(m, k, n, "fp8"))
    assert 0.65 <= 2 * m * k * n / t16 / 989e12 <= 0.85
    assert 1.4 <= t16 / t8 <= 1.95
    assert 0.8 <= float(km.hbm_fraction(4e9)) <= 0.92
    assert float(km.hbm_fraction(2e6)) < 0.5


def test_vectorized_over_arrays():
    km = kernel_model(H100)
    m = np.array([16.0, 1024.0, 8192.0, 8192.0])
    t = km.gemm_s(m, 4096.0, 4096.0)
    assert t.shape == (4,) and np.all(np.diff(t[:3]) > 0)
    for i, mi in enumerate(m):
        assert float(km.gemm_s(mi, 4096.0, 4096.0)) == pytest.approx(t[i])
    s = np.array([4096.0, 8192.0])
    a = km.attention_s(causal_attention_flops(s, 16, 128), s, 16.0)
    assert a.shape == (2,) and a[1] > a[0]


def test_accelerator_without_a_table_scales_the_h100_kernels():
    """The documented rule: an accelerator without a table (H200) gets the H100's measured fraction of
    its own peak at the same shape: a large compute-bound GEMM takes the H100 time (same peak, same
    SMs), an HBM transfer the H100 time x 3350/4800."""
    h200 = load_option("hardware", "h200-sxm-141gb")
    kx, kh = kernel_model(h200), kernel_model(H100)
    assert not kx.own_table and kh.own_table
    big = (16384.0, 16384.0, 16384.0)
    ratio = float(kx.gemm_s(*big)) / float(kh.gemm_s(*big))
    assert ratio == pytest.approx(989 / h200.peak_tflops["bf16"], rel=0.05)
    assert float(kx.memory_s(1e9)) / float(kh.memory_s(1e9)) == pytest.approx(3350 / h200.hbm_bandwidth_gbps)


def _hw_with_table(tmp_path, table_text, name):
    from parallmelism.errors import UserError  # noqa: F401

    folder = tmp_path / "hardware"
    folder.mkdir(exist_ok=True)
    table = folder / f"{name}.csv"
    if table_text is not None:
        table.write_text(table_text)
    return H100.model_copy(update={"kernels": H100.kernels.model_copy(update={"table": str(table)})})


@pytest.mark.parametrize(
    "text", [None, "family,dtype\ngemm,bf16\n", "family,dtype,part,m,k,n,measured_s\ngemm,bf16,fwd,16,16,16,-1\n"]
)
def test_missing_or_broken_table_is_one_sentence(tmp_path, text):
    from parallmelism.errors import UserError

    hw = _hw_with_table(tmp_path, text, "broken")
    with pytest.raises(UserError, match="kernel table"):
        kernel_model(hw)


def test_cli_with_a_broken_table_exits_2(tmp_path):
    from conftest import invoke

    (tmp_path / "hardware").mkdir()
    (tmp_path / "hardware" / "trunc.csv").write_text("family,dtype\ngemm,bf16\n")
    src = (Path(__file__).resolve().parents[1] / "hardware" / "h100-sxm-80gb.yaml").read_text()
    src = src.replace("table: kernels/h100-sxm-80gb.csv", f"table: {tmp_path / 'hardware' / 'trunc.csv'}")
    src = src.replace("name: h100-sxm-80gb", "name: badt")
    (tmp_path / "hardware" / "badt.yaml").write_text(src)
    code, out = invoke("best", "--config-dir", str(tmp_path), "hardware=badt", "model=llama3.1-8b", "grid.ngpus=[8]")
    assert code == 2 and "kernel table" in out and "Traceback" not in out


def test_a100_table_is_aiconfigurator_measurements_with_the_h100_rule_for_the_rest():
    """The A100 table holds NVIDIA aiconfigurator's measured bf16 GEMMs and prefill (forward) attention;
    a measured A100 GEMM comes back from the model, and the attention backward and HBM transfers,
    which aiconfigurator does not measure, come from the H100 table on the A100's own physics."""
    a100 = load_option("hardware", "a100-sxm-80gb")
    km = kernel_model(a100)
    assert km.own_table and km.backend == "flash2"
    table = pd.read_csv(km.table.path, comment="#")
    assert table.source.str.startswith("aiconfigurator").all()
    g = table[(table.family == "gemm") & (table.m == 4096) & (table.k == 4096) & (table.n == 4096)].iloc[0]
    assert float(km.gemm_s(4096, 4096, 4096)) == pytest.approx(g.measured_s, rel=0.02)
    assert 0.6 < 2 * 4096**3 / g.measured_s / 312e12 < 0.95  # a measured A100, not a scaled H100
    assert float(km.memory_s(1e9)) / float(kernel_model(H100).memory_s(1e9)) == pytest.approx(3350 / 2039)
    assert ("cudnn", "bwd") in km.table.attention and ("flash2", "fwd") in km.table.attention


def test_remembered_residuals_are_the_interpolated_ones():
    """A sweep looks each shape's residual up in the memo after its first chunk (cost.kernels
    `_Residuals._memoized`): shapes seen before, new ones and repeats in one call get what a fresh
    interpolation (`_idw`) gives, bit for bit, and a shape whose key collides with a remembered
    one (a different row under an equal float key) is interpolated, not looked up."""
    from parallmelism.cost.kernels import _idw, _Residuals

    rng = np.random.default_rng(0)
    points, values = rng.uniform(0, 14, (40, 3)), rng.normal(0, 0.3, 40)
    res = _Residuals(points, values)
    shapes = 2.0 ** rng.integers(4, 14, (500, 3)).astype(np.float64)
    first = res(*shapes[:300].T)
    second = res(*shapes[200:].T)  # 100 shapes remembered, 200 new
    expected = _idw(points, values, np.log2(shapes))
    assert np.array_equal(first, expected[:300]) and np.array_equal(second, expected[200:])
    width = 3
    keys, seen, vals = res.memo[width]
    assert np.all(np.diff(keys) >= 0) and len(keys) == len(np.unique(np.log2(shapes), axis=0))
    # an entry whose row differs from the query's is not that row's residual, whatever its key
    i = int(np.flatnonzero((seen == np.log2(shapes[0])).all(axis=1))[0])  # a shape of the call below
    wrong_row, wrong_value = seen.copy(), vals.copy()
    wrong_row[i] += 1.0
    wrong_value[i] += 1.0
    res.memo[width] = (keys, wrong_row, wrong_value)
    again = res(*shapes[:300].T)
    assert np.array_equal(again, expected[:300])
