"""`parallmelism export` / `import-run`: a chosen layout as the launch configuration of the
framework or engine that runs it, and such a configuration read back into pinned overrides.

One module per target (megatron, nemo, torchtitan, deepspeed, maxtext: training; vllm, sglang, trtllm:
serving; dynamo: a disaggregated plan's two pools), each
holding its field table (the framework's own names at a pinned version, cited) next to `render`
(layout -> text) and `parse` (text -> pinned overrides). `layout.Planned` is what every target
reads: the layout's axes, the workload fields it assumes and the predicted columns; `serving` holds
what the two engines' modules share. Later
`stack=` / `engine=` config groups can pick a target by these names."""

from __future__ import annotations

import importlib
from types import ModuleType

TRAINING_TARGETS = ("megatron", "nemo", "torchtitan", "deepspeed", "maxtext")
SERVING_TARGETS = ("vllm", "sglang", "trtllm")
DISAGGREGATED_TARGETS = ("dynamo",)  # a `plan serve` row's prefill and decode pools
TARGETS = TRAINING_TARGETS + SERVING_TARGETS + DISAGGREGATED_TARGETS


def target_module(name: str) -> ModuleType:
    """The module of target `name` (one of TARGETS)."""
    from ..errors import UserError

    if name not in TARGETS:
        raise UserError(f"--to {name!r} is not a target; choose one of {', '.join(TARGETS)}")
    return importlib.import_module(f"{__name__}.{name}")
