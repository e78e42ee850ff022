"""RunConfig: the whole composed configuration of one run, validated once."""

from __future__ import annotations

from typing import Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, PositiveInt

from .accelerator import AcceleratorSpec
from .grid import GridSpec
from .model import ModelSpec
from .plan import PlanSpec
from .workload import InferenceWorkload, TrainWorkload


class OutputSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    path: Optional[str] = Field(None, description="file to write; default results/<model>_<hardware>_<workload>.<fmt>")
    format: Literal["csv", "parquet"] = "csv"
    dir: str = "results"
    top: PositiveInt = Field(10, description="rows in the terminal table")
    write: bool = True


class RunConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    model: ModelSpec
    hardware: AcceleratorSpec
    workload: Union[TrainWorkload, InferenceWorkload] = Field(discriminator="kind")
    grid: GridSpec
    output: OutputSpec = OutputSpec()
    plan: PlanSpec = PlanSpec()
