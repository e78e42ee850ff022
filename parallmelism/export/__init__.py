"""`parallmelism export` / `import-run`: a chosen layout as the launch configuration of the
framework or engine that runs it, and such a configuration read back into pinned overrides.

One module per target (megatron, nemo, torchtitan, deepspeed, maxtext: training; vllm, sglang, trtllm:
serving; dynamo: a disaggregated plan's two pools), each
holding its field table (the framework's own names at a pinned version, cited) next to `render`
(layout -> text) and `parse` (text -> pinned overrides). `layout.Planned` is what every target
reads: the layout's axes, the workload fields it assumes and the predicted columns; `serving` holds
what the engines' modules share. Without --to, `default_target` picks the target of the run's
`stack=` (training) or `engine=` (serving)."""

from __future__ import annotations

import importlib
from types import ModuleType

TRAINING_TARGETS = ("megatron", "nemo", "torchtitan", "deepspeed", "maxtext")
SERVING_TARGETS = ("vllm", "sglang", "trtllm")
DISAGGREGATED_TARGETS = ("dynamo",)  # a `plan serve` row's prefill and decode pools
TARGETS = TRAINING_TARGETS + SERVING_TARGETS + DISAGGREGATED_TARGETS


# `export` without --to: the target of the stack (conf/stack/, training) or engine (conf/engine/,
# serving) the layout was evaluated under. megatron-te is Megatron-Core + Transformer Engine, whose
# own launcher is Megatron-LM's (NeMo / Megatron-Bridge recipes: --to nemo).
STACK_TARGETS = {"megatron-te": "megatron"}
ENGINE_TARGETS = {"vllm": "vllm", "sglang": "sglang", "trtllm": "trtllm"}


def default_target(planned) -> str:
    """The target of `planned`'s stack or engine (`Planned.runs_on`), or one sentence asking for --to."""
    from ..errors import UserError

    table, group = (STACK_TARGETS, "stack") if planned.kind == "train" else (ENGINE_TARGETS, "engine")
    if planned.runs_on not in table:
        raise UserError(
            f"{group} {planned.runs_on or '(none)'} has no export target of its own; name one with --to "
            f"({', '.join(TRAINING_TARGETS if planned.kind == 'train' else SERVING_TARGETS)})"
        )
    return table[planned.runs_on]


def target_module(name: str) -> ModuleType:
    """The module of target `name` (one of TARGETS)."""
    from ..errors import UserError

    if name not in TARGETS:
        raise UserError(f"--to {name!r} is not a target; choose one of {', '.join(TARGETS)}")
    return importlib.import_module(f"{__name__}.{name}")
