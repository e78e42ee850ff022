"""Compare two result tables (CSV or Parquet) for CI: did any capacity number move?

Rows are aligned on configuration columns (the key); every other column present in both files
is compared: numbers with a tolerance, everything else exactly. A number moved when

    |new - old| > atol + rtol·|old|          (numpy.isclose convention; NaN equals NaN)

with (rtol, atol) from `--tolerances` for that column (glob patterns allowed, first match wins)
or the global `--rtol/--atol`. Rows present in only one file, and columns present in only one
file, are differences too. `tool_version` is never compared; `schema_version` must agree,
because a baseline from another schema compares different quantities under the same names.

Pure pandas/numpy; the CLI (`parallmelism compare`) prints and sets the exit code.
"""

from __future__ import annotations

from ..schema import LAYOUT_AXES

import fnmatch
import math
from dataclasses import dataclass, field
from typing import Any
from pathlib import Path

import numpy as np

from ..errors import UserError, require_file

# Configuration columns, training and inference; the default key is those present in both files.
KEY_COLUMNS: tuple[str, ...] = (
    "model",
    "hardware",
    "workload",
    "phase",
    "ngpus",
    *LAYOUT_AXES,
    # workload knobs that vary inside a multi-run table
    "seq_len",
    "global_batch",
    "precision",
    "schedule",
    # inference layout and workload columns
    "sp",
    "batch",
    "input_len",
    "output_len",
    "context_len",
    "weight_dtype",
    "kv_dtype",
    # a study's design point (parallmelism/study/): its swept values, hardware fields included
    "point",
)
NOT_COMPARED = ("tool_version",)
DEFAULT_RTOL = 1e-9
DEFAULT_ATOL = 1e-12


@dataclass
class Comparison:
    key: list[str]
    moved: Any  # DataFrame: key..., column, old, new, rel_change
    added_rows: Any  # DataFrame of keys only in NEW
    removed_rows: Any  # DataFrame of keys only in BASELINE
    added_columns: list[str] = field(default_factory=list)
    removed_columns: list[str] = field(default_factory=list)
    rows_compared: int = 0
    columns_compared: int = 0
    label_key: list[str] = field(default_factory=list)  # key columns that vary: enough to name a row
    unmatched_tolerances: list[str] = field(default_factory=list)  # `unmatched_tolerances`

    @property
    def ok(self) -> bool:
        return (
            len(self.moved) == 0
            and len(self.added_rows) == 0
            and len(self.removed_rows) == 0
            and not self.added_columns
            and not self.removed_columns
        )


def load_tolerances(path: str | Path) -> dict[str, tuple[float, float]]:
    """Per-column tolerances from YAML/JSON: `column_or_glob: {rtol: R, atol: A}` or `column: R`."""
    import yaml

    path = require_file(path, "tolerances file")
    try:
        data = yaml.safe_load(path.read_text())
    except Exception as exc:
        raise UserError(f"tolerances file {str(path)!r} is not valid YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise UserError(f"tolerances file {str(path)!r} must map column names to {{rtol, atol}}")
    out = {}
    for col, spec in data.items():
        if isinstance(spec, (int, float)) and not isinstance(spec, bool):
            spec = {"rtol": spec}
        if not isinstance(spec, dict) or set(spec) - {"rtol", "atol"}:
            raise UserError(f"tolerances file {str(path)!r}: {col!r} must be a number (rtol) or {{rtol, atol}}")
        try:
            rtol, atol = float(spec.get("rtol", 0.0)), float(spec.get("atol", 0.0))
        except (TypeError, ValueError):
            raise UserError(f"tolerances file {str(path)!r}: {col!r} has a non-numeric tolerance") from None
        if not (0 <= rtol < math.inf and 0 <= atol < math.inf):  # also rejects NaN; inf would pass anything
            raise UserError(f"tolerances file {str(path)!r}: {col!r} tolerances must be finite and >= 0")
        out[str(col)] = (rtol, atol)
    return out


def _tolerance_for(col: str, tolerances: dict, rtol: float, atol: float) -> tuple[float, float]:
    if col in tolerances:
        return tolerances[col]
    for pattern, tol in tolerances.items():
        if fnmatch.fnmatchcase(col, pattern):
            return tol
    return rtol, atol


def unmatched_tolerances(tolerances: dict, columns) -> list[str]:
    """The tolerance names and globs that match none of `columns`: a misspelt name leaves its
    column at the default tolerance (a CI gate looser or stricter than meant), so `compare` says
    so; one tolerance file may serve training and serving tables, so it is a note, not an error."""
    cols = sorted(columns)
    return [p for p in tolerances if p not in columns and not fnmatch.filter(cols, p)]


def _schema_version(df, name: str):
    if "schema_version" not in df.columns or len(df) == 0:
        return None
    values = df["schema_version"].dropna().unique()
    if len(values) > 1:
        raise UserError(f"{name} mixes schema versions {sorted(map(str, values))}; compare one schema at a time")
    return str(values[0]) if len(values) else None


def _is_numeric(s) -> bool:
    return s.dtype.kind in "iuf"


def _key_values(s):
    """A key column in a form that merges across CSV/Parquet (category, bool, int vs float)."""
    if s.dtype.kind in "iuf":
        return s.astype("float64")
    return s.astype(str)


def default_key(*frames) -> list[str]:
    """The configuration columns (KEY_COLUMNS) present in every frame: what names one row."""
    return [c for c in KEY_COLUMNS if all(c in df.columns for df in frames)]


def check_unique(df, key, name, hint="give more key columns with --key"):
    """One sentence when two rows of df share a key (compare could not align them; merge would
    write a configuration twice)."""
    dup = df.duplicated(subset=key, keep=False)
    if dup.any():
        first = df.loc[dup, key].iloc[0].to_dict()
        raise UserError(f"{name} has {int(dup.sum()):,} rows with duplicate keys (e.g. {_fmt_key(first)}); {hint}")


def _fmt_key(d: dict) -> str:
    parts = []
    for k, v in d.items():
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        parts.append(f"{k}={v}")
    return " ".join(parts)


def _blank_as_na(values):
    """A text column (of any dtype: object, string, category) with its empty strings as missing."""
    return values.astype(object).where(values.astype(object) != "", None)


def compare_frames(
    base,
    new,
    key: list[str] | None = None,
    rtol: float = DEFAULT_RTOL,
    atol: float = DEFAULT_ATOL,
    tolerances: dict | None = None,
    names=("baseline", "new"),
) -> Comparison:
    """Align `base` and `new` on `key` and list every difference (see module docstring)."""
    import pandas as pd

    if not (0 <= rtol < math.inf and 0 <= atol < math.inf):  # NaN fails too; inf would pass any change
        raise UserError(f"--rtol={rtol} and --atol={atol} must be finite and >= 0")
    tolerances = tolerances or {}
    vb, vn = _schema_version(base, names[0]), _schema_version(new, names[1])
    if vb is not None and vn is not None and vb != vn:
        raise UserError(
            f"{names[0]} has schema_version {vb} but {names[1]} has {vn}; regenerate the baseline with this version"
        )
    if key is None:
        key = default_key(base, new)
        if not key:
            raise UserError("no configuration column (model, tp, pp, ...) is common to both files; give --key")
    else:
        for c in key:
            for df, name in ((base, names[0]), (new, names[1])):
                if c not in df.columns:
                    raise UserError(f"key column {c!r} is not in {name}")
    check_unique(base, key, names[0])
    check_unique(new, key, names[1])

    skip = set(key) | set(NOT_COMPARED) | {"schema_version"}
    cols_b = [c for c in base.columns if c not in skip]
    cols_n = [c for c in new.columns if c not in skip]
    common = [c for c in cols_b if c in set(cols_n)]
    added_cols = [c for c in cols_n if c not in set(cols_b)]
    removed_cols = [c for c in cols_b if c not in set(cols_n)]

    kb = pd.DataFrame({c: _key_values(base[c]) for c in key})
    kn = pd.DataFrame({c: _key_values(new[c]) for c in key})
    kb["_ib"] = np.arange(len(base))
    kn["_in"] = np.arange(len(new))
    m = kb.merge(kn, on=key, how="outer", indicator=True, sort=False)
    both = m[m["_merge"] == "both"]
    removed = m.loc[m["_merge"] == "left_only", key].reset_index(drop=True)
    added = m.loc[m["_merge"] == "right_only", key].reset_index(drop=True)
    ib = both["_ib"].to_numpy(dtype=np.int64)
    inn = both["_in"].to_numpy(dtype=np.int64)
    keys_both = both[key].reset_index(drop=True)

    pieces = []
    for c in common:
        ob, on = base[c].iloc[ib].reset_index(drop=True), new[c].iloc[inn].reset_index(drop=True)
        if _is_numeric(ob) and _is_numeric(on):
            old = ob.to_numpy(dtype=np.float64)
            nw = on.to_numpy(dtype=np.float64)
            r, a = _tolerance_for(c, tolerances, rtol, atol)
            with np.errstate(invalid="ignore", divide="ignore"):
                same = (np.abs(nw - old) <= a + r * np.abs(old)) | (np.isnan(old) & np.isnan(nw)) | (old == nw)
                rel = np.where(old != 0, (nw - old) / np.abs(old), np.where(nw == old, 0.0, np.inf))
            moved = ~same
            if moved.any():
                pieces.append(
                    pd.DataFrame(
                        {
                            **{k: keys_both.loc[moved, k] for k in key},
                            "column": c,
                            "old": ob[moved].astype(object),
                            "new": on[moved].astype(object),
                            "rel_change": rel[moved],
                        }
                    )
                )
        else:
            # both missing = equal (pandas 3's astype(str) keeps NaN, and NaN != NaN); an empty text
            # is missing too: CSV writes both as an empty field, so a Parquet table's "" reads back
            # from its CSV copy as NaN (best's loses_on of the winner moved, exit 1)
            ob, on = _blank_as_na(ob), _blank_as_na(on)
            both_na = (ob.isna() & on.isna()).to_numpy()
            sb, sn = ob.astype(object).where(ob.notna(), None), on.astype(object).where(on.notna(), None)
            moved = (sb.astype(str) != sn.astype(str)).to_numpy() & ~both_na
            if moved.any():
                pieces.append(
                    pd.DataFrame(
                        {
                            **{k: keys_both.loc[moved, k] for k in key},
                            "column": c,
                            "old": ob[moved].astype(object),
                            "new": on[moved].astype(object),
                            "rel_change": np.nan,
                        }
                    )
                )
    if pieces:
        moved_df = pd.concat(pieces, ignore_index=True)
    else:
        moved_df = pd.DataFrame(columns=[*key, "column", "old", "new", "rel_change"])
    return Comparison(
        key=key,
        moved=moved_df,
        added_rows=added,
        removed_rows=removed,
        added_columns=added_cols,
        removed_columns=removed_cols,
        rows_compared=len(both),
        columns_compared=len(common),
        label_key=[k for k in key if pd.concat([kb[k], kn[k]]).nunique(dropna=False) > 1],
        unmatched_tolerances=unmatched_tolerances(tolerances, set(cols_b) | set(cols_n)),
    )


def compare_files(
    baseline: str | Path,
    new: str | Path,
    key=None,
    rtol=DEFAULT_RTOL,
    atol=DEFAULT_ATOL,
    tolerances: dict | None = None,
) -> Comparison:
    """Read two tables written by `parallmelism sweep` (or any tidy CSV/Parquet) and compare them."""
    from .writer import read_table

    base_df = _with_schema_version(read_table(baseline), baseline)
    new_df = _with_schema_version(read_table(new), new)
    from .writer import table_kind

    kb, kn = table_kind(base_df), table_kind(new_df)
    if kb != kn:
        raise UserError(
            f"{str(baseline)!r} holds a table of kind {kb} but {str(new)!r} one of kind {kn}; compare like with like"
        )
    return compare_frames(
        base_df,
        new_df,
        key=key,
        rtol=rtol,
        atol=atol,
        tolerances=tolerances,
        names=(f"baseline {str(baseline)!r}", f"new {str(new)!r}"),
    )


def _with_schema_version(df, path):
    """A Parquet file without the `schema_version` column still carries it in its metadata."""
    path = Path(path)
    if "schema_version" in df.columns or path.suffix != ".parquet":
        return df
    import pyarrow.parquet as pq

    meta = pq.read_schema(path).metadata or {}
    v = meta.get(b"parallmelism_schema_version")
    return df.assign(schema_version=int(v)) if v is not None and v.decode().isdigit() else df


def varying_key(comp: Comparison) -> list[str]:
    """Key columns worth showing: those that take more than one value in the two files."""
    return comp.label_key or comp.key


def row_label(row, cols) -> str:
    """`tp=8 pp=4 ...`, leaving out key columns that do not apply to this row (missing)."""
    import pandas as pd

    return _fmt_key({c: row[c] for c in cols if not (pd.api.types.is_scalar(row[c]) and pd.isna(row[c]))})


def summary_by_column(comp: Comparison):
    """Per moved column: how many rows moved and the largest relative change."""
    import pandas as pd

    if len(comp.moved) == 0:
        return pd.DataFrame(columns=["column", "rows_moved", "max_abs_rel_change"])
    g = comp.moved.assign(abs_rel=comp.moved["rel_change"].astype(float).abs())
    out = g.groupby("column", sort=False).agg(rows_moved=("column", "size"), max_abs_rel_change=("abs_rel", "max"))
    return out.reset_index().sort_values("rows_moved", ascending=False, kind="stable")
