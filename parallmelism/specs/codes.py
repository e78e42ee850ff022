"""Integer codes of the string-valued columns: the engine keeps codes in numpy arrays, reports
show the labels. One IntEnum per column; its members' order is the code and `label` the string
users type and read (the same spellings as the config)."""

from __future__ import annotations

from enum import IntEnum


class Code(IntEnum):
    """A column code; its label is the member name in lower case unless a subclass says otherwise."""

    @property
    def label(self) -> str:
        return self.name.lower()


class DPSharding(Code):
    """Data-parallel sharding (ZeRO stages 0-3 / FSDP); labels are the upper-case config names."""

    NO_OP = 0
    OPTIMIZER_STATES = 1
    OPTIMIZER_STATES_AND_GRADS = 2
    FULLY_SHARD = 3

    @property
    def label(self) -> str:
        return self.name


class Recompute(Code):
    """Activation recomputation (Korthikanti et al. 2022): none, selective (attention core), full."""

    NONE = 0
    SELECTIVE = 1
    FULL = 2


class MemStage(Code):
    """The pipeline stage whose memory a row reports (the most loaded one)."""

    FIRST = 0
    SECOND = 1
    LAST = 2


class Bound(Code):
    """What dominates a training step."""

    COMPUTE = 0
    MEMORY = 1
    COMMUNICATION = 2
    BUBBLE = 3


def labels(codes: type[Code]) -> list[str]:
    """The labels of an enum in code order (index = code)."""
    return [member.label for member in codes]


def code_of(codes: type[Code], label: str) -> int:
    """The code of a label, e.g. code_of(Recompute, "full") == 2."""
    return labels(codes).index(label)
