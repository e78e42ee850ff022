"""Integer codes of the string-valued columns: the engine keeps codes in numpy arrays, reports
show the labels. One IntEnum per column; its members' order is the code and `label` the string
users type and read (the same spellings as the config)."""

from __future__ import annotations

from enum import IntEnum


class DPSharding(IntEnum):
    """Data-parallel sharding (ZeRO stages 0-3 / FSDP)."""

    NO_OP = 0
    OPTIMIZER_STATES = 1
    OPTIMIZER_STATES_AND_GRADS = 2
    FULLY_SHARD = 3

    @property
    def label(self) -> str:
        return self.name


class Recompute(IntEnum):
    """Activation recomputation (Korthikanti et al. 2022): none, selective (attention core), full."""

    NONE = 0
    SELECTIVE = 1
    FULL = 2

    @property
    def label(self) -> str:
        return self.name.lower()


class MemStage(IntEnum):
    """The pipeline stage whose memory a row reports (the most loaded one)."""

    FIRST = 0
    SECOND = 1
    LAST = 2

    @property
    def label(self) -> str:
        return self.name.lower()


class Bound(IntEnum):
    """What dominates a training step."""

    COMPUTE = 0
    MEMORY = 1
    COMMUNICATION = 2
    BUBBLE = 3

    @property
    def label(self) -> str:
        return self.name.lower()


def labels(codes: type[IntEnum]) -> list[str]:
    """The labels of an enum in code order (index = code)."""
    return [member.label for member in codes]  # type: ignore[attr-defined]


def code_of(codes: type[IntEnum], label: str) -> int:
    """The code of a label, e.g. code_of(Recompute, "full") == 2."""
    return labels(codes).index(label)
