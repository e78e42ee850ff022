"""The accelerator files added for issue 32 item 3 (machines users have): each spec number equals the
datasheet value it cites (tests/data/accelerator_datasheets.csv, one number a row with its page), each
file composes, `list hardware` shows it and `best` finds a Llama-3.1-8B layout on it; a power-capped
part runs its kernels at its sustained clock (specs AcceleratorSpec.sustained_clock_fraction), derived
here from the cited datasheet numbers rather than restated."""

from __future__ import annotations

import csv

import pytest

from conftest import REPO, invoke, shared_reference
from parallmelism.config.compose import load_option
from parallmelism.config.kernel_tables import kernel_model

TABLE = REPO / "tests" / "data" / "accelerator_datasheets.csv"
NEW = [
    "h100-grand-teton-96gb",
    "h100-nvl-94gb",
    "h800-sxm-80gb",
    "h20-96gb",
    "b300-288gb",
    "mi325x-256gb",
    "mi355x-288gb",
    "tpu-v5e",
    "tpu-v6e",
]


def _rows() -> list[dict]:
    with open(TABLE, encoding="utf-8") as fh:
        return list(csv.DictReader(line for line in fh if not line.startswith("#")))


def _field(spec, dotted: str) -> float:
    node = spec
    for part in dotted.split("."):
        node = node[part] if isinstance(node, dict) else getattr(node, part)
    return float(node)


def _value(name: str, field: str) -> float:
    (row,) = [r for r in _rows() if r["accelerator"] == name and r["field"] == field]
    return float(row["datasheet_value"]) * float(row["to_spec"])


@pytest.mark.parametrize("row", _rows(), ids=lambda r: f"{r['accelerator']}:{r['field']}")
def test_spec_number_equals_its_cited_datasheet_value(row):
    assert row["source"].strip() and row["confidence"] in ("primary", "secondary", "datasheet-knowledge")
    spec = load_option("hardware", row["accelerator"])
    expected = float(row["datasheet_value"]) * float(row["to_spec"])
    # within the datasheets' own rounding (1979 / 2 = 989.5 against the 989.4 of 132 SMs at 1830 MHz)
    assert _field(spec, row["field"]) == pytest.approx(expected, rel=1e-3), row


def test_every_new_file_cites_its_peak_hbm_and_links():
    cited = {(r["accelerator"], r["field"]) for r in _rows()}
    for name in NEW:
        for field in ("peak_tflops.bf16", "hbm_bandwidth_gbps", "hbm_capacity_gib", "scale_up.bandwidth_gbps"):
            assert (name, field) in cited, (name, field)


def test_the_500_w_h100_runs_at_the_clock_interpolated_from_the_cited_datasheets():
    """torchtitan puts the Grand Teton H100's peak between the NVL's (400 W) and the SXM's (700 W):
    linear in power at 500 W, from the datasheet rows, not a restated number."""
    nvl, sxm = _value("h100-nvl-94gb", "peak_tflops.bf16"), _value("h100-sxm-80gb", "peak_tflops.bf16")
    p_nvl, p_sxm = _value("h100-nvl-94gb", "tdp_w"), _value("h100-sxm-80gb", "tdp_w")
    p = _value("h100-grand-teton-96gb", "tdp_w")
    lo = nvl / sxm
    expected = lo + (p - p_nvl) / (p_sxm - p_nvl) * (1.0 - lo)
    gt = load_option("hardware", "h100-grand-teton-96gb")
    assert gt.sustained_clock_fraction == pytest.approx(expected, abs=5e-4)
    assert gt.peak_tflops["bf16"] == pytest.approx(sxm, rel=1e-3)  # the datasheet peak stays (MFU is against it)


def test_the_power_cap_slows_compute_bound_kernels_and_only_them():
    """A compute-bound GEMM on the 500 W part takes 1/fraction the time of the same part uncapped
    (an override of the one field), a memory-bound transfer the same time; serving rates likewise."""
    from parallmelism.cost.roofline import Rates

    gt = load_option("hardware", "h100-grand-teton-96gb")
    uncapped = gt.model_copy(update={"sustained_clock_fraction": 1.0})
    big = 16384.0
    capped_s, free_s = (float(kernel_model(h).gemm_s(big, big, big)) for h in (gt, uncapped))
    assert capped_s / free_s == pytest.approx(1.0 / gt.sustained_clock_fraction, rel=5e-3)
    assert float(kernel_model(gt).memory_s(2.0**30)) == float(kernel_model(uncapped).memory_s(2.0**30))
    assert Rates(gt, "bf16").gemm_peak / Rates(uncapped, "bf16").gemm_peak == pytest.approx(
        gt.sustained_clock_fraction, rel=1e-12
    )


CAPPED = ("h100-grand-teton-96gb", "mi300x-192gb", "mi325x-256gb")  # clocks from tests/data/accelerator_datasheets.csv


def test_uncapped_parts_keep_their_spec_object():
    """Every other shipped part has fraction 1: its kernel physics is its spec, unchanged (goldens)."""
    from parallmelism.config import option_files
    from parallmelism.config.kernel_tables import sustained

    for name in option_files("hardware", []):
        hw = load_option("hardware", name)
        if name not in CAPPED:
            assert hw.sustained_clock_fraction == 1.0 and sustained(hw) is hw, name
        else:
            assert hw.sustained_clock_fraction < 1.0 and (name, "sustained_clock_fraction") in {
                (r["accelerator"], r["field"]) for r in _rows()
            } | {("h100-grand-teton-96gb", "sustained_clock_fraction")}, name


def test_shared_reference_rows_agree_with_the_files():
    """../shared/reference/accelerators.csv (its shipped copy) holds rows for some of these parts:
    where a file exists for a row, the numbers both state agree."""
    import pandas as pd

    from parallmelism.config import option_files

    ref = pd.read_csv(shared_reference("accelerators.csv"), comment="#")
    shipped = set(option_files("hardware", []))
    checked = 0
    for r in ref.itertuples():
        if r.accelerator not in shipped:
            continue
        hw = load_option("hardware", r.accelerator)
        pairs = [
            (r.bf16_dense_tflops, hw.peak_tflops["bf16"]),
            (r.hbm_bandwidth_gbps, hw.hbm_bandwidth_gbps),
            (r.scale_up_domain_gpus, hw.scale_up.domain_size),
            (r.scale_up_gbps_bidirectional, 2 * hw.scale_up.bandwidth_gbps),
        ]
        if pd.notna(r.fp8_dense_tflops) and "fp8" in hw.peak_tflops:  # tpu-v5p: no fp8 MXUs (its file)
            pairs.append((r.fp8_dense_tflops, hw.peak_tflops["fp8"]))
        if pd.notna(r.scale_out_gbps_per_gpu_per_direction) and hw.scale_out is not None:
            pairs.append((r.scale_out_gbps_per_gpu_per_direction, hw.scale_out.bandwidth_gbps))
        for want, got in pairs:
            assert got == pytest.approx(float(want), rel=1e-9), (r.accelerator, want, got)
        checked += 1
    assert checked >= 12


def test_list_shows_every_new_file():
    code, out = invoke("list", "hardware")
    assert code == 0, out
    for name in NEW:
        assert name in out, name


@pytest.mark.parametrize("name", NEW)
def test_best_finds_a_llama_8b_layout(name):
    hw = load_option("hardware", name)
    ngpus = 8 if hw.hbm_usable_gib >= 60 else 64  # 16-32 GB TPUs need more chips for 8B's states
    code, out = invoke(
        "best", "model=llama3.1-8b", f"hardware={name}", f"grid.ngpus=[{ngpus}]", "grid.pp=1", "grid.ep=1"
    )
    assert code == 0, out
    assert "fastest layouts that fit" in out and name in out, out
