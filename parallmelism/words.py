"""Counts in sentences: "1 GPU", "2 GPUs" (every message that prints a count beside its noun)."""

from __future__ import annotations


def plural(count: float, noun: str, many: str | None = None) -> str:
    """`noun` for a count of exactly one, else its plural: `many`, or `noun` + "s"."""
    return noun if count == 1 else many or f"{noun}s"


def counted(count: int, noun: str, many: str | None = None) -> str:
    """ "1 GPU", "1,024 GPUs": the count with thousands separators, then its noun (`plural`)."""
    return f"{count:,} {plural(count, noun, many)}"
