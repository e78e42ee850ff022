"""A 10^8-layout study on one machine: every shipped model x accelerator x GPU count 8-16,384.

    python benchmarks/bench_study.py                 # the whole study (a few minutes on 2 cores)
    python benchmarks/bench_study.py --quick         # two models, three accelerators
    python benchmarks/bench_study.py --workers 1     # one process
    python benchmarks/bench_study.py --launcher joblib --jobs 2   # as a multirun: best -m, then merge

Runs the command a user runs, as a whole process:

    parallmelism best model=<all> hardware=<all> grid.ngpus=[8,...,16384] grid.max_micro_batch=null \
        --top 1 --quiet --out STUDY.csv [--workers N]

(the fastest fitting layout per model x accelerator x GPU count, every micro-batch, vpp,
recompute, sharding and SP choice) and prints the layouts considered (every axis combination)
and evaluated (valid layouts through the cost model), wall and CPU seconds, layouts per second
and per CPU-second, and the peak resident memory of the command and of its largest worker.
With --launcher, the same study runs as it does across machines: `best -m` hands one job per
model x accelerator to a Hydra launcher (joblib: local processes, as a stand-in for submitit_slurm
or ray on a cluster), each job writes its part, and `merge` joins the parts; the figures then
cover the launch, every job and the merge, and the peak RSS is that of the largest job.
Timings are figures to read, never pass/fail: the machine is shared.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

GPU_COUNTS = [2**i for i in range(3, 15)]  # 8 .. 16384


def _shipped(group: str) -> list[str]:
    from parallmelism.config.paths import option_files

    return sorted(option_files(group, []))


def fits_the_sequence(models: list[str]) -> tuple[list[str], list[str]]:
    """(models the study takes, models it leaves out): a model with a learned position table shorter
    than the training workload's sequence (GPT-3's 2048 rows at the default 8192) has no position for
    the later tokens, and `best` refuses it in one sentence."""
    from parallmelism.config import load_option, load_run_configs

    seq = load_run_configs([f"model={models[0]}"])[0][1].workload.seq_len
    fits = [m for m in models if (load_option("model", m).max_position or seq) >= seq]
    return fits, [m for m in models if m not in fits]


def count_layouts(overrides: list[str]) -> tuple[int, int]:
    """(considered, valid) layouts of the study: enumeration only, no cost model."""
    from parallmelism.config import load_run_configs
    from parallmelism.grid import enumerate_training_layouts
    from parallmelism.search.partitions import run_partitions

    considered = valid = 0
    for _, run in load_run_configs(overrides):
        for sub in run_partitions(run):
            g = enumerate_training_layouts(run.model, run.hardware, run.workload, sub)
            considered += g.considered
            valid += len(g)
    return considered, valid


def run_cli(args: list[str]) -> tuple[float, float, float, int]:
    """(wall s, CPU s of the command and its workers, peak RSS MiB of the largest process, exit code)."""
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "parallmelism", *args], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode:
        print(proc.stderr, file=sys.stderr)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return wall, cpu, after.ru_maxrss / 1024, proc.returncode


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="two models on three accelerators")
    ap.add_argument("--workers", type=int, default=None, help="worker processes (default: the CLI's)")
    ap.add_argument("--launcher", choices=["joblib", "submitit_local"], help="run as a multirun (best -m) + merge")
    ap.add_argument("--jobs", type=int, default=2, help="jobs at a time (with --launcher joblib)")
    args = ap.parse_args(argv)
    models, hardware = _shipped("model"), _shipped("hardware")
    models, left_out = fits_the_sequence(models)
    if left_out:
        print(f"left out (learned position table shorter than the sequence): {', '.join(left_out)}")
    if args.quick:
        models, hardware = ["llama3.1-70b", "mixtral-8x7b"], ["a100-sxm-80gb", "h100-sxm-80gb", "b200-180gb"]
    overrides = [
        f"model={','.join(models)}",
        f"hardware={','.join(hardware)}",
        f"grid.ngpus=[{','.join(map(str, GPU_COUNTS))}]",
        "grid.max_micro_batch=null",
    ]
    t = time.perf_counter()
    considered, valid = count_layouts(overrides)
    print(
        f"study: {len(models)} models x {len(hardware)} accelerators x {len(GPU_COUNTS)} GPU counts "
        f"(8-16384): {considered:,} layouts considered, {valid:,} valid (counted in {time.perf_counter() - t:.1f} s)"
    )
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "study.csv"
        if args.launcher:
            sweep_dir = Path(tmp) / "multirun"
            # joblib runs n_jobs jobs at a time; submitit_local has no such knob (its tasks_per_node
            # would run every job that many times over, each writing the same part)
            parallel = ["hydra.launcher.n_jobs=" + str(args.jobs)] if args.launcher == "joblib" else []
            cli = ["best", "-m", *overrides, "--top", "1", f"hydra/launcher={args.launcher}", *parallel]
            cli += [f"hydra.sweep.dir={sweep_dir}"]
            wall, cpu, rss, code = run_cli(cli)
            if not code:
                parts = sorted(str(p) for p in sweep_dir.glob("*/part.csv"))
                w2, c2, r2, code = run_cli(["merge", *parts, "--out", str(out), "--quiet"])
                print(f"{len(parts)} jobs; merge {w2:.1f} s wall")
                wall, cpu, rss = wall + w2, cpu + c2, max(rss, r2)
        else:
            cli = ["best", *overrides, "--top", "1", "--quiet", "--out", str(out)]
            if args.workers:
                cli += ["--workers", str(args.workers)]
            wall, cpu, rss, code = run_cli(cli)
        rows = sum(1 for _ in open(out)) - 1 if out.exists() else 0
    if code:
        print(f"the study command failed with exit code {code}")
        return 1
    print(f"command: parallmelism {' '.join(cli[:1] + ['...'] + cli[-5:])}")
    print(
        "| layouts considered | valid layouts | wall s | CPU s | valid/s (wall) | valid per CPU-s | peak RSS MiB | rows written |"
    )
    print("|---|---|---|---|---|---|---|---|")
    print(
        f"| {considered:,} | {valid:,} | {wall:.1f} | {cpu:.1f} | {valid / wall:,.0f} | {valid / cpu:,.0f} | "
        f"{rss:,.0f} | {rows:,} |"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
