"""Evaluate a run: enumerate layouts, apply every cost term, return one tidy table.

The cost columns of a chunk of rows are `parallmelism.columns` (re-exported here); `evaluate` runs
a whole run through the search driver (search/driver.py), which calls them."""

from __future__ import annotations

from .columns import (
    coded_categories,
    evaluate_inference_columns,
    evaluate_training_columns,
    record_of,
    to_frame,
)
from .specs import RunConfig

__all__ = [
    "coded_categories",
    "evaluate",
    "evaluate_inference_columns",
    "evaluate_training_columns",
    "record_of",
    "to_frame",
]


def evaluate(run: RunConfig):
    """Every valid layout of one run through the evaluation driver (search/driver.py), in
    enumeration order. Returns (DataFrame, LayoutGrid with the rows' coded layout columns)."""
    from .grid import LayoutGrid
    from .search.driver import evaluate_table

    df, res = evaluate_table(run)
    codes = {k: v for k, v in res.kept[0].items() if k not in ("_run", "_row")}
    return df, LayoutGrid(codes, res.dropped(), res.considered)
