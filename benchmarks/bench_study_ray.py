"""A co-design study through the study engine on Ray, and the streamed merge of a 10^7-row study.

    python benchmarks/bench_study_ray.py                  # 1,000 hardware points x 2 models, ngpus 64 and 256
    python benchmarks/bench_study_ray.py --quick          # 20 hardware points
    python benchmarks/bench_study_ray.py --engine local   # the same points in worker processes
    python benchmarks/bench_study_ray.py --merge-rows     # build a sweep study of ~10^7 rows, merge it
    python benchmarks/bench_study_ray.py --models llama3.1-8b,llama3.1-70b,llama3.1-405b --ngpus 64,256,1024
                                                          # ~10^9 layouts: 3 models x 3 GPU counts per point

The co-design study is a `parallmelism study run` file: hardware fields as design points (peak
bf16 FLOP/s x HBM bandwidth x HBM capacity (with its usable part) x NVLink bandwidth x NVLink domain
size) x models, `best` per point over its GPU counts (the fastest fitting layout per GPU count, every
micro-batch, vpp, recompute, sharding and SP choice), on a local Ray with one CPU per core.

It prints the valid layouts evaluated (summed from the workers' answers), wall and CPU time (the
workers' own CPU seconds on their batches, plus the driver's), layouts per CPU-second, the peak RSS
of each worker, and the driver's per-point overhead (its time submitting tasks and taking in
results, waits excluded; the first submission, which exports the function, apart), then the extrapolation to 10^10 layouts on 1,000 cores. With
--merge-rows it writes a `sweep` study of about that many rows (local engine), then runs
`parallmelism merge DIR --out merged.parquet` as a process and prints its wall time and peak RSS.
Timings are figures to read, never pass/fail: the machine is shared.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

PEAK_TFLOPS = [600, 800, 989, 1250, 1600, 2000, 2500, 3000, 4000, 5000]
HBM_GBPS = [2000, 3350, 4800, 8000, 12000]
HBM_GIB = [[80, 79.6], [141, 140.0]]  # capacity, usable
NVLINK_GBPS = [225, 450, 900, 1800, 3600]
NVLINK_DOMAIN = [8, 72]
MODELS = ["llama3.1-8b", "llama3.1-70b"]
NGPUS = "64,256"


def codesign_points(quick: bool) -> list[dict]:
    import itertools

    peaks, hbm = (PEAK_TFLOPS[2:4], HBM_GBPS[1:3]) if quick else (PEAK_TFLOPS, HBM_GBPS)
    links = NVLINK_GBPS[1:2] if quick else NVLINK_GBPS
    pts = []
    for f, b, (cap, usable), link, dom in itertools.product(peaks, hbm, HBM_GIB, links, NVLINK_DOMAIN):
        pts.append(
            {
                "hardware.peak_tflops.bf16": f,
                "hardware.hbm_bandwidth_gbps": b,
                "hardware.hbm_capacity_gib": cap,
                "hardware.hbm_usable_gib": usable,
                "hardware.scale_up.bandwidth_gbps": link,
                "hardware.scale_up.domain_size": dom,
            }
        )
    return pts


def write_study(folder: Path, engine: dict, quick: bool, models: list[str], ngpus: str) -> tuple[Path, int]:
    hw = codesign_points(quick)
    keys = list(hw[0])
    lines = [",".join(keys)] + [",".join(str(p[k]) for k in keys) for p in hw]
    (folder / "hardware.csv").write_text("\n".join(lines) + "\n")
    study = {
        "command": "best",
        "top": 1,
        "out": "codesign",
        "overrides": [ngpus, "grid.max_micro_batch=null"],
        "points": {"product": {"model": models}, "csv": "hardware.csv"},
        "engine": engine,
    }
    path = folder / "codesign.yaml"
    path.write_text(json.dumps(study, indent=1))
    return path, len(hw)


def run_codesign(args) -> None:
    from parallmelism.search.workers import available_cores
    from parallmelism.study.engines import batch_size
    from parallmelism.study.run import start_study

    cores = available_cores()
    engine = {"kind": args.engine, ("num_cpus" if args.engine == "ray" else "workers"): cores}
    with tempfile.TemporaryDirectory(dir=args.tmp) as tmp:
        models, ngpus = args.models.split(","), f"grid.ngpus=[{args.ngpus}]"
        path, hw_points = write_study(Path(tmp), engine, args.quick, models, ngpus)
        cpu0, wall0 = time.process_time(), time.perf_counter()
        out = start_study(path, out=Path(tmp) / "codesign")
        wall, driver_cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        ran = out.ran
        layouts = sum(r.evaluated for r in ran.results)
        points = len(out.points)
        worker_cpu = sum(ran.worker_cpu_s.values())
        cpu = worker_cpu + driver_cpu
        print(
            f"engine {args.engine} on {cores} cores: {hw_points:,} hardware points x {len(models)} models "
            f"({', '.join(models)}) x {ngpus}: {points:,} points in {ran.tasks} tasks "
            f"({points / max(ran.tasks, 1):.0f} points per task)"
        )
        print(
            f"failed points: {len(out.failed)}, lost: {len(out.lost)}, rows written: "
            f"{sum(r.rows for r in ran.results):,}"
        )
        print(f"layouts evaluated (valid, through the cost model): {layouts:,}")
        print(
            f"wall {wall:.1f} s (engine {ran.wall_s:.1f} s, of which launch checks and manifest "
            f"{wall - ran.wall_s:.1f} s); CPU {cpu:.1f} s (workers {worker_cpu:.1f}, driver {driver_cpu:.1f})"
        )
        print(
            f"{layouts / wall:,.0f} layouts/s, {layouts / max(worker_cpu, 1e-9):,.0f} layouts per worker CPU-s, "
            f"{worker_cpu / points * 1e3:.1f} worker CPU-ms per point"
        )
        peaks = sorted(ran.worker_peak_mib.values())
        print(f"peak RSS per worker (MiB): {', '.join(f'{p:.0f}' for p in peaks)} ({len(peaks)} workers)")
        steady = (ran.driver_s - ran.driver_first_s) / max(ran.tasks - 1, 1)
        print(
            f"driver overhead: {ran.driver_s * 1e3:.1f} ms submitting and taking in results, "
            f"{ran.driver_s / points * 1e3:.3f} ms per point; of which the first submission (the function's "
            f"export) {ran.driver_first_s * 1e3:.1f} ms, then {steady * 1e3:.2f} ms per task"
        )
        per_layout = worker_cpu / max(layouts, 1)
        big, cores_big = 1e10, 1000
        points_big = round(big / max(layouts / points, 1))
        batch = batch_size(points_big, cores_big)
        tasks_big = -(-points_big // batch)
        compute = big * per_layout / cores_big
        driver = ran.driver_first_s + tasks_big * steady
        print(
            f"extrapolation: 10^10 layouts = {points_big:,} points of this size; {big * per_layout:,.0f} worker "
            f"CPU-s / {cores_big:,} cores = {compute:,.0f} s ({compute / 60:.1f} min) of compute per core; "
            f"{tasks_big:,} tasks of {batch} points (the default batch) cost the driver {driver:.1f} s "
            f"({driver / points_big * 1e3:.3f} ms per point) at this run's per-task time"
        )


def peak_rss_of(cmd: list[str]) -> tuple[float, float, int, str]:
    """(wall s, peak RSS MiB, exit code, output) of a command, run under a fresh Python whose only
    child it is (RUSAGE_CHILDREN's peak then covers that command and its own workers only)."""
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    probe = (
        "import resource, subprocess, sys; p = subprocess.run(sys.argv[1:]); "
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, p.returncode, file=sys.stderr)"
    )
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", probe, *cmd], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    *text, last = (proc.stdout + proc.stderr).strip().splitlines()
    peak_kib, rc = last.split()
    return wall, int(peak_kib) / 1024, int(rc), "\n".join(text)


def run_merge(args) -> None:
    """A sweep study of ~10^7 rows (llama3.1-405b: 6 GPU counts x 40 peak FLOP/s values, 35-45k valid
    layouts each; local engine), then its merge as a process."""
    from parallmelism.search.workers import available_cores

    cores = available_cores()
    with tempfile.TemporaryDirectory(dir=args.tmp) as tmp:
        folder = Path(tmp)
        counts = [[512], [1024], [2048], [4096], [8192], [16384]]
        study = {
            "command": "sweep",
            "out": "rows",
            "overrides": ["model=llama3.1-405b"],
            "points": {"product": {"grid.ngpus": counts, "hardware.peak_tflops.bf16": list(range(800, 4800, 100))}},
            "engine": {"kind": "local", "workers": cores},
        }
        (folder / "rows.yaml").write_text(json.dumps(study))
        wall, _, rc, text = peak_rss_of(
            [
                sys.executable,
                "-m",
                "parallmelism",
                "study",
                "run",
                "-q",
                str(folder / "rows.yaml"),
                "--out",
                str(folder / "rows"),
            ]
        )
        print(f"study run: {wall:.1f} s, exit {rc}: {text.splitlines()[-1]}")
        size = sum(f.stat().st_size for f in (folder / "rows").rglob("*.parquet"))
        wall, peak, rc, text = peak_rss_of(
            [
                sys.executable,
                "-m",
                "parallmelism",
                "merge",
                str(folder / "rows"),
                "--out",
                str(folder / "merged.parquet"),
            ]
        )
        print(
            f"merge: {text.splitlines()[-1]} (dataset {size / 2**20:,.0f} MiB, merged "
            f"{(folder / 'merged.parquet').stat().st_size / 2**20:,.0f} MiB)"
        )
        print(f"merge wall {wall:.1f} s, peak RSS {peak:.0f} MiB (exit {rc})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="20 hardware points")
    ap.add_argument("--engine", default="ray", choices=["ray", "local"])
    ap.add_argument("--merge-rows", action="store_true", help="build a ~10^7-row sweep study and merge it")
    ap.add_argument("--models", default=",".join(MODELS), help="models, comma-separated")
    ap.add_argument("--ngpus", default=NGPUS, help="GPU counts of every point, comma-separated")
    ap.add_argument("--tmp", default=None, help="folder for the study (default: the system's temporary folder)")
    args = ap.parse_args()
    if args.merge_rows:
        run_merge(args)
    else:
        run_codesign(args)


if __name__ == "__main__":
    main()
