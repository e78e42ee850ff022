"""Step-time validation on the shipped published runs (parallmelism/cases/training_measured.csv)."""

import pandas as pd
import pytest

from conftest import REPO, invoke, shared_reference

CASES = REPO / "parallmelism" / "cases" / "training_measured.csv"


@pytest.fixture(scope="module")
def table():
    from parallmelism.validate.runner import run_validation

    return run_validation([CASES], [], None).set_index("case")


def test_korthikanti_eight_within_target(table):
    k = table.loc[[c for c in table.index if c.startswith("korthikanti") and "dp8" not in c], "error_pct"].abs()
    assert len(k) == 8
    assert k.mean() <= 3.0 and k.max() <= 6.0, k.to_dict()


# Known gaps with kernel times from kernel measurements and the fitted named overheads
# (python -m parallmelism.validate.calibrate). H100: mcore-h100-32b +21 % (+9 % with kernels alone:
# its DP reduce-scatter is exposed behind only the last micro-batch's backward at b = 1, the overlap
# model of cost/steptime.py), mcore-h100-1.7b/7.1b -20/-20 % (-28/-27 % with kernels alone; any per-layer
# or per-step term that closes them pushes the 32b row further out), llama3-405b-128k -21 % (-33 % with
# kernels alone: context-parallel ring steps are not modelled as separate kernels and syncs). A100
# (aiconfigurator's 2025 A100 kernels against 2021-22 runs): narayanan-7.5b/18.4b +18/+16 % (+8/+6 %
# with kernels alone), bloom-176b -18 % (-24 % with kernels alone; Megatron-DeepSpeed at 48 % HFU).
KNOWN_GAPS = (
    "mcore-h100-32b",
    "mcore-h100-1.7b",
    "mcore-h100-7.1b",
    "llama3-405b-128k-16384gpu",
    "narayanan-7.5b",
    "narayanan-18.4b",
    "bloom-176b",
)


def test_all_shipped_rows(table):
    """The issue's bar: median <= 7 % over all rows; max <= 15 % on every row but the named gaps
    (each within 25 %)."""
    e = table["error_pct"].abs()
    assert len(e) == 32
    assert e.median() <= 7.0
    rest = e.drop(list(KNOWN_GAPS))
    assert (rest <= 15.0).all(), rest[rest > 15].to_dict()
    assert (e <= 25.0).all(), e[e > 25].to_dict()


@pytest.mark.xfail(strict=True, reason="gaps named in KNOWN_GAPS (issue 11 report)")
def test_every_shipped_row_within_15_percent(table):
    e = table["error_pct"].abs()
    assert (e <= 15.0).all(), e[e > 15].to_dict()


def test_llama3_rows_read_the_stated_interleaving(table):
    """vpp_stated = 8 (Llama 3 §3.3.2): the three Llama 3 rows run interleaved 1F1B on the uneven
    7, 8x14, 7 split; without it the 16,384-GPU 8k row (m = pp = 16) was +39 %."""
    from parallmelism.validate.runner import _context
    from parallmelism.validate.steptime import fill_blanks

    ours = pd.read_csv(CASES, dtype=str, keep_default_na=False).replace({"": None}).set_index("case")
    models = _context([], None)[0]
    row = ours.loc["llama3-405b-8k-16384gpu"].to_dict()
    assert fill_blanks(row, models["llama3.1-405b"])["vpp"] == "8"
    assert abs(table.loc["llama3-405b-8k-16384gpu", "error_pct"]) <= 15.0


def test_shipped_copy_keeps_the_reference_columns():
    ref = pd.read_csv(shared_reference("training_measured.csv"), dtype=str, keep_default_na=False)
    ours = pd.read_csv(CASES, dtype=str, keep_default_na=False)
    assert list(ours.columns[: len(ref.columns)]) == list(ref.columns)
    assert ours[ref.columns].equals(ref)


def test_validate_reads_the_reference_file():
    code, out = invoke("validate", "--cases", str(shared_reference("training_measured.csv")))
    assert code == 0, out
    assert "step_time_s: 32 cases" in out
