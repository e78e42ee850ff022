"""Typed, validated inputs: model, accelerator, workload, grid, and the run that holds them."""

from .accelerator import AcceleratorSpec, Efficiency, ScaleOut, ScaleUp
from .engine import EngineSpec
from .codes import Bound, Code, DPSharding, MemStage, Recompute, code_of, labels
from .grid import DP_SHARDING, RECOMPUTE, GridSpec
from .model import MLASpec, ModelSpec, MoESpec, moe_layers_in_range
from .run import OutputSpec, RunConfig
from .stack import Overheads, StackSpec
from .workload import BYTES_PER_ELEMENT, InferenceWorkload, TrainWorkload

__all__ = [
    "Bound",
    "Code",
    "DPSharding",
    "MemStage",
    "Recompute",
    "code_of",
    "labels",
    "AcceleratorSpec",
    "Efficiency",
    "ScaleOut",
    "ScaleUp",
    "EngineSpec",
    "DP_SHARDING",
    "RECOMPUTE",
    "GridSpec",
    "MLASpec",
    "ModelSpec",
    "MoESpec",
    "moe_layers_in_range",
    "OutputSpec",
    "RunConfig",
    "Overheads",
    "StackSpec",
    "BYTES_PER_ELEMENT",
    "InferenceWorkload",
    "TrainWorkload",
]
