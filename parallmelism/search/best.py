"""`best`: the winner and runner-ups per (run, GPU count), and why each runner-up loses."""

from __future__ import annotations

from ..schema import LAYOUT_AXES

BEST_COLUMNS = [
    "model",
    "hardware",
    "workload",
    "ngpus",
    "rank",
    *LAYOUT_AXES,
    "time_step_s",
    "tokens_per_s",
    "mfu",
    "mem_total_gib",
    "fits",
    "loses_on",
    "why",
]


# `best` lists faster layouts that miss memory only when they need at most this much more than the
# usable HBM (25 %: within reach of a larger micro-batch count, recompute or an 80 -> 96/141 GB part);
# a layout needing several times the memory is not a near miss.
NEAR_MISS_MEMORY_MARGIN = 0.25


def near_miss(cols):
    """Rows that miss memory by at most the margin: mem_total <= (1 + margin) · usable HBM, with
    usable = mem_total + mem_headroom. `cols` is a chunk's columns or a frame; a boolean array."""
    import numpy as np

    total = np.asarray(cols["mem_total_gib"], dtype=np.float64)
    usable = total + np.asarray(cols["mem_headroom_gib"], dtype=np.float64)
    return ~np.asarray(cols["fits"], dtype=bool) & (total <= (1.0 + NEAR_MISS_MEMORY_MARGIN) * usable)


def search_best(runs, top: int, stream, extra_collectors=()):
    """(best table, layouts evaluated) of `runs`: the `top` fastest layouts that fit per GPU count
    and the faster near misses (`best_table`). `stream(runs, collectors)` is the evaluation driver
    (search.stream_runs with the caller's progress and workers); `extra_collectors` (e.g. a
    full-output sink) see every row too. No layout, or none that fits, is one UserError sentence.
    The table is a `Records` table (no pandas; `report.records.as_frame` gives the DataFrame)."""
    from ..errors import UserError
    from .collectors import TopKCollector
    from .frames import records_of_kept

    if any(r.workload.kind != "train" for r in runs):
        raise UserError(
            "best ranks training layouts by step time; for serving use `parallmelism plan serve` "
            "or `parallmelism pareto workload=inference`"
        )
    fits = TopKCollector(top, "time_step_s", group_by=["ngpus"], where="fits")
    # the fastest near misses (not the fastest of all layouts: those need several times the memory)
    near = TopKCollector(max(1, top // 2), "time_step_s", group_by=["ngpus"], where=near_miss)
    res = stream(runs, [fits, near, *extra_collectors])
    if res.evaluated == 0:
        raise UserError(res.explain_empty())
    fit = records_of_kept(runs, res.kept[0], keep_index_columns=True)
    if len(fit) == 0:
        raise UserError(
            f"none of the {res.evaluated:,} valid layouts fits in memory; "
            f"try more GPUs (grid.ngpus) or a larger accelerator"
        )
    return best_table(fit, records_of_kept(runs, res.kept[1], keep_index_columns=True), top), res.evaluated


def _rows(table) -> list[dict]:
    """Row dicts of a list of dicts or a DataFrame (Python values, as `to_dict()` gives them)."""
    if table is None:
        return []
    if isinstance(table, list):
        return table
    return [r.to_dict() for _, r in table.iterrows()]


def _by_time(row: dict) -> tuple:
    """Sort key: step time (NaN last), then enumeration order."""
    t = row["time_step_s"]
    return (t != t, t if t == t else 0.0, row["_row"])


def best_table(res_fit, res_any, top: int):
    """Winner and runner-ups per (run, ngpus), plus faster layouts that lose on memory: a
    `Records` table (rows of `res_fit`/`res_any`, row dicts or DataFrames with `_run`, `_row`)."""
    from ..report.records import Records
    from ..search.explain import additive_time_parts, why_slower

    fit, near = _rows(res_fit), _rows(res_any)
    if not fit:
        return Records([], [])
    parts = additive_time_parts(list(fit[0]))
    groups: dict[tuple, list[dict]] = {}
    for r in fit:
        groups.setdefault((r["_run"], r["ngpus"]), []).append(r)
    rows = []
    for key in sorted(groups):
        grp = sorted(groups[key], key=_by_time)
        winner = grp[0]
        for i, r in enumerate(grp[:top]):
            d = dict(r)
            d["rank"] = i + 1
            d["loses_on"], d["why"] = ("", "fastest that fits") if i == 0 else why_slower(winner, r, parts)[:2]
            rows.append(d)
        faster = [
            r
            for r in near
            if r["_run"] == winner["_run"]
            and r["ngpus"] == winner["ngpus"]
            and _near_miss_row(r)
            and r["time_step_s"] < winner["time_step_s"]
        ]
        for r in sorted(faster, key=_by_time)[: max(1, top // 2)]:
            d = dict(r)
            d["rank"] = 0
            d["loses_on"], d["why"] = why_slower(winner, r, parts)[:2]
            d["why"] += (
                f" (would be {(winner['time_step_s'] - r['time_step_s']) * 1e3:.1f} ms faster; near "
                f"misses within {NEAR_MISS_MEMORY_MARGIN:.0%} of the memory are listed)"
            )
            rows.append(d)
    names = list(dict.fromkeys(k for d in rows for k in d))
    cols = [c for c in BEST_COLUMNS if c in names]
    cols += [c for c in names if c not in cols and not c.startswith("_")]
    return Records(rows, cols)


def _near_miss_row(row: dict) -> bool:
    """`near_miss` of one row."""
    return bool(near_miss({k: [row[k]] for k in ("mem_total_gib", "mem_headroom_gib", "fits")})[0])
