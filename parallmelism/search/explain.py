"""Why a layout loses to the winner: the step-time component that grew, or memory.

The time model's step time is additive: time_step_s = time_compute_s + time_bubble_s +
Σ_dim time_comm_<dim>_exposed_s (tp, cp, ep, dp, pp). Link times (time_comm_<dim>_s) overlap with
compute and are not additive, and time_comm_exposed_s is the sum of the per-dimension terms, so
both are left out of the breakdown.
"""

from __future__ import annotations


def additive_time_parts(columns) -> list[str]:
    """The time_*_s columns that add up to time_step_s (see module docstring)."""
    cols = [c for c in columns if c.startswith("time_") and c.endswith("_s") and c != "time_step_s"]
    exposed = {
        c for c in cols if c.startswith("time_comm_") and c.endswith("_exposed_s") and c != "time_comm_exposed_s"
    }
    out = []
    for c in cols:
        if c == "time_comm_exposed_s" and exposed:
            continue
        if c.startswith("time_comm_") and not c.endswith("_exposed_s") and c[:-2] + "_exposed_s" in exposed:
            continue
        out.append(c)
    return out


def kind_of(part: str) -> str:
    """compute | bubble | comm (or the bare name) for a time column."""
    name = part[len("time_") : -len("_s")]
    if "bubble" in name:
        return "bubble"
    if name.startswith("comm"):
        return "comm"
    if "compute" in name or "recompute" in name:
        return "compute"
    return name


def why_slower(winner, row, parts: list[str]) -> tuple[str, str, float]:
    """(loses_on, sentence, seconds slower) for a row compared with the winner of its group."""
    if not bool(row["fits"]):
        if "mem_host_offload_gib" in row and row["mem_headroom_gib"] >= 0:  # HBM holds it, the host does not
            host = f"does not fit: its offloaded activations need {row['mem_host_offload_gib']:.1f} GiB of host memory"
            return ("memory", host, 0.0)
        return ("memory", f"does not fit: needs {row['mem_total_gib']:.1f} GiB of {row['hbm_usable_gib']:.1f}", 0.0)
    delta = float(row["time_step_s"] - winner["time_step_s"])
    if abs(delta) <= 1e-9 * max(1.0, float(winner["time_step_s"])):
        return ("tie", "tie: same step time as the winner", 0.0)
    if parts:
        diffs = {c: float(row[c] - winner[c]) for c in parts}
        worst = max(diffs, key=lambda c: diffs[c])
        if diffs[worst] > 0:
            return (
                kind_of(worst),
                f"+{delta * 1e3:.1f} ms per step, mostly {worst} (+{diffs[worst] * 1e3:.1f} ms)",
                delta,
            )
    return ("time", f"+{delta * 1e3:.1f} ms per step", delta)
