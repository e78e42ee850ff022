"""A small result table without pandas: rows as dicts of Python values, in a column order.

`best` keeps a few rows per GPU count; building them as a pandas DataFrame cost more than the
search on a small question (importing pandas alone ~0.5 CPU-s). A `Records` table answers what
the terminal table needs (`columns`, `len`, a column as an array) and becomes the same DataFrame
as `pandas.DataFrame(rows)[columns]` only when a file is written (`to_pandas`), so the written
bytes are those of the DataFrame path.
"""

from __future__ import annotations

import numpy as np


class Records:
    """Rows (dicts, every row with the same keys) shown and written in `columns` order."""

    def __init__(self, rows: list[dict], columns: list[str]):
        self.rows, self.columns = rows, list(columns)

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, column: str) -> np.ndarray:
        """One column as an array, typed as pandas types a column of these Python values
        (bool, int64, float64; text and anything mixed as objects)."""
        values = [r[column] for r in self.rows]
        kinds = {type(v) for v in values}
        if kinds <= {bool}:
            return np.array(values, dtype=bool)
        if kinds <= {int}:
            return np.array(values, dtype=np.int64)
        if kinds <= {int, float}:
            return np.array(values, dtype=np.float64)
        out = np.empty(len(values), dtype=object)
        out[:] = values
        return out

    def to_pandas(self):
        """The DataFrame of these rows, as `pandas.DataFrame(rows)[columns]` builds it."""
        import pandas as pd

        if not self.rows:
            return pd.DataFrame(columns=self.columns)
        return pd.DataFrame(self.rows)[self.columns]


def as_frame(table):
    """A pandas DataFrame of `table` (a Records table, or a DataFrame as it is)."""
    return table.to_pandas() if isinstance(table, Records) else table
