"""`show` says where a training layout's compute times come from (issue 32 item 5): a measured
kernel table (and which overrides scale it, and which families it takes from the H100 table by rule),
or the H100 table scaled by spec, and a power-capped part's sustained clock."""

from __future__ import annotations

import csv

import pytest

from conftest import REPO, invoke
from parallmelism.config.compose import load_option
from parallmelism.config.kernel_tables import kernel_source

PINNED = [
    "model=llama3.1-8b",
    "grid.ngpus=[8]",
    "grid.tp=1",
    "grid.pp=1",
    "grid.cp=1",
    "grid.micro_batch=1",
    "grid.vpp=1",
    "grid.dp_sharding=FULLY_SHARD",
    "grid.recompute=none",
    "grid.sequence_parallel=false",
]


def _show(*overrides) -> str:
    code, out = invoke("show", *PINNED, *overrides)
    assert code == 0, out
    return " ".join(out.split())  # the console wraps long lines


def _families(table: str) -> set[tuple[str, str]]:
    with open(REPO / "hardware" / table, encoding="utf-8") as fh:
        rows = list(csv.DictReader(line for line in fh if not line.startswith("#")))
    return {(r["family"], r.get("part") or "") for r in rows}


def test_show_names_the_measured_table_that_pins_the_h100():
    out = _show("hardware=h100-sxm-80gb")
    assert "compute times from measured kernel table hardware/kernels/h100-sxm-80gb.csv" in out
    assert "at the peaks and HBM bandwidth it was measured on" in out and "by rule" not in out


def test_show_says_which_overrides_scale_the_table():
    out = _show("hardware=h100-sxm-80gb", "hardware.peak_tflops.bf16=1978", "hardware.hbm_bandwidth_gbps=6700")
    assert (
        "scaled from the physics it was measured on: bf16 989 -> 1,978 TFLOP/s (x2.00), HBM 3,350 -> 6,700 GB/s (x2.00)"
        in out
    )


def test_show_says_an_accelerator_without_a_table_is_scaled_by_spec():
    out = _show("hardware=b300-288gb")
    assert "compute times scaled from the H100 table hardware/kernels/h100-sxm-80gb.csv by spec" in out
    assert "no measured table for b300-288gb: bf16 2,250 vs 989 TFLOP/s, HBM 8,000 vs 3,350 GB/s" in out
    assert "160 vs 132 SMs" in out


def test_show_names_the_published_amd_table_and_what_it_lacks():
    out = _show("hardware=mi325x-256gb")
    assert "compute times from measured kernel table hardware/kernels/mi300x-192gb.csv" in out
    # the MI300X's sustained clock (0.5748) against the MI325X's (0.689), and its HBM
    assert "scaled from the physics it was measured on: bf16 751.49 -> 900.799 TFLOP/s (x1.20)" in out
    assert "HBM 5,300 -> 6,000 GB/s (x1.13)" in out
    assert "attention forward, attention backward" in out and "GEMMs" not in out.split("by rule")[0].split(";")[-1]
    assert "at the sustained clock under the 1000 W cap (0.689 of the datasheet peak)" in out


def test_a_partial_table_names_what_it_takes_from_the_h100_table():
    """The A100 table (aiconfigurator) has GEMMs and causal attention forward only: the sentence names
    the families the model completes from the H100 table, read off the table file itself."""
    fam = _families("kernels/a100-sxm-80gb.csv")
    assert ("attention", "bwd") not in fam and not any(f == "hbm" for f, _ in fam)
    text = kernel_source(load_option("hardware", "a100-sxm-80gb"))
    assert "measured kernel table hardware/kernels/a100-sxm-80gb.csv" in text
    assert "attention backward" in text and "HBM transfers" in text and "by rule" in text
    assert "attention forward" not in text and "GEMMs" not in text


@pytest.mark.parametrize("name", ["h100-sxm-80gb", "h100-sxm-80gb-profiled"])
def test_a_complete_table_takes_nothing_by_rule(name):
    fam = _families(f"kernels/{name}.csv")
    assert {("attention", p) for p in ("fwd", "bwd", "fwd_block", "bwd_block")} <= fam
    assert any(f == "gemm" for f, _ in fam) and any(f == "hbm" for f, _ in fam)
    assert "by rule" not in kernel_source(load_option("hardware", name))


def test_show_states_the_power_capped_clock():
    out = _show("hardware=h100-grand-teton-96gb")
    assert "at the sustained clock under the 500 W cap (0.896 of the datasheet peak)" in out
    assert "at the sustained clock" not in _show("hardware=h100-sxm-80gb")
