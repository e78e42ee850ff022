"""A non-NVIDIA accelerator's kernel efficiencies from its own published measurements (issue 32
item 3): the MI300X's GEMMs from AMD's Max-Achievable-FLOPs blog (bf16, fp8) and Microsoft Azure's
AI-benchmarking-guide (fp8 over sizes, HBM copy) in hardware/kernels/mi300x-192gb.csv, timed at the
clock the part sustains in dense GEMMs (AMD's published median clock); its RCCL all-reduce bus
bandwidth and fp8 GEMM fraction in its efficiency block; attention, which neither publishes, stays
the H100 rule. The MI325X (same CDNA 3 compute, higher sustained clock) reads the same table on its
own clock and HBM, and reproduces AMD's MI325X figures, which no table holds."""

from __future__ import annotations

import csv
import re

import pytest

from conftest import REPO
from parallmelism.config.compose import load_option
from parallmelism.config.kernel_tables import kernel_model, reference_table

TABLE = REPO / "hardware" / "kernels" / "mi300x-192gb.csv"
MI300X = load_option("hardware", "mi300x-192gb")
MI325X = load_option("hardware", "mi325x-256gb")
PEAK_CLOCK_MHZ = 2100  # the MI300X/MI325X peak engine clock their datasheet peaks are quoted at
# AMD ROCm blog 'Measuring Max-Achievable FLOPs - Part 2' (2025), Table 1: MI325X, in no table here
MI325X_MAF = {"bf16": (843.0, 1447), "fp8": (1519.0, 1464)}  # (TFLOPS, median clock MHz)
MAF_SHAPES = {"bf16": (4096, 32896, 4864), "fp8": (4096, 32896, 3648)}  # (m, k, n), its Appendix B


def _rows(family: str) -> list[dict]:
    with open(TABLE, encoding="utf-8") as fh:
        rows = list(csv.DictReader(line for line in fh if not line.startswith("#")))
    return [r for r in rows if r["family"] == family]


def _published(source: str, unit: str) -> float:
    (value,) = re.findall(rf"([0-9.]+) {unit}", source)
    return float(value)


def _tflops(km, dtype, m, k, n) -> float:
    return 2 * m * k * n / float(km.gemm_s(m, k, n, dtype)) / 1e12


def _rule(hw):
    """The same accelerator without its table: the H100 rule, on the same physics."""
    kernels = hw.kernels.model_copy(
        update={"table": None, "measured_peak_tflops": None, "measured_hbm_bandwidth_gbps": None}
    )
    return hw.model_copy(update={"kernels": kernels})


def test_each_gemm_row_is_the_published_tflops():
    rows = _rows("gemm")
    assert len(rows) == 12 and {r["dtype"] for r in rows} == {"bf16", "fp8"}
    for r in rows:
        m, k, n, t = (float(r[c]) for c in ("m", "k", "n", "measured_s"))
        assert 2 * m * k * n / t / 1e12 == pytest.approx(_published(r["source"], "TFLOPS"), rel=1e-12), r


def test_the_sustained_clocks_are_amds_published_median_clocks():
    (bf16,) = [r for r in _rows("gemm") if r["dtype"] == "bf16" and "MHz" in r["source"]]
    assert MI300X.sustained_clock_fraction == pytest.approx(
        _published(bf16["source"], "MHz") / PEAK_CLOCK_MHZ, abs=1e-4
    )
    assert MI325X.sustained_clock_fraction == pytest.approx(MI325X_MAF["bf16"][1] / PEAK_CLOCK_MHZ, abs=1e-4)
    # the table was timed at the MI300X's clock: its own file pins that when composed, the MI325X states it
    for hw in (MI300X, MI325X):
        for dtype, peak in MI300X.peak_tflops.items():
            want = peak * MI300X.sustained_clock_fraction
            assert hw.kernels.measured_peak_tflops[dtype] == pytest.approx(want, rel=1e-5)


def test_measured_gemms_come_back_and_attention_stays_the_rule():
    km, rule = kernel_model(MI300X), kernel_model(_rule(MI300X))
    for r in _rows("gemm"):
        m, k, n = (float(r[c]) for c in ("m", "k", "n"))
        assert float(km.gemm_s(m, k, n, r["dtype"])) == pytest.approx(float(r["measured_s"]), rel=1e-6)
    flops = 4.0 * 8192**2 * 128 * 32 / 2
    assert float(km.attention_s(flops, 8192, 32)) == float(rule.attention_s(flops, 8192, 32))
    # AMD's bf16 MAF is 0.54 of the datasheet peak, where the H100 rule on the datasheet peak made 0.77
    datasheet_rule = kernel_model(_rule(MI300X).model_copy(update={"sustained_clock_fraction": 1.0}))
    m, k, n = MAF_SHAPES["bf16"]
    assert _tflops(datasheet_rule, "bf16", m, k, n) > 1.3 * _tflops(km, "bf16", m, k, n)


@pytest.mark.parametrize("dtype", ["bf16", "fp8"])
def test_the_mi325x_reproduces_amds_figures_from_the_mi300x_table_and_its_clock(dtype):
    """Out of sample: AMD's MI325X MAF (not in any table) from the MI300X rows on the MI325X's published
    sustained clock, within 1 % (the fp8 run's clock differs from the bf16 one the fraction is)."""
    m, k, n = MAF_SHAPES[dtype]
    assert _tflops(kernel_model(MI325X), dtype, m, k, n) == pytest.approx(MI325X_MAF[dtype][0], rel=0.01)


def test_the_mi325x_is_within_5_percent_of_its_community_mamf():
    """Out of sample, other software: Stas Bekman's MI325X MAMF (torch 2.6 + ROCm 6.2.4, 1000 W), 784.9
    TFLOPS bf16 at M=13312 N=10240 K=8192 (ml-engineering compute/accelerator/README.md), in no table."""
    assert _tflops(kernel_model(MI325X), "bf16", 13312, 8192, 10240) == pytest.approx(784.9, rel=0.05)


def test_the_mi355x_reads_its_one_published_gemm_and_the_rule_for_the_rest():
    hw = load_option("hardware", "mi355x-288gb")
    with open(REPO / "hardware" / "kernels" / "mi355x-288gb.csv", encoding="utf-8") as fh:
        (row,) = list(csv.DictReader(line for line in fh if not line.startswith("#")))
    m, k, n = (float(row[c]) for c in ("m", "k", "n"))
    km, rule = kernel_model(hw), kernel_model(_rule(hw))
    assert _tflops(km, "bf16", m, k, n) == pytest.approx(_published(row["source"], "TFLOPS"), rel=1e-9)
    assert _tflops(rule, "bf16", m, k, n) > 1.15 * _tflops(km, "bf16", m, k, n)  # the rule was 19 % optimistic
    assert km.table.gemm["fp8"] is reference_table().gemm["fp8"]
    assert float(km.gemm_s(m, k, n, "fp8")) == float(rule.gemm_s(m, k, n, "fp8"))


def test_hbm_runs_at_the_published_copy_bandwidth():
    (row,) = _rows("hbm")
    tbps = _published(row["source"], "TB/s")
    assert float(kernel_model(MI300X).memory_s(2.0**30)) == pytest.approx(2.0**30 / (tbps * 1e12), rel=1e-12)
    # the MI325X: the MI300X's measured fraction of its bandwidth, on its own 6 TB/s
    frac = tbps * 1e3 / MI300X.hbm_bandwidth_gbps
    assert float(kernel_model(MI325X).memory_s(2.0**30)) == pytest.approx(
        2.0**30 / (frac * MI325X.hbm_bandwidth_gbps * 1e9), rel=1e-12
    )
    assert MI325X.kernels.measured_hbm_bandwidth_gbps == MI300X.hbm_bandwidth_gbps


def test_efficiency_fractions_are_the_published_measurements():
    """RCCL all_reduce busbw at 8 GB on 8 GPUs over the per-direction Infinity Fabric bandwidth; the
    8192^3 fp8 GEMM over the sustained fp8 peak the serving rates run at (ND_MI300X_v5_results.md)."""
    assert MI300X.efficiency.scale_up == round(316.82 / MI300X.scale_up.bandwidth_gbps, 3)
    (row,) = [r for r in _rows("gemm") if r["m"] == r["k"] == r["n"] == "8192"]
    published = _published(row["source"], "TFLOPS")
    assert MI300X.efficiency.matmul_fp8 == round(published / (MI300X.sustained_flops("fp8") / 1e12), 3)
    assert MI325X.efficiency == MI300X.efficiency


def test_a_table_missing_a_precision_takes_it_from_the_h100_table_but_a_cpu_table_keeps_its_own():
    """A table that measured some tensor-core GEMMs (here fp8 only) takes the precisions it lacks from
    the H100 table (the rule); a CPU profile (fp32 only) keeps reading its fp32 ratios, as before."""
    from parallmelism.cost.kernels import KernelModel, KernelTable, KernelTables

    def table(dtype):
        rows = [
            {
                "family": "gemm",
                "dtype": dtype,
                "part": "fwd",
                "m": str(s),
                "k": str(s),
                "n": str(s),
                "measured_s": str(t),
            }
            for s, t in ((256, 1e-4), (1024, 3e-3))
        ]
        return KernelTable(rows, {"bf16": 1.0, "fp8": 2.0}, 50.0, 8, require_all=False)

    ref = reference_table()
    fp8_only = KernelModel(_rule(MI300X), KernelTables(table("fp8"), ref))
    assert fp8_only.table.gemm["bf16"] is ref.gemm["bf16"] and fp8_only.table.gemm["fp8"] is not ref.gemm["fp8"]
    cpu = KernelModel(_rule(MI300X), KernelTables(table("fp32"), ref))
    assert set(cpu.table.gemm) == {"fp32"}
