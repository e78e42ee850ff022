"""Reading a request trace for the load simulation (workload.length_trace): a CSV with one row per
request, columns input_len and output_len (tokens, positive integers) and optionally arrival_s (send
time in seconds, non-decreasing). Edge module: the simulation itself reads arrays only."""

from __future__ import annotations

import numpy as np

from ..errors import UserError, require_file


def read_length_trace(path: str):
    """The trace at `path` as cost.serving_load.Requests; one sentence for a bad file."""
    import pandas as pd

    from ..cost.serving_load import Requests

    p = require_file(path, "workload.length_trace")
    try:
        df = pd.read_csv(p)
    except (ValueError, OSError, UnicodeDecodeError) as exc:
        raise UserError(f"workload.length_trace {str(p)!r} is not a readable CSV ({exc})") from None
    missing = [c for c in ("input_len", "output_len") if c not in df.columns]
    if missing:
        raise UserError(f"workload.length_trace {str(p)!r} lacks the column(s) {', '.join(missing)}")
    if len(df) == 0:
        raise UserError(f"workload.length_trace {str(p)!r} has no requests")
    lengths = []
    for c in ("input_len", "output_len"):
        v = pd.to_numeric(df[c], errors="coerce").to_numpy(dtype=np.float64)
        if not (np.isfinite(v).all() and (v >= 1).all() and (v == np.round(v)).all()):
            raise UserError(f"workload.length_trace {str(p)!r}: column {c} must hold positive integers")
        lengths.append(v.astype(np.int64))
    arrival = None
    if "arrival_s" in df.columns:
        arrival = pd.to_numeric(df["arrival_s"], errors="coerce").to_numpy(dtype=np.float64)
        if not (np.isfinite(arrival).all() and (arrival >= 0).all() and (np.diff(arrival) >= 0).all()):
            raise UserError(f"workload.length_trace {str(p)!r}: column arrival_s must hold non-decreasing seconds >= 0")
    return Requests(lengths[0], lengths[1], arrival)


def workload_requests(wl):
    """The simulated requests: workload.length_trace's, or workload.load_requests drawn from
    workload.length_dist with workload.load_seed."""
    from ..cost.serving_load import drawn_requests

    if wl.length_trace is not None:
        return read_length_trace(wl.length_trace)
    return drawn_requests(wl, wl.load_requests, wl.load_seed)
