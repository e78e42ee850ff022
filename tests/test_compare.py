"""`parallmelism compare`: alignment on configuration columns, tolerances, exit codes 0/1/2."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from conftest import invoke, run_cli
from parallmelism.errors import UserError
from parallmelism.report.compare import compare_frames
from parallmelism.report.writer import write_table
from tests.golden.cases import golden_path

GOLDEN = golden_path("mixtral-8x7b_h100_64")
REPO_VALIDATION = GOLDEN.parent / "validation.csv"  # validate's table: keyed by (case, quantity)


def _golden():
    return pd.read_csv(GOLDEN)


def _write(df, path):
    """Write a table as-is (keeping its own schema_version column)."""
    df.to_csv(path, index=False) if str(path).endswith(".csv") else df.to_parquet(path, index=False)
    return path


def test_identical_tables_are_within_tolerance():
    df = _golden()
    comp = compare_frames(df, df.sample(frac=1.0, random_state=0))  # row order does not matter
    assert comp.ok and comp.rows_compared == len(df)
    assert "tp" in comp.key and "dp_sharding" in comp.key and "mem_total_gib" not in comp.key


def test_one_moved_value_is_reported_with_its_key_and_relative_change():
    base = _golden()
    new = base.copy()
    new.loc[7, "mem_total_gib"] *= 1.01
    comp = compare_frames(base, new)
    assert not comp.ok
    assert len(comp.moved) == 1
    row = comp.moved.iloc[0]
    assert row["column"] == "mem_total_gib"
    assert row["rel_change"] == pytest.approx(0.01)
    assert row["tp"] == base.loc[7, "tp"] and row["ep"] == base.loc[7, "ep"]


def test_tolerances_global_and_per_column():
    base = _golden()
    new = base.copy()
    new["mem_total_gib"] *= 1 + 1e-4
    assert not compare_frames(base, new).ok
    assert compare_frames(base, new, rtol=1e-3).ok
    assert compare_frames(base, new, tolerances={"mem_*_gib": (1e-3, 0.0)}).ok
    assert not compare_frames(base, new, tolerances={"mem_states_gib": (1e-3, 0.0)}).ok
    # atol: 1e-4 relative of up to a few hundred GiB is < 0.1 GiB
    assert compare_frames(base, new, atol=0.1).ok


def test_strings_compare_exactly_and_nan_equals_nan():
    base = pd.DataFrame({"tp": [1, 2], "x": [np.nan, 1.0], "s": ["a", "b"]})
    assert compare_frames(base, base.copy()).ok
    new = base.assign(s=["a", "c"])
    comp = compare_frames(base, new)
    assert list(comp.moved["column"]) == ["s"]


def test_added_and_removed_rows_and_columns():
    base = pd.DataFrame({"tp": [1, 2, 4], "x": [1.0, 2.0, 3.0], "old": [0, 0, 0]})
    new = pd.DataFrame({"tp": [2, 4, 8], "x": [2.0, 3.0, 4.0], "time_step_s": [1.0, 1.0, 1.0]})
    comp = compare_frames(base, new)
    assert list(comp.added_rows["tp"]) == [8] and list(comp.removed_rows["tp"]) == [1]
    assert comp.added_columns == ["time_step_s"] and comp.removed_columns == ["old"]
    assert len(comp.moved) == 0 and not comp.ok


def test_bad_input_is_a_user_error():
    base = _golden()
    with pytest.raises(UserError, match="key column 'nope'"):
        compare_frames(base, base, key=["nope"])
    with pytest.raises(UserError, match="duplicate keys"):
        compare_frames(base, base, key=["model", "tp"])
    other = base.assign(schema_version=base["schema_version"] + 1)
    with pytest.raises(UserError, match="schema_version"):
        compare_frames(other, base)


def test_cli_exit_codes(tmp_path):
    base = _golden()
    new = base.copy()
    new.loc[3, "mem_activations_gib"] += 1.0
    moved = _write(new, tmp_path / "moved.csv")
    assert invoke("compare", GOLDEN, GOLDEN)[0] == 0
    code, out = invoke("compare", GOLDEN, moved)
    assert code == 1
    assert "mem_activations_gib" in out and "DIFFERENT" in out
    assert invoke("compare", GOLDEN, moved, "--atol", "2")[0] == 0


def test_cli_csv_against_parquet(tmp_path):
    """A Parquet file (categorical columns, metadata) compares equal to the CSV of the same run."""
    df = _golden().drop(columns=["tool_version", "schema_version"])
    for c in ("model", "hardware", "workload", "dp_sharding", "recompute", "mem_stage"):
        df[c] = df[c].astype("category")
    pq = write_table(df, tmp_path / "x.parquet")
    code, out = invoke("compare", GOLDEN, pq)
    assert code == 0, out


def test_cli_tolerances_file(tmp_path):
    base = _golden()
    new = _write(base.assign(mem_total_gib=base["mem_total_gib"] * 1.001), tmp_path / "n.csv")
    tol = tmp_path / "tol.yaml"
    tol.write_text("mem_total_gib: {rtol: 0.01}\n")
    assert invoke("compare", GOLDEN, new, "--tolerances", tol)[0] == 0
    tol.write_text("mem_*: 0.00001\n")
    assert invoke("compare", GOLDEN, new, "--tolerances", tol)[0] == 1


def test_cli_bad_input_real_process(tmp_path):
    """Exit code 2 and one line on stderr from a real process, no traceback."""
    other = _write(_golden().assign(schema_version=99), tmp_path / "other.csv")
    cases = [
        (GOLDEN, tmp_path / "missing.csv", "does not exist"),
        (GOLDEN, other, "schema_version"),
    ]
    for a, b, text in cases:
        r = run_cli("compare", a, b)
        assert r.returncode == 2, r.stderr
        assert text in r.stderr and "Traceback" not in r.stderr
    r = run_cli("compare", GOLDEN, GOLDEN, "--key", "tp,bogus")
    assert r.returncode == 2 and "bogus" in r.stderr


def test_key_given_twice_keys_on_both(tmp_path):
    """--key case --key quantity keys on both columns, as --key case,quantity does (a repeated option
    kept only its last: the validation table's rows were "duplicate keys" on quantity alone)."""
    table = pd.read_csv(REPO_VALIDATION)
    for key in (["--key", "case", "--key", "quantity"], ["--key", "case,quantity"]):
        code, out = invoke("compare", REPO_VALIDATION, REPO_VALIDATION, *key)
        assert code == 0 and f"{len(table):,} rows" in out and "(case, quantity)" in out, out


def test_parquet_metadata_schema_version_is_checked(tmp_path):
    """A Parquet baseline whose schema version lives only in its metadata is still recognised."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    df = _golden().drop(columns=["schema_version"])
    table = pa.Table.from_pandas(df, preserve_index=False)
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), b"parallmelism_schema_version": b"999"})
    pq.write_table(table, tmp_path / "old.parquet")
    code, out = invoke("compare", tmp_path / "old.parquet", GOLDEN)
    assert code == 2 and "schema_version 999" in out


def test_mixed_training_and_inference_table(tmp_path):
    """A merged table (training + serving rows, keys missing where they do not apply) equals itself,
    and one moved value is found and labelled with the keys that apply to its row."""
    from tests.golden.cases import golden_path as gp

    a = pd.read_csv(GOLDEN)
    b = pd.read_csv(gp("mixtral-8x7b_h100_inference"))
    merged = pd.concat([a, b], ignore_index=True)
    assert compare_frames(merged, merged.copy()).ok
    moved = merged.copy()
    i = len(a) + 3
    moved.loc[i, "tpot_ms"] *= 2
    comp = compare_frames(merged, moved)
    assert list(comp.moved["column"]) == ["tpot_ms"] and comp.moved["rel_change"].iloc[0] == pytest.approx(1.0)
    from parallmelism.report.compare import row_label

    label = row_label(comp.moved.iloc[0], comp.label_key)
    assert "workload=inference" in label and "sp=" in label and "recompute" not in label


def test_a_misspelt_tolerance_is_named(tmp_path):
    """A tolerance whose name matches no column would leave that column at the default tolerance
    without a word (a CI gate looser or stricter than its author meant): compare names it. One
    file may serve training and serving tables, so it is a note and the verdict stands."""
    base = _golden()
    comp = compare_frames(base, base.copy(), tolerances={"time_stp_s": (0.01, 0.0), "mem_*_gib": (0.0, 0.0)})
    assert comp.ok and comp.unmatched_tolerances == ["time_stp_s"]
    tol = tmp_path / "tol.yaml"
    tol.write_text("time_step_s: 0.01\nmem_totl_*: 0.01\n")
    code, out = invoke("compare", GOLDEN, GOLDEN, "--tolerances", tol)
    assert code == 0 and "note: the tolerance for 'mem_totl_*' matches no compared column" in out
