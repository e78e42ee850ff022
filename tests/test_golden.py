"""Golden outputs: regenerate each canonical sweep and `parallmelism compare` it with tests/golden/.

A failure here means a change moved a capacity number. If the move is intended, refresh with
`python -m tests.golden.refresh` and commit the golden diff with the change (README, "Regression
checks"); otherwise fix the regression.
"""

from __future__ import annotations

import pytest

from conftest import invoke
from tests.golden.cases import CASES, VALIDATION, generate, generate_validation, golden_path


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden_unchanged(name, tmp_path):
    golden = golden_path(name)
    assert golden.is_file(), f"missing {golden}; create it with `python -m tests.golden.refresh {name}`"
    new = generate(name, tmp_path / f"{name}.csv")
    code, out = invoke("compare", golden, new)
    assert code == 0, (
        f"golden case {name} moved; if intended run `python -m tests.golden.refresh {name}` and commit the diff\n{out}"
    )


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden_is_a_few_hundred_rows(name):
    rows = sum(1 for _ in open(golden_path(name))) - 1
    assert 100 <= rows <= 2000, rows


def test_regenerated_csv_is_byte_identical(tmp_path):
    """Determinism: same inputs give the same bytes (row order, float formatting)."""
    name = "mixtral-8x7b_h100_64"
    a = generate(name, tmp_path / "a.csv").read_bytes()
    b = generate(name, tmp_path / "b.csv").read_bytes()
    assert a == b


def test_determinism_across_processes(tmp_path, cli):
    """A fresh interpreter (other hash seed) writes the same bytes as this one."""
    name = "llama3.1-70b_h100_64-512"
    mine = generate(name, tmp_path / "a.csv").read_bytes()
    r = cli("sweep", "-q", *CASES[name], f"output.path={tmp_path / 'b.csv'}", env={"PYTHONHASHSEED": "12345"})
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "b.csv").read_bytes() == mine


def test_floats_round_trip_exactly(tmp_path):
    """Floats are written with enough digits to read back bit-identical (shortest repr)."""
    import pandas as pd

    from parallmelism.config import load_run_configs
    from parallmelism.engine import evaluate

    name = "gpt3-175b_a100_korthikanti"
    df, _ = evaluate(load_run_configs(CASES[name])[0][1])
    back = pd.read_csv(generate(name, tmp_path / "x.csv"))
    for c in df.columns:
        if df[c].dtype.kind == "f":
            assert (back[c].to_numpy() == df[c].to_numpy()).all(), c


def test_refresh_command_writes_what_the_test_compares(tmp_path, capsys):
    """`python -m tests.golden.refresh NAME` (README) writes exactly the committed golden."""
    from tests.golden.refresh import main

    name = "gpt3-175b_a100_korthikanti"
    assert main([name], folder=tmp_path) == 0
    assert (tmp_path / f"{name}.csv").read_bytes() == golden_path(name).read_bytes()
    assert main(["no-such-case"], folder=tmp_path) == 2


def test_readme_compare_example(tmp_path):
    """The README's CI example (same sweep, compare against a golden) runs and exits 0 or 1, not 2."""
    r = invoke(
        "sweep",
        "model=llama3.1-70b",
        "grid.ngpus=[64]",
        "grid.micro_batch=[1]",
        "grid.vpp=[1]",
        "-q",
        f"output.path={tmp_path / 'new.csv'}",
    )
    assert r[0] == 0, r[1]
    (tmp_path / "tol.yaml").write_text("time_*_s: {rtol: 0.01}\n")
    code, out = invoke(
        "compare",
        golden_path("llama3.1-70b_h100_64-512"),
        tmp_path / "new.csv",
        "--rtol",
        "1e-6",
        "--tolerances",
        tmp_path / "tol.yaml",
    )
    assert code == 1 and "rows only in new (added)" in out  # the README sweep has more layouts than the golden


def test_validation_table_unchanged(tmp_path):
    """The committed validation table (every shipped case: measured, predicted, error) is what the
    model predicts today; calibration statistics are read from it, never from docstrings. Refresh
    with `python -m tests.golden.refresh validation` when a change is meant to move them."""
    new = generate_validation(tmp_path / "validation.csv")
    code, out = invoke("compare", VALIDATION, new, "--key", "case,quantity", "--rtol", "1e-9")
    assert code == 0, f"validation moved; if intended run `python -m tests.golden.refresh validation`\n{out}"
