"""workload=inference end to end: sweep writes the serving CSV, show explains per op, validate
meets the 20 % bar on the shipped serving cases, bad input is one line with exit 2."""

from __future__ import annotations

import pandas as pd
import pytest

from conftest import invoke, run_cli, shared_reference
from parallmelism.schema import INFERENCE_COLUMNS


def test_sweep_writes_every_inference_column(tmp_path):
    out = tmp_path / "serve.csv"
    code, text = invoke("sweep", "workload=inference", "model=llama3.1-8b", "grid.ngpus=[1,2]",
                        f"output.path={out}", "workload.batch=4")
    assert code == 0, text
    df = pd.read_csv(out)
    ours = [c for c in df.columns if c in INFERENCE_COLUMNS]
    assert ours == list(INFERENCE_COLUMNS)  # every schema column, in schema order
    assert (df["ngpus"] == df["tp"] * df["pp"] * df["sp"] * df["dp"]).all()
    assert set(df["bound_decode"]) <= {"compute", "memory", "communication"}


def test_show_explains_one_layout_per_op():
    code, text = invoke("show", "workload=inference", "grid.ngpus=[8]", "grid.tp=[8]", "grid.pp=[1]", "grid.sp=[1]")
    assert code == 0, text
    for op in ("qkv_proj", "attention_qk", "attention_pv", "output_proj", "gate_up_proj", "down_proj",
               "tp_all_reduce", "ttft_ms", "tpot_ms"):
        assert op in text


def test_validate_shipped_serving_cases_within_20_percent():
    from parallmelism.validate.runner import run_validation, shipped_case_files

    files = [f for f in shipped_case_files() if f.name == "inference_measured.csv"]
    assert files, "parallmelism/cases/inference_measured.csv is shipped"
    table = run_validation(files, [], None)
    assert set(table["quantity"]) == {"ttft_ms", "itl_ms"}
    assert len(table) == 6
    assert (table["error_pct"].abs() <= 20).all(), table


def test_shipped_cases_are_the_reference_cases():
    from parallmelism.validate.runner import shipped_case_files

    ref = pd.read_csv(shared_reference("inference_measured.csv"))
    ours = pd.read_csv([f for f in shipped_case_files() if f.name == "inference_measured.csv"][0])
    pd.testing.assert_frame_equal(ref, ours)


@pytest.mark.parametrize("arg,key", [("workload.weight_dtype=fp4", "weight_dtype"),
                                     ("grid.sp=[0]", "sp"), ("workload.batching=dynamic", "batching")])
def test_bad_inference_input_is_one_line_exit_2(tmp_path, arg, key):
    out = tmp_path / "x.csv"
    p = run_cli("sweep", "workload=inference", arg, f"output.path={out}")
    assert p.returncode == 2
    assert "Traceback" not in p.stderr and key in p.stderr
    assert not out.exists()
