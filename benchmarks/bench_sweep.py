"""Sweep throughput: layouts evaluated per second, end to end (enumerate + every cost term + search).

    python benchmarks/bench_sweep.py            # all cases
    python benchmarks/bench_sweep.py gpt3       # one case
    python benchmarks/bench_sweep.py --workers=1  # one process (default: every core)
    python benchmarks/bench_sweep.py --prune      # time model only on layouts that fit (pareto's path)
    python benchmarks/bench_sweep.py --no-bound   # every layout through the time model (no lower bound)
    python benchmarks/bench_sweep.py --best-keep  # what `best` keeps: near misses within 25 % of the memory
    python benchmarks/bench_sweep.py --workers=1 --against=REV [--rounds=3]  # now vs git revision REV

Prints, per case: layouts considered (every axis combination), valid layouts evaluated by the
cost model, wall and CPU seconds, rows per second, and the ratio to Calculon's published search
rate of 115 configurations per CPU-second (its `llm-optimal-execution` search). The search kept
is the five fastest layouts that fit per GPU count and the two fastest of all layouts (`best`
keeps its near misses, those within 25 % of the memory, instead: --best-keep; fewer rows timed). Every
layout goes through the memory model and the step-time lower bound (cost/step_bound.py); the
step-time model runs only on the layouts whose bound does not exclude them (search/bounded.py,
the same rows kept). The rate is valid layouts evaluated per CPU-second, the issue's rate; the
layouts fully timed per CPU-second are printed beside it (--no-bound: every layout timed).
--prune keeps pareto's collectors (the time model on the layouts that fit, no bound).
No file is written (the optional full-output Parquet write is excluded, as in the target).

With `--against=REV` the script as it is now and as it was at REV (`git archive` into a temporary
folder) run in their own processes, alternating round after round, so load from others on a shared
machine falls on both alike; it prints each case's layouts per CPU-second (median over rounds) and
the median of the per-round ratios now / REV. CPU seconds, not wall: on a busy machine the wall
time counts the waits for a core, the CPU time is the per-core rate issue 29 asks for.
"""

from __future__ import annotations

import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from parallmelism.config import load_run_configs  # noqa: E402
from parallmelism.search import ParetoCollector, TopKCollector, stream_runs  # noqa: E402
from parallmelism.search.best import near_miss  # noqa: E402
from parallmelism.specs import ModelSpec, RunConfig  # noqa: E402

CALCULON_CONFIGS_PER_CPU_S = 115.0

# Every layout, micro-batch, vpp, recompute, sharding and SP choice (max_micro_batch=null: all divisors).
CASES = {
    "gpt3": (
        "GPT-3 175B on 4096 A100-80GB (seq 2048, batch 1536)",
        [
            "model=gpt3-175b",
            "hardware=a100-sxm-80gb",
            "workload.seq_len=2048",
            "workload.global_batch=1536",
            "grid.ngpus=[4096]",
            "grid.max_micro_batch=null",
        ],
    ),
    # Calculon's README case is 530B on 5128 GPUs with *max* batch 2520 (it shrinks the batch to a
    # multiple of dp). 5128 = 8 x 641 leaves no layout with a fixed batch, so we take 5120 GPUs, batch 2560.
    "turing530b": ("Megatron-Turing 530B on 5120 A100-80GB (seq 2048, batch 2560; near Calculon's README case)", None),
    "llama405b": (
        "Llama-3.1-405B on 1024..16384 H100 (seq 8192, batch 2048): a multi-million-row sweep",
        [
            "model=llama3.1-405b",
            "hardware=h100-sxm-80gb",
            "workload.global_batch=2048",
            "grid.ngpus=[1024,2048,4096,8192,16384]",
            "grid.max_micro_batch=null",
        ],
    ),
    # fp8 adds work per layout: each GEMM's bf16 kernels too (workload.low_precision_gemms) and the
    # weight casts, which depend on the micro-batch count and DP sharding (cost/steptime.py layer_key).
    "llama70b-fp8": (
        "Llama-3.1-70B fp8 on 64..1024 H100 (seq 8192, batch 512)",
        [
            "model=llama3.1-70b",
            "hardware=h100-sxm-80gb",
            "workload.precision=fp8",
            "workload.global_batch=512",
            "grid.ngpus=[64,128,256,512,1024]",
            "grid.max_micro_batch=null",
        ],
    ),
}


def turing_530b_run() -> RunConfig:
    """MT-NLG 530B (Smith et al. 2022): h 20480, 105 layers, 128 heads, seq 2048, GPT-style blocks."""
    base = load_run_configs(
        [
            "model=gpt3-175b",
            "hardware=a100-sxm-80gb",
            "workload.seq_len=2048",
            "workload.global_batch=2560",
            "grid.ngpus=[5120]",
            "grid.max_micro_batch=null",
        ]
    )[0][1]
    model = ModelSpec.model_validate(
        {
            **base.model.model_dump(),
            "name": "turing-530b",
            "display_name": "MT-NLG 530B",
            "hidden": 20480,
            "layers": 105,
            "heads": 128,
            "kv_heads": 128,
            "head_dim": 160,
            "ffn_hidden": 81920,
        }
    )
    return base.model_copy(update={"model": model})


def runs_of(case: str):
    if case == "turing530b":
        return [turing_530b_run()]
    return [rc for _, rc in load_run_configs(CASES[case][1])]


def _cpu_s() -> float:
    """CPU seconds of this process and of its finished worker processes (user + system)."""
    import resource

    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def bench(
    case: str,
    repeats: int = 3,
    workers: int | None = None,
    prune: bool = False,
    bound: bool = True,
    best_keep: bool = False,
) -> dict:
    runs = runs_of(case)
    probe = stream_runs(runs[:1], [], chunk_rows=1 << 18, workers=1)  # warm-up, and learn the columns
    best_by = "time_step_s"
    wall, cpu = [], []
    for _ in range(repeats):
        collectors = [  # what `best --top 5` keeps
            TopKCollector(5, best_by, group_by=["ngpus"], where="fits"),
            TopKCollector(2, best_by, group_by=["ngpus"], where=near_miss if best_keep else None),
        ]
        if prune:
            collectors = [
                TopKCollector(5, best_by, group_by=["ngpus"], where="fits"),
                ParetoCollector([("ngpus", "min"), (best_by, "min")], group_by=[]),
            ]
        t0, c0 = time.perf_counter(), _cpu_s()
        # `bound` only when asked off: bench_cli.py runs this against older checkouts' packages
        off = {} if bound else {"bound": False}
        res = stream_runs(runs, collectors, workers=workers, prune_unfit=prune or None, **off)
        wall.append(time.perf_counter() - t0)
        cpu.append(_cpu_s() - c0)
    w, c = min(wall), min(cpu)
    return {
        "case": case,
        "considered": probe.considered,
        "evaluated": res.evaluated,
        "wall_s": w,
        "cpu_s": c,
        "rows_per_s": res.evaluated / w,
        "rows_per_cpu_s": res.evaluated / c,
        "considered_per_s": probe.considered / w,
        "ranked_by": best_by,
        "workers": workers,
        "timed": res.timed,
    }


def rates_of_tree(root: Path, cases: list[str], workers: int | None) -> dict[str, float]:
    """Layouts per CPU-second of each case, printed by the bench_sweep.py under `root` in a process
    of its own (its cases print in the order asked)."""
    args = [sys.executable, str(root / "benchmarks" / "bench_sweep.py"), *cases]
    args += [f"--workers={workers}"] if workers else []
    out = subprocess.run(args, cwd=root, check=True, capture_output=True, text=True).stdout
    rates = [float(m.replace(",", "")) for m in re.findall(r"([\d,]+) layouts per CPU-second", out)]
    return dict(zip(cases, rates, strict=True))


def against(rev: str, cases: list[str], workers: int | None, rounds: int) -> None:
    """Now vs git revision `rev`, alternating rounds (module docstring)."""
    root = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(["git", "-C", str(root), "archive", rev], check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        now, then = [], []
        for _ in range(rounds):
            now.append(rates_of_tree(root, cases, workers))
            then.append(rates_of_tree(Path(tmp), cases, workers))
    print(f"layouts per CPU-second, median of {rounds} alternating rounds [workers: {workers or 'default'}]")
    print(f"{'case':>14} {rev:>12} {'now':>12}  now/{rev} (median of per-round ratios)")
    for case in cases:
        ratio = statistics.median(n[case] / t[case] for n, t in zip(now, then))
        a, b = (statistics.median(r[case] for r in runs) for runs in (then, now))
        print(f"{case:>14} {a:>12,.0f} {b:>12,.0f}  {ratio:.3f}")


def main(argv: list[str]) -> None:
    cases = [a for a in argv if not a.startswith("--")] or list(CASES)
    workers = next((int(a.split("=")[1]) for a in argv if a.startswith("--workers=")), None)
    prune = "--prune" in argv
    bound = "--no-bound" not in argv
    best_keep = "--best-keep" in argv
    rev = next((a.split("=", 1)[1] for a in argv if a.startswith("--against=")), None)
    if rev:
        against(rev, cases, workers, next((int(a.split("=")[1]) for a in argv if a.startswith("--rounds=")), 3))
        return
    for case in cases:
        r = bench(case, workers=workers, prune=prune, bound=bound, best_keep=best_keep)
        w = r["workers"] or "default"
        print(f"== {CASES[case][0]}  [workers: {w}]")
        print(
            f"   combinations considered {r['considered']:>12,}   valid layouts evaluated {r['evaluated']:>11,}"
            f"   (ranked by {r['ranked_by']})"
        )
        skipped = (
            "that fit"
            if prune
            else "a collector could keep (the rest: lower bound past its kept steps, or outside its `where`)"
        )
        print(
            f"   memory model on all {r['evaluated']:,}; full cost model on the {r['timed']:,} {skipped}"
            if r["timed"] < r["evaluated"]
            else f"   full cost model on all {r['evaluated']:,}"
        )
        print(
            f"   search time {r['wall_s']:.3f} s wall, {r['cpu_s']:.3f} s CPU   ->  {r['rows_per_s']:,.0f} layouts/s, "
            f"{r['rows_per_cpu_s']:,.0f} layouts per CPU-second"
        )
        print(
            f"   fully timed: {r['timed'] / r['cpu_s']:,.0f} per CPU-second ({r['timed'] / r['evaluated']:.1%} of them)"
        )
        print(
            f"   vs Calculon (115 configs per CPU-second): {r['rows_per_cpu_s'] / CALCULON_CONFIGS_PER_CPU_S:,.0f}x"
            f"   (Calculon would need {r['evaluated'] / CALCULON_CONFIGS_PER_CPU_S / 60:,.1f} CPU-minutes for these"
            f" layouts)"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
