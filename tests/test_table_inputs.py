"""merge and compare check what they read: complete files, one schema, one kind (issue 14)."""

from __future__ import annotations

import pandas as pd
import pytest
from typer.testing import CliRunner

from parallmelism.cli.app import app
from parallmelism.report.writer import write_table


def cli(*args):
    res = CliRunner().invoke(app, [str(a) for a in args])
    return res.exit_code, res.output


def _training(path, n=3):
    df = pd.DataFrame(
        {"ngpus": [8] * n, "tp": list(range(1, n + 1)), "time_step_s": [1.0 + i for i in range(n)], "why": ["a, b"] * n}
    )
    return write_table(df, path)


def _serving(path):
    return write_table(pd.DataFrame({"ngpus": [8], "tp": [8], "tpot_ms": [10.0]}), path)


def _truncate(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 7])


def test_truncated_csv_is_named_with_its_line(tmp_path):
    part = _training(tmp_path / "a.csv")
    _truncate(part)
    for args in (["merge", part, "--out", tmp_path / "m.csv"], ["compare", part, part]):
        code, out = cli(*args)
        assert code == 2, out
        assert "truncated" in out and "line 4" in out, out
    assert not (tmp_path / "m.csv").exists()


def test_merge_refuses_mixed_kinds(tmp_path):
    a, b = _training(tmp_path / "a.csv"), _serving(tmp_path / "b.csv")
    code, out = cli("merge", a, b, "--out", tmp_path / "m.csv")
    assert code == 2 and "kind serving" in out and "kind training" in out, out


def test_compare_refuses_mixed_kinds_and_folders(tmp_path):
    a, b = _training(tmp_path / "a.csv"), _serving(tmp_path / "b.csv")
    code, out = cli("compare", a, b)
    assert code == 2 and "compare like with like" in out, out
    code, out = cli("compare", a, tmp_path)
    assert code == 2 and "is a folder" in out, out
    other = tmp_path / "other.csv"
    other.write_text("x,y\n1,2\n")
    code, out = cli("compare", a, other)
    assert code == 2 and "of kind unrecognised" in out, out


def test_merge_refuses_another_schema_version(tmp_path):
    a = _training(tmp_path / "a.csv")
    df = pd.read_csv(a)
    df["schema_version"] = 0
    df.to_csv(tmp_path / "old.csv", index=False)
    code, out = cli("merge", a, tmp_path / "old.csv", "--out", tmp_path / "m.csv")
    assert code == 2 and "schema version 0" in out, out


def test_complete_csv_with_quoted_commas_reads(tmp_path):
    from parallmelism.report.writer import read_table

    assert len(read_table(_training(tmp_path / "a.csv"))) == 3


@pytest.mark.parametrize(
    "override, words",
    [
        ("model.hidden=1e13", "parameters"),  # was an OverflowError traceback
        ("workload.seq_len=1e12", "activation elements"),
        ("hardware.hbm_bandwidth_gbps=inf", "finite"),  # was blamed on the kernel table
        ("hardware.efficiency.matmul=nan", "finite"),
    ],
)
def test_derived_sizes_and_non_finite_values_are_one_sentence(override, words):
    code, out = cli("sweep", "-q", "grid.ngpus=[8]", "output.write=false", override)
    assert code == 2, out
    assert words in out and "Traceback" not in out and len(out.strip().splitlines()) == 1


def test_validate_reports_every_row_and_fails_at_the_end(tmp_path):
    """Rows that cannot be built (NaN, inf, a word for a number) are listed by case; the others are
    still predicted; the exit code is 2 at the end (was: the first bad row aborted the file)."""
    from conftest import REPO

    df = pd.read_csv(REPO / "parallmelism" / "cases" / "training_measured.csv", dtype=str, keep_default_na=False)
    df.loc[1, "hidden"] = "nan"
    df.loc[3, "step_time_s"] = "inf"
    df.loc[5, "tp"] = "x"
    df.to_csv(tmp_path / "cases.csv", index=False)
    res = CliRunner().invoke(app, ["validate", "--cases", str(tmp_path / "cases.csv")])
    assert res.exit_code == 2
    out = res.output
    assert f"step_time_s: {len(df) - 3} cases" in out
    for case, col in ((df.loc[1, "case"], "hidden"), (df.loc[3, "case"], "step_time_s"), (df.loc[5, "case"], "tp")):
        assert f"could not build case {case}" in out and col in out
    assert "3 case rows could not be built" in out


def test_validate_applies_hardware_overrides_and_refuses_others(tmp_path):
    from parallmelism.validate.runner import run_validation
    from conftest import REPO

    # megatron-te's rows (blank stack): a stack.overheads.ACCELERATOR override needs that entry in every
    # stack the cases name, and automodel's file has only its H100 fit
    df = pd.read_csv(REPO / "parallmelism" / "cases" / "training_measured.csv", dtype=str, keep_default_na=False)
    df[df["stack"] == ""].to_csv(tmp_path / "cases.csv", index=False)
    cases = [tmp_path / "cases.csv"]
    base = run_validation(cases, [], None).set_index("case")["predicted"]
    fixed = [f"stack.overheads.{hw}.step_fixed_ms=1000" for hw in ("h100-sxm-80gb", "a100-sxm-80gb")]
    slower = run_validation(cases, fixed, None).set_index("case")["predicted"]
    assert (slower > base + 0.85).all()  # 0.9-0.98 s more per step on every case (A100 100 ms, H100 20 ms before)
    code, out = cli("validate", "workload.seq_len=4096")
    assert code == 2 and "engine.* and stack.* overrides only" in out


def test_case_rows_find_shipped_models_by_alias_or_architecture():
    """'Grok-1 314B' is grok-1 (a MoE), not a dense model built from the columns; a row whose
    architecture columns equal a shipped model's gets that model; disagreeing columns do not match."""
    from parallmelism.validate.cases import model_of
    from parallmelism.validate.runner import _context

    models = _context([], None)[0]
    grok = models["grok-1"]
    assert model_of({"case": "c", "model_desc": "Grok-1 314B"}, models) is grok
    row = {
        "case": "c",
        "model_desc": "some MoE",
        "hidden": str(grok.hidden),
        "layers": str(grok.layers),
        "heads": str(grok.heads),
        "vocab": str(grok.vocab),
        "experts": str(grok.moe.num_experts),
    }
    assert model_of(row, models) is grok
    other = dict(row, model_desc="Grok-1 custom", layers=str(grok.layers + 2), ffn=str(grok.ffn_hidden))
    assert model_of(other, models).name == "c"  # built from its own columns


CASE_FILES = {
    "memory": "memory_measured.csv",
    "training": "training_measured.csv",
    "inference": "inference_measured.csv",
}


@pytest.mark.parametrize(
    "kind, column, value, words",
    [
        ("memory", "measured_gib", "", "is blank (row 1) where a number belongs"),  # was a TypeError traceback
        ("memory", "measured_gib", "abc", "holds 'abc' (row 1) where a number belongs"),  # was a ValueError one
        ("memory", "measured_gib", "0", "holds '0' (row 1) where a finite number > 0 belongs"),  # was "mean inf%"
        ("memory", "measured_gib", "-45.5", "holds '-45.5' (row 1) where a finite number > 0 belongs"),
        ("memory", "measured_gib", "inf", "holds 'inf' (row 1) where a finite number > 0 belongs"),
        ("training", "step_time_s", "abc", "holds 'abc' (row 1) where a number belongs"),
        ("inference", "measured_itl_ms", "abc", "holds 'abc' (row 1) where a number belongs"),
    ],
)
def test_validate_names_a_bad_measured_value(tmp_path, kind, column, value, words):
    from conftest import REPO

    df = pd.read_csv(REPO / "parallmelism" / "cases" / CASE_FILES[kind], dtype=str, keep_default_na=False)
    df = df.head(1).copy()
    df.loc[0, column] = value
    cases = tmp_path / "cases.csv"
    df.to_csv(cases, index=False)
    code, out = cli("validate", "--cases", cases)
    assert code == 2, out
    assert f"{str(cases)!r}: column {column} {words}" in out, out
    assert "Traceback" not in out and len(out.strip().splitlines()) == 1, out


def test_validate_refuses_a_truncated_case_file(tmp_path):
    """The check compare and merge make: a file cut mid-number was read and validated (exit 0)."""
    from conftest import REPO

    cases = tmp_path / "cases.csv"
    cases.write_bytes((REPO / "parallmelism" / "cases" / "memory_measured.csv").read_bytes()[:-40])
    code, out = cli("validate", "--cases", cases)
    assert code == 2, out
    assert "is truncated: line 15, its last, ends without a line break" in out, out
    assert len(out.strip().splitlines()) == 1, out


def test_merge_refuses_a_configuration_twice(tmp_path):
    """A part given twice was written twice ("wrote 6 rows from 2 parts"); compare's key finds it."""
    a = _training(tmp_path / "a.csv")
    code, out = cli("merge", a, a, "--out", tmp_path / "m.csv")
    assert code == 2, out
    assert "has 6 rows with duplicate keys (e.g. ngpus=8 tp=1)" in out and "nothing was written" in out, out
    assert len(out.strip().splitlines()) == 1, out
    assert not (tmp_path / "m.csv").exists()


@pytest.mark.parametrize("value, shown", [(float("nan"), "nan"), (float("inf"), "inf"), (float("-inf"), "-inf")])
def test_merge_refuses_non_finite_quantities(tmp_path, value, shown):
    df = pd.DataFrame({"ngpus": [8, 8], "tp": [1, 2], "time_step_s": [1.0, value]})
    part = write_table(df, tmp_path / "a.csv")
    code, out = cli("merge", part, "--out", tmp_path / "m.csv")
    assert code == 2, out
    assert f"{str(part)!r}: column time_step_s holds {shown} (row 2) where a finite number belongs" in out, out
    assert not (tmp_path / "m.csv").exists()
