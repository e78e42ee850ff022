"""Kept columns (codes, with `_run` and `_row`) -> pandas DataFrames, or row dicts (no pandas),
in schema order."""

from __future__ import annotations

import numpy as np

from ..report.arrow import numpy_to_arrow, string_array
from .collectors import take_rows

INDEX_COLUMNS = ("_run", "_row")


def frame_of_run(run, cols: dict):
    """One run's columns as a DataFrame (schema order, readable strings for coded columns)."""
    from ..columns import to_frame

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


def records_of_kept(runs: list, cols: dict, keep_index_columns: bool = False) -> list[dict]:
    """Kept column dict (several runs mixed) -> one dict per row, rows in the collector's order,
    without pandas: the rows `frame_of_kept(...).iterrows()` gives as `to_dict()` (schema order,
    Python values, coded columns as their names, a missing code as NaN, `_run`/`_row` last)."""
    from ..columns import _column_order, coded_categories

    if not cols or len(cols.get("_row", ())) == 0:
        return []
    coded = coded_categories()
    names = [k for k in cols if k not in INDEX_COLUMNS]
    values = {k: v.tolist() for k, v in cols.items()}  # Python scalars, as to_dict() boxes them
    run_ids = values["_run"]
    orders: dict[int, list[str]] = {}
    out = []
    for i, r in enumerate(run_ids):
        run = runs[int(r)]
        if r not in orders:
            orders[r] = _column_order(run, names)
        fixed = {"model": run.model.name, "hardware": run.hardware.name, "workload": run.workload.kind}
        row = {}
        for c in orders[r]:
            if c in fixed:
                row[c] = fixed[c]
            elif c in coded:
                code = values[c][i]
                row[c] = coded[c][code] if code >= 0 else float("nan")
            else:
                row[c] = values[c][i]
        if keep_index_columns:
            row["_run"], row["_row"] = run_ids[i], values["_row"][i]
        out.append(row)
    return out


def arrow_of_run(run, cols: dict):
    """One run's columns as an Arrow table, without pandas: the table
    `report.writer.arrow_table(frame_of_run(run, cols))` builds through a DataFrame (same
    schema, values and metadata), straight from the evaluated arrays. Coded columns and
    model/hardware/workload are dictionary columns with int8 codes (a missing code is null),
    floats have NaN as null, as `pyarrow.Table.from_pandas` writes them."""
    import pyarrow as pa

    from ..report.writer import versioned_columns

    columns, n = _arrow_columns(run, cols, (), pa.string())
    return versioned_columns(columns, n)


def dataset_arrow_of_run(run, cols: dict):
    """One run's columns as a `--full-output` dataset file holds them, without pandas: the table
    `pyarrow.Table.from_pandas(frame_of_run(run, cols).drop(columns=[model, hardware, workload]),
    preserve_index=False)` (no version columns; text as pandas' own type: `pandas_text_type`)."""
    from ..report.writer import described_table, pandas_text_type

    columns, _ = _arrow_columns(run, cols, ("model", "hardware", "workload"), pandas_text_type())
    return described_table(columns)


def _arrow_columns(run, cols: dict, drop, text_type) -> tuple[list, int]:
    """[(name, Arrow array, categorical info or None)] of a run's columns in schema order, less
    `drop`, text columns and the categories of coded ones as `text_type`; and the row count."""
    import numpy as np
    import pyarrow as pa

    from ..columns import _column_order, coded_categories

    names = [k for k in cols if k not in INDEX_COLUMNS]
    n = len(cols[names[0]]) if names else 0
    coded = coded_categories()
    fixed = {"model": run.model.name, "hardware": run.hardware.name, "workload": run.workload.kind}
    columns: list[tuple[str, object, dict | None]] = []
    for c in _column_order(run, names):
        if c in drop:
            continue
        if c in fixed or c in coded:
            labels = [fixed[c]] if c in fixed else coded[c]
            codes = np.zeros(n, dtype=np.int8) if c in fixed else np.asarray(cols[c])
            codes = codes.astype(_code_dtype(len(labels)), copy=False)
            missing = codes < 0
            indices = numpy_to_arrow(codes, missing)
            values = string_array(labels)
            array = pa.DictionaryArray.from_arrays(
                indices, values if text_type == pa.string() else values.cast(text_type)
            )
            columns.append((c, array, {"num_categories": len(labels), "ordered": False}))
        else:
            v = np.asarray(cols[c])
            if v.dtype.kind in "biuf":
                columns.append((c, numpy_to_arrow(v, np.isnan(v) if v.dtype.kind == "f" else None), None))
            else:  # text (a serving table's bound_* columns): as pandas keeps it, then as the writer writes it
                columns.append((c, pa.array(v.astype(object), type=text_type, from_pandas=True), None))
    return columns, n


def _code_dtype(categories: int):
    """The integer type pandas keeps a categorical's codes in (the smallest that holds them)."""
    import numpy as np

    for t in (np.int8, np.int16, np.int32):
        if categories < np.iinfo(t).max:
            return t
    return np.int64
