"""Weak scaling against NVIDIA's published columns (parallmelism/cases/scaling/dgxc_weak_scaling.csv):
the same DGX Cloud recipe and layout from its smallest to its largest GPU count (DP and global
batch grow together, tag v25.01 README tables). The shipped step-time rows take one column of
each table; the other columns test how the step grows with DP and scale (DP collectives over
more ranks, the straggler term), which no single row can."""

import pandas as pd
import pytest

from conftest import REPO

SCALING = REPO / "parallmelism" / "cases" / "scaling" / "dgxc_weak_scaling.csv"
SERIES = (
    "dgxc-llama31-70b-{}gpu-bf16",
    "dgxc-llama31-70b-{}gpu-fp8",
    "dgxc-llama31-8b-{}gpu-bf16",
    "dgxc-llama31-8b-{}gpu-fp8",
    "dgxc-gpt3-175b-{}gpu-bf16",
    "dgxc-gpt3-175b-{}gpu-fp8",
    "dgxc-nemotron4-340b-{}gpu-bf16",
    "dgxc-nemotron4-340b-{}gpu-fp8",
)


@pytest.fixture(scope="module")
def table():
    from parallmelism.validate.runner import run_validation

    t = run_validation([SCALING], [], None).set_index("case")
    cases = pd.read_csv(SCALING, dtype=str).set_index("case")
    t["gpus"] = cases.loc[t.index, "gpus"].astype(int)
    return t


def _series(table, pattern):
    rows = table[[pattern.format(g) == c for c, g in zip(table.index, table["gpus"])]]
    assert len(rows) >= 5, pattern
    return rows.sort_values("gpus")


@pytest.mark.parametrize("pattern", SERIES)
def test_step_growth_from_the_smallest_to_the_largest_count(table, pattern):
    """Measured growth 1.2-10 % over 16x the GPUs (e.g. Llama 3.1 70B bf16, 64 -> 2,048: 14.72 ->
    14.98 s, +1.8 %); the model's growth is within 4 points of it for every series (70B bf16
    +4.3 %, Nemotron-4 fp8 +10.4 % against +10.4 %)."""
    s = _series(table, pattern)
    measured = s["measured"].iloc[-1] / s["measured"].iloc[0]
    predicted = s["predicted"].iloc[-1] / s["predicted"].iloc[0]
    assert predicted >= 1.0  # more DP ranks never shorten the same per-rank work
    assert abs(predicted - measured) <= 0.04, (measured, predicted)


def test_every_point_off_the_gpt3_recipe_within_8_percent(table):
    """The Llama 3.1 and Nemotron-4 points at every published GPU count (8-2,048 GPUs). GPT-3's
    points sit 13-22 % fast like its shipped pair (tests/test_validate_steptime.py KNOWN_GAPS),
    the 512- and 1,024-GPU fp8 points most (6.44 and 6.72 s measured between 5.96 s at 256 GPUs
    and 6.24 s at 2,048)."""
    rest = table[~table.index.str.contains("gpt3")]
    assert len(rest) == 32
    e = rest["error_pct"].abs()
    assert (e <= 8.0).all(), e[e > 8.0].to_dict()


def test_the_smallest_counts_are_the_shipped_rows():
    ours = pd.read_csv(REPO / "parallmelism" / "cases" / "training_measured.csv", dtype=str).set_index("case")
    scaling = pd.read_csv(SCALING, dtype=str).set_index("case")
    for pattern in SERIES:
        head, tail = pattern.split("{}")
        base = [c for c in scaling.index if c in ours.index and c.startswith(head) and c.endswith(tail)]
        assert len(base) == 1, pattern
        assert scaling.loc[base[0]].equals(ours.loc[base[0], scaling.columns])
