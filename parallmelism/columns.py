"""Cost columns of layout rows and their table form: every cost term applied to a chunk of rows
(training or serving), a DataFrame or a record in schema order. The search driver (search/)
calls these on its chunks; `engine.evaluate` runs a whole run through that driver."""

from __future__ import annotations

import numpy as np

from .cost.memory import training_memory
from .cost.params import total_params
from .cost.pipeline import bubble_rate
from .config.kernel_tables import kernel_model
from .cost.steptime import training_time
from .cost.layout import TrainingLayout
from .schema import TRAINING_COLUMNS
from .specs import Bound, DPSharding, InferenceWorkload, MemStage, Recompute, RunConfig, TrainWorkload, labels


def evaluate_training_columns(
    cols: dict[str, np.ndarray], run: RunConfig, memory: dict[str, np.ndarray] | None = None, ops_table=None
) -> dict[str, np.ndarray]:
    """All cost columns for layout rows (codes, not strings). `memory`: the rows'
    `training_memory` columns when the caller already has them (row-wise, so a subset of an
    earlier call's rows is the same numbers); ops_table: the op sums of their shapes, when the
    caller has them (cost/steptime.py ShapeOpSums)."""
    # the accelerator's overheads and attention kernel, the workload's compile and unfused ops: the stack's
    model, hw, wl = run.model, run.accelerator(), run.training_workload()
    assert isinstance(wl, TrainWorkload), "training columns need a training workload"
    out = dict(cols)
    n = len(cols["tp"])
    layout = TrainingLayout.of(cols)  # one for both models: they share its distinct-key codes (cost/keys.py)
    out["seq_len"] = np.full(n, wl.seq_len)
    out["global_batch"] = np.full(n, wl.global_batch)
    out["params_total"] = np.full(n, total_params(model), dtype=np.int64)
    out["params_active"] = np.full(n, total_params(model, active=True), dtype=np.int64)
    out.update(training_memory(layout, model, hw, wl) if memory is None else memory)
    out["pp_bubble_rate"] = bubble_rate(cols["pp"], cols["vpp"], cols["num_micro_batches"], wl.schedule)
    out.update(training_time(layout, model, hw, wl, kernel_model(hw), ops_table))
    return out


def coded_categories() -> dict[str, list[str]]:
    """Columns the cost model keeps as integer codes, with the name of each code."""
    return {
        "dp_sharding": labels(DPSharding),
        "recompute": labels(Recompute),
        "mem_stage": labels(MemStage),
        "bound": labels(Bound),
    }


def _column_order(run: RunConfig, names, column_order=None) -> list[str]:
    """Schema order (training or serving), then any column the schema does not list."""
    if column_order is None:
        from .schema import INFERENCE_COLUMNS

        column_order = TRAINING_COLUMNS if run.workload.kind == "train" else INFERENCE_COLUMNS
    names = ["model", "hardware", "workload", *names]
    present = set(names)
    order = [c for c in column_order if c in present]
    return order + [c for c in names if c not in set(order)]


def to_frame(cols: dict[str, np.ndarray], run: RunConfig, column_order=None):
    """A pandas DataFrame in schema order with readable strings for coded columns."""
    import pandas as pd

    n = len(next(iter(cols.values())))
    zeros = np.zeros(n, dtype=np.int8)  # one category, built from codes (no n-string list)
    data = {
        "model": pd.Categorical.from_codes(zeros, categories=[run.model.name]),
        "hardware": pd.Categorical.from_codes(zeros, categories=[run.hardware.name]),
        "workload": pd.Categorical.from_codes(zeros, categories=[run.workload.kind]),
    }
    coded = coded_categories()
    for k, v in cols.items():
        data[k] = pd.Categorical.from_codes(v, categories=coded[k]) if k in coded else v
    return pd.DataFrame({c: data[c] for c in _column_order(run, cols, column_order)})


def record_of(cols: dict[str, np.ndarray], i: int, run: RunConfig) -> dict:
    """Row i as {column: Python value} in schema order, coded columns as names (no pandas):
    the same record as `to_frame(cols, run).iloc[i].to_dict()`."""
    coded = coded_categories()
    row: dict = {"model": run.model.name, "hardware": run.hardware.name, "workload": run.workload.kind}
    for k, v in cols.items():
        value = v[i]
        row[k] = coded[k][int(value)] if k in coded else (value.item() if hasattr(value, "item") else value)
    return {c: row[c] for c in _column_order(run, cols)}


def evaluate_inference_columns(cols: dict[str, np.ndarray], run: RunConfig) -> dict[str, np.ndarray]:
    """Serving cost columns (cost/inference.py) for inference layout rows (grid/inference.py)."""
    from .config.drafts import draft_model_of
    from .config.kernel_tables import serving_kernel_model
    from .cost.inference import inference_columns

    wl = run.workload
    assert isinstance(wl, InferenceWorkload), "serving columns need an inference workload"
    draft = draft_model_of(run.model, wl)
    hw = run.accelerator()
    engine = run.serving_engine()
    return inference_columns(cols, run.model, hw, wl, serving_kernel_model(hw, engine), engine, draft)
