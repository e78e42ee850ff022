"""What users run, timed as they run it: whole CLI processes, plus a per-configuration loop.

    python benchmarks/bench_cli.py                       # every case, 3 repeats
    python benchmarks/bench_cli.py --quick               # start-up and the small searches only
    python benchmarks/bench_cli.py --baseline DIR        # also run another checkout, same loop: ratios
    python benchmarks/bench_cli.py --markdown            # the table as Markdown
    python benchmarks/bench_cli.py --write-readme        # ... and put it into README.md's marked block

Each case is a fresh `python -m parallmelism ...` process (min wall of the repeats; CPU seconds and
peak RSS of the process and its workers from os.wait4). Layouts per case are counted in-process by
enumeration alone. In the same run, a Calculon-style loop evaluates layouts of the GPT-3-175B grid
one at a time (each a 1-row column dict through the same cost model) and prints microseconds per
configuration, and the ratio to the vectorized search. With --baseline the other checkout runs in
the same loop (alternating), so a shared, noisy machine affects both alike; ratios are
this / baseline. Timings are figures to read, never pass/fail.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_sweep import CASES  # noqa: E402  (the same search cases as the in-process benchmark)

GPT3, L405 = CASES["gpt3"][1], CASES["llama405b"][1]
assert GPT3 is not None and L405 is not None
BIG = [
    "model=llama3.1-405b,llama3.1-70b,gpt3-175b",
    "grid.ngpus=[256,512,768,1024,1536,2048,3072,4096,6144,8192,12288,16384]",
    "grid.max_micro_batch=null",
    "workload.global_batch=4096",
]
PINNED_SHOW = [
    "show",
    "model=llama3.1-8b",
    "grid.ngpus=[8]",
    "grid.tp=1",
    "grid.pp=1",
    "grid.cp=1",
    "grid.micro_batch=[1]",
    "grid.vpp=1",
    "grid.dp_sharding=NO_OP",
    "grid.recompute=none",
    "grid.sequence_parallel=false",
]
README_START, README_END = "<!-- bench:cli:start -->", "<!-- bench:cli:end -->"


def cases(quick: bool, tmp: Path) -> list[tuple[str, list[str], list[str] | None, bool]]:
    """(label, CLI arguments, overrides whose layouts are counted, uses --workers)."""
    out: list[tuple[str, list[str], list[str] | None, bool]] = [
        ("--help", ["--help"], None, False),
        ("show, one pinned layout", PINNED_SHOW, None, False),
        ("best GPT-3 175B @ 4096 A100, 1 worker", ["best", *GPT3, "-q", "--workers", "1"], GPT3, True),
        ("best GPT-3 175B @ 4096 A100, 2 workers", ["best", *GPT3, "-q", "--workers", "2"], GPT3, True),
        ("best Llama-3.1-405B @ 1k-16k H100, 1 worker", ["best", *L405, "-q", "--workers", "1"], L405, True),
        ("best Llama-3.1-405B @ 1k-16k H100, 2 workers", ["best", *L405, "-q", "--workers", "2"], L405, True),
    ]
    if not quick:
        out += [
            ("sweep 405B -> CSV", ["sweep", *L405, "-q", "--out", str(tmp / "s.csv")], L405, False),
            ("sweep 405B -> Parquet", ["sweep", *L405, "-q", "--out", str(tmp / "s.parquet")], L405, False),
            (
                "sweep 3 models x 12 counts -> Parquet",
                ["sweep", *BIG, "-q", "--out", str(tmp / "b.parquet")],
                BIG,
                False,
            ),
        ]
    return out


def count_layouts(overrides: list[str]) -> int:
    """Valid layouts of a command line (enumeration only, no cost model)."""
    from parallmelism.config import load_run_configs
    from parallmelism.grid import enumerate_training_layouts
    from parallmelism.search.partitions import run_partitions

    n = 0
    for _, run in load_run_configs(overrides):
        for sub in run_partitions(run):
            n += len(enumerate_training_layouts(run.model, run.hardware, run.workload, sub))
    return n


def run_process(checkout: Path, args: list[str]) -> tuple[float, float, float, int]:
    """(wall s, CPU s, peak RSS MiB, exit code) of one CLI process and its workers."""
    env = dict(os.environ, PYTHONPATH=str(checkout))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # measure as installed: compiled bytecode
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "parallmelism", *args],
        cwd=checkout,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, proc.returncode


def supports_workers(checkout: Path) -> bool:
    env = dict(os.environ, PYTHONPATH=str(checkout))
    text = subprocess.run(
        [sys.executable, "-m", "parallmelism", "best", "--help"], cwd=checkout, env=env, capture_output=True, text=True
    ).stdout
    return "--workers" in text


def per_config_loop(n: int = 2000) -> float:
    """Microseconds per configuration when layouts are evaluated one at a time (Calculon-style)."""
    from parallmelism.config import load_run_configs
    from parallmelism.engine import evaluate_training_columns
    from parallmelism.grid import enumerate_training_layouts

    run = load_run_configs([*GPT3, "grid.micro_batch=[1]"])[0][1]
    grid = enumerate_training_layouts(run.model, run.hardware, run.workload, run.grid)
    rows = min(n, len(grid))
    t0 = time.perf_counter()
    for i in range(rows):
        evaluate_training_columns({k: v[i : i + 1] for k, v in grid.columns.items()}, run)
    return (time.perf_counter() - t0) / rows * 1e6


def measure(args) -> list[dict]:
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(args.baseline).resolve() if args.baseline else None
        base_workers = supports_workers(base) if base else False
        for label, cli, counted, uses_workers in cases(args.quick, Path(tmp)):
            layouts = count_layouts(counted) if counted else None
            run_process(REPO, cli)  # warm: bytecode and the composition cache, as a second run finds them
            mine, theirs = [], []
            base_cli = cli
            if base and uses_workers and not base_workers:
                base_cli = cli[: cli.index("--workers")]  # the baseline picks its own worker count
            for _ in range(args.repeat):
                mine.append(run_process(REPO, cli))
                if base:
                    theirs.append(run_process(base, base_cli))
            row = {"case": label, "layouts": layouts, "this": min(mine), "base": min(theirs) if theirs else None}
            results.append(row)
            print(_line(row), flush=True)
    return results


def _line(r: dict) -> str:
    wall, cpu, rss, code = r["this"]
    text = f"{r['case']:<46} {wall:7.2f} s wall {cpu:7.2f} s CPU {rss:7.0f} MiB"
    if code:
        text += f"  (exit {code})"
    if r["layouts"]:
        text += f"  {r['layouts']:>10,} layouts  {r['layouts'] / wall:>10,.0f}/s  {cpu / r['layouts'] * 1e6:6.2f} CPU-µs/layout"
    if r["base"]:
        text += f"  | baseline {r['base'][0]:.2f} s, {r['base'][2]:.0f} MiB, this/baseline {wall / r['base'][0]:.2f}"
    return text


def markdown(results: list[dict], loop_us: float, vector_us: float, baseline: str | None) -> str:
    head = "| case | wall s | CPU s | peak RSS MiB | layouts | layouts/s | CPU-µs per layout |"
    sep = "|---|---|---|---|---|---|---|"
    if baseline:
        head += " baseline wall s | baseline RSS MiB | this / baseline wall |"
        sep += "---|---|---|"
    lines = [
        f"Measured by `python benchmarks/bench_cli.py` on {date.today().isoformat()}: {os.cpu_count()} cores, "
        f"Python {platform.python_version()}; min of the repeats, whole processes"
        + (f"; baseline: {baseline}" if baseline else "")
        + ".",
        "",
        head,
        sep,
    ]
    for r in results:
        wall, cpu, rss, _ = r["this"]
        n = r["layouts"]
        cells = [
            r["case"],
            f"{wall:.2f}",
            f"{cpu:.2f}",
            f"{rss:,.0f}",
            f"{n:,}" if n else "-",
            f"{n / wall:,.0f}" if n else "-",
            f"{cpu / n * 1e6:.2f}" if n else "-",
        ]
        if baseline:
            b = r["base"]
            cells += [f"{b[0]:.2f}", f"{b[2]:,.0f}", f"{wall / b[0]:.2f}"] if b else ["-", "-", "-"]
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        f"Calculon-style loop (one layout at a time through the same cost model): {loop_us:,.0f} µs per "
        f"configuration, against {vector_us:.2f} CPU-µs per layout in the vectorized GPT-3 search: "
        f"{loop_us / vector_us:,.0f}x.",
    ]
    return "\n".join(lines)


def write_readme(text: str) -> None:
    readme = REPO / "README.md"
    body = readme.read_text()
    if README_START not in body or README_END not in body:
        raise SystemExit(f"README.md has no {README_START} ... {README_END} block")
    head, rest = body.split(README_START, 1)
    _, tail = rest.split(README_END, 1)
    new = f"{head}{README_START}\n{text}\n{README_END}{tail}"
    fd, tmp = tempfile.mkstemp(dir=REPO, prefix=".README.", suffix=".tmp")
    with os.fdopen(fd, "w") as fh:
        fh.write(new)
    os.chmod(tmp, 0o644)
    os.replace(tmp, readme)
    print(f"wrote the table into {readme}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="start-up and the small searches only")
    ap.add_argument("--repeat", type=int, default=3, help="runs per case (the minimum is reported)")
    ap.add_argument("--baseline", help="another checkout of parallmelism to run in the same loop")
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    ap.add_argument("--write-readme", action="store_true", help="replace README.md's bench:cli block")
    args = ap.parse_args(argv)
    results = measure(args)
    loop_us = per_config_loop()
    gpt3 = next(r for r in results if r["case"].startswith("best GPT-3") and r["layouts"])
    vector_us = gpt3["this"][1] / gpt3["layouts"] * 1e6
    print(f"Calculon-style loop: {loop_us:,.0f} µs per configuration; vectorized {vector_us:.2f} CPU-µs per layout")
    if args.markdown or args.write_readme:
        label = None
        if args.baseline:
            commit = subprocess.run(
                ["git", "-C", args.baseline, "rev-parse", "--short", "HEAD"], capture_output=True, text=True
            ).stdout.strip()
            label = f"commit {commit}" if commit else str(args.baseline)
        text = markdown(results, loop_us, vector_us, label)
        print(text)
        if args.write_readme:
            write_readme(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
