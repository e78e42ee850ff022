"""How many worker processes evaluate a grid (search/driver.py): the default, and the limits of a
requested count. The rule is `default_workers`, a pure function of the grid's tasks and of the
cores and load it is given; `worker_count` reads them from the machine.

Why so careful: a worker costs its fork, its first cost-model calls and the transfer of its
results, and tasks in separate processes no longer share cost-model calls (one process evaluates a
run's tasks together: search/chunks.py `evaluated_tasks`). On a shared machine a second worker
only competes with the other work for a core: on 2 cores under load, 2 workers took 1.4-2.2x as
long as one (issue 29). Measured on 2 free cores (bench_cli, issue 29): GPT-3 175B @ 4096 A100, 5
tasks, 2 workers took 1.07x the wall time of one; Llama-3.1-405B over five counts, 15 tasks,
0.76x; a 10^6-row sweep, 39 tasks, 0.68x. `benchmarks/bench_workers.py` measures -j 1, the
default and -j 2 side by side at 10^5, 10^6 and 10^7 layouts.
"""

from __future__ import annotations

import os

# Partitions evaluated together in one task, the unit of work a worker is handed: their layouts
# share cost-model calls (small partitions cost ~6 ms each in per-call overhead alone; in one
# process consecutive tasks share them too, `evaluated_tasks`). A constant, never the worker count,
# so the chunks, and the bytes a Parquet sink writes, are the same for any number of workers.
PARTITIONS_PER_TASK = 4

# Four tasks per worker keeps the GPT-3 search above (5 tasks) in one process and the others parallel.
MIN_TASKS_PER_WORKER = 4


def available_cores() -> int:
    """Cores this process may run on (its affinity mask, else the machine's)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def free_cores(cores: int, load: float | None, running_others: int = 0) -> int:
    """Cores that other work leaves free: `cores` less the busier of the 1-minute load average
    `load` and the processes other than this one running right now (`running_others`; the load
    average lags a job that just started by a minute), rounded; at least 1. No load average
    (None: Windows): every core counts as free."""
    if load is None:
        return max(1, cores)
    busy = max(load, float(running_others))
    return max(1, min(cores, int(cores - busy + 0.5)))


def default_workers(tasks: int, cores: int, load: float | None, running_others: int = 0) -> int:
    """The default worker count: as many of the free cores (`free_cores`) as the grid has
    MIN_TASKS_PER_WORKER tasks for, when that is at least two; else 1 (one process is never slower
    than several competing for a core, and a small grid does not repay the pool)."""
    n = min(free_cores(cores, load, running_others), tasks // MIN_TASKS_PER_WORKER)
    return n if n >= 2 else 1


def machine_load() -> tuple[float | None, int]:
    """(1-minute load average or None, processes running now other than this one): the load
    average and the running count of /proc/loadavg where there is one (Linux), else os.getloadavg."""
    try:
        with open("/proc/loadavg", encoding="ascii") as fh:
            fields = fh.read().split()
        return float(fields[0]), max(0, int(fields[3].split("/")[0]) - 1)
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.getloadavg()[0], 0
    except (AttributeError, OSError):
        return None, 0


def worker_count(requested: int | None, tasks: int, cap_to_cores: bool = False) -> tuple[int, str | None]:
    """(worker processes, the sentence saying why a requested count was lowered, or None).

    Default (`requested` None): `default_workers` on this machine's cores and load. A requested
    count is lowered to the tasks there are and, with `cap_to_cores` (the CLI), to the cores this
    process may run on."""
    if requested is None:
        return default_workers(tasks, available_cores(), *machine_load()), None
    n, why = requested, None
    if cap_to_cores and n > available_cores():
        n = available_cores()
        why = f"{n} core{'s' if n > 1 else ''} available to this process"
    if n > max(1, tasks):
        n = max(1, tasks)
        why = f"the grid has {tasks} task{'s' if tasks != 1 else ''} (about {PARTITIONS_PER_TASK} partitions each)"
    if n == requested:
        return n, None
    return n, f"using {n} worker{'s' if n > 1 else ''}, not {requested}: {why}"
