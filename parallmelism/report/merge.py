"""Merge tables written by multirun jobs, sweeps or --full-output datasets into one, checking that
they are the same kind of table written by the same schema version."""

from __future__ import annotations

from pathlib import Path

from .. import SCHEMA_VERSION, schema
from ..errors import UserError
from .compare import check_unique, default_key
from .writer import not_a_number, quantity_columns, read_table, table_kind


def read_part(path: Path):
    import pandas as pd

    if path.is_dir():
        if not any(f.suffix.lower() == ".parquet" for f in path.rglob("*") if f.is_file()):
            # (pandas read an empty folder as a table of no columns, "of kind unrecognised", and a
            # folder of other files as pyarrow's words about a footer)
            raise UserError(
                f"{str(path)!r} is a folder with no .parquet file; give part files (.csv, .parquet) "
                "or a Parquet dataset folder (--full-output DIR, a study folder)"
            )
        try:
            return pd.read_parquet(path)
        except Exception as exc:
            raise UserError(f"cannot read {str(path)!r} as a Parquet dataset: {str(exc).splitlines()[0]}") from None
    return read_table(path)


def merge_tables(parts: list[Path]):
    """One DataFrame of every part's rows, columns in schema order (version columns dropped)."""
    import pandas as pd

    frames = []
    versions = {}
    for p in parts:
        df = read_part(p)
        if "schema_version" in df.columns and len(df):
            versions[p] = str(df["schema_version"].iloc[0])
        _check_finite(df, p)
        frames.append(df.drop(columns=[c for c in ("tool_version", "schema_version") if c in df.columns]))
    if len(set(versions.values())) > 1:
        (a, va), (b, vb) = list(versions.items())[:1] + [
            next((k, v) for k, v in versions.items() if v != next(iter(versions.values())))
        ]
        raise UserError(f"{b} has schema version {vb} but {a} has {va}; re-run the older part")
    for p, v in versions.items():
        if v != str(SCHEMA_VERSION):
            raise UserError(
                f"{p} has schema version {v}, this parallmelism writes {SCHEMA_VERSION}; "
                "re-run that part with this version"
            )
    kinds = {p: table_kind(f) for p, f in zip(parts, frames)}
    if len(set(kinds.values())) > 1:
        a = next(iter(kinds))
        b = next(p for p, k in kinds.items() if k != kinds[a])
        raise UserError(
            f"{b} holds a table of kind {kinds[b]} but {a} one of kind {kinds[a]}; merge one kind at a time"
        )
    for c in ("model", "hardware", "workload", "dp_sharding", "recompute", "mem_stage"):
        for f in frames:
            if c in f.columns:
                f[c] = f[c].astype(str)
    merged = pd.concat(frames, ignore_index=True, sort=False)
    # compare's key: a configuration written twice (a part given twice, overlapping shards) is refused
    check_unique(
        merged,
        default_key(merged),
        f"the table merged from {len(parts)} part(s)",
        "give each part once, and parts that do not overlap; nothing was written",
    )
    known = [*schema.TRAINING_COLUMNS, *getattr(schema, "INFERENCE_COLUMNS", {})]
    order = [c for c in dict.fromkeys(known) if c in merged.columns]  # Parquet datasets put partition keys last
    merged = merged[order + [c for c in merged.columns if c not in order]]
    return merged


def _check_finite(df, path: Path) -> None:
    """NaN or inf in a quantity column is a broken part, never a number to pass on."""
    import numpy as np
    import pandas as pd

    for col in quantity_columns(df):
        values = pd.to_numeric(df[col], errors="coerce").to_numpy(dtype=np.float64)
        bad = np.flatnonzero(~np.isfinite(values))
        if len(bad):
            raise not_a_number(path, col, df[col].iloc[bad[0]], int(bad[0]) + 1, "a finite number")
