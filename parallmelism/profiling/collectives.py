"""Collective micro-benchmarks with torch.distributed, and the α–β fit of the link they ran on.

What is timed (the method of nccl-tests, one process per device, all in this node):
  all_reduce, all_gather, reduce_scatter, all_to_all of fp32 buffers over message sizes S, where
  S is the full buffer as in cost/collectives.py (the all-reduced tensor, the gathered output,
  the reduce-scatter input, the bytes one rank holds before the all-to-all). Per (collective, S):
  `warmup` untimed runs, then `reps` runs, each after a barrier and a device sync, timed by CUDA
  events around the call (CPU: the clock); a run takes as long as its slowest rank; the median is kept.
  NCCL on CUDA (one GPU per rank), gloo on the CPU (`--device cpu`, what CI runs).
  algbw = S / time; busbw = algbw · busbw_factor(kind, n)   (nccl-tests PERFORMANCE.md:
  2(n−1)/n for all_reduce, (n−1)/n for all_gather, reduce_scatter, all_to_all).

The fit (`fit_link`): the ring model the cost model uses inside a scale-up domain,
  time = steps(kind, n)·α + busbw_factor(kind, n)·S/β,   steps = 2(n−1) all_reduce, n−1 others,
is linear in (α, 1/β); least squares on relative residuals (every size weighs the same, so the
small sizes fix α and the large ones β), with α, 1/β ≥ 0. β is per rank per direction (GB/s =
1e9 B/s), α the latency per ring step (µs): the keys scale_up.bandwidth_gbps and latency_us.
One (α, β) serves all four collectives, as in the cost model; what the ring does not describe
(NCCL's LL/LL128/Simple protocol switch at mid sizes, which the shipped NVLink files state as
`scale_up.protocols` and a profiled file leaves out; NVLS in-switch all-reduce) shows up in the fit's
rms error, which is printed and written beside the numbers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from ..cost.collectives import busbw_factor

KINDS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")

CPU = dict(sizes=[2**12, 2**16, 2**20], reps=5, warmup=2)
QUICK = dict(sizes=[2**16, 2**20, 2**24, 2**28], reps=10, warmup=3)
FULL = dict(sizes=[2**k for k in range(10, 31, 2)], reps=20, warmup=5)  # 1 KiB .. 1 GiB, x4
ELEMENT_BYTES = 4  # fp32, as nccl-tests runs by default


def plan(device: str, quick: bool) -> dict:
    return CPU if device == "cpu" else (QUICK if quick else FULL)


def message_bytes(nbytes: int, n: int) -> int:
    """S rounded down to whole fp32 elements that split evenly over n ranks (at least one each)."""
    per_rank = max(1, int(nbytes) // (ELEMENT_BYTES * n))
    return per_rank * n * ELEMENT_BYTES


def ring_steps(kind: str, n):
    """Latency terms of the ring algorithm: 2(n−1) for all_reduce, n−1 for the others."""
    n = np.asarray(n, dtype=np.float64)
    return 2.0 * (n - 1) if kind == "all_reduce" else n - 1


def bandwidths(kind: str, n, nbytes, time_s) -> tuple:
    """(algbw, busbw) in GB/s, nccl-tests convention: algbw = S / time, busbw = algbw · factor."""
    alg = np.asarray(nbytes, dtype=np.float64) / np.asarray(time_s, dtype=np.float64) / 1e9
    return alg, alg * busbw_factor(kind, n)


@dataclass(frozen=True)
class LinkFit:
    alpha_us: float  # latency per ring step
    beta_gbps: float  # per rank per direction
    rms_rel_err: float  # of the fitted times against the measured ones
    points: int


def fit_link(kinds, n, nbytes, time_s) -> LinkFit:
    """α (µs per step) and β (GB/s) of time = steps·α + factor·S/β over measured points
    (module docstring); arrays of equal length, one entry per point.

    Where the points cannot tell β (every one latency-bound, so 1/β fits to 0), β is the largest
    busbw measured, a lower bound."""
    kinds = list(kinds)
    n = np.broadcast_to(np.asarray(n, dtype=np.float64), (len(kinds),))
    S = np.asarray(nbytes, dtype=np.float64)
    t = np.asarray(time_s, dtype=np.float64)
    steps = np.array([ring_steps(k, m) for k, m in zip(kinds, n)])
    per_byte = np.array([busbw_factor(k, m) for k, m in zip(kinds, n)]) * S
    A = np.column_stack([steps / t, per_byte / t])  # rows divided by t: residuals are relative
    y = np.ones(len(t))
    alpha, inv_beta = _nonnegative_lstsq(A, y)
    if inv_beta > 0:
        beta = 1.0 / inv_beta
    else:
        beta = max(float(bandwidths(k, m, s, x)[1]) for k, m, s, x in zip(kinds, n, S, t)) * 1e9
    model = steps * alpha + per_byte / beta
    rms = float(np.sqrt(np.mean((model / t - 1.0) ** 2)))
    return LinkFit(alpha_us=float(alpha * 1e6), beta_gbps=float(beta / 1e9), rms_rel_err=rms, points=len(t))


def _nonnegative_lstsq(A, y) -> tuple[float, float]:
    """argmin |A·x − y| over x ≥ 0 for two unknowns: the unconstrained solution if it is
    feasible, else the better of the two one-variable fits with the other at 0."""
    x, *_ = np.linalg.lstsq(A, y, rcond=None)
    if (x >= 0).all():
        return float(x[0]), float(x[1])
    best = None
    for j in (0, 1):
        col = A[:, j]
        v = max(float(col @ y) / float(col @ col), 0.0) if float(col @ col) > 0 else 0.0
        cand = np.zeros(2)
        cand[j] = v
        err = float(np.sum((A @ cand - y) ** 2))
        if best is None or err < best[0]:
            best = (err, cand)
    assert best is not None
    return float(best[1][0]), float(best[1][1])


@dataclass
class Measured:
    """What `run` returns: rows (one per collective and size), the notes of what was skipped,
    and how it ran."""

    rows: list
    skipped: list
    backend: str
    ranks: int
    versions: dict
    reps: int
    warmup: int


def point_labels(device: str, quick: bool) -> list[str]:
    """One label per timed (collective, size): the progress bar's steps."""
    return [f"{k} {s / 2**10:g} KiB" for k in KINDS for s in plan(device, quick)["sizes"]]


def run(torch, device: str, quick: bool, ranks: int, on_point: Optional[Callable[[str], None]] = None) -> Measured:
    """Spawn `ranks` processes (NCCL, one GPU each; gloo on the CPU), time every collective over
    the plan's sizes, return rows. A child that fails raises RuntimeError with its last line."""
    import os
    import signal
    import tempfile

    mp = torch.multiprocessing
    backend = "nccl" if device == "cuda" else "gloo"
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    rows: list = []
    skipped: list = []
    versions: dict = {}
    with tempfile.TemporaryDirectory(prefix="parallmelism-coll-") as tmp:
        store = os.path.join(tmp, "store")
        # the ranks start with Ctrl-C ignored (an ignored signal stays ignored across exec): a Ctrl-C
        # to the process group reaches this process, which stops them, instead of each rank
        # printing a traceback from the middle of its start-up
        try:
            sigint = signal.signal(signal.SIGINT, signal.SIG_IGN)
        except ValueError:  # not the main thread: signals are not ours to set
            sigint = None
        try:
            procs = mp.spawn(
                _worker, args=(ranks, device, quick, store, queue), nprocs=ranks, join=False, start_method="spawn"
            )
        finally:
            if sigint is not None:
                signal.signal(signal.SIGINT, sigint)

        def drain():
            while not queue.empty():
                what, payload = queue.get()
                if what == "point" and on_point is not None:
                    on_point(payload)
                elif what == "row":
                    rows.append(payload)
                elif what == "skip":
                    skipped.append(payload)
                elif what == "versions":
                    versions.update(payload)

        try:
            while not procs.join(timeout=0.1):
                drain()
        except Exception as exc:  # ProcessRaisedException / ProcessExitedException: say why in one line
            lines = [ln for ln in str(exc).splitlines() if ln.strip()]
            raise RuntimeError(lines[-1] if lines else type(exc).__name__) from None
        except BaseException:  # Ctrl-C, SIGTERM: the ranks stop before their files are removed
            for proc in procs.processes:
                if proc.is_alive():
                    proc.terminate()
            for proc in procs.processes:
                proc.join(timeout=5)
            raise
        drain()
    p = plan(device, quick)
    return Measured(rows, skipped, backend, ranks, versions, reps=p["reps"], warmup=p["warmup"])


def _worker(rank: int, n: int, device: str, quick: bool, store: str, queue) -> None:
    """One rank: join the group, time every (collective, size), rank 0 reports to the queue."""
    import datetime
    import statistics
    import time

    import torch
    import torch.distributed as dist

    cuda = device == "cuda"
    if cuda:
        torch.cuda.set_device(rank)
        dev = torch.device("cuda", rank)
    else:
        torch.set_num_threads(1)  # n ranks share the cores; gloo's reductions are single-threaded
        dev = torch.device("cpu")
    dist.init_process_group(
        "nccl" if cuda else "gloo",
        init_method=f"file://{store}",
        rank=rank,
        world_size=n,
        timeout=datetime.timedelta(seconds=600 if cuda else 120),
        device_id=dev if cuda else None,
    )
    p = plan(device, quick)
    # torch >= 2.12 names the tensor collectives *_single; older releases *_into_tensor.
    gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor

    def sync():
        if cuda:
            torch.cuda.synchronize(dev)

    def timed(fn) -> float:
        """Seconds of one call: CUDA events on the current stream, which waits for NCCL's (no host
        launch time in it, which would be a large part of a 10 us latency floor); else the clock."""
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) * 1e-3
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0

    def op(kind: str, S: int) -> Callable[[], object]:
        count = S // ELEMENT_BYTES
        full = torch.ones(count, dtype=torch.float32, device=dev)
        if kind == "all_reduce":
            return lambda: dist.all_reduce(full)
        if kind == "all_gather":
            part = torch.ones(count // n, dtype=torch.float32, device=dev)
            return lambda: gather(full, part)
        if kind == "reduce_scatter":
            part = torch.empty(count // n, dtype=torch.float32, device=dev)
            return lambda: scatter(part, full)
        out = torch.empty_like(full)
        return lambda: dist.all_to_all_single(out, full)

    if rank == 0:
        versions: dict[str, str] = {"torch": str(torch.__version__)}
        if cuda:
            v = torch.cuda.nccl.version()
            versions["nccl"] = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
        queue.put(("versions", versions))
    try:
        for kind in KINDS:
            for size in p["sizes"]:
                S = message_bytes(size, n)
                label = f"{kind} {size / 2**10:g} KiB"
                try:
                    fn = op(kind, S)
                    for _ in range(p["warmup"]):
                        fn()
                    sync()
                except RuntimeError as exc:  # unsupported by this backend, or out of memory: every rank alike
                    if rank == 0:
                        queue.put(("skip", f"{label}: {str(exc).splitlines()[0]}"))
                        queue.put(("point", label))
                    continue
                times = []
                for _ in range(p["reps"]):
                    dist.barrier()
                    sync()
                    times.append(timed(fn))
                slowest = torch.tensor(times, dtype=torch.float64, device=dev)
                dist.all_reduce(slowest, op=dist.ReduceOp.MAX)  # a run lasts until its slowest rank ends
                if rank == 0:
                    t = statistics.median(slowest.tolist())
                    alg, bus = bandwidths(kind, n, S, t)
                    queue.put(
                        (
                            "row",
                            dict(
                                collective=kind,
                                ranks=n,
                                message_bytes=S,
                                time_s=t,
                                algbw_gbps=float(alg),
                                busbw_gbps=float(bus),
                            ),
                        )
                    )
                    queue.put(("point", label))
    finally:
        dist.destroy_process_group()
