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
    df = pd.DataFrame({"ngpus": [8] * n, "tp": list(range(1, n + 1)), "time_step_s": [1.0 + i for i in range(n)],
                       "why": ["a, b"] * n})
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
    assert code == 2 and "serving table" in out and "training table" in out, out


def test_compare_refuses_mixed_kinds_and_folders(tmp_path):
    a, b = _training(tmp_path / "a.csv"), _serving(tmp_path / "b.csv")
    code, out = cli("compare", a, b)
    assert code == 2 and "compare like with like" in out, out
    code, out = cli("compare", a, tmp_path)
    assert code == 2 and "is a folder" in out, out


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
