"""Command-line targets (megatron, vllm, sglang): a bash script whose arguments are an array, one
flag a line with its comment, and the reader that takes flags back out of such a script or of any
command line a user runs today."""

from __future__ import annotations

import shlex

from ..errors import UserError


def script(header: list[str], source: str, var: str, flags: list[tuple[str, object, str]], launch: list[str]) -> str:
    """The script: header comments, the cited source, `var=(` flags `)`, then the launch lines.
    flags: (flag, value, comment); value True is a bare switch, a list is several words."""
    lines = ["#!/usr/bin/env bash", *(f"# {h}" for h in header), f"# field names: {source}", f"{var}=("]
    for flag, value, comment in flags:
        if value is True:
            words = flag
        elif isinstance(value, (list, tuple)):
            words = " ".join([flag, *map(str, value)])
        else:
            words = f"{flag} {shlex.quote(str(value))}"
        lines.append(f"  {words}" + (f"  # {comment}" if comment else ""))
    lines.append(")")
    return "\n".join(lines + launch) + "\n"


def flags_of(text: str, known: dict[str, str]) -> dict[str, object]:
    """{flag: value} for the flags in `known` (flag -> "switch" | "value") found in text: a script
    written by `script` or a plain command line. A switch is True; --no-X of a switch X is False;
    --flag=value and --flag value both read. Unknown flags are left out."""
    try:
        words = shlex.split(text, comments=True)
    except ValueError as exc:
        raise UserError(f"the file is not a command line a shell can read ({exc})") from None
    out: dict[str, object] = {}
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if not word.startswith("-"):
            continue
        flag, _, inline = word.partition("=")
        if flag in known and known[flag] == "switch":
            out[flag] = True
        elif flag.startswith("--no-") and "--" + flag[5:] in known:
            out["--" + flag[5:]] = False
        elif flag in known:
            if inline:
                out[flag] = inline
            elif i < len(words):
                out[flag] = words[i]
                i += 1
    return out


def as_int(flags: dict, flag: str, default: int = 1) -> int:
    """An integer flag, one sentence when it is not an integer."""
    if flag not in flags:
        return default
    try:
        return int(str(flags[flag]))
    except ValueError:
        raise UserError(f"{flag} {flags[flag]!r} is not an integer") from None
