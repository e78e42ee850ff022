"""Fit the serving per-iteration overhead (efficiency.iteration_overhead_ms) once per accelerator.

    python benchmarks/fit_serving_overhead.py [CASE_FILE ...]

For every accelerator with serving rows in the case files (default: the shipped
parallmelism/cases/inference_*.csv), grid-search iteration_overhead_ms over 0..5 ms in 0.05 ms
steps for the smallest mean |ITL error| over all its rows (every concurrency), the kernels and
every other constant held at the accelerator's YAML; then, at that value, request_overhead_ms
(per-request host time in TTFT) over 0..20 ms in 0.25 ms steps for the smallest mean |TTFT error|
over its validated TTFT rows. Prints the fit, then per case family
(model × input/output lengths) the ITL and TTFT mean |error| at the fitted value, TTFT under load
against the reported (not validated) TTFT column, and the H200 / H100 ITL ratio the model gives
for the same rows. Re-run it after the kernel model or the serving model changes and copy the
printed value into hardware/<name>.yaml.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from parallmelism.validate import kinds  # noqa: E402,F401  (registers the case kinds)
from parallmelism.validate.cases import get  # noqa: E402
from parallmelism.validate.inference_cases import inference_run_of  # noqa: E402
from parallmelism.validate.runner import _context, _evaluate_one, shipped_case_files  # noqa: E402

GRID_MS = np.round(np.arange(0.0, 5.0001, 0.05), 2)
REQUEST_GRID_MS = np.round(np.arange(0.0, 20.0001, 0.25), 2)


def load_rows(files):
    rows = []
    for f in files:
        df = pd.read_csv(f, dtype=str, keep_default_na=False).replace({"": None})
        if "measured_itl_ms" in df.columns:
            rows += df.to_dict("records")
    return rows


def family(case: str) -> str:
    """Case name without its concurrency suffix (-cN) or trailing length: one serving config."""
    return re.sub(r"-c\d+$", "", case)


def predict(rows, ctx, hw_name, overhead_ms, request_ms=None):
    models, hardware_of, base = ctx

    def patched(name):
        hw = hardware_of(hw_name or name)
        upd = {"iteration_overhead_ms": overhead_ms}
        if request_ms is not None:
            upd["request_overhead_ms"] = request_ms
        return hw.model_copy(update={"efficiency": hw.efficiency.model_copy(update=upd)})

    out = []
    for row in rows:
        r = _evaluate_one(inference_run_of(row, models, patched, base))
        out.append((float(r["tpot_ms"]), float(r["ttft_ms"])))
    return out


def errors(rows, preds):
    itl, ttft, load = [], [], []
    for row, (p_itl, p_ttft) in zip(rows, preds):
        m_itl, m_ttft, rep = (get(row, k) for k in ("measured_itl_ms", "measured_ttft_ms", "reported_ttft_ms"))
        if m_itl is not None:
            itl.append((family(row["case"]), 100 * (p_itl - float(m_itl)) / float(m_itl)))
        if m_ttft is not None:
            ttft.append((family(row["case"]), 100 * (p_ttft - float(m_ttft)) / float(m_ttft)))
        elif rep is not None:
            load.append((family(row["case"]), 100 * (p_ttft - float(rep)) / float(rep)))
    return itl, ttft, load


def mean_abs(pairs):
    return float(np.mean([abs(e) for _, e in pairs])) if pairs else float("nan")


def main(argv):
    files = [Path(a) for a in argv] or [f for f in shipped_case_files() if "inference" in f.name]
    rows = load_rows(files)
    ctx = _context([], [])
    by_hw = {}
    for row in rows:
        by_hw.setdefault(get(row, "accelerator", "h100-sxm-80gb"), []).append(row)
    fitted = {}
    for hw_name, hw_rows in sorted(by_hw.items()):
        scores = [(mean_abs(errors(hw_rows, predict(hw_rows, ctx, None, g))[0]), g) for g in GRID_MS]
        best_err, best = min(scores)
        fitted[hw_name] = best
        req = [(mean_abs(errors(hw_rows, predict(hw_rows, ctx, None, best, g))[1]), g) for g in REQUEST_GRID_MS]
        req_err, req_best = min(req)
        print(f"{hw_name}: iteration_overhead_ms = {best:.2f}  (ITL mean |error| {best_err:.2f} % over "
              f"{sum(get(r, 'measured_itl_ms') is not None for r in hw_rows)} rows; YAML now "
              f"{ctx[1](hw_name).efficiency.iteration_overhead_ms:.2f})")
        print(f"{hw_name}: request_overhead_ms = {req_best:.2f}  (TTFT mean |error| {req_err:.2f} %; YAML now "
              f"{ctx[1](hw_name).efficiency.request_overhead_ms:.2f})")
        itl, ttft, load = errors(hw_rows, predict(hw_rows, ctx, None, best, req_best))
        fams = sorted({f for f, _ in itl + ttft + load})
        print(f"  {'family':<34} {'ITL n':>5} {'ITL |err|%':>10} {'TTFT n':>6} {'TTFT |err|%':>11} "
              f"{'TTFT@load n':>11} {'|err|% vs reported':>18}")
        for fam in fams:
            parts = [[e for f, e in x if f == fam] for x in (itl, ttft, load)]
            cells = [f"{len(p):>5} {np.mean(np.abs(p)) if p else float('nan'):>10.2f}" for p in parts]
            print(f"  {fam:<34} {cells[0]} {cells[1]:>18} {cells[2]:>30}")
        print(f"  all: ITL {mean_abs(itl):.2f} % ({len(itl)}), TTFT {mean_abs(ttft):.2f} % ({len(ttft)}), "
              f"TTFT under load vs reported {mean_abs(load):.2f} % ({len(load)})")
    h100 = by_hw.get("h100-sxm-80gb")
    if h100:
        a = predict(h100, ctx, "h100-sxm-80gb", fitted["h100-sxm-80gb"])
        b = predict(h100, ctx, "h200-sxm-141gb", fitted.get("h200-sxm-141gb", ctx[1]("h200-sxm-141gb")
                                                              .efficiency.iteration_overhead_ms))
        ratio = np.array([y[0] / x[0] for x, y in zip(a, b)])
        conc = np.array([float(get(r, "concurrency", 1)) for r in h100])
        print(f"H200 / H100 ITL on the H100 rows (model): concurrency 1 mean {ratio[conc == 1].mean():.3f}, "
              f"all rows mean {ratio.mean():.3f} (min {ratio.min():.3f}, max {ratio.max():.3f})")


if __name__ == "__main__":
    main(sys.argv[1:])
