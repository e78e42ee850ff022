"""Layout enumeration: the one place that knows which parallel layouts are valid."""

from .layouts import (
    DROP_REASONS,
    add_drop_counts,
    RECOMPUTE_CODE,
    SHARDING_CODE,
    LayoutGrid,
    divisors,
    enumerate_training_layouts,
    stage_layer_split,
)

__all__ = [
    "DROP_REASONS",
    "add_drop_counts",
    "RECOMPUTE_CODE",
    "SHARDING_CODE",
    "LayoutGrid",
    "divisors",
    "enumerate_training_layouts",
    "stage_layer_split",
]
