"""What users run, timed as they run it: whole CLI processes, A/B against another revision.

    python benchmarks/bench_cli.py                       # start-up, searches, sweeps at 10^5 and 10^6 rows
    python benchmarks/bench_cli.py --base main           # ... and the same cases on revision main, alternating
    python benchmarks/bench_cli.py --base REV --large    # ... plus the ~10^7-row sweeps (minutes each)
    python benchmarks/bench_cli.py --quick               # start-up and the small questions only
    python benchmarks/bench_cli.py --large --only 1e7    # the cases whose label holds "1e7"
    python benchmarks/bench_cli.py --baseline DIR        # another checkout instead of a revision
    python benchmarks/bench_cli.py --quick --instructions --base main   # start-up as instructions (valgrind)
    python benchmarks/bench_cli.py --markdown            # the table as Markdown
    python benchmarks/bench_cli.py --write-readme        # ... and put it into README.md's marked block

Each case is a fresh `python -m parallmelism ...` process, run once to warm (bytecode, the
composition cache) and then `--repeat` times; the table gives the minimum wall seconds, CPU
seconds and peak RSS (of the process and its workers, from os.wait4). Sweeps give microseconds
per row written (wall and CPU); searches give layouts per second. `--base REV` checks REV out into
a temporary git worktree and runs each of its cases right after ours (alternating, so a shared,
noisy machine slows both alike); ratios are this / base. In the same run: layouts per second in
process (benchmarks/bench_sweep.py, one worker, each checkout in its own process) and a
Calculon-style loop (one layout at a time through the same cost model). Timings are figures to
read, never pass/fail.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import re
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
SMALL_BEST = ["best", "model=llama3.1-8b", "grid.ngpus=[8]", "-q"]
COUNTS = "grid.ngpus=[256,512,768,1024,1536,2048,3072,4096,6144,8192,12288,16384]"
# (label, overrides) of sweeps of about 10^5, 10^6 and 10^7 rows (169,212; 1,152,450; ~9M) of dense
# Llama models alike per row, so peak RSS compares row counts, not models (an MoE model's chunk
# holds more cost-model temporaries per row: grok-1 alone peaks near 550 MiB at any size).
_TRAIN = ["grid.max_micro_batch=null", "workload.global_batch=4096"]
_H100 = ["hardware=h100-sxm-80gb", *_TRAIN]
SWEEPS = {
    "1e5": ["model=llama3.1-405b", "grid.ngpus=[1024,2048]", *_H100],
    "1e6": ["model=llama3.1-405b,llama3.1-70b", "grid.ngpus=[256,512,1024,2048,4096,8192]", *_H100],
    "1e7": [
        "model=llama3.1-405b,llama3.1-70b,llama3.1-8b",
        "hardware=h100-sxm-80gb,h200-sxm-141gb,b200-180gb,mi300x-192gb",
        COUNTS,
        *_TRAIN,
    ],
}
README_START, README_END = "<!-- bench:cli:start -->", "<!-- bench:cli:end -->"


def cases(args, tmp: Path) -> list[tuple[str, list[str], list[str] | None, str]]:
    """(label, CLI arguments, overrides whose layouts are counted, unit: '' | 'layout' | 'row')."""
    out: list[tuple[str, list[str], list[str] | None, str]] = [
        ("--help", ["--help"], None, ""),
        ("show, one pinned layout", PINNED_SHOW, None, ""),
        ("best Llama-3.1-8B on 8 H100 (one count)", SMALL_BEST, None, ""),
    ]
    if args.quick:
        return out
    for name, overrides in (("GPT-3 175B @ 4096 A100", GPT3), ("Llama-3.1-405B @ 1k-16k H100", L405)):
        out += [
            (f"best {name}, -j 1", ["best", *overrides, "-q", "--workers", "1"], overrides, "layout"),
            (f"best {name}, default workers", ["best", *overrides, "-q"], overrides, "layout"),
        ]
    sizes = ["1e5", "1e6"] + (["1e7"] if args.large else [])
    for size in sizes:
        for fmt in ("parquet", "csv"):
            if size == "1e7" and fmt == "csv":
                continue  # ~1 GB of text: Parquet alone at this size
            target = ["-q", "--out", str(tmp / f"s{size}.{fmt}")]
            out.append(
                (f"sweep {size} rows -> {fmt}, -j 1", ["sweep", *SWEEPS[size], *target, "-j", "1"], SWEEPS[size], "row")
            )
            if size == "1e6":
                out.append(
                    (
                        f"sweep {size} rows -> {fmt}, default workers",
                        ["sweep", *SWEEPS[size], *target],
                        SWEEPS[size],
                        "row",
                    )
                )
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


def instructions(checkout: Path, args: list[str]) -> int | None:
    """Instructions one CLI process executes (valgrind's callgrind, its `Collected` count), or None
    without valgrind. Unlike seconds they do not grow with the machine's load: a start-up change is
    read to a fraction of a percent on a box shared with other work (~50x slower than a run)."""
    env = dict(os.environ, PYTHONPATH=str(checkout))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, "-m", "parallmelism"]
    try:
        done = subprocess.run([*cmd, *args], cwd=checkout, env=env, capture_output=True, text=True)
    except FileNotFoundError:
        return None
    m = re.search(r"Collected : (\d+)", done.stderr)
    return int(m[1]) if m else None


def in_process_rates(checkout: Path) -> dict[str, tuple[float, float]]:
    """{case: (layouts/s, layouts per CPU-s)} of benchmarks/bench_sweep.py gpt3 llama405b, one worker,
    run with this benchmark's copy of bench_sweep.py against `checkout`'s package."""
    env = dict(os.environ, PYTHONPATH=str(checkout))
    code = (
        f"import sys; sys.path[:0] = [{str(checkout)!r}, {str(REPO / 'benchmarks')!r}]\n"
        # the checkout's package first: bench_sweep puts its own repository at the front of sys.path,
        # which would otherwise measure this benchmark's checkout twice
        "import parallmelism\n"
        f"assert parallmelism.__file__.startswith({str(checkout)!r}), parallmelism.__file__\n"
        "import bench_sweep\n"
        "for case in ('gpt3', 'llama405b'):\n"
        "    r = bench_sweep.bench(case, repeats=3, workers=1)\n"
        "    print('RATE', case, r['rows_per_s'], r['rows_per_cpu_s'])\n"
    )
    text = subprocess.run([sys.executable, "-c", code], cwd=checkout, env=env, capture_output=True, text=True).stdout
    return {m[1]: (float(m[2]), float(m[3])) for m in re.finditer(r"RATE (\S+) (\S+) (\S+)", text)}


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


@contextlib.contextmanager
def checkout_of(rev: str | None, folder: str | None):
    """The other checkout: a temporary git worktree of `rev`, or the folder given, or None."""
    if folder:
        yield Path(folder).resolve()
        return
    if not rev:
        yield None
        return
    tmp = Path(tempfile.mkdtemp(prefix="bench-base-"))
    where = tmp / "checkout"
    subprocess.run(
        ["git", "-C", str(REPO), "worktree", "add", "--detach", str(where), rev], check=True, capture_output=True
    )
    try:
        yield where
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(where)], capture_output=True)
        subprocess.run(["rm", "-rf", str(tmp)])


def measure(args, base: Path | None) -> list[dict]:
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for label, cli, counted, unit in cases(args, Path(tmp)):
            if args.only and args.only not in label:
                continue
            n = count_layouts(counted) if counted else None
            repeat = 1 if "1e7" in label else args.repeat
            run_process(REPO, cli)  # warm: bytecode and the composition cache, as a second run finds them
            if base:
                run_process(base, cli)
            mine, theirs = [], []
            for _ in range(repeat):
                mine.append(run_process(REPO, cli))
                if base:
                    theirs.append(run_process(base, cli))
            row = {"case": label, "n": n, "unit": unit, "this": _best(mine), "base": _best(theirs) if theirs else None}
            results.append(row)
            print(_line(row), flush=True)
            if args.instructions and not unit:  # the start-up cases: a fraction of a second each
                ours, other = instructions(REPO, cli), instructions(base, cli) if base else None
                text = f"{label:<46} {ours:,} instructions" if ours else f"{label:<46} (no valgrind)"
                if ours and other:
                    text += f" | base {other:,}; this/base {ours / other:.3f}"
                print(text, flush=True)
    return results


def worker_ratios(results: list[dict]) -> list[str]:
    """Default workers against one, per case measured both ways (issue 29: never above 1.00), with
    the load average now; benchmarks/bench_workers.py measures -j 1, default and -j 2 at 10^5-10^7."""
    one = {r["case"].removesuffix(", -j 1"): r for r in results if r["case"].endswith(", -j 1")}
    lines = []
    for r in results:
        base = r["case"].removesuffix(", default workers")
        if base != r["case"] and base in one:
            ratio = r["this"][0] / one[base]["this"][0]
            lines.append(f"default/one worker, wall: {ratio:.2f}  {base} ({r['n']:,} {r['unit']}s)")
    if lines:
        lines.append(
            f"(1-minute load average now {os.getloadavg()[0]:.1f}, {len(os.sched_getaffinity(0))} cores usable)"
        )
    return lines


def _best(runs: list[tuple]) -> tuple:
    """Minimum wall, CPU and RSS over the repeats (each its own minimum), and the worst exit code."""
    return (min(r[0] for r in runs), min(r[1] for r in runs), min(r[2] for r in runs), max(r[3] for r in runs))


def _rate(r: dict, which: str) -> str:
    wall, cpu, _, _ = r[which]
    if not r["n"]:
        return ""
    if r["unit"] == "row":
        return f"{wall / r['n'] * 1e6:.2f} µs/row wall, {cpu / r['n'] * 1e6:.2f} CPU-µs/row"
    return f"{r['n'] / wall:,.0f} layouts/s"


def _line(r: dict) -> str:
    wall, cpu, rss, code = r["this"]
    text = f"{r['case']:<46} {wall:7.2f} s wall {cpu:7.2f} s CPU {rss:6.0f} MiB"
    if code:
        text += f"  (exit {code})"
    if r["n"]:
        text += f"  {r['n']:>10,} {r['unit']}s  {_rate(r, 'this')}"
    if r["base"]:
        b = r["base"]
        text += f"  | base {b[0]:.2f} s, {b[1]:.2f} CPU-s, {b[2]:.0f} MiB; this/base wall {wall / b[0]:.2f}, CPU {cpu / b[1]:.2f}"
        if b[3]:
            text += f" (base exit {b[3]})"
    return text


def markdown(results: list[dict], rates: dict, loop_us: float, vector_us: float, baseline: str | None) -> str:
    head = "| case | wall s | CPU s | peak RSS MiB | rows or layouts | per row or layout |"
    sep = "|---|---|---|---|---|---|"
    if baseline:
        head += (
            " base wall s | base CPU s | base RSS MiB | base per row or layout | this / base wall | this / base CPU |"
        )
        sep += "---|---|---|---|---|---|"
    lines = [
        f"Measured by `python benchmarks/bench_cli.py` on {date.today().isoformat()}: {os.cpu_count()} cores "
        f"(shared with other work), Python {platform.python_version()}; min of the repeats, whole processes"
        + (f"; base: {baseline}, run alternately in the same loop" if baseline else "")
        + ".",
        "",
        head,
        sep,
    ]
    for r in results:
        wall, cpu, rss, _ = r["this"]
        n = r["n"]
        cells = [r["case"], f"{wall:.2f}", f"{cpu:.2f}", f"{rss:,.0f}", f"{n:,}" if n else "-", _rate(r, "this") or "-"]
        if baseline:
            b = r["base"]
            cells += (
                [
                    f"{b[0]:.2f}",
                    f"{b[1]:.2f}",
                    f"{b[2]:,.0f}",
                    _rate(r, "base") or "-",
                    f"{wall / b[0]:.2f}",
                    f"{cpu / b[1]:.2f}",
                ]
                if b
                else ["-"] * 6
            )
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    for case, label in (("gpt3", "GPT-3 175B @ 4096 A100"), ("llama405b", "Llama-3.1-405B @ 1k-16k H100")):
        mine = rates["this"].get(case)
        theirs = rates["base"].get(case) if rates.get("base") else None
        if mine:
            text = f"In process, one worker ({label}, benchmarks/bench_sweep.py): {mine[0]:,.0f} layouts/s, {mine[1]:,.0f} per CPU-s"
            if theirs:
                text += f"; base {theirs[0]:,.0f}/s, {theirs[1]:,.0f} per CPU-s"
            lines.append(text + ".")
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
    ap.add_argument("--quick", action="store_true", help="start-up and the small questions only")
    ap.add_argument("--large", action="store_true", help="also the ~10^7-row Parquet sweep (one run each)")
    ap.add_argument("--only", help="only the cases whose label holds this text (and no in-process rates)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per case (the minimum is reported)")
    ap.add_argument("--base", help="a git revision to run in the same loop (checked out into a temporary worktree)")
    ap.add_argument("--baseline", help="another checkout of parallmelism to run in the same loop")
    ap.add_argument(
        "--instructions",
        action="store_true",
        help="also count the start-up cases' instructions (valgrind callgrind: the same under any load)",
    )
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    ap.add_argument("--write-readme", action="store_true", help="replace README.md's bench:cli block")
    args = ap.parse_args(argv)
    with checkout_of(args.base, args.baseline) as base:
        label = None
        if base:
            commit = subprocess.run(
                ["git", "-C", str(base), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
            )
            label = f"commit {commit.stdout.strip()}" if commit.stdout.strip() else str(base)
        results = measure(args, base)
        rates = {"this": {}, "base": {}}
        if not args.quick and not args.only:
            for _ in range(2):  # alternating, twice: the best of each
                for who, where in (("this", REPO), ("base", base)):
                    if where is None:
                        continue
                    for case, r in in_process_rates(where).items():
                        old = rates[who].get(case, (0.0, 0.0))
                        rates[who][case] = (max(old[0], r[0]), max(old[1], r[1]))
            for who in ("this", "base"):
                for case, (per_s, per_cpu_s) in rates[who].items():
                    print(f"in process ({who}) {case}: {per_s:,.0f} layouts/s, {per_cpu_s:,.0f} per CPU-s")
    for text in worker_ratios(results):
        print(text)
    loop_us = per_config_loop()
    gpt3 = next((r for r in results if r["case"].startswith("best GPT-3") and r["n"]), None)
    vector_us = gpt3["this"][1] / gpt3["n"] * 1e6 if gpt3 else float("nan")
    print(f"Calculon-style loop: {loop_us:,.0f} µs per configuration; vectorized {vector_us:.2f} CPU-µs per layout")
    if args.markdown or args.write_readme:
        text = markdown(results, rates, loop_us, vector_us, label)
        print(text)
        if args.write_readme:
            write_readme(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
