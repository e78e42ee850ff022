"""User-facing errors: one sentence, exit code 2. Internal bugs raise anything else."""


class UserError(Exception):
    """A problem with what the user asked for. The message is one sentence naming the key and value."""

    exit_code = 2


def format_validation_error(exc, prefix: str = "") -> str:
    """Turn a pydantic ValidationError into one line: `key: value is wrong because ...`."""
    parts = []
    for err in exc.errors():
        parts_of_loc = [str(p) for p in err.get("loc", ()) if p != "__root__"]
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
