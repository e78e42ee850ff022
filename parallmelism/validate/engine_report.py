"""Per serving engine: how close the serving model is to that engine's published runs (issue 33).

For every (engine, sample) of validate's serving rows (runner.serving_case_info: the case's
`engine`, blank = the default engine, and `sample`, independent publications vs aiconfigurator
0.12.0's measured silicon sample, scored apart because that tool is checked against them, and the
held-out samples, HELD_OUT_SAMPLES: rows no fit has seen, validated and never fitted):
  ITL   mean |error| at light load (closed-loop concurrency <= LIGHT_LOAD), target ITL_TARGET_PCT;
        rows above it (ITL of a loaded closed loop) are reported on their own line
  TTFT  mean |error| over the rows whose TTFT is validated (concurrency 1, and closed loops up to
        LIGHT_LOAD whose benchmark the row states, simulated: validate/inference_cases.py; the case
        files leave measured_ttft_ms blank elsewhere above concurrency 1), target TTFT_TARGET_PCT
  output tokens/s per GPU at the row's fixed concurrency or static batch, the context pass and a
        static batch's completion without a server (validate/inference_cases.py's optional
        quantities, OTHER_QUANTITIES), where rows have them
Loaded points (percentiles under a request rate) are validate's `loaded` kind, reported by it.
"""

from __future__ import annotations

# Samples validated and reported on their own lines but never fitted (benchmarks/fit_serving_overhead.py leaves
# their rows out): their error is what the engines' fitted overheads predict out of sample, as validate/stacks.py
# HELD_OUT is for the training stacks. aiconfigurator-heldout: parallmelism/cases/inference_heldout.csv, campaigns
# of aiconfigurator 0.12.0's silicon sample no earlier session read (benchmarks/build_heldout_cases.py);
# independent-heldout: published tables no fit has seen (parallmelism/cases/inference_heldout_*.csv)
HELD_OUT_SAMPLES = ("aiconfigurator-heldout", "independent-heldout")
LIGHT_LOAD = 8  # concurrent requests: the survey's light-load bound (benchmarks/surveys/engines/sources.md)
# validate/inference_cases.py's optional quantities, by report key, and how a line names them
OTHER_QUANTITIES = {"tput": "output_tok_s_per_gpu", "context": "context_ms", "batch": "batch_ms"}
OTHER_LABELS = {
    "tput": "output tok/s per GPU at fixed concurrency",
    "context": "context pass (no server)",
    "batch": "static batch to its last token (no server)",
}
ITL_TARGET_PCT = 10.0
TTFT_TARGET_PCT = 15.0


def engine_errors(table) -> list[dict]:
    """One record per (engine, sample): rows and mean |error| % of ITL at light load, ITL above it
    and validated TTFT (NaN where there are no rows), from validate's table and its attrs["serving"]."""
    import pandas as pd

    info = pd.DataFrame(table.attrs.get("serving", []), columns=["case", "engine", "sample", "concurrency"])
    if len(info) == 0:
        return []
    rows = table.merge(info, on="case", how="inner")
    out = []
    for (engine, sample), part in rows.groupby(["engine", "sample"], sort=True):
        itl = part[part["quantity"] == "itl_ms"]
        light = itl[itl["concurrency"] <= LIGHT_LOAD]["error_pct"].abs()
        loaded = itl[itl["concurrency"] > LIGHT_LOAD]["error_pct"].abs()
        ttft = part[part["quantity"] == "ttft_ms"]["error_pct"].abs()
        other = {k: part[part["quantity"] == q]["error_pct"].abs() for k, q in OTHER_QUANTITIES.items()}
        out.append(
            {
                "engine": engine,
                "sample": sample,
                "itl_rows": len(light),
                "itl_mean_abs_pct": float(light.mean()) if len(light) else float("nan"),
                "itl_loaded_rows": len(loaded),
                "itl_loaded_mean_abs_pct": float(loaded.mean()) if len(loaded) else float("nan"),
                "ttft_rows": len(ttft),
                "ttft_mean_abs_pct": float(ttft.mean()) if len(ttft) else float("nan"),
                **{f"{k}_rows": len(e) for k, e in other.items()},
                **{f"{k}_mean_abs_pct": float(e.mean()) if len(e) else float("nan") for k, e in other.items()},
            }
        )
    return out


def engine_lines(table) -> list[str]:
    """The per-engine report as lines (empty without serving rows)."""
    lines = []
    for r in engine_errors(table):
        parts = []
        if r["itl_rows"]:
            parts.append(
                f"ITL at concurrency <= {LIGHT_LOAD}: {r['itl_rows']} rows, mean |error| "
                f"{r['itl_mean_abs_pct']:.2f}% (target {ITL_TARGET_PCT:g}%)"
            )
        if r["ttft_rows"]:
            parts.append(
                f"TTFT: {r['ttft_rows']} rows, mean |error| {r['ttft_mean_abs_pct']:.2f}% (target {TTFT_TARGET_PCT:g}%)"
            )
        else:
            parts.append("TTFT: no light-load rows")
        if r["itl_loaded_rows"]:
            parts.append(
                f"ITL above concurrency {LIGHT_LOAD} (loaded): {r['itl_loaded_rows']} rows, "
                f"{r['itl_loaded_mean_abs_pct']:.2f}%"
            )
        for k, label in OTHER_LABELS.items():
            if r[f"{k}_rows"]:
                parts.append(f"{label}: {r[f'{k}_rows']} rows, {r[f'{k}_mean_abs_pct']:.2f}%")
        lines.append(f"engine {r['engine']} ({r['sample']}): " + "; ".join(parts))
    return lines
