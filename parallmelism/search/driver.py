"""The evaluation driver: every command's grid goes through `stream_runs`.

A sweep of 100M layouts cannot live in memory as a table (the cost model makes ~70 columns per
row). The driver walks each run partition by partition (search/partitions.py), evaluates each
partition in chunks of at most `chunk_rows` rows (search/chunks.py) and feeds every chunk, tagged
with `_run` (index of the run) and `_row` (enumeration order), to the collectors
(search/collectors.py, search/sinks.py). With workers > 1 the partitions are evaluated in worker
processes, each filling spawned copies of the collectors; the driver merges the copies in
partition order, so the kept rows and the written bytes are the same as a serial run.

`evaluate_table(run)` is the small case: every row of one run as a DataFrame (show, plot,
validate, multirun jobs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

from ..grid import LayoutGrid, add_drop_counts
from ..stop import raise_if_stopped
from .chunks import DEFAULT_CHUNK_ROWS, RunStats, evaluated_tasks
from .bounded import bounds_steps
from .collectors import Collector, RowsCollector
from .frames import frame_of_kept
from .partitions import run_partitions
from .workers import PARTITIONS_PER_TASK, worker_count


class Progress(Protocol):
    """What the driver reports: `start(total partitions)` once the workers exist, then
    `advance(partitions, rows)` as work completes, and `stop()`."""

    def start(self, total: int) -> None: ...

    def advance(self, partitions: int, rows: int) -> None: ...

    def stop(self) -> None: ...


@dataclass
class StreamResult:
    """What the collectors kept, plus counts of what the driver walked through."""

    runs: list
    kept: list  # collector.result() per collector
    stats: list  # RunStats per run

    @property
    def evaluated(self) -> int:
        return sum(s.evaluated for s in self.stats)

    @property
    def timed(self) -> int:
        return sum(s.timed for s in self.stats)

    @property
    def considered(self) -> int:
        return sum(s.considered for s in self.stats)

    def dropped(self) -> dict:
        out: dict = {}
        for s in self.stats:
            add_drop_counts(out, s.dropped)
        return out

    def explain_empty(self) -> str:
        """One sentence for a grid with no valid layout, naming the main reasons."""
        return LayoutGrid({}, self.dropped(), self.considered).explain_empty()

    def frame(self, i: int = 0, keep_index_columns: bool = False):
        """Collector i's rows as a DataFrame (schema order, readable strings), runs in order."""
        return frame_of_kept(self.runs, self.kept[i], keep_index_columns)


def _tag(cols: dict, r: int, numbers) -> dict:
    import numpy as np

    cols["_run"] = np.full(len(numbers), r, dtype=np.int32)
    cols["_row"] = numbers
    return cols


@dataclass
class _Job:
    """Everything a partition's evaluation needs (shared with the workers once, at fork)."""

    runs: list
    parts: list  # run_partitions per run
    collectors: list
    chunk_rows: int
    prune: bool
    derive: bool
    bound: bool = False  # time only the rows the collectors could still keep (search/bounded.py)

    def tasks(self) -> list[tuple[int, range]]:
        """(run, partition indices) of each task: consecutive partitions of one run."""
        return [
            (r, range(lo, min(lo + PARTITIONS_PER_TASK, len(parts))))
            for r, parts in enumerate(self.parts)
            for lo in range(0, len(parts), PARTITIONS_PER_TASK)
        ]

    def evaluate(self, r: int, tasks: Sequence[range], collectors: Sequence[Collector], stats: RunStats, seeds=None):
        """Feed the chunks of consecutive tasks of run r to the collectors, in order; yield each
        task's position once its chunks are all fed (their evaluation is shared: `evaluated_tasks`).
        seeds: the driver's collectors' `kept_steps` when these are a worker's copies (bounded.py)."""
        parts = [[(p, self.parts[r][p]) for p in indices] for indices in tasks]
        bounded = (r, collectors, seeds) if self.bound and self.runs[r].workload.kind == "train" else None
        for t, chunk in evaluated_tasks(self.runs[r], parts, self.chunk_rows, stats, self.prune, self.derive, bounded):
            if chunk is None:
                yield t
                continue
            # `chunk` alone holds it, and lets go before the generator resumes: bound until the next
            # yield, the last chunk of a call (every column, as views of the call's arrays) stayed alive
            # through the next call's evaluation wherever a call ended inside a task
            _tag(chunk[0], r, chunk[1])
            for c in collectors:
                c.update(chunk[0])
            chunk = None


_WORKER_JOB: list = []


def _worker_task(task):
    """Evaluate one partition in a worker process; return the spawned collectors' results."""
    r, indices, seeds = task
    job = _WORKER_JOB[0]
    local = [c.spawn() for c in job.collectors]
    stats = RunStats()
    for _ in job.evaluate(r, [indices], local, stats, seeds):
        pass
    return r, len(indices), [c.result() for c in local], stats


def stream_runs(
    runs: list,
    collectors: list[Collector],
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
    progress: Progress | None = None,
    workers: int | None = None,
    prune_unfit: bool | None = None,
    derive: bool = True,
    say=None,
    bound: bool | None = None,
) -> StreamResult:
    """Evaluate every run chunk by chunk, feeding each chunk to every collector.

    workers: processes evaluating partitions (default and limits: search/workers.py; 1 = this
    process only). say: where the sentence goes when a requested worker count is lowered (the CLI
    passes one, and then also caps the count at the cores). prune_unfit (default: when every collector keeps fitting
    rows only) skips the time model for layouts that do not fit in memory. bound (default: when
    every collector keeps rows by step time alone, search/bounded.py `bounds_steps`) skips it for
    training layouts whose lower bound on the step exceeds what every collector could still keep:
    the same rows are kept. derive: add the search columns (`usd_per_step`). Collectors are closed at the end, or aborted on any error
    or interrupt (a sink then leaves nothing behind).
    """
    if prune_unfit is None:
        prune_unfit = bool(collectors) and all(c.where == "fits" for c in collectors)
    if bound is None:
        bound = bounds_steps(collectors)
    stats = [RunStats() for _ in runs]
    try:
        for c in collectors:  # temporaries are made inside this scope: any interrupt removes them
            c.open()
        job = _Job(runs, [run_partitions(r) for r in runs], collectors, chunk_rows, prune_unfit, derive, bound)
        tasks = job.tasks()
        workers, lowered = worker_count(workers, len(tasks), cap_to_cores=say is not None)
        if lowered and say is not None:
            say(lowered)
        if workers > 1:
            _stream_parallel(job, tasks, workers, stats, progress)
        else:
            _stream_serial(job, tasks, stats, progress)
        raise_if_stopped()  # before the first output is committed (parallmelism/stop.py)
        for c in collectors:
            c.close()
    except BaseException:
        for c in collectors:
            c.abort()
        raise
    finally:
        if progress is not None:
            progress.stop()
    return StreamResult(runs, [c.result() for c in collectors], stats)


def _stream_serial(job: _Job, tasks, stats, progress) -> None:
    if progress is not None:
        progress.start(sum(len(i) for _, i in tasks))
    for r in range(len(job.runs)):  # a run's tasks in one go: their chunks share cost-model calls
        run_tasks = [indices for run, indices in tasks if run == r]
        before = stats[r].evaluated
        for t in job.evaluate(r, run_tasks, job.collectors, stats[r]):
            if progress is not None:
                progress.advance(len(run_tasks[t]), stats[r].evaluated - before)
                before = stats[r].evaluated


def _stream_parallel(job: _Job, tasks, workers: int, stats, progress) -> None:
    """Partitions in worker processes, results merged in partition order.

    The pool is forked before the progress bar starts its refresh thread (a thread must never be
    running while a process forks). At most 2 x workers partitions are in flight, so results
    waiting to be merged stay bounded.
    """
    import multiprocessing as mp
    from collections import deque

    ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else mp.get_context("spawn")
    with _fork_pool(ctx, workers, job) as pool:
        if progress is not None:
            progress.start(sum(len(i) for _, i in tasks))
        pending: deque = deque()
        queue = iter(tasks)

        def submit(task):
            # the steps kept so far: a worker's bound skips what these already beat (bounded.py)
            seeds = [c.kept_steps() for c in job.collectors] if job.bound else None
            pending.append(pool.apply_async(_worker_task, ((*task, seeds),)))

        for task in queue:
            submit(task)
            if len(pending) >= 2 * workers:
                break
        while pending:
            r, done, kept, st = pending.popleft().get()
            stats[r].add(st)
            for c, part_kept in zip(job.collectors, kept):
                c.merge(part_kept)
            nxt = next(queue, None)
            if nxt is not None:
                submit(nxt)
            if progress is not None:
                progress.advance(done, st.evaluated)
        pool.close()
        pool.join()


STOP_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP")


def _fork_pool(ctx, workers: int, job: _Job):
    """The worker pool, forked with the stop signals blocked: a Ctrl-C or SIGTERM that arrives
    during a fork would otherwise be raised inside the fork's bookkeeping and be lost; blocked, it
    waits and is raised right after, in the driver, which then cleans up. Workers restore the
    signal mask first thing."""
    import signal

    if not hasattr(signal, "pthread_sigmask"):
        return ctx.Pool(workers, initializer=_set_worker_job, initargs=(job, None))
    stop = {getattr(signal, s) for s in STOP_SIGNALS if hasattr(signal, s)}
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, stop)
    try:
        return ctx.Pool(workers, initializer=_set_worker_job, initargs=(job, mask))
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def _set_worker_job(job: _Job, mask) -> None:
    import signal

    # Ctrl-C reaches the whole process group: the driver stops the pool, so a worker ignores it
    # (else each prints its own KeyboardInterrupt traceback on the way out)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if mask is not None:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    _WORKER_JOB[:] = [job]


def evaluate_table(run, workers: int = 1):
    """Every valid layout of one run as a DataFrame (schema order), and the StreamResult
    (`.explain_empty()` for an empty grid; `.kept[0]` holds the rows' coded columns)."""
    res = stream_runs([run], [RowsCollector()], workers=workers, derive=False)
    return res.frame(0), res
