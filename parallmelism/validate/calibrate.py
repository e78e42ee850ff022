"""Fit the named overhead terms (cost/overheads.py) once per accelerator on the shipped step times.

    python -m parallmelism.validate.calibrate            # prints the fit and the validation table

For every accelerator with rows in parallmelism/cases/training_measured.csv: the model's step times
with all overheads at zero, and their sensitivity to each term (finite differences) give a linear
model of every row; a grid search over (layer_launch_us, comm_contention, step_fixed_ms, straggler_per_doubling)
takes the set with the fewest rows outside the validation bar (|error| > 15 %), then the smallest
mean |error| (plus a small parsimony cost per term, PARSIMONY), over that accelerator's rows (Korthikanti's rows held to their bar, mean <= 3 %,
max <= 6 %, where it can be), then the full model is re-run with it and the table printed. The
objective is robust on purpose: a smallest-max fit let one row with unpublished settings
(mcore-h100-32b, micro-batch not given) hold every other H100 row 10-20 % fast. Paste the printed `overheads:` block into hardware/NAME.yaml (and the ones that
share that accelerator's calibration). Kernel efficiencies are not fitted here (cost/kernels.py).
"""

from __future__ import annotations

import sys
from importlib import resources

import numpy as np

BAR = 0.15  # the step-time validation bar (|error| per row)
SHORTLIST = 24  # best grid points of the linearised fit re-run with the full model
TERMS = ("layer_launch_us", "comm_contention", "step_fixed_ms", "straggler_per_doubling")
STEPS = {"layer_launch_us": 100.0, "comm_contention": 0.1, "step_fixed_ms": 100.0, "straggler_per_doubling": 0.01}
GRID = {
    "layer_launch_us": np.arange(0.0, 801.0, 20.0),
    "comm_contention": np.arange(0.0, 1.001, 0.1),
    "step_fixed_ms": np.arange(0.0, 301.0, 10.0),
    "straggler_per_doubling": np.arange(0.0, 0.0801, 0.004),
}
# Parsimony: each term costs this much mean |error| per full grid range (0.5 %), so that where the
# rows barely tell the terms apart (a flat valley: on A100, 120 us and 800 us of launch time per
# layer fit within 0.4 % of each other) the smaller overheads win instead of a grid edge.
PARSIMONY = 0.005


def _rows():
    import pandas as pd

    from .runner import _context
    from .steptime import step_time_run_of

    path = resources.files("parallmelism") / "cases" / "training_measured.csv"
    df = pd.read_csv(str(path), dtype=str, keep_default_na=False).replace({"": None})
    ctx = _context([], None)
    out = []
    for row in df.to_dict("records"):
        out.append((row["case"], float(row["step_time_s"]), step_time_run_of(row, ctx)))
    return out


def _predict(runs, terms):
    """Step times of the runs with the overhead terms set on each run's own accelerator (a row may
    state its cluster's network, validate/steptime.py scale_out_gbps)."""
    from .runner import _evaluate_one

    return np.array(
        [
            float(_evaluate_one(r.model_copy(update={"hardware": _with(r.hardware, **terms)}))["time_step_s"])
            for r in runs
        ]
    )


def _with(hw, **terms):
    return hw.model_copy(update={"overheads": hw.overheads.model_copy(update=terms)})


def fit(cases, runs, measured):
    """(terms, predicted) for one accelerator's rows (module docstring)."""
    zero = {t: 0.0 for t in TERMS}
    p0 = _predict(runs, zero)
    jac = {t: (_predict(runs, {**zero, t: STEPS[t]}) - p0) / STEPS[t] for t in TERMS}
    mesh = [g.ravel() for g in np.meshgrid(*(GRID[t] for t in TERMS), indexing="ij")]
    J = np.stack([jac[t] for t in TERMS], axis=1)  # rows x terms
    pred = p0[:, None] + J @ np.stack(mesh, axis=0)
    kor = np.array([c_.startswith("korthikanti") and "dp8" not in c_ for c_ in cases])  # the paper's 8 rows

    # the parsimony cost of every grid point (PARSIMONY per full range of each term)
    sizes = PARSIMONY * sum(mesh[j] / GRID[t][-1] for j, t in enumerate(TERMS))

    def score_of(pred, size):
        """Rows outside the bar first, then the mean |error| plus the terms' parsimony cost;
        Korthikanti's bar held (margins below 3 % / 6 % where the model is linearised)."""
        err = np.abs(pred / measured[:, None] - 1.0)
        score = (err > BAR).sum(axis=0) + err.mean(axis=0) + size
        if kor.any():
            over = np.maximum(err[kor].mean(axis=0) - 0.028, 0) + np.maximum(err[kor].max(axis=0) - 0.055, 0)
            score = score + 100.0 * over  # held: it outweighs any row count
        return score

    linear = score_of(pred, sizes)
    # the linear model ranks the grid; the full model (overheads move link bounds and the critical
    # stage) decides among the best few
    shortlist = np.argsort(linear, kind="stable")[:SHORTLIST]
    full = []
    for i in shortlist:
        terms = {t: float(mesh[j][i]) for j, t in enumerate(TERMS)}
        full.append((float(score_of(_predict(runs, terms)[:, None], sizes[i])[0]), int(i), terms))
    _, _, terms = min(full, key=lambda x: (x[0], x[1]))
    return terms, p0, _predict(runs, terms)


def main(argv=None) -> int:
    rows = _rows()
    by_hw: dict[str, list] = {}
    for case, meas, run in rows:
        by_hw.setdefault(run.hardware.name, []).append((case, meas, run))
    for name, items in by_hw.items():
        cases = [i[0] for i in items]
        measured = np.array([i[1] for i in items])
        runs = [i[2] for i in items]
        terms, p0, pred = fit(cases, runs, measured)
        print(f"\n== {name}: {len(items)} rows; fitted overheads (paste into hardware/{name}.yaml):")
        print("overheads:")
        for t in TERMS:
            print(f"  {t}: {terms[t]:g}")
        print(
            f"{'case':34s} {'measured_s':>11s} {'kernels_only':>12s} {'err%':>7s} {'with_overheads':>14s} {'err%':>7s}"
        )
        for c_, m_, k_, p_ in zip(cases, measured, p0, pred):
            print(f"{c_:34s} {m_:11.3f} {k_:12.3f} {100 * (k_ / m_ - 1):7.2f} {p_:14.3f} {100 * (p_ / m_ - 1):7.2f}")
        e = np.abs(pred / measured - 1) * 100
        e0 = np.abs(p0 / measured - 1) * 100
        print(
            f"|error| kernels only: median {np.median(e0):.2f} % max {e0.max():.2f} %; "
            f"with overheads: mean {e.mean():.2f} % median {np.median(e):.2f} % max {e.max():.2f} %"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
