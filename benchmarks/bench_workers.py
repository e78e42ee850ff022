"""Default workers against one: whole `best` and `sweep` processes at 10^5, 10^6 and 10^7 layouts.

    python benchmarks/bench_workers.py                    # 10^5 and 10^6, best and sweep
    python benchmarks/bench_workers.py --large            # ... and ~10^7 (minutes per run)
    python benchmarks/bench_workers.py --only best --sizes 1e5,1e6 --repeat 3

For each (command, size) the three variants run alternately, round after round: `-j 1`, the
default (no -j) and `-j 2`, so load from other work on a shared machine falls on all three alike.
Before each run the 1-minute load average, the processes running, and the cores this process may
use (os.sched_getaffinity) are recorded, with the count the default rule
(search/workers.py `default_workers`) picks at that moment. Printed per case: the minimum wall
and CPU seconds of each variant, the ratios default / one and two / one (of the minima), and the
load average range the runs saw. Where the default picked one worker it runs what -j 1 runs (the
same code path), so its ratio is the machine's noise at that moment. Figures to read, never pass/fail (issue 29: the default must
never be slower than one worker at any measured size).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_cli import SWEEPS, count_layouts, run_process  # noqa: E402

VARIANTS = (("-j 1", ["-j", "1"]), ("default", []), ("-j 2", ["-j", "2"]))


def tasks_of(overrides: list[str]) -> int:
    """The driver's tasks (PARTITIONS_PER_TASK consecutive partitions of one run) of a command line."""
    from parallmelism.config import load_run_configs
    from parallmelism.search.workers import PARTITIONS_PER_TASK
    from parallmelism.search.partitions import run_partitions

    return sum(-(-len(run_partitions(run)) // PARTITIONS_PER_TASK) for _, run in load_run_configs(overrides))


def measure(command: str, size: str, repeat: int, tmp: Path) -> dict:
    from parallmelism.search.workers import available_cores, default_workers, machine_load

    overrides = SWEEPS[size]
    n, tasks = count_layouts(overrides), tasks_of(overrides)
    head = [command, *overrides, "-q"]
    if command == "sweep":
        head += ["--out", str(tmp / f"w{size}.parquet")]
    runs: dict[str, list] = {label: [] for label, _ in VARIANTS}
    loads, picks = [], []
    run_process(REPO, [*head, "-j", "1"])  # warm: bytecode and the composition cache
    for _ in range(repeat):
        for label, flag in VARIANTS:
            (load, running), cores = machine_load(), available_cores()
            loads.append(load)
            if label == "default":
                picks.append(default_workers(tasks, cores, load, running))
            runs[label].append(run_process(REPO, [*head, *flag]))
    best = {label: (min(r[0] for r in rs), min(r[1] for r in rs), max(r[3] for r in rs)) for label, rs in runs.items()}
    return {"command": command, "size": size, "n": n, "tasks": tasks, "best": best, "loads": loads, "picks": picks}


def line(r: dict) -> str:
    one, default, two = (r["best"][label] for label, _ in VARIANTS)
    codes = {label: b[2] for label, b in r["best"].items() if b[2]}
    text = (
        f"{r['command']:<5} {r['size']} ({r['n']:>10,} layouts, {r['tasks']:>3} tasks): "
        f"-j 1 {one[0]:7.2f} s ({one[1]:6.2f} CPU-s)  default {default[0]:7.2f} s ({default[1]:6.2f} CPU-s)  "
        f"-j 2 {two[0]:7.2f} s "
        f"({two[1]:6.2f} CPU-s)  default/one {default[0] / one[0]:.2f}  two/one {two[0] / one[0]:.2f}  "
        f"default picked {sorted(set(r['picks']))}  load {min(r['loads']):.1f}-{max(r['loads']):.1f}"
    )
    return text + (f"  exit codes {codes}" if codes else "")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--large", action="store_true", help="also the ~10^7-layout grid (one round: minutes)")
    ap.add_argument("--sizes", help="comma-separated sizes among 1e5,1e6,1e7 (overrides --large)")
    ap.add_argument("--only", choices=("best", "sweep"), help="one command only")
    ap.add_argument("--repeat", type=int, default=3, help="rounds per case (1 for 1e7)")
    args = ap.parse_args(argv)
    sizes = args.sizes.split(",") if args.sizes else ["1e5", "1e6"] + (["1e7"] if args.large else [])
    print(f"cores this process may use: {len(os.sched_getaffinity(0))} of {os.cpu_count()}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            for command in [args.only] if args.only else ["best", "sweep"]:
                repeat = 1 if size == "1e7" else args.repeat
                print(line(measure(command, size, repeat, Path(tmp))), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
