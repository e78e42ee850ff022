"""Partitions: sub-grids whose union, in order, is a run's grid.

The driver walks a run partition by partition so enumeration stays bounded and so partitions can
be handed to worker processes. Training partitions are one GPU count x one micro-batch size;
serving partitions are one GPU count. A row's number is (partition index << 32) + its position in
the partition, so rows are numbered before earlier partitions finish.
"""

from __future__ import annotations

from ..grid.layouts import divisors
from ..specs import GridSpec


def run_partitions(run) -> list[GridSpec]:
    """The run's grid cut into partitions, in enumeration order."""
    grid = run.grid
    if run.workload.kind != "train":
        return [grid.model_copy(update={"ngpus": [int(n)]}) for n in grid.ngpus]
    if grid.micro_batch is not None:
        mbs = [list(grid.micro_batch)]
    else:
        mb = divisors(run.workload.global_batch)
        if grid.max_micro_batch:
            mb = mb[mb <= grid.max_micro_batch]
        mbs = [[int(v)] for v in mb]
    return [grid.model_copy(update={"ngpus": [int(n)], "micro_batch": m}) for n in grid.ngpus for m in mbs]
