"""RunConfig: the whole composed configuration of one run, validated once."""

from __future__ import annotations

from typing import Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, model_validator

from .accelerator import AcceleratorSpec
from .grid import GridSpec
from .model import ModelSpec
from .plan import PlanSpec
from .workload import InferenceWorkload, TrainWorkload


class OutputSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    path: Optional[str] = Field(None, description="file to write; default results/<model>_<hardware>_<workload>.<fmt>")
    format: Literal["csv", "parquet"] = "csv"
    dir: str = "results"
    top: PositiveInt = Field(10, description="rows in the terminal table")
    write: bool = True


class RunConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    model: ModelSpec
    hardware: AcceleratorSpec
    workload: Union[TrainWorkload, InferenceWorkload] = Field(discriminator="kind")
    grid: GridSpec
    output: OutputSpec = OutputSpec()
    plan: PlanSpec = PlanSpec()

    @model_validator(mode="after")
    def _overlap_needs_its_axis(self):
        if getattr(self.workload, "overlap_ep_comm", False) and not self.model.is_moe:
            raise ValueError(
                f"overlap_ep_comm=true overlaps expert-parallel all-to-alls, but model {self.model.name} has no experts"
            )
        return self
