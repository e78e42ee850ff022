"""Evaluate a run: enumerate layouts, apply every cost term, return one tidy table."""

from __future__ import annotations

import numpy as np

from .cost.memory import MEM_STAGES, training_memory
from .cost.params import total_params
from .cost.pipeline import bubble_rate
from .cost.steptime import BOUND_NAMES, training_time
from .grid import RECOMPUTE_CODE, SHARDING_CODE, enumerate_training_layouts
from .schema import TRAINING_COLUMNS
from .specs import RunConfig

SHARDING_NAMES = np.array(sorted(SHARDING_CODE, key=SHARDING_CODE.get))
RECOMPUTE_NAMES = np.array(sorted(RECOMPUTE_CODE, key=RECOMPUTE_CODE.get))


def evaluate_training_columns(
    cols: dict[str, np.ndarray], run: RunConfig, memory: dict[str, np.ndarray] | None = None
) -> dict[str, np.ndarray]:
    """All cost columns for layout rows (codes, not strings). `memory`: the rows'
    `training_memory` columns when the caller already has them (row-wise, so a subset of an
    earlier call's rows is the same numbers)."""
    model, hw, wl = run.model, run.hardware, run.workload
    out = dict(cols)
    n = len(cols["tp"])
    out["seq_len"] = np.full(n, wl.seq_len)
    out["global_batch"] = np.full(n, wl.global_batch)
    out["params_total"] = np.full(n, total_params(model), dtype=np.int64)
    out["params_active"] = np.full(n, total_params(model, active=True), dtype=np.int64)
    out.update(training_memory(cols, model, hw, wl) if memory is None else memory)
    out["pp_bubble_rate"] = bubble_rate(cols["pp"], cols["vpp"], cols["num_micro_batches"], wl.schedule)
    out.update(training_time(cols, model, hw, wl))
    return out


def to_frame(cols: dict[str, np.ndarray], run: RunConfig, column_order=None):
    """A pandas DataFrame in schema order with readable strings for coded columns."""
    import pandas as pd

    n = len(cols["tp"])
    zeros = np.zeros(n, dtype=np.int8)  # one category, built from codes (no n-string list)
    data = {
        "model": pd.Categorical.from_codes(zeros, categories=[run.model.name]),
        "hardware": pd.Categorical.from_codes(zeros, categories=[run.hardware.name]),
        "workload": pd.Categorical.from_codes(zeros, categories=[run.workload.kind]),
    }
    for k, v in cols.items():
        if k == "dp_sharding":
            v = pd.Categorical.from_codes(v, categories=list(SHARDING_NAMES))
        elif k == "recompute":
            v = pd.Categorical.from_codes(v, categories=list(RECOMPUTE_NAMES))
        elif k == "mem_stage":
            v = pd.Categorical.from_codes(v, categories=MEM_STAGES)
        elif k == "bound":
            v = pd.Categorical.from_codes(v, categories=list(BOUND_NAMES))
        data[k] = v
    order = [c for c in (column_order or TRAINING_COLUMNS) if c in data]
    order += [c for c in data if c not in order]
    return pd.DataFrame({c: data[c] for c in order})


def evaluate(run: RunConfig):
    """Evaluate every valid layout of a run. Returns (DataFrame, LayoutGrid)."""
    if run.workload.kind == "inference":
        return evaluate_inference(run)
    grid = enumerate_training_layouts(run.model, run.hardware, run.workload, run.grid)
    cols = evaluate_training_columns(grid.columns, run)
    return to_frame(cols, run), grid


def evaluate_inference(run: RunConfig):
    """Serving: enumerate inference layouts (grid/inference.py) and add the serving cost columns
    (cost/inference.py). Returns (DataFrame in INFERENCE_COLUMNS order, LayoutGrid)."""
    from .cost.inference import draft_model_of, inference_columns
    from .grid.inference import enumerate_inference_layouts
    from .schema import INFERENCE_COLUMNS

    grid = enumerate_inference_layouts(run.model, run.hardware, run.workload, run.grid)
    draft = draft_model_of(run.model, run.workload)
    cols = inference_columns(grid.columns, run.model, run.hardware, run.workload, draft)
    return to_frame(cols, run, column_order=INFERENCE_COLUMNS), grid
