"""Collectors: receive evaluated chunks (columns with `_run`, `_row`) and keep a bounded subset.

  TopKCollector     k best rows per group by one or more columns (e.g. fastest fitting layout per ngpus)
  ParetoCollector   non-dominated rows on two or more objectives (per group or global)
  RowsCollector     every row (or every row where a boolean column holds): small grids, `show`, `plot`

Every collector is *mergeable*: `spawn()` returns an empty copy that a worker process fills, and
`merge(copy.result())` folds the copy's rows back in. Fed in partition order, that gives the same
rows, in the same tie order, as a serial run (top-k and Pareto fronts of a union are the top-k and
fronts of the parts' top-k and fronts).
"""

from __future__ import annotations

from typing import Callable, Sequence, Union

import numpy as np

from ..errors import UserError


def concat_columns(a: dict | None, b: dict) -> dict:
    if not a:
        return b
    return {k: np.concatenate([a[k], b[k]]) for k in a}


def take_rows(cols: dict, idx) -> dict:
    return {k: v[idx] for k, v in cols.items()}


def require_columns(cols: dict, names: Sequence[str], why: str) -> None:
    missing = [c for c in names if c not in cols]
    if missing:
        raise UserError(
            f"{why} needs the column {missing[0]!r}, which this workload's cost model does not "
            f"produce yet"
            + (" (needs the time model)" if missing[0].startswith(("time_", "tokens_", "mfu", "cost_")) else "")
        )


#: which rows a collector keeps: a boolean column's name, a module-level function of the chunk's
#: columns returning a boolean mask (picklable, so worker processes can use it), or None for all
Where = Union[str, Callable[[dict], np.ndarray], None]


def where_mask(cols: dict, where: Where) -> np.ndarray:
    """Indices of the rows of `cols` that `where` keeps."""
    if where is None:
        return np.arange(len(cols["_row"]))
    return np.flatnonzero(cols[where] if isinstance(where, str) else where(cols))


class Collector:
    """Interface: `update` with each chunk, `result` at the end; `spawn`/`merge` for workers."""

    #: every kept row satisfies this (see `Where`); the driver may skip the time model for rows
    #: that do not fit when every collector keeps fitting rows only (where == "fits")
    where: Where = None

    #: whether the collector keeps the `k` rows with the smallest `time_step_s` per group of
    #: `group_by` among the rows `where` keeps (and nothing else), so that a row whose lower bound
    #: on the step exceeds its group's k-th kept step need not be timed (search/bounded.py)
    bounds_step: bool = False
    k: int = 0
    group_by: list[str]  # the columns a group is the same on (collectors that `bounds_step`)

    def kept_steps(self) -> dict[tuple, np.ndarray]:
        """Per group, the step times kept so far, smallest first (collectors that `bounds_step`)."""
        raise NotImplementedError

    def spawn(self) -> "Collector":
        raise NotImplementedError

    def update(self, cols: dict) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def merge(self, result) -> None:
        """Fold a spawned copy's `result()` into this collector."""
        if result:
            self.update(result)

    def result(self):
        raise NotImplementedError

    def open(self) -> None:
        """Start of a run, inside the driver's cleanup scope (sinks make their temporary here, so
        an interrupt at any later moment removes it)."""

    def close(self) -> object:
        """End of a successful run (sinks rename their output into place and return its path)."""
        return None

    def abort(self) -> None:
        """The run failed or was interrupted (sinks remove their temporary output)."""


Key = tuple[str, str]  # (column, "min" | "max")


def _keys(by: str | Sequence[Key], descending: bool) -> list[Key]:
    if isinstance(by, str):
        return [(by, "max" if descending else "min")]
    return [(c, s) for c, s in by]


class TopKCollector(Collector):
    """k rows per group with the best `by` (ties in enumeration order).

    `by` is a column (smallest first; largest with descending=True) or [(column, "min"|"max"), ...]
    compared in turn. Groups are `group_by` within each run (per_run=True) or across the runs.
    Equals `df[where].sort_values(group + by, kind="stable").groupby(group).head(k)` on the
    full table; `where` is a boolean column name (e.g. "fits"), a mask function (see `Where`) or
    None for every row.
    """

    def __init__(
        self,
        k: int,
        by: str | Sequence[Key],
        group_by: Sequence[str] = ("ngpus",),
        where: Where = None,
        descending: bool = False,
        per_run: bool = True,
    ):
        self.k, self.by, self.where = k, _keys(by, descending), where
        self.group_by = (["_run"] if per_run else []) + list(group_by)
        self.kept: dict | None = None

    def spawn(self) -> "TopKCollector":
        copy = TopKCollector(self.k, self.by, (), self.where, per_run=False)
        copy.group_by = list(self.group_by)
        return copy

    def update(self, cols: dict) -> None:
        if not cols:
            return
        by_cols = [c for c, _ in self.by]
        where_col = [self.where] if isinstance(self.where, str) else []
        require_columns(cols, by_cols + self.group_by + where_col, "this search")
        # Select on the key columns first, copy whole rows only for the few survivors.
        keys = list(dict.fromkeys(["_run", "_row", *by_cols, *self.group_by]))
        idx = where_mask(cols, self.where)
        if len(idx) == 0:
            return
        idx = self._shortlist({k: cols[k] for k in keys}, idx)
        if len(idx) == 0:  # no row beats the k already kept in its group
            return
        idx = idx[self._select({k: cols[k][idx] for k in keys})]
        both = concat_columns(self.kept, take_rows(cols, idx))
        self.kept = take_rows(both, self._select(both))

    @property
    def bounds_step(self) -> bool:  # type: ignore[override]
        return self.k >= 1 and self.by[0] == ("time_step_s", "min")

    def kept_steps(self) -> dict[tuple, np.ndarray]:
        """Per group (its `group_by` values), the step times kept so far, smallest first."""
        if not self.kept:
            return {}
        steps = np.asarray(self.kept["time_step_s"], dtype=np.float64)
        keys = list(zip(*(np.asarray(self.kept[g]).tolist() for g in self.group_by)))
        out: dict[tuple, list] = {}
        for key, step in zip(keys, steps.tolist()):
            out.setdefault(key, []).append(step)
        return {key: np.sort(np.asarray(v)) for key, v in out.items()}

    def _primary(self, cols: dict) -> np.ndarray:
        c, s = self.by[0]
        return np.asarray(cols[c], dtype=np.float64) * (-1.0 if s == "max" else 1.0)

    def _shortlist(self, cols: dict, idx: np.ndarray) -> np.ndarray:
        """The rows of `idx` that can be among the k best: when the rows form one group, those
        whose first `by` key is at most the k-th smallest of the chunk's and of the rows already
        kept in that group (ties kept, so the later sort breaks them as before: a row with k
        better rows in either cannot be among the k best of both); every row when there are
        several groups or a NaN among the k best."""
        if self.k < 1 or len(idx) <= 4 * self.k or any(np.any(cols[g] != cols[g][idx[0]]) for g in self.group_by):
            return idx
        c, s = self.by[0]
        values = np.asarray(cols[c], dtype=np.float64)
        values = values if len(idx) == len(values) else values[idx]  # all rows: idx is every row in order
        primary = -values if s == "max" else values  # as _primary (x * -1.0 is -x, x * 1.0 is x)
        bound = self._kept_kth(cols, idx[0])
        if bound is not None:
            below = np.flatnonzero(primary <= bound)
            idx, primary = idx[below], primary[below]
            if len(idx) <= 4 * self.k:
                return idx
        kth = np.partition(primary, self.k - 1)[self.k - 1]
        if np.isnan(kth):  # NaN sorts last: the k best are not all numbers
            return idx
        return idx[primary <= kth]

    def _kept_kth(self, cols: dict, row: int) -> float | None:
        """The k-th smallest first `by` key of the rows kept so far in the group of `row`, or None
        when fewer than k are kept there or one of them is NaN."""
        if not self.kept:
            return None
        same = np.ones(len(self.kept["_row"]), dtype=bool)
        for g in self.group_by:
            same &= self.kept[g] == cols[g][row]
        kept = self._primary(self.kept)[same]
        if len(kept) < self.k or np.isnan(kept).any():
            return None
        return float(np.partition(kept, self.k - 1)[self.k - 1])

    def _select(self, cols: dict) -> np.ndarray:
        sort_keys = [self._primary(cols)] + [
            np.asarray(cols[c], dtype=np.float64) * (-1.0 if s == "max" else 1.0) for c, s in self.by[1:]
        ]
        # lexsort: last key is primary -> groups, then `by` in order, then run and row (enumeration order)
        order = np.lexsort(
            (cols["_row"], cols["_run"], *reversed(sort_keys), *[cols[g] for g in reversed(self.group_by)])
        )
        n = len(order)
        change = np.zeros(n, dtype=bool)
        change[0] = True
        for g in self.group_by:
            s = cols[g][order]
            change[1:] |= s[1:] != s[:-1]
        starts = np.flatnonzero(change)
        rank = np.arange(n) - np.repeat(starts, np.diff(np.r_[starts, n]))
        return order[rank < self.k]

    def result(self) -> dict:
        return self.kept or {}


class ParetoCollector(Collector):
    """Non-dominated rows on `objectives` [(column, "min"|"max"), ...], per group (or global)."""

    def __init__(self, objectives: Sequence[Key], group_by: Sequence[str] = ("_run",), where: Where = "fits"):
        self.objectives, self.group_by, self.where = list(objectives), list(group_by), where
        self.kept: dict | None = None

    def spawn(self) -> "ParetoCollector":
        return ParetoCollector(self.objectives, self.group_by, self.where)

    def _front(self, cols: dict) -> dict:
        from .pareto import pareto_mask

        objs = [np.asarray(cols[c], dtype=np.float64) * (1.0 if s == "min" else -1.0) for c, s in self.objectives]
        if not self.group_by:
            return take_rows(cols, np.flatnonzero(pareto_mask(*objs)))
        key = np.zeros(len(objs[0]), dtype=np.int64)
        for g in self.group_by:
            _, inv = np.unique(cols[g], return_inverse=True)
            key = key * (inv.max() + 1) + inv
        keep = np.zeros(len(key), dtype=bool)
        for k in np.unique(key):
            idx = np.flatnonzero(key == k)
            keep[idx[pareto_mask(*[o[idx] for o in objs])]] = True
        return take_rows(cols, np.flatnonzero(keep))

    def update(self, cols: dict) -> None:
        if not cols:
            return
        where_col = [self.where] if isinstance(self.where, str) else []
        require_columns(cols, [c for c, _ in self.objectives] + where_col, "a Pareto front")
        keys = ["_run", "_row", *[c for c, _ in self.objectives], *self.group_by]
        idx = where_mask(cols, self.where)
        if len(idx) == 0:
            return
        small = {k: cols[k][idx] for k in dict.fromkeys(keys)}
        small["_i"] = idx
        idx = self._front(small)["_i"]
        self.kept = self._front(concat_columns(self.kept, take_rows(cols, idx)))

    def result(self) -> dict:
        if not self.kept:
            return {}
        order = np.lexsort((self.kept["_row"], self.kept["_run"]))
        return take_rows(self.kept, order)


class RowsCollector(Collector):
    """Every row where `where` holds (None: every row), in the order fed."""

    def __init__(self, where: Where = None):
        self.where = where
        self.parts: list[dict] = []

    def spawn(self) -> "RowsCollector":
        return RowsCollector(self.where)

    def update(self, cols: dict) -> None:
        if cols:
            self.parts.append(take_rows(cols, where_mask(cols, self.where)) if self.where is not None else cols)

    def result(self) -> dict:
        parts = [p for p in self.parts if len(p.get("_row", ()))]
        if len(parts) == 1:
            return parts[0]
        return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]} if parts else {}


class CountCollector(Collector):
    """How many rows were fed, and how many of them satisfy the boolean column `column`."""

    def __init__(self, column: str = "fits"):
        self.column, self.rows, self.matching = column, 0, 0

    def spawn(self) -> "CountCollector":
        return CountCollector(self.column)

    def update(self, cols: dict) -> None:
        if cols:
            self.rows += len(cols["_row"])
            self.matching += int(np.count_nonzero(cols[self.column])) if self.column in cols else 0

    def merge(self, result) -> None:
        self.rows += result[0]
        self.matching += result[1]

    def result(self):
        return (self.rows, self.matching)
