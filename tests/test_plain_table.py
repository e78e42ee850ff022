"""report/plain_table.py: a fit_table table printed without rich's engine is, character for
character, what rich prints; anything it cannot reproduce goes to rich."""

from __future__ import annotations

import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from parallmelism.report.plain_table import FittedTable
from parallmelism.report.table import fit_table, record_table
from parallmelism.schema import TRAINING_COLUMNS


def _printed(table, width: int, fast: bool, monkeypatch, color: bool = False) -> str:
    out = io.StringIO()
    console = Console(file=out, width=width, highlight=False, color_system="truecolor" if color else None)
    with monkeypatch.context() as m:
        if not fast:
            m.setattr(FittedTable, "plain_lines", lambda self, max_width: None)
        console.print(table, crop=False)
    return out.getvalue()


def _fast_taken(table, width: int) -> bool:
    return isinstance(table, FittedTable) and table.plain_lines(width) is not None


CELLS = {
    "name": ["norm_attn", "qkv", "attention_core", "cross_entropy"],
    "seconds": ["0.358", "3.643", "7.614", "0.488"],
    "share": ["1.0 %", "10.2 %", "21.3 %", "1.4 %"],
    "note": ["memory-bound", "Σ of the parts (p−1)·v", "", "a sentence of several words that may wrap here"],
}
KINDS = {"name": "value", "seconds": "number", "share": "number", "note": "text"}
TITLES = [
    None,
    "per-op roofline (one GPU, one micro-batch)",
    "a title far longer than any table this narrow could hold on one line, so rich wraps it over lines",
    "grid.ngpus=[8] reads as markup",
    "an emoji code :smile: here",
]


@pytest.mark.parametrize("width", [30, 60, 80, 120, 200])
@pytest.mark.parametrize("title", TITLES)
def test_fitted_tables_print_as_rich_prints_them(width, title, monkeypatch):
    table = fit_table(list(CELLS), CELLS, KINDS, width, title=title, keep=("name",), hint="wider")
    assert _printed(table, width, True, monkeypatch) == _printed(table, width, False, monkeypatch)


def test_the_fast_path_is_taken_where_it_can_be_and_not_elsewhere(monkeypatch):
    table = fit_table(list(CELLS), CELLS, KINDS, 200, title=TITLES[1], keep=("name",))
    assert _fast_taken(table, 200)
    assert not _fast_taken(table, 40)  # wider than the console offers: rich shrinks it
    narrow = fit_table(list(CELLS), CELLS, KINDS, 40, keep=("name",))  # the note wraps, or is left out
    assert _printed(narrow, 40, True, monkeypatch) == _printed(narrow, 40, False, monkeypatch)
    # a title longer than the table wraps between words, as rich wraps it (show's "where the step goes")
    assert _fast_taken(fit_table(list(CELLS), CELLS, KINDS, 200, title=TITLES[2], keep=("name",)), 200)
    for title in TITLES[3:]:  # markup or an emoji code: rich's to read
        assert not _fast_taken(fit_table(list(CELLS), CELLS, KINDS, 200, title=title, keep=("name",)), 200)
    # a colour terminal keeps rich's styles (bold header, italic title): rich renders it
    coloured = _printed(table, 200, True, monkeypatch, color=True)
    assert coloured == _printed(table, 200, False, monkeypatch, color=True) and "\x1b[" in coloured


@pytest.mark.parametrize("width", [80, 120, 200])
def test_shows_record_table_prints_as_rich_prints_it(width, monkeypatch):
    record = {k: (3.25 if "_s" in k else "x" * (len(k) % 7)) for k in TRAINING_COLUMNS}
    table = record_table(record, title="layout", descriptions=TRAINING_COLUMNS, width=width)
    assert _printed(table, width, True, monkeypatch) == _printed(table, width, False, monkeypatch)


def test_parameter_counts_print_as_whole_numbers(monkeypatch):
    """params_* columns are counts (float columns: a per-GPU share): 655,360 parameters, not
    "655,360.00"; other floats keep two decimals, and counts past 1e6 the 3-significant-digit form."""
    import pandas as pd

    from parallmelism.report.table import frame_table

    record = {"params_experts_per_gpu": 655360.0, "params_per_gpu": 8.03e9, "mfu": 0.0, "params_active": 0.0}
    printed = _printed(record_table(record, title="layout", width=80), 80, True, monkeypatch)
    assert "655,360 " in printed and "655,360.00" not in printed and "8.030e+09" in printed
    assert [line.split()[-2] for line in printed.splitlines() if "params_active" in line or " mfu " in line] == [
        "0.00",
        "0",
    ]
    frame = pd.DataFrame({"ngpus": [8], "params_per_gpu": [655360.0], "mfu": [0.5]})
    printed = _printed(frame_table(frame, columns=["ngpus", "params_per_gpu", "mfu"], width=80), 80, True, monkeypatch)
    assert "655,360 " in printed and "0.50" in printed


text = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30) | st.text(
    alphabet=st.sampled_from(list("ab xyz019.,%[]:/-·Σ−漢\t")), max_size=40
)


@settings(max_examples=60, deadline=None)
@given(
    cells=st.lists(st.tuples(text, text, text), min_size=1, max_size=5),
    title=st.none() | text,
    width=st.integers(min_value=20, max_value=160),
)
def test_any_text_prints_as_rich_prints_it(cells, title, width):
    """Whatever the text (wide characters, markup, tabs, newlines, spaces at the ends), the lines
    are rich's: the fast path prints only what it can prove, rich the rest."""
    columns = {"a": [c[0] for c in cells], "b": [c[1] for c in cells], "c": [c[2] for c in cells]}
    kinds = {"a": "value", "b": "number", "c": "text"}
    table = fit_table(list(columns), columns, kinds, width, title=title, keep=("a",))
    with pytest.MonkeyPatch.context() as monkeypatch:
        assert _printed(table, width, True, monkeypatch) == _printed(table, width, False, monkeypatch)


words = st.lists(st.text(alphabet=st.sampled_from(list("abcxyz0189.,%()-;")), min_size=1, max_size=14), max_size=30)


@settings(max_examples=80, deadline=None)
@given(
    words=words,
    gaps=st.lists(st.sampled_from([" ", " ", " ", "  "]), min_size=30, max_size=30),
    width=st.integers(20, 200),
)
def test_a_long_title_wraps_as_rich_wraps_it(words, gaps, width):
    """Titles of words longer than the table: the plain lines wrap them where rich does (greedy,
    a line's end stripped, each line centred), or leave them to rich (a word wider than the table)."""
    title = "".join(w + g for w, g in zip(words, gaps)).strip() or None
    table = fit_table(list(CELLS), CELLS, KINDS, width, title=title, keep=("name",), hint="wider")
    with pytest.MonkeyPatch.context() as monkeypatch:
        assert _printed(table, width, True, monkeypatch) == _printed(table, width, False, monkeypatch)


@settings(max_examples=80, deadline=None)
@given(notes=st.lists(words, min_size=4, max_size=4), width=st.integers(30, 160))
def test_a_sentence_wraps_in_its_cell_as_rich_wraps_it(notes, width):
    """A text column narrower than its sentences: the plain lines wrap each between words, the
    row's other cells blank below, where rich does (or leave the table to rich)."""
    cells = {**CELLS, "note": [" ".join(n) for n in notes]}
    table = fit_table(list(cells), cells, KINDS, width, title=TITLES[1], keep=("name",), hint="wider")
    with pytest.MonkeyPatch.context() as monkeypatch:
        assert _printed(table, width, True, monkeypatch) == _printed(table, width, False, monkeypatch)
