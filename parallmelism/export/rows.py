"""A row of a `best` / `plan` / `sweep` file as the overrides that pin its layout again."""

from __future__ import annotations

from pathlib import Path

from ..errors import UserError, require_file
from .layout import SERVE_AXES, TRAIN_AXES, override_strings


def read_rows(path: str | Path):
    """The file's rows (CSV or Parquet) as a DataFrame."""
    import pandas as pd

    p = require_file(path, "row source")
    try:
        if p.suffix.lower() in (".parquet", ".pq"):
            return pd.read_parquet(p)
        return pd.read_csv(p)
    except (ValueError, OSError, UnicodeDecodeError) as exc:
        raise UserError(
            f"row source {str(p)!r} is not a CSV or Parquet table ({str(exc).splitlines()[0][:120]})"
        ) from None


def select_row(df, rank: int | None = None, case: str | None = None, where: str | None = None) -> dict:
    """The one row the selectors leave. No selector on a `best` file: its rank-1 row; on a plan:
    its chosen row. Zero or several rows left: one sentence saying so."""
    picked = df
    if case is not None:
        if "case" not in df.columns:
            raise UserError("--case needs a 'case' column, and this file has none; use --rank or --where")
        picked = picked[picked["case"].astype(str) == case]
    if rank is not None:
        if "rank" not in df.columns:
            raise UserError("--rank needs a 'rank' column (a best table), and this file has none; use --where")
        picked = picked[picked["rank"] == rank]
    if where is not None:
        try:
            picked = picked.query(where)
        except Exception as exc:  # pandas raises many kinds for a bad expression
            raise UserError(f"--where {where!r} is not an expression over the file's columns ({exc})") from None
    if rank is None and case is None and where is None and len(picked) > 1:
        if "rank" in picked.columns:
            picked = picked[picked["rank"] == 1]
        elif "chosen" in picked.columns:
            picked = picked[picked["chosen"].astype(bool)]
    if len(picked) != 1:
        raise UserError(
            f"{len(picked)} rows match; choose one with --rank N, --case NAME or --where EXPR (e.g. --where 'ngpus == 512')"
        )
    return {k: (v.item() if hasattr(v, "item") else v) for k, v in picked.iloc[0].to_dict().items()}


def row_overrides(row: dict) -> list[str]:
    """Hydra overrides pinning the row's model, hardware, workload and layout."""
    missing = [c for c in ("model", "hardware", "tp", "pp") if c not in row]
    if missing:
        raise UserError(f"the row has no {', '.join(missing)} column; export reads best, plan and sweep outputs")
    serving = row.get("workload") == "inference" or "batch" in row or "input_len" in row
    pinned: dict = {}
    if serving:
        pinned["workload"] = "inference"
    pinned["model"], pinned["hardware"] = row["model"], row["hardware"]
    if "ngpus" in row:
        ngpus = int(row["ngpus"])
    elif "replica_gpus" in row and "dp" in row:  # a serve plan: replica_gpus = ngpus / dp
        ngpus = int(row["replica_gpus"]) * int(row["dp"])
    else:
        raise UserError("the row has no ngpus column")
    pinned["grid.ngpus"] = ngpus
    for k in SERVE_AXES if serving else TRAIN_AXES:
        if k in row:
            v = row[k]
            if k == "sequence_parallel" and isinstance(v, str):
                v = v.strip().lower() == "true"
            pinned[f"grid.{k}"] = v
    for k in ("input_len", "output_len") if serving else ("seq_len", "global_batch"):
        if k in row:
            pinned[f"workload.{k}"] = int(row[k])
    return override_strings(pinned)
