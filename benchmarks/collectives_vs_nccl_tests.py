"""The collective model (parallmelism/cost/collectives.py) against measured nccl-tests, point by point.

Measured points, all kernel-level nccl-tests times (out-of-place), none end to end:
- tests/data/collectives_nccl_sizes.csv: aiconfigurator's all-reduce / all-gather / reduce-scatter, 2, 4, 8 ranks,
  256 KiB-32 MiB (H100, H200, B200 NCCL 2.29.2; A100 2.27.3);
- tests/data/collectives_nccl_large.csv: aiconfigurator's all-reduce, 2, 4, 8 ranks, 64-512 MiB (H100, H200, B200,
  B300), where NCCL runs NVLS at 8 ranks on Hopper;
- tests/data/collectives_nccl_alltoall.csv: aiconfigurator's alltoall_perf, 2, 4, 8 ranks, 256 KiB-512 MiB;
- ../shared/reference/collectives_measured.csv: NVIDIA dgxc-benchmarking and nccl-tests maintainers' H100 points
  (8 B to 8 GiB, 8 and 64 ranks; busbw or time).

For each accelerator x collective x ranks x size it prints the measured and modelled time (us), the modelled
protocol or algorithm where the model can name it, and the signed error; then the mean |time error| per
(accelerator, collective, ranks) and per accelerator. `group_collective_time_s(hw, kind, S, n, stride=1)`: a group
of consecutive ranks, inside one node for n <= 8, as nccl-tests runs them.

    python benchmarks/collectives_vs_nccl_tests.py [--accelerator h100-sxm-80gb] [--collective all_reduce]
        [--ranks 8] [--summary]

Figures to read, never pass/fail (tests/test_collectives.py asserts the bounds).
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from parallmelism.config import load_option  # noqa: E402
from parallmelism.cost.collectives import (  # noqa: E402
    busbw_factor,
    group_collective_time_s,
    nvls_all_reduce_time_s,
    protocol_ring_time_s,
    scale_up_protocols,
)

DATA = ROOT / "tests" / "data"
TABLES = ("collectives_nccl_sizes.csv", "collectives_nccl_large.csv", "collectives_nccl_alltoall.csv")
SHARED = ROOT.parent / "shared" / "reference" / "collectives_measured.csv"
PROTOCOL_NAMES = ("LL", "LL128", "Simple")


def _rows(path: Path) -> list[dict]:
    with open(path) as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def measured_points() -> list[dict]:
    """Every measured point with a size, a rank count and a time (us): the stored tables, and the shared H100 points
    whose busbw gives the time back (time = S / busbw · factor)."""
    points = []
    for name in TABLES:
        for r in _rows(DATA / name):
            points.append({**r, "table": name.removeprefix("collectives_nccl_").removesuffix(".csv")})
    if SHARED.exists():
        for r in _rows(SHARED):
            if not (r["message_bytes"] and r["ranks"]):
                continue
            S, n = float(r["message_bytes"]), int(r["ranks"])
            if r["time_us"]:
                t = float(r["time_us"])
            elif r["busbw_gbps"]:
                t = S / (float(r["busbw_gbps"]) * 1e3) * float(busbw_factor(r["collective"], n))
            else:
                continue
            points.append({**r, "time_us": f"{t}", "table": "shared"})
    return points


def modelled_path(hw, kind: str, S: float, n: int) -> str:
    """Which path the model takes for a group inside one node (the fastest protocol, or NVLS), for the listing."""
    if kind == "all_to_all":
        return "a2a"
    protos = scale_up_protocols(hw)
    bw = hw.scale_up.bandwidth_gbps * hw.efficiency.scale_up
    if len(protos) == 1:
        return "base"
    times = {}
    for name, (launch, step, frac) in zip(PROTOCOL_NAMES, protos):
        steps = 2 * (n - 1) if kind == "all_reduce" else n - 1
        times[name] = launch + steps * step + float(busbw_factor(kind, n)) * S / (frac * bw * 1e3)
    if kind == "all_reduce" and hw.scale_up.nvls is not None:
        times["NVLS"] = float(nvls_all_reduce_time_s(hw, S, n, bw)) * 1e6
    best = min(times, key=times.get)
    ring_s = float(protocol_ring_time_s(hw, kind, S, n, bw))
    assert abs(times[best] * 1e-6 - min(ring_s, times.get("NVLS", np.inf) * 1e-6)) < 1e-9  # the listing = the model
    return best


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--accelerator", help="only this hardware file (e.g. h100-sxm-80gb)")
    ap.add_argument("--collective", help="only this collective (all_reduce, all_gather, reduce_scatter, all_to_all)")
    ap.add_argument("--ranks", type=int, help="only this rank count")
    ap.add_argument("--summary", action="store_true", help="the mean errors only, no point listing")
    args = ap.parse_args(argv)

    points = measured_points()
    hws: dict = {}
    groups: dict = defaultdict(list)
    if not args.summary:
        print(
            f"{'accelerator':<16} {'collective':<15} {'n':>3} {'size':>10} {'measured us':>12} {'model us':>10} "
            f"{'path':>6} {'error':>8}  table"
        )
    for p in sorted(
        points, key=lambda r: (r["accelerator"], r["collective"], int(r["ranks"]), float(r["message_bytes"]))
    ):
        name, kind, n, S = p["accelerator"], p["collective"], int(p["ranks"]), float(p["message_bytes"])
        if (args.accelerator and name != args.accelerator) or (args.collective and kind != args.collective):
            continue
        if args.ranks and n != args.ranks:
            continue
        hw = hws.setdefault(name, load_option("hardware", name))
        model_us = float(group_collective_time_s(hw, kind, S, n, 1)) * 1e6
        measured_us = float(p["time_us"])
        err = model_us / measured_us - 1
        groups[(name, kind, n)].append(err)
        if not args.summary:
            path = modelled_path(hw, kind, S, n) if n <= hw.scale_up.domain_size else "span"
            print(
                f"{name:<16} {kind:<15} {n:>3} {_size(S):>10} {measured_us:>12.1f} {model_us:>10.1f} {path:>6} "
                f"{100 * err:>+7.1f}%  {p['table']}"
            )
    print()
    print(f"{'accelerator':<16} {'collective':<15} {'n':>3} {'points':>6} {'mean |error|':>13} {'mean signed':>12}")
    per_hw: dict = defaultdict(list)
    for (name, kind, n), errs in sorted(groups.items()):
        e = np.asarray(errs)
        per_hw[name].extend(errs)
        print(
            f"{name:<16} {kind:<15} {n:>3} {len(e):>6} {100 * np.mean(np.abs(e)):>12.1f}% {100 * np.mean(e):>+11.1f}%"
        )
    print()
    for name, errs in sorted(per_hw.items()):
        e = np.asarray(errs)
        print(
            f"{name:<16} all {len(e):>4} points: mean |time error| {100 * np.mean(np.abs(e)):.1f} %, "
            f"mean signed {100 * np.mean(e):+.1f} %, max |error| {100 * np.max(np.abs(e)):.1f} %"
        )
    return 0


def _size(S: float) -> str:
    for unit, div in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if S >= div:
            return f"{S / div:g} {unit}"
    return f"{S:g} B"


if __name__ == "__main__":
    raise SystemExit(main())
