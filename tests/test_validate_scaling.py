"""Scaling against NVIDIA's published columns (parallmelism/cases/scaling/): the same DGX Cloud recipe
and layout from its smallest to its largest GPU count (DP and global batch grow together), at
two tags: v25.01 (NeMo 24.09-24.11, `dgxc_v2501.csv`) and v25.04 (NeMo 25.02, `dgxc_v2504.csv`,
with the 405B "proxy" runs of 8, 30 and 62 of its layers). The shipped step-time rows take one
column of a table; the other columns test how the step grows with DP and scale (DP collectives
over more ranks, the straggler term), which no single row can. No point's level was fitted; the
overhead fit (validate/calibrate.py) scores each series' growth from its smallest to its largest
GPU count, the one statistic that sets the per-doubling straggler term."""

import pandas as pd
import pytest

from conftest import REPO
from parallmelism.validate.calibrate import is_growth_series, series_name

FOLDER = REPO / "parallmelism" / "cases" / "scaling"
V2501, V2504 = FOLDER / "dgxc_v2501.csv", FOLDER / "dgxc_v2504.csv"


@pytest.fixture(scope="module")
def table():
    from parallmelism.validate.runner import run_validation

    t = run_validation([V2501, V2504], [], None).set_index("case")
    cases = pd.concat([pd.read_csv(f, dtype=str) for f in (V2501, V2504)]).drop_duplicates("case").set_index("case")
    t["gpus"] = cases.loc[t.index, "gpus"].astype(int)
    t["series"] = [series_name(c) for c in t.index]
    return t


def _series(table):
    """(name, rows by GPU count) of every series whose growth the overhead fit scores."""
    for name, rows in table.groupby("series"):
        if is_growth_series(name, len(rows)):
            yield name, rows.sort_values("gpus")


MAXTEXT_FP8 = "dgxc-maxtext-llama2-70b-fp8"


def _growth(s):
    """(measured, predicted) step at the largest GPU count over the smallest."""
    return s["measured"].iloc[-1] / s["measured"].iloc[0], s["predicted"].iloc[-1] / s["predicted"].iloc[0]


def test_every_series_is_read(table):
    names = [n for n, _ in _series(table)]
    # v25.01: 8B, 70B, GPT-3, Nemotron-4 340B, MaxText Llama 2 70B; v25.04: 8B, 70B, 405B, GPT-3,
    # Nemotron-4 15B and 340B; each in bf16 and fp8
    assert len(names) == 22, names
    assert len(table) == 54 + 68


def test_step_growth_from_the_smallest_to_the_largest_count(table):
    """Measured growth 0-10 % over 16-32x the GPUs (Llama 3.1 70B bf16, 64 -> 2,048 GPUs: +1.8 % at
    v25.01, +0.0 % at v25.04); the model never shrinks the step as DP grows, and its growth is at
    most 5 points steeper than measured, and never shallower by more than 2.5 (Nemotron-4 340B fp8
    at v25.01: +10.4 % measured, +8.4 % predicted): its straggler term
    (0.8 % per doubling: these series' growth prefers 0.4-0.8 %, Llama 3's rows at 8-16k GPUs
    more) runs 1-5 points steeper than these clusters at 1-2k GPUs. MaxText's fp8 FSDP is the
    exception (the xfail below)."""
    diffs = {}
    for name, s in _series(table):
        measured, predicted = _growth(s)
        assert predicted >= 1.0, name
        if name != MAXTEXT_FP8:
            diffs[name] = predicted - measured
    assert all(-0.025 <= d <= 0.05 for d in diffs.values()), diffs


@pytest.mark.xfail(
    strict=True,
    reason="known gap: MaxText's fp8 Llama 2 70B under XLA FSDP slows 4.32 -> 4.96 s from 64 to 256 "
    "GPUs (+15 %; bf16 +2 %) where the model, with the FSDP gathers hidden under the shorter fp8 "
    "compute, grows 4 %: what XLA's fp8 adds per FSDP rank at scale is not modelled",
)
def test_maxtext_fp8_fsdp_growth(table):
    s = dict(_series(table))[MAXTEXT_FP8]
    measured, predicted = _growth(s[s["gpus"] <= 256])
    assert abs(predicted - measured) <= 0.05, (measured, predicted)


def test_every_point_within_the_bar_but_the_v2501_gpt3_recipe(table):
    """All 122 points but v25.01's GPT-3 within the 15 % bar; the NeMo Llama 3.1 points within 11 %
    (v25.04's 8B ran 5 % faster than v25.01's on the same layout: +7 to +10 %). v25.01's GPT-3
    points sit 8-16 % fast like its shipped pair, the 512- and 1,024-GPU fp8 points most (6.44 and
    6.72 s measured between 5.96 s at 256 GPUs and 6.24 s at 2,048); the same recipe at v25.04
    (NeMo 24.12, VP 6) ran 7 % faster and is predicted within 5 %."""
    old_gpt3 = table.index.str.startswith("dgxc-gpt3")
    assert old_gpt3.sum() == 10
    e = table.loc[~old_gpt3, "error_pct"].abs()
    assert (e <= 15.0).all(), e[e > 15.0].to_dict()
    llama = table[table.index.str.contains("llama31")]
    assert len(llama) == 22 + 34
    assert (llama["error_pct"].abs() <= 11.0).all()


def test_proxies_of_fewer_layers_are_built_from_their_own_columns(table):
    """A row named "Llama 3.1 405B" with 8 layers is an 8-layer model (validate/cases.py), not the
    shipped 126-layer one: step time grows with the layers per GPU (8 on one stage; 30 and 62 over
    four stages of 8 and 16 layers)."""
    p = table[table.index.str.contains("proxy") & table.index.str.endswith("bf16")].sort_values("gpus")
    assert list(p["gpus"]) == [32, 64, 128]
    assert (p["error_pct"].abs() <= 8.0).all()
    assert p["predicted"].is_monotonic_increasing


def test_the_smallest_counts_are_the_shipped_rows():
    ours = pd.read_csv(REPO / "parallmelism" / "cases" / "training_measured.csv", dtype=str).set_index("case")
    scaling = pd.read_csv(V2501, dtype=str).set_index("case")
    shared = [c for c in scaling.index if c in ours.index]
    assert len(shared) == 12  # the 8 NeMo rows' smallest counts and MaxText's 64- and 512-GPU rows
    for case in shared:
        assert scaling.loc[case].equals(ours.loc[case, scaling.columns]), case
