"""The case kinds `validate` knows, one explicit registry (no kind registers itself on import). A
case file is the first kind, in this order, whose columns it has."""

from __future__ import annotations

from . import inference_cases, loaded_cases, memory_cases, steptime
from .cases import CaseKind

CASE_KINDS: dict[str, CaseKind] = {
    "memory": memory_cases.KIND,
    "step_time": steptime.KIND,
    "loaded": loaded_cases.KIND,  # before inference: its files also have inference's columns
    "inference": inference_cases.KIND,
}
