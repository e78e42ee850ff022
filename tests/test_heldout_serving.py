"""Held-out serving rows (validate/engine_report.py HELD_OUT_SAMPLES, parallmelism/cases/inference_heldout.csv):
validated and reported per engine, never fitted, and built from the silicon sample by one rule per column
(benchmarks/build_heldout_cases.py)."""

import importlib.util

import pandas as pd

from conftest import REPO
from parallmelism.validate.engine_report import HELD_OUT_SAMPLES

HELDOUT = REPO / "parallmelism" / "cases" / "inference_heldout.csv"


def _module(name):
    spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_serving_fit_never_sees_a_held_out_row():
    """fit_serving_overhead reads every shipped serving file (the held-out one too) and keeps no row of a
    held-out sample: the shipped overheads are fitted without them."""
    fit = _module("fit_serving_overhead")
    held = set(pd.read_csv(HELDOUT, dtype=str)["case"])
    assert held
    fitted = {r["case"] for rows in fit.rows_by_engine().values() for r in rows}
    assert fitted and not fitted & held
    assert fit.load_rows([HELDOUT]) == []  # the held-out file alone: nothing to fit


def test_held_out_file_is_one_held_out_sample_and_reported_apart():
    df = pd.read_csv(HELDOUT, dtype=str, keep_default_na=False)
    assert set(df["sample"]) <= set(HELD_OUT_SAMPLES)
    assert df["source"].str.contains("silicon_sample.csv id=").all()
    # above concurrency 1 these campaigns' harness is not stated: TTFT is reported, not validated
    above = df[df["concurrency"].astype(int) > 1]
    assert (above["measured_ttft_ms"] == "").all() and (above["reported_ttft_ms"] != "").all()


def test_builder_reads_the_layout_and_lengths_as_recorded():
    """One silicon-sample record of each campaign: tp = tp_size, ep = moe_ep_size, concurrency = batch_size,
    TTFT validated at concurrency 1 only."""
    build = _module("build_heldout_cases")
    rec = {
        "id": "x",
        "backend": "trtllm",
        "backend_version": "1.0.0rc3",
        "model_path": "Qwen/Qwen3-235B-A22B-FP8",
        "isl": 512,
        "osl": 128,
        "batch_size": 4.0,
        "tp_size": 4.0,
        "pp_size": 1.0,
        "moe_tp_size": 1.0,
        "moe_ep_size": 4.0,
        "gemm_quant_mode": "fp8_block",
        "moe_quant_mode": "fp8_block",
        "silicon_data_source": "source_file=a.csv",
        "silicon_ttft_ms": 173.5,
        "silicon_tpot_ms": 13.34,
    }
    row = build.case_row(rec, "h100-sxm-80gb", "qwen3-235b-a22b", "q235b-h100")
    assert (row["tp"], row["ep"], row["gpus"], row["concurrency"]) == (4, 4, 4, 4)
    assert row["measured_ttft_ms"] is None and row["reported_ttft_ms"] == 173.5 and row["measured_itl_ms"] == 13.34
    assert row["sample"] in HELD_OUT_SAMPLES and row["source"].endswith("id=x")
    one = build.case_row({**rec, "batch_size": 1.0}, "h100-sxm-80gb", "qwen3-235b-a22b", "q235b-h100")
    assert one["measured_ttft_ms"] == 173.5 and one["case"].endswith("-c1")
