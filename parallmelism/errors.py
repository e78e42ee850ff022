"""User-facing errors: one sentence, exit code 2. Internal bugs raise anything else."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path


class UserError(Exception):
    """A problem with what the user asked for. The message is one sentence naming the key and value."""

    exit_code = 2


def require_file(path, what: str) -> Path:
    """`path` as a Path if it is a readable file, else one sentence naming `what` it should be
    (a folder or a missing path are told apart)."""
    from pathlib import Path

    p = Path(path)
    if p.is_dir():
        raise UserError(f"{what} {str(p)!r} is a folder; give a file")
    if not p.is_file():
        raise UserError(f"{what} {str(p)!r} does not exist" if not p.exists() else f"{what} {str(p)!r} is not a file")
    return p


def require_dir(path, what: str) -> Path:
    """`path` as a Path if it is a folder, else one sentence (a file where a folder belongs, or missing)."""
    from pathlib import Path

    p = Path(path)
    if not p.is_dir():
        raise UserError(
            f"{what} {str(p)!r} is a file; give a folder" if p.exists() else f"{what} {str(p)!r} does not exist"
        )
    return p


_UNION_MEMBERS = {"str", "int", "float", "bool"}  # how pydantic names a union's plain-type members
_MODEL_NAME = r"(?:[A-Z][a-z0-9]+)+"  # a union's model member (CamelCase; no key a user types is)
# ... or that member behind a model validator: "function-after[_check(), Overheads]"
_MODEL_MEMBER = rf"{_MODEL_NAME}|function-(?:after|before|wrap|plain)\[.*\]"


def format_validation_error(exc, prefix: str = "") -> str:
    """Turn a pydantic ValidationError into one line: `key: value is wrong because ...`."""
    import re

    errors = exc.errors()
    # A value of a union field (stack overheads: a fit or the name of another) that fits no member is
    # one error per member, its member's name in the key ("Overheads", "str"): keep the member that
    # says what is wrong inside the value, and drop the names
    locs = [tuple(map(str, e.get("loc", ()))) for e in errors]
    branch = {
        i
        for i, loc in enumerate(locs)
        if loc
        and loc[-1] in _UNION_MEMBERS
        and any(j != i and other[: len(loc) - 1] == loc[:-1] for j, other in enumerate(locs))
    }
    parts = []
    for i, err in enumerate(errors):
        if i in branch:
            continue
        parts_of_loc = [
            str(p) for p in err.get("loc", ()) if p != "__root__" and not re.fullmatch(_MODEL_MEMBER, str(p))
        ]
        # the workload union's tag (workload.train.seq_len) is not part of the name a user types
        parts_of_loc = [
            p
            for i, p in enumerate(parts_of_loc)
            if not (i and parts_of_loc[i - 1] == "workload" and p in ("train", "inference"))
        ]
        loc = ".".join(parts_of_loc)
        key = f"{prefix}.{loc}" if prefix and loc else (prefix or loc)
        msg = err.get("msg", "invalid value")
        msg = msg.removeprefix("Value error, ")
        if err.get("type") == "extra_forbidden":
            parts.append(f"{key}: unknown key")
        elif not key:  # a check across fields (model validator): the message names the keys itself
            parts.append(msg)
        elif "input" in err and not isinstance(err["input"], dict):
            parts.append(f"{key}={err['input']!r}: {msg}")
        else:
            parts.append(f"{key}: {msg}")
    return "; ".join(parts)
