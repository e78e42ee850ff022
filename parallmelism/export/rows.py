"""A row of a `best` / `plan` / `sweep` file as the overrides that pin its layout again."""

from __future__ import annotations

from pathlib import Path

from ..errors import UserError, require_file
from .layout import SERVE_AXES, TRAIN_AXES, override_strings


def read_rows(path: str | Path):
    """The file's rows (CSV or Parquet) as a DataFrame."""
    import pandas as pd

    p = require_file(path, "row source")
    if p.suffix.lower() not in (".csv", ".parquet", ".pq"):  # was read as a CSV: "truncated: line 20 ..."
        table = p.name.endswith(".summary.md") and next(
            (
                t
                for t in (p.with_name(p.name.removesuffix(".summary.md") + x) for x in (".csv", ".parquet"))
                if t.is_file()
            ),
            None,
        )
        raise UserError(
            f"row source {str(p)!r} is neither .csv nor .parquet; give the table a command wrote"
            + (f" ({str(table)!r} is this plan summary's table)" if table else "")
        )
    if p.suffix.lower() not in (".parquet", ".pq"):
        from ..report.writer import check_csv_complete

        check_csv_complete(p)  # a copy cut short: never a last row of half its values
    try:
        if p.suffix.lower() in (".parquet", ".pq"):
            return pd.read_parquet(p)
        return pd.read_csv(p)
    except (ValueError, OSError, UnicodeDecodeError) as exc:
        raise UserError(
            f"row source {str(p)!r} is not a CSV or Parquet table ({str(exc).splitlines()[0][:120]})"
        ) from None


def _is_true_value(v) -> bool:
    """A boolean cell as read from CSV (bool, or the string 'True'/'true') or Parquet."""
    return str(v).strip().lower() == "true"


def _is_true(column):
    """A boolean column as a mask (see _is_true_value)."""
    return column.map(_is_true_value).astype(bool)


def select_row(df, rank: int | None = None, case: str | None = None, where: str | None = None) -> dict:
    """The one row the selectors leave. `--case NAME` matches the 'case' column, or a serve plan's
    'deployment' column (colocated, disaggregated). No selector on a `best` file: its rank-1 row; on a
    serve plan: its recommended row; on another plan: its chosen row. Zero or several rows left: one
    sentence saying so."""
    picked = df
    if case is not None:
        by = next((c for c in ("case", "deployment") if c in df.columns), None)
        if by is None:
            raise UserError(
                "--case needs a 'case' or 'deployment' column, and this file has none; use --rank or --where"
            )
        picked = picked[picked[by].astype(str) == case]
        if picked.empty:
            names = ", ".join(dict.fromkeys(df[by].astype(str)))
            raise UserError(f"--case {case!r} matches no row; this file's {by} values are {names}")
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
        elif "recommended" in picked.columns:
            picked = picked[_is_true(picked["recommended"])]
            if picked.empty:
                raise UserError(
                    "the plan recommends no deployment (none meets every target); "
                    "pass --case colocated to export the colocated plan's layout"
                )
        elif "chosen" in picked.columns:
            picked = picked[_is_true(picked["chosen"])]
    if len(picked) != 1:
        raise UserError(_not_one_row(df, len(picked), rank, case, where))
    return {k: (v.item() if hasattr(v, "item") else v) for k, v in picked.iloc[0].to_dict().items()}


def _not_one_row(df, n: int, rank, case, where) -> str:
    """Why the selectors left no row or several: a rank the file does not hold names those it does."""
    if rank is not None and not (df["rank"] == rank).any():
        ranks = sorted({int(r) for r in df["rank"].dropna()})
        held = [r for r in ranks if r > 0]
        return (
            f"--rank {rank}: no row has that rank; "
            + (f"this file's ranks are {held[0]} to {held[-1]}" if held else "this file ranks no row")
            + (" (0: the near misses, which do not fit)" if 0 in ranks else "")
        )
    given = [f"--rank {rank}" * (rank is not None), f"--case {case!r}" * (case is not None)]
    chosen = " and ".join(g for g in [*given, f"--where {where!r}" * (where is not None)] if g)
    if n == 0 and not chosen:  # no selector: the file's own answer (rank 1, chosen) is missing
        if len(df) == 0:
            return "the row source holds no row"
        return "no row is the file's answer (rank 1 or chosen); choose one with --rank N, --case NAME or --where EXPR"
    if n == 0:
        return f"no row matches {chosen}"
    return (
        f"{n} rows match{' ' + chosen if chosen else ''}; choose one with --rank N, --case NAME or --where EXPR "
        "(e.g. --where 'ngpus == 512')"
    )


def _pool_sizes(row: dict) -> str:
    """' (13 prefill + 3 decode GPUs)' of a disaggregated row, '' when a pool has no plan."""
    pools = []
    for pool in ("prefill", "decode"):
        gpus = row.get(f"{pool}_gpus")
        if gpus is not None and gpus == gpus:  # NaN when the pool has no plan
            pools.append(f"{int(gpus):,} {pool}")
    return f" ({' + '.join(pools)} GPUs)" if len(pools) == 2 else ""


def _refuse_disaggregated(row: dict) -> None:
    """A serve plan's disaggregated row is two pools (prefill, decode): only `--to dynamo` writes them."""
    if str(row.get("deployment")) != "disaggregated":
        return
    what = (
        "the recommended plan is disaggregated"
        if _is_true_value(row.get("recommended"))
        else "this row is the disaggregated plan"
    )
    raise UserError(
        f"{what}{_pool_sizes(row)}, which only --to dynamo writes (two pools); "
        "pass --case colocated to export the colocated plan"
    )


def replica_ngpus(replica_gpus: int, tp: int, ep: int, dp: int) -> int:
    """The layout's ngpus from a serve plan's replica (search/plan.py): replica_gpus = ngpus / dp,
    or ngpus itself when the experts are spread over the dp replicas (ep_across_replicas)."""
    import pandas as pd

    from ..search.plan import ep_across_replicas

    tied = bool(ep_across_replicas(pd.DataFrame({"ep": [ep], "tp": [tp]}))[0])
    return replica_gpus if tied else replica_gpus * dp


def _pool_pinned(row: dict, pool: str, batch) -> dict:
    """Pinned overrides of one worker of a disaggregated row's pool: its axes (tp, pp, sp, ep) on
    one replica unit of {pool}_replica_gpus GPUs (dp 1, or the EP group's dp when the experts span
    the replicas, search/serve_disagg.py)."""
    pinned: dict = {"workload": "inference", "model": row["model"], "hardware": row["hardware"]}
    pinned["grid.ngpus"] = int(row[f"{pool}_replica_gpus"])
    for k in ("tp", "pp", "sp", "ep"):
        pinned[f"grid.{k}"] = int(row[f"{pool}_{k}"])
    pinned["grid.batch"] = int(batch)
    for k in ("input_len", "output_len"):
        if k in row:
            pinned[f"workload.{k}"] = int(row[k])
    return pinned


def disaggregated_pools(row: dict) -> dict[str, tuple[list[str], int]]:
    """{pool: (Hydra overrides pinning one worker of the pool, its replicas)} of a serve plan's
    disaggregated row: the prefill pool's layout at batch 1 (it prefills one prompt at a time,
    search/serve_disagg.py), the decode pool's at decode_batch. Another row: one sentence."""
    if str(row.get("deployment")) != "disaggregated":
        raise UserError(
            "--to dynamo writes the two pools of a `plan serve` file's disaggregated row, and this row is "
            f"{row.get('deployment', 'not from a serve plan')}; pass --case disaggregated, or --to vllm for one replica"
        )
    if not all(row.get(f"{pool}_replicas") == row.get(f"{pool}_replicas") for pool in ("prefill", "decode")):
        raise UserError("the disaggregated plan has no layout for one of its pools; no manifest can be written")
    out = {}
    for pool, batch in (("prefill", 1), ("decode", row.get("decode_batch"))):
        out[pool] = (override_strings(_pool_pinned(row, pool, batch)), int(row[f"{pool}_replicas"]))
    return out


def row_overrides(row: dict) -> list[str]:
    """Hydra overrides pinning the row's model, hardware, workload and layout."""
    _refuse_disaggregated(row)
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
    elif "replica_gpus" in row and "dp" in row:  # a serve plan's replica
        ngpus = replica_ngpus(int(row["replica_gpus"]), int(row["tp"]), int(row.get("ep", 1)), int(row["dp"]))
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
