"""GridSpec: which layouts to enumerate. A key left unset (null) means every valid value."""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, field_validator

from .codes import DPSharding as _DPSharding
from .codes import Recompute as _Recompute
from .codes import labels as _labels

DP_SHARDING = tuple(_labels(_DPSharding))  # ("NO_OP", "OPTIMIZER_STATES", ...), in code order
RECOMPUTE = tuple(_labels(_Recompute))  # ("none", "selective", "full")

DpSharding = Literal["NO_OP", "OPTIMIZER_STATES", "OPTIMIZER_STATES_AND_GRADS", "FULLY_SHARD"]
Recompute = Literal["none", "selective", "full"]


# The most GPUs one layout may have: 2**20, several times any cluster built. The grid crosses every
# divisor triple of a count (tp x pp x cp): 720,720 GPUs (240 divisors) took 0.6 GB of memory for
# llama3.1-8b's grid, 14,414,400 (448) 5.2 GB, and a 16-digit count (41,472 divisors) was a numpy
# MemoryError traceback asking for 519 TiB.
MAX_GPUS = 2**20


def check_gpu_counts(value):
    """`value` (a GPU count or a list of them, None passes) when every count is at most MAX_GPUS."""
    for n in _as_list(value) or ():
        if isinstance(n, int) and n > MAX_GPUS:
            raise ValueError(
                f"{n:,} GPUs is more than the {MAX_GPUS:,} (2**20) a layout may have, several times any cluster built"
            )
    return value


def _as_list(value):
    if value is None or isinstance(value, (list, tuple)):
        return value
    return [value]


class GridSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, defer_build=True)

    ngpus: list[PositiveInt] = Field(min_length=1)
    tp: Optional[list[PositiveInt]] = None
    pp: Optional[list[PositiveInt]] = None
    cp: Optional[list[PositiveInt]] = None
    ep: Optional[list[PositiveInt]] = None
    micro_batch: Optional[list[PositiveInt]] = None
    vpp: Optional[list[PositiveInt]] = None
    dp_sharding: Optional[list[DpSharding]] = None
    recompute: Optional[list[Recompute]] = None
    sequence_parallel: Optional[list[bool]] = None
    max_micro_batch: Optional[PositiveInt] = Field(None, description="cap when micro_batch is unset")
    uneven_pipeline: bool = Field(
        True,
        description="allow pp that does not divide the layers: first/last stages take fewer layers (Megatron, Llama 3)",
    )
    cross_node_tp: bool = Field(
        False,
        description="keep layouts whose TP group spans scale-up domains (whole domains; its collectives "
        "priced on the scale-out link, a warning printed); false: tp > domain_size is dropped",
    )
    # Inference only (workload=inference, grid/inference.py): prompt sharding and batch axes.
    sp: Optional[list[PositiveInt]] = Field(None, description="inference: ranks sharing one prompt (prefill)")
    batch: Optional[list[PositiveInt]] = Field(
        None, description="inference: concurrent sequences per replica; null = workload.batch"
    )

    _coerce = field_validator(
        "ngpus",
        "tp",
        "pp",
        "cp",
        "ep",
        "micro_batch",
        "vpp",
        "dp_sharding",
        "recompute",
        "sequence_parallel",
        "sp",
        "batch",
        mode="before",
    )(_as_list)

    @field_validator(
        "ngpus",
        "tp",
        "pp",
        "cp",
        "ep",
        "micro_batch",
        "vpp",
        "dp_sharding",
        "recompute",
        "sequence_parallel",
        "sp",
        "batch",
    )
    @classmethod
    def _non_empty(cls, value):
        if value is not None and len(value) == 0:
            raise ValueError("an empty list selects nothing; use null for every value")
        return value

    _gpu_counts = field_validator("ngpus")(check_gpu_counts)
