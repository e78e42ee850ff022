"""PlanSpec: the question a capacity plan answers (the `plan:` section of the config).

`parallmelism plan train` and `plan serve` read it; `sweep` ignores it. Shorthands on the plan
command line (`days=30`, `qps=50`) are rewritten to `plan.days=30`, ... (config/plan_shorthands.py).
"""

from __future__ import annotations

from typing import Optional

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt, ValidationInfo, field_validator

from .grid import check_gpu_counts


class PlanSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, defer_build=True)

    # training: at most one of days / gpus / budget_usd picks the plan (none: cheapest)
    days: Optional[PositiveFloat] = Field(None, description="finish within this many days (fewest GPUs that do)")
    gpus: Optional[PositiveInt] = Field(None, description="use exactly this many GPUs")
    budget_usd: Optional[PositiveFloat] = Field(None, description="fastest plan whose cost stays within this")
    ngpus: Optional[list[PositiveInt]] = Field(
        None, description="GPU counts to consider (default: default_ngpus, or grid.ngpus if set)"
    )
    default_ngpus: list[PositiveInt] = Field(
        [2**i for i in range(3, 16)],
        description="GPU counts a training plan considers when none are given (8 .. 32768)",
    )
    utilization: float = Field(
        0.9,
        gt=0,
        le=1,
        description=(
            "goodput: fraction of wall-clock spent in productive steps (failures, restarts, checkpoints and "
            "evaluation take the rest; Llama 3 405B reported >90% effective training time)"
        ),
    )
    # a physical range: facility power is at least the IT power; the Uptime Institute's annual surveys put the
    # industry average near 1.5-1.6 and the oldest facilities near 2.5, so 3 bounds any real data centre
    pue: float = Field(
        1.2, ge=1, le=3, description="data-centre power usage effectiveness (facility / IT power; 1 to 3)"
    )
    # serving
    # a physical range: a billion requests/s is ~10^4 times the busiest web services; beyond it the
    # replica count ceil(qps / (replica_rps·load)) overflows a 64-bit count
    qps: Optional[PositiveFloat] = Field(None, le=1e9, description="requests per second to serve (at most 1e9)")
    tokens_per_s: Optional[PositiveFloat] = Field(
        None,
        le=1e12,
        description="output tokens per second to serve (instead of qps: qps = tokens_per_s / output_len; at most 1e12)",
    )
    prefill_gpus: Optional[PositiveInt] = Field(
        None, description="disaggregated serving: GPUs of the prefill pool (with decode_gpus: a fixed P:D split)"
    )
    decode_gpus: Optional[PositiveInt] = Field(None, description="disaggregated serving: GPUs of the decode pool")
    ttft_ms: Optional[PositiveFloat] = Field(None, description="time-to-first-token limit, ms")
    tpot_ms: Optional[PositiveFloat] = Field(None, description="time-per-output-token limit, ms")
    serve_batch: list[PositiveInt] = Field(
        [1, 2, 4, 8, 16, 32, 64, 128, 256],
        description="sequences in flight per replica that a serving plan considers when grid.batch is not given",
    )
    load: float = Field(0.8, gt=0, le=1, description="target fraction of a replica's capacity in use (burst headroom)")
    load_percentiles: bool = Field(
        False,
        description="plan serve: simulate the colocated plan's replica at its share of the load (Poisson, "
        "cost/serving_load.py, workload.load_requests and load_seed) and print p50/p90/p99 TTFT and ITL and "
        "the goodput within ttft_ms/tpot_ms; the plan CSV gains those columns (ms, requests/s)",
    )

    @field_validator("ngpus", "default_ngpus", "serve_batch")
    @classmethod
    def _non_empty(cls, value, info: ValidationInfo):
        # plan.serve_batch=[] was a ZeroDivisionError traceback in the grid; plan.default_ngpus=[] "no
        # layout to evaluate"; plan.ngpus=[] silently meant the default counts
        if value is not None and len(value) == 0:
            default = " (null: plan.default_ngpus, or grid.ngpus if set)" if info.field_name == "ngpus" else ""
            raise ValueError(f"an empty list selects nothing; give at least one value{default}")
        return value

    _gpu_counts = field_validator("gpus", "ngpus", "default_ngpus")(check_gpu_counts)
