"""Fit the serving overheads of each engine (conf/engine/NAME.yaml: iteration_overhead_ms,
moe_layer_overhead_us, request_overhead_ms; tp_all_reduce_call_overhead_us for the engines of
ALL_REDUCE_FITTED) once, on that engine's rows.

    python benchmarks/fit_serving_overhead.py [CASE_FILE ...]

For every serving engine with rows in the case files (default: the shipped
parallmelism/cases/inference_*.csv, less the rows of a held-out sample, validate/engine_report.py
HELD_OUT_SAMPLES; the `engine` column, blank = the default engine trtllm), each by
grid search for the smallest mean |error|, the kernels (the rows' accelerators) and every other
constant held at the YAML files, in this order:
  tp_all_reduce_call_overhead_us  0..30 us, 0.1 us steps, on the ITL of its dense-model rows with
                         tp > 1 at concurrency <= LIGHT_LOAD (engines of ALL_REDUCE_FITTED only; the
                         all-reduce kernel's own times stay at the measurement the YAML cites)
  iteration_overhead_ms  0..5 ms, 0.05 ms steps, on the ITL of its dense-model rows
  moe_layer_overhead_us  0..200 us, 2.5 us steps, on the ITL of its MoE rows whose gate or shared expert runs outside the fused-MoE op
  request_overhead_ms    0..40 ms, 0.25 ms steps, on its validated TTFT rows (concurrency 1, and the
                         closed-loop rows whose benchmark is stated: validate/inference_cases.py)
Then, per constant fitted on rows of two or more sources, the leave-one-source-out error (refit
without a source, error on that source). A constant without rows of its kind keeps the YAML value (the
rule the engine file states). Disaggregated rows are reported, not fitted. Prints the fit, then per case family
(model × input/output lengths) the ITL and TTFT mean |error| at the fitted value, TTFT under load
against the reported (not validated) TTFT column, and the H200 / H100 ITL ratio the model gives
for the same rows (the H100 NIM rows, nim's values). Re-run it after the kernel model or the serving model changes
and copy the printed values into conf/engine/<name>.yaml.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from parallmelism.validate.cases import get, model_of  # noqa: E402
from parallmelism.validate.engine_report import HELD_OUT_SAMPLES  # noqa: E402  validated, never fitted
from parallmelism.validate.inference_cases import inference_run_of, predicted_quantities  # noqa: E402
from parallmelism.validate.runner import _context, _evaluate_one, shipped_case_files  # noqa: E402

GRID_MS = np.round(np.arange(0.0, 5.0001, 0.05), 2)
MOE_GRID_US = np.round(np.arange(0.0, 200.0001, 2.5), 1)
REQUEST_GRID_MS = np.round(np.arange(0.0, 40.0001, 0.25), 2)
AR_GRID_US = np.round(np.arange(0.0, 30.0001, 0.1), 1)
FIELDS = (
    "iteration_overhead_ms",
    "moe_layer_overhead_us",
    "request_overhead_ms",
    "tp_all_reduce_call_overhead_us",
)
# Engines whose serving TP all-reduce excess per call beyond the kernel (tp_all_reduce_call_overhead_us:
# rank skew at the barrier, the peer-buffer copy, the unfused residual add) is fitted here on end-to-end
# ITL: NIM 1.8 (TensorRT-LLM's TensorRT-engine AllReduce plugin of that release; its TP2 rows run short
# with the measured kernel alone). The kernel's latency fields are never fitted here: each YAML cites the
# kernel measurement they are. The other engines' excess is 0 by rule (their YAML says why).
ALL_REDUCE_FITTED = ("nim",)
LIGHT_LOAD = 8  # concurrency at and below which a row is light-load (validate's engine lines)


def load_rows(files):
    """The serving rows of the case files, less the held-out samples' (validate/engine_report.py
    HELD_OUT_SAMPLES: validated, never fitted)."""
    rows = []
    for f in files:
        df = pd.read_csv(f, dtype=str, keep_default_na=False).replace({"": None})
        if "measured_itl_ms" in df.columns:
            rows += [r for r in df.to_dict("records") if get(r, "sample") not in HELD_OUT_SAMPLES]
    return rows


def family(case: str) -> str:
    """Case name without its concurrency suffix (-cN): one serving configuration."""
    return re.sub(r"-c\d+$", "", case)


def predict(rows, ctx, hw_name, values: dict):
    """Per row: (predicted quantities of validate, predicted TTFT) with the row's engine's overheads
    set to `values`; hw_name: every row on that accelerator (None: the row's own)."""
    models, hardware_of, base, engine_of = ctx[:4]  # ctx[4]: the training stacks

    def hardware(name):
        return hardware_of(hw_name or name)

    def engine(name):
        return engine_of(name).model_copy(update=values)

    out = []
    for row in rows:
        r = _evaluate_one(inference_run_of(row, models, hardware, base, engine))
        out.append((predicted_quantities(row, r, (models, hardware, base, engine)), float(r["ttft_ms"])))
    return out


def errors(rows, preds):
    itl, ttft, load = [], [], []
    for row, (q, p_ttft) in zip(rows, preds):
        fam = family(row["case"])
        m_itl, m_ttft, rep = (get(row, k) for k in ("measured_itl_ms", "measured_ttft_ms", "reported_ttft_ms"))
        if m_itl is not None:
            itl.append((fam, 100 * (q["itl_ms"] - float(m_itl)) / float(m_itl)))
        if m_ttft is not None and "ttft_ms" in q:
            ttft.append((fam, 100 * (q["ttft_ms"] - float(m_ttft)) / float(m_ttft)))
        elif rep is not None:
            load.append((fam, 100 * (p_ttft - float(rep)) / float(rep)))
    return itl, ttft, load


def mean_abs(pairs):
    return float(np.mean([abs(e) for _, e in pairs])) if pairs else float("nan")


def grid_fit(rows, ctx, values, field, grid, which):
    """(mean |error|, value) of `field` on `grid` minimizing the mean |error| of quantity list `which`
    (0 ITL, 1 TTFT). An overhead only adds time, so each row's error moves one way as it grows and
    the mean |error| falls then rises along the grid: bisection on its slope finds the minimum in
    ~2·log2(len(grid)) evaluations instead of len(grid) (each evaluates every row)."""
    cache: dict[int, float] = {}

    def score(i: int) -> float:
        if i not in cache:
            cache[i] = mean_abs(errors(rows, predict(rows, ctx, None, {**values, field: float(grid[i])}))[which])
        return cache[i]

    lo, hi = 0, len(grid) - 1
    while hi - lo > 2:
        mid = (lo + hi) // 2
        if score(mid) <= score(mid + 1):
            hi = mid + 1
        else:
            lo = mid + 1
    return min((score(i), grid[i]) for i in range(lo, hi + 1))


def fit_parts(engine_rows, models, engine_name=None):
    """(field, rows, grid, which) of each overhead, in fitting order, on one engine's rows:
    disaggregated rows are reported, not fitted; for an engine of ALL_REDUCE_FITTED the light-load
    ITL of its dense rows with tp > 1 sets tp_all_reduce_call_overhead_us (a TP all-reduce is all
    such a row has that a tp 1 row lacks); dense-model ITL sets iteration_overhead_ms, the ITL of MoE rows whose gate runs outside
    the fused-MoE op moe_layer_overhead_us, validated TTFT (concurrency 1) request_overhead_ms."""
    fit_rows = [r for r in engine_rows if str(get(r, "disaggregated", "false")).lower() != "true"]
    dense = [r for r in fit_rows if model_of(r, models).moe is None]
    # the rows the per-MoE-layer term moves: MoE layers whose gate or shared expert runs outside the fused-MoE op
    # (cost/inference_iteration.iteration_overhead_s); a softmax top-k MoE row (Mixtral, Qwen3-MoE) does not pay it
    moe = [r for r in fit_rows if model_of(r, models).num_moe_layers_gate_outside > 0]
    ttft_rows = [r for r in fit_rows if get(r, "measured_ttft_ms") is not None]
    tp_rows = [
        r
        for r in dense
        if int(get(r, "tp", 1)) > 1
        and float(get(r, "concurrency", 1)) <= LIGHT_LOAD
        and get(r, "measured_itl_ms") is not None
    ]
    ar = (("tp_all_reduce_call_overhead_us", tp_rows, AR_GRID_US, 0),) if engine_name in ALL_REDUCE_FITTED else ()
    return ar + (
        ("iteration_overhead_ms", dense, GRID_MS, 0),
        ("moe_layer_overhead_us", moe, MOE_GRID_US, 0),
        ("request_overhead_ms", ttft_rows, REQUEST_GRID_MS, 1),
    )


def source_group(row) -> str:
    """The source a row is held out with: its `source`, except aiconfigurator's silicon sample, whose
    rows each name their run id: held out by measurement campaign (model on accelerator)."""
    src = str(row["source"])
    if " id=" in src:
        return f"{src.split(' id=')[0]} {row['model']} on {get(row, 'accelerator', 'h100-sxm-80gb')}"
    return src


def leave_one_source_out(engine_rows, ctx, models, values, engine_name=None):
    """Per fitted overhead with rows from two or more sources (the `source` column): refit it on the
    other sources' rows (the other overheads at `values`) and report the mean |error| on the held-out
    source's rows, then over every held-out row. The out-of-sample error of the fit."""
    out = []
    for field, part, grid, which in fit_parts(engine_rows, models, engine_name):
        sources = sorted({source_group(r) for r in part})
        if not part:
            continue
        if len(sources) < 2:
            out.append(f"  LOSO {field}: one source ({len(part)} rows), nothing to hold out")
            continue
        held = []
        for src in sources:
            rest = [r for r in part if source_group(r) != src]
            test = [r for r in part if source_group(r) == src]
            _, best = grid_fit(rest, ctx, values, field, grid, which)
            errs = errors(test, predict(test, ctx, None, {**values, field: float(best)}))[which]
            held += errs
            out.append(
                f"  LOSO {field}: hold out {src[:60] + ('...' + src[-40:] if len(src) > 100 else '')!r} ({len(errs)} rows): fit {best:g} on the rest, "
                f"held-out mean |error| {mean_abs(errs):.2f} %"
            )
        out.append(f"  LOSO {field}: all held-out rows mean |error| {mean_abs(held):.2f} % ({len(held)} rows)")
    return out


def rows_by_engine(files=None, ctx=None):
    """Serving rows of the case files (default: the shipped parallmelism/cases/inference_*.csv) by
    engine name (a blank engine: the default engine's, as validate reads it)."""
    files = files or [f for f in shipped_case_files() if "inference" in f.name]
    default = (ctx or _context([], []))[3](None).name
    by_engine = {}
    for row in load_rows(files):
        by_engine.setdefault(str(get(row, "engine", default)).lower(), []).append(row)
    return by_engine


def main(argv):
    ctx = _context([], [])
    by_engine = rows_by_engine([Path(a) for a in argv], ctx)
    models = ctx[0]
    fitted = {}
    for engine_name, engine_rows in sorted(by_engine.items()):
        engine = ctx[3](engine_name)
        values = {f: getattr(engine, f) for f in FIELDS}
        for field, part, grid, which in fit_parts(engine_rows, models, engine_name):
            if not part:
                print(f"{engine_name}: {field} = {values[field]:g} (YAML; no rows of that kind)")
                continue
            err, best = grid_fit(part, ctx, values, field, grid, which)
            values[field] = float(best)
            print(
                f"{engine_name}: {field} = {best:g}  (mean |error| {err:.2f} % over {len(part)} rows; "
                f"YAML now {getattr(engine, field):g})"
            )
        fitted[engine_name] = values
        itl, ttft, load = errors(engine_rows, predict(engine_rows, ctx, None, values))
        fams = sorted({f for f, _ in itl + ttft + load})
        print(
            f"  {'family':<36} {'ITL n':>5} {'ITL |err|%':>10} {'TTFT n':>6} {'TTFT |err|%':>11} "
            f"{'TTFT@load n':>11} {'|err|% vs reported':>18}"
        )
        for fam in fams:
            parts = [[e for f, e in x if f == fam] for x in (itl, ttft, load)]
            cells = [f"{len(p):>5} {np.mean(np.abs(p)) if p else float('nan'):>10.2f}" for p in parts]
            print(f"  {fam:<36} {cells[0]} {cells[1]:>18} {cells[2]:>30}")
        print(
            f"  all: ITL {mean_abs(itl):.2f} % ({len(itl)}), TTFT {mean_abs(ttft):.2f} % ({len(ttft)}), "
            f"TTFT under load vs reported {mean_abs(load):.2f} % ({len(load)})"
        )
        for line in leave_one_source_out(engine_rows, ctx, models, values, engine_name):
            print(line)
    h100 = [
        r
        for r in by_engine.get("nim", [])
        if model_of(r, models).moe is None and get(r, "accelerator", "h100-sxm-80gb") == "h100-sxm-80gb"
    ]
    if h100:
        a = predict(h100, ctx, "h100-sxm-80gb", fitted["nim"])
        b = predict(h100, ctx, "h200-sxm-141gb", fitted["nim"])
        ratio = np.array([y[0]["itl_ms"] / x[0]["itl_ms"] for x, y in zip(a, b)])
        conc = np.array([float(get(r, "concurrency", 1)) for r in h100])
        print(
            f"H200 / H100 ITL on the H100 dense rows (model, fitted values): concurrency 1 mean "
            f"{ratio[conc == 1].mean():.3f}, all rows mean {ratio.mean():.3f} (min {ratio.min():.3f}, "
            f"max {ratio.max():.3f}); HBM bandwidth ratio {3350 / 4800:.3f}"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
