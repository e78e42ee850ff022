"""Kept columns (codes, with `_run` and `_row`) -> pandas DataFrames in schema order."""

from __future__ import annotations

import numpy as np

from .collectors import take_rows

INDEX_COLUMNS = ("_run", "_row")


def frame_of_run(run, cols: dict):
    """One run's columns as a DataFrame (schema order, readable strings for coded columns)."""
    from ..engine import to_frame

    return to_frame({k: v for k, v in cols.items() if k not in INDEX_COLUMNS}, run)


def frame_of_kept(runs: list, cols: dict, keep_index_columns: bool = False):
    """Kept column dict (several runs mixed) -> one DataFrame, rows in the collector's order."""
    import pandas as pd

    if not cols or len(cols.get("_row", ())) == 0:
        return pd.DataFrame()
    frames = []
    run_ids = cols["_run"]
    for r in np.unique(run_ids):
        idx = np.flatnonzero(run_ids == r)
        sub = take_rows(cols, idx) if len(idx) < len(run_ids) else cols
        df = frame_of_run(runs[int(r)], sub)
        df.index = idx
        if keep_index_columns:
            df["_run"], df["_row"] = sub["_run"], sub["_row"]
        frames.append(df)
    if len(frames) == 1:
        return frames[0].reset_index(drop=True)
    return pd.concat(frames).sort_index().reset_index(drop=True)
