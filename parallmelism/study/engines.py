"""Engines: who runs a study's batches of points (worker.run_batch) and how a lost worker is told.

  local     worker processes on this machine (workers=1: in this process); a worker that dies
            breaks the pool, and the batches it left unanswered run again in a new one (max_retries)
  ray       plain Ray tasks, many points each; Ray re-runs a task only when its worker is lost
            (max_retries, retry_exceptions=False): user errors are failure records, never retried
  submitit  one array job of batches through submitit (SLURM, or its local executor)

Each returns the points' results and the points whose batch was lost for good (its worker died
more often than the retries allow); those have neither a partition nor a failure record and run
again with `study resume`.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import UserError
from .dataset import StudyContext
from .spec import EngineSpec, Point
from .worker import PointResult, run_batch

# Default tasks per slot: enough for load balance when points differ in cost (models of different
# sizes), few enough that the driver's per-task work (submit, wait, a few hundred bytes of results)
# stays far below a millisecond per point.
TASKS_PER_SLOT = 8
MAX_BATCH = 512


def batch_size(points: int, slots: int, asked: int | None = None) -> int:
    """Points per task: `asked`, else about TASKS_PER_SLOT tasks per slot (at most MAX_BATCH points)."""
    if asked:
        return asked
    return max(1, min(MAX_BATCH, math.ceil(points / (TASKS_PER_SLOT * max(1, slots)))))


def batches_of(points: list[Point], size: int) -> list[list[Point]]:
    return [points[i : i + size] for i in range(0, len(points), size)]


@dataclass
class EngineRun:
    """What an engine gives back: results per point, lost points and the driver's own time."""

    results: list[PointResult] = field(default_factory=list)
    lost: list[tuple[str, str]] = field(default_factory=list)  # (point id, why its batch was lost)
    tasks: int = 0
    driver_s: float = 0.0  # driver time spent submitting tasks and taking in results (not waiting)
    driver_first_s: float = 0.0  # of which the first submission (ray: the function's export, once)
    wall_s: float = 0.0
    worker_cpu_s: dict = field(default_factory=dict)  # worker pid -> CPU seconds on batches
    worker_peak_mib: dict = field(default_factory=dict)  # worker pid -> peak RSS MiB

    def take(self, batch) -> None:
        """Fold in one batch's answers and costs (worker.BatchResult)."""
        self.results.extend(batch.results)
        self.worker_cpu_s[batch.pid] = self.worker_cpu_s.get(batch.pid, 0.0) + batch.cpu_s
        self.worker_peak_mib[batch.pid] = max(self.worker_peak_mib.get(batch.pid, 0.0), batch.peak_rss_mib)


class _Quiet:
    def start(self, total: int) -> None: ...

    def advance(self, partitions: int, rows: int) -> None: ...

    def stop(self) -> None: ...


def run_engine(engine: EngineSpec, ctx: StudyContext, points: list[Point], progress=None) -> EngineRun:
    """Run the points; `progress` (search.driver.Progress: the CLI's bar) hears start(points) once
    the workers exist, then advance(points, layouts) per finished batch."""
    start = time.perf_counter()
    if not points:
        return EngineRun()
    bar = progress if progress is not None else _Quiet()
    try:
        if engine.kind == "ray":
            out = _run_ray(engine, ctx, points, bar)
        elif engine.kind == "submitit":
            out = _run_submitit(engine, ctx, points, bar)
        else:
            out = _run_local(engine, ctx, points, bar)
    finally:
        bar.stop()
    out.wall_s = time.perf_counter() - start
    return out


def _advance(bar, batch) -> None:
    bar.advance(len(batch.results), sum(r.evaluated for r in batch.results))


def _lost(batch: list[Point], exc: BaseException) -> list[tuple[str, str]]:
    why = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
    return [(p.id, why) for p in batch]


# ----------------------------------------------------------------------------- local


def _run_local(engine: EngineSpec, ctx: StudyContext, points: list[Point], bar) -> EngineRun:
    from ..search.workers import available_cores

    workers = min(engine.workers or available_cores(), len(points))
    out = EngineRun()
    if workers == 1:  # in this process, batch by batch (for the progress only)
        batches = batches_of(points, batch_size(len(points), 1, engine.batch))
        out.tasks = len(batches)
        bar.start(len(points))
        for b in batches:
            result = run_batch(ctx, b)
            out.take(result)
            _advance(bar, result)
        return out
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    batches = batches_of(points, batch_size(len(points), workers, engine.batch))
    out.tasks = len(batches)
    # a worker that dies breaks the pool: the batches it had not answered run again in a new pool,
    # at most max_retries times (as Ray re-runs a lost worker's task); their points already done
    # are skipped. The first pool is forked before the bar's thread starts; later ones are spawned.
    remaining = batches
    for attempt in range(engine.max_retries + 1):
        method = "fork" if attempt == 0 and "fork" in mp.get_all_start_methods() else "spawn"
        broken: list[tuple[list[Point], BaseException]] = []
        with ProcessPoolExecutor(workers, mp_context=mp.get_context(method)) as pool:
            futures = [(pool.submit(run_batch, ctx, b), b) for b in remaining]
            if attempt == 0:
                bar.start(len(points))
            for fut, batch in futures:
                try:
                    result = fut.result()
                    out.take(result)
                    _advance(bar, result)
                except BrokenProcessPool as exc:
                    broken.append((batch, exc))
        remaining = [b for b, _ in broken]
        if not remaining:
            break
    for batch, why in broken:
        out.lost.extend(_lost(batch, why))
    return out


# ----------------------------------------------------------------------------- ray


def _ray():
    try:
        import ray
    except ImportError:
        raise UserError('engine ray needs Ray in this environment: pip install ray (or ".[test]")') from None
    return ray


def _run_ray(engine: EngineSpec, ctx: StudyContext, points: list[Point], bar) -> EngineRun:
    ray = _ray()
    started = False
    if not ray.is_initialized():
        # the workers import this copy of parallmelism (a checkout on PYTHONPATH, as the driver does)
        root = str(Path(__file__).resolve().parent.parent.parent)
        path = os.environ.get("PYTHONPATH", "")
        if root not in path.split(os.pathsep):
            os.environ["PYTHONPATH"] = root + (os.pathsep + path if path else "")
        kwargs: dict = {"include_dashboard": False, "logging_level": "ERROR", "log_to_driver": False}
        if engine.address:
            kwargs["address"] = engine.address
        elif engine.num_cpus:
            kwargs["num_cpus"] = engine.num_cpus
        try:
            ray.init(**kwargs)
        except Exception as exc:  # noqa: BLE001 - a cluster that cannot be reached is one sentence
            raise UserError(f"cannot start or reach Ray ({(str(exc).splitlines() or [''])[0]})") from None
        started = True
    try:
        return _submit_ray(ray, engine, ctx, points, bar)
    finally:
        if started:
            ray.shutdown()


def _submit_ray(ray, engine: EngineSpec, ctx: StudyContext, points: list[Point], bar) -> EngineRun:
    slots = max(1, int(ray.cluster_resources().get("CPU", 1)))
    batches = batches_of(points, batch_size(len(points), slots, engine.batch))
    task = ray.remote(num_cpus=1, max_retries=engine.max_retries, retry_exceptions=False)(run_batch)
    out = EngineRun(tasks=len(batches))
    t0 = time.perf_counter()
    ctx_ref = ray.put(ctx)
    refs = [task.remote(ctx_ref, batches[0])]  # the first call exports the function: timed apart
    out.driver_first_s = time.perf_counter() - t0
    refs += [task.remote(ctx_ref, b) for b in batches[1:]]
    pending = dict(zip(refs, batches))
    out.driver_s += time.perf_counter() - t0
    bar.start(len(points))
    while refs:
        # whatever is ready within half a second, in one call (one wait per result would cost the
        # driver O(tasks) per result on a large study)
        ready, refs = ray.wait(refs, num_returns=len(refs), timeout=0.5)
        t0 = time.perf_counter()
        for ref in ready:
            batch = pending.pop(ref)
            try:
                result = ray.get(ref)
                out.take(result)
                _advance(bar, result)
            except ray.exceptions.RayError as exc:  # its worker was lost more often than max_retries
                out.lost.extend(_lost(batch, exc))
        out.driver_s += time.perf_counter() - t0
    return out


# ----------------------------------------------------------------------------- submitit


def _run_submitit(engine: EngineSpec, ctx: StudyContext, points: list[Point], bar) -> EngineRun:
    try:
        import submitit
    except ImportError:
        raise UserError('engine submitit needs submitit: pip install ".[submitit]"') from None
    folder = Path(ctx.folder) / ".submitit"
    executor = submitit.AutoExecutor(folder=folder, cluster=engine.cluster)
    try:
        executor.update_parameters(**engine.parameters)
    except Exception as exc:  # noqa: BLE001 - submitit names the parameter it does not know
        raise UserError(f"engine.parameters: {(str(exc).splitlines() or [''])[0]}") from None
    batches = batches_of(points, batch_size(len(points), 64, engine.batch))
    t0 = time.perf_counter()
    jobs = executor.map_array(run_batch, [ctx] * len(batches), batches)
    out = EngineRun(tasks=len(batches), driver_s=time.perf_counter() - t0)
    bar.start(len(points))
    for job, batch in zip(jobs, batches):
        try:
            result = job.result()
            out.take(result)
            _advance(bar, result)
        except Exception as exc:  # noqa: BLE001 - a job killed, timed out or preempted: resume runs it
            out.lost.extend(_lost(batch, exc))
    return out
