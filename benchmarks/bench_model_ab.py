"""The training cost model now vs at a git revision, in one process, call by call (CPU seconds).

    python benchmarks/bench_model_ab.py REV                      # gpt3 and llama405b, 11 rounds
    python benchmarks/bench_model_ab.py REV gpt3 --rounds=15 --part=time   # memory | time | all

`bench_sweep.py --against=REV` alternates whole searches in their own processes; on the shared
2-core machine at load ~7 whole searches of an unchanged tree alternated against itself (in one
process) came out 0.966 and 1.018 (gpt3, llama405b, median of 11 rounds), too wide to see a 3 %
step. Here REV's package (`git archive` into a temporary folder,
imported as `pm_ref`: the package imports itself relatively) and the working tree's run on the
same layout chunks (bench_sweep's case, its partitions concatenated in ~60k-row chunks) in the
same process, alternating call by call, so load falls on both alike; an unchanged tree against
itself measured 1.008 and 0.992. It times the cost model only (`--part`: `training_memory`,
`training_time`, or all of `evaluate_training_columns`), not enumeration or the search, and
prints each case's median CPU seconds and the median of the per-round ratios REV / now (> 1:
now is faster).
"""

from __future__ import annotations

import importlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

# The composition cache (config/cache.py) keys an entry on the override strings, the config files'
# paths and contents, the composing code and the current folder, not on where the package lies:
# REV's copy composing in this folder would leave entries that name its temporary folder (kernel
# tables) for this tree's next command in the same folder to load. Off for this process.
os.environ["PARALLMELISM_CACHE"] = "0"

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

CHUNK_ROWS = 60_000


def _chunks(pkg: str, run) -> list[dict]:
    """The run's layouts in chunks of about CHUNK_ROWS rows (whole partitions, in order)."""
    layout_grid = importlib.import_module(pkg + ".search.chunks").layout_grid
    partitions = importlib.import_module(pkg + ".search.partitions").run_partitions
    memo: dict = {}
    out, waiting, rows = [], [], 0
    for grid in partitions(run):
        cols = layout_grid(run, grid, memo).columns
        waiting.append(cols)
        rows += len(cols["tp"])
        if rows >= CHUNK_ROWS:
            out.append({k: np.concatenate([c[k] for c in waiting]) for k in waiting[0]})
            waiting, rows = [], 0
    if waiting:
        out.append({k: np.concatenate([c[k] for c in waiting]) for k in waiting[0]})
    return out


def _model(pkg: str, run, part: str):
    """The part of package `pkg`'s cost model timed, as a function of a chunk."""
    layout = importlib.import_module(pkg + ".cost.layout").TrainingLayout
    model, hw, wl = run.model, run.accelerator(), run.training_workload()
    if part == "memory":
        memory = importlib.import_module(pkg + ".cost.memory").training_memory
        return lambda chunk: memory(layout.of(chunk), model, hw, wl)
    if part == "time":
        time_of = importlib.import_module(pkg + ".cost.steptime").training_time
        kernels = importlib.import_module(pkg + ".config.kernel_tables").kernel_model(hw)
        return lambda chunk: time_of(layout.of(chunk), model, hw, wl, kernels)
    columns = importlib.import_module(pkg + ".columns").evaluate_training_columns
    return lambda chunk: columns(chunk, run)


def compare(rev: str, cases: list[str], rounds: int, part: str) -> None:
    from bench_sweep import CASES

    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        (Path(tmp) / "parallmelism").rename(Path(tmp) / "pm_ref")
        sys.path.insert(0, tmp)
        print(f"cost model ({part}), CPU ms per pass over a case's chunks, median of {rounds} alternating rounds")
        print(f"{'case':>12} {rev:>12} {'now':>10}  {rev}/now (median of per-round ratios)")
        for case in cases:
            pair = []
            for pkg in ("parallmelism", "pm_ref"):
                run = importlib.import_module(pkg + ".config").load_run_configs(CASES[case][1])[0][1]
                chunks = _chunks(pkg, run)
                pair.append((_model(pkg, run, part), chunks))

            def one(fn, chunks) -> float:
                t0 = time.process_time()
                for chunk in chunks:
                    fn(chunk)
                return time.process_time() - t0

            for fn, chunks in pair:  # warm-up: kernel tables, caches
                one(fn, chunks)
            now, then = [], []
            for i in range(rounds):
                order = pair if i % 2 == 0 else pair[::-1]
                for fn, chunks in order:
                    (now if fn is pair[0][0] else then).append(one(fn, chunks))
            ratio = statistics.median(t / n for n, t in zip(now, then))
            print(
                f"{case:>12} {statistics.median(then) * 1e3:>12.1f} {statistics.median(now) * 1e3:>10.1f}  {ratio:.3f}"
            )


def main(argv: list[str]) -> None:
    args = [a for a in argv if not a.startswith("--")]
    if not args:
        raise SystemExit(__doc__)
    rounds = next((int(a.split("=")[1]) for a in argv if a.startswith("--rounds=")), 11)
    part = next((a.split("=")[1] for a in argv if a.startswith("--part=")), "all")
    compare(args[0], args[1:] or ["gpt3", "llama405b"], rounds, part)


if __name__ == "__main__":
    main(sys.argv[1:])
