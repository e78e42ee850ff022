"""Kernel micro-benchmarks with PyTorch on the local device (the `profile` command).

What is timed (median of `reps` runs after `warmup` runs, on a GPU at least 25 ms of them; CUDA:
CUDA events around each run, the L2 flushed by a 256 MiB write before it, repeated until the GPU
stays busy for twice the CPU time one run takes to launch, so the CPU has queued the whole run
before its start event: the time is the GPU's, as in a training step where the CPU runs ahead, not
the launch rate of Python; CPU: wall clock):
  gemm       the three GEMMs of a linear layer Y[m,n] = X[m,k]·W[k,n] in training (fwd X·W, dgrad
             dY·Wᵀ, wgrad Xᵀ·dY) over a grid of m and (k, n) pairs, bf16 (CUDA) or fp32 (CPU), and
             fp8 e4m3 through torch._scaled_mm with per-tensor scales where the GPU has fp8 tensor
             cores (compute capability >= 8.9); the cast of X is timed beside fwd.
  attention  F.scaled_dot_product_attention(is_causal=True), batch 1, head_dim 128 (CPU: 64),
             and the non-causal block of a context-parallel ring step (seq queries, seq/2 keys),
             forward and backward, per backend available: cudnn, flash2 (FlashAttention-2 through
             SDPA); CPU: PyTorch's own kernel, labelled sdpa.
  hbm        y = x + 1 in bf16 over transfer sizes; bytes = read + write.
Sizes: the full grid on a GPU, a smaller one with --quick, tiny ones on the CPU (seconds).
Passes: on a GPU the whole grid is timed twice, one pass after the other, and each point keeps the
smaller of its two medians (fastest_of_passes): on an H100 single passes had a few points 1.5-14x
slow, a different few each run, while most points agreed within 2 % from run to run.
Rows come out in the kernel-table format of validate/kernel_table.py.
"""

from __future__ import annotations

from functools import partial
from typing import Callable

import math
import statistics
import time

MAX_FLUSHES = 1000  # at most ~0.1 s of flushing before one timed run
# Warm-up on a GPU lasts at least this long (triton.testing.do_bench's 25 ms): a point timed right after
# a CPU-heavy setup (cuDNN building a plan for a new shape) otherwise ran on clocks that had dropped
# while the GPU idled; one such H100 run had a few points 1.5-40x slow.
WARMUP_S = 0.025
MAX_WARMUP_CALLS = 10_000

FULL = dict(
    m=[16, 256, 1024, 4096, 8192],
    kn=[(4096, 4096), (4096, 14336), (14336, 4096), (8192, 8192), (8192, 28672), (1024, 8192), (8192, 1280)],
    seq=[1024, 2048, 4096, 8192, 16384],
    heads=[8, 16, 32],
    hbm=[2**21, 2**23, 2**25, 2**27, 2**29, 2**31],
    head_dim=128,
    reps=20,
    warmup=5,
    passes=2,
)
QUICK = dict(
    m=[256, 4096],
    kn=[(4096, 4096), (8192, 8192)],
    seq=[2048, 8192],
    heads=[8, 32],
    hbm=[2**23, 2**27, 2**30],
    head_dim=128,
    reps=5,
    warmup=2,
    passes=2,
)
CPU = dict(
    m=[16, 64, 256],
    kn=[(128, 128), (256, 512)],
    seq=[64, 128],
    heads=[2, 4],
    hbm=[2**16, 2**20, 2**22],
    head_dim=64,
    reps=3,
    warmup=1,
    passes=1,
)


def plan(device: str, quick: bool) -> dict:
    return CPU if device == "cpu" else (QUICK if quick else FULL)


class Timer:
    """Median seconds of fn() on a device."""

    def __init__(self, torch, device, reps, warmup):
        self.torch, self.device, self.reps, self.warmup = torch, device, reps, warmup
        self.flush = torch.empty(2**28, dtype=torch.uint8, device=device) if device == "cuda" else None
        self.flush_s = self._gpu_s(self.flush.zero_) if self.flush is not None else 0.0

    def _gpu_s(self, fn) -> float:
        """GPU seconds of one fn() (CUDA events, after one warm-up)."""
        torch = self.torch
        fn()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        return max(start.elapsed_time(end) * 1e-3, 1e-6)

    def _flushes(self, fn) -> int:
        """L2 flushes to queue before a run: enough that the GPU writes for twice the CPU time fn()
        takes to launch (measured once, warm), so no kernel of the run waits on the CPU."""
        self.torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        launch_s = time.perf_counter() - t0
        self.torch.cuda.synchronize()
        return max(1, min(MAX_FLUSHES, math.ceil(2.0 * launch_s / self.flush_s)))

    def __call__(self, fn) -> float:
        torch = self.torch
        for _ in range(self.warmup):
            fn()
        if self.flush is not None:  # and at least WARMUP_S of GPU work, as triton's do_bench does
            extra = math.ceil(WARMUP_S / self._gpu_s(fn))
            for _ in range(min(extra, MAX_WARMUP_CALLS)):
                fn()
        flush = self.flush
        flushes = self._flushes(fn) if flush is not None else 0
        times = []
        for _ in range(self.reps):
            if flush is not None:  # a CUDA device (allocated in __init__)
                for _ in range(flushes):
                    flush.zero_()
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                fn()
                end.record()
                torch.cuda.synchronize()
                times.append(start.elapsed_time(end) * 1e-3)
            else:
                t0 = time.perf_counter()
                fn()
                times.append(time.perf_counter() - t0)
        return statistics.median(times)


def _row(**kw):
    base = dict(
        family="",
        dtype="",
        part="",
        m=None,
        k=None,
        n=None,
        seq=None,
        heads=None,
        kv_heads=None,
        head_dim=None,
        backend="",
        bytes=None,
        measured_s=None,
        cast_input_s=None,
        source="profile",
        kv_seq=None,
    )
    base.update(kw)
    return base


KEY = ("family", "dtype", "part", "m", "k", "n", "seq", "kv_seq", "heads", "kv_heads", "head_dim", "backend", "bytes")


def fastest_of_passes(rows: list[dict]) -> list[dict]:
    """One row per kernel (KEY), the one with the smallest measured_s (and the smallest cast time),
    in first-seen order: the passes' repeated points folded into one."""
    best: dict[tuple, dict] = {}
    for r in rows:
        key = tuple(r[c] for c in KEY)
        old = best.get(key)
        if old is None:
            best[key] = dict(r)
            continue
        if r["measured_s"] < old["measured_s"]:
            old["measured_s"] = r["measured_s"]
        if r["cast_input_s"] is not None and (old["cast_input_s"] is None or r["cast_input_s"] < old["cast_input_s"]):
            old["cast_input_s"] = r["cast_input_s"]
    return list(best.values())


def tasks(torch, device: str, quick: bool):
    """[(label, thunk returning a list of rows)]: one task per benchmark point and pass (the progress
    bar's steps); fold the rows with fastest_of_passes."""
    p = plan(device, quick)
    timer = Timer(torch, device, p["reps"], p["warmup"])
    dt = torch.bfloat16 if device == "cuda" else torch.float32
    dname = "bf16" if device == "cuda" else "fp32"
    fp8 = device == "cuda" and torch.cuda.get_device_capability() >= (8, 9) and hasattr(torch, "_scaled_mm")
    out: list[tuple[str, Callable[[], list]]] = []

    def gemm(m, k, n):
        # The three GEMMs of a linear layer's training step, labelled by the layer's (m, k, n) as in
        # the reference table: fwd Y = X·W, dgrad dX = dY·Wᵀ, wgrad dW = Xᵀ·dY.
        x = torch.randn(m, k, device=device, dtype=dt)
        w = torch.randn(k, n, device=device, dtype=dt)
        dy = torch.randn(m, n, device=device, dtype=dt)
        xt = x.t().contiguous()
        parts = {"fwd": lambda: x @ w, "dgrad": lambda: dy @ w.t(), "wgrad": lambda: xt @ dy}
        rows = [
            _row(family="gemm", dtype=dname, part=part, m=m, k=k, n=n, measured_s=timer(fn))
            for part, fn in parts.items()
        ]
        if fp8:
            # torch._scaled_mm takes A row-major and B column-major, per-tensor scales (Transformer
            # Engine keeps the transposed fp8 copies it needs; their cast is timed beside fwd).
            e4m3 = torch.float8_e4m3fn
            one = torch.ones((), device=device, dtype=torch.float32)

            def col_major(t):
                return t.t().contiguous().t()

            x8, xt8, dy8 = x.to(e4m3), xt.to(e4m3), dy.to(e4m3)
            w8, wt8, dyc8 = col_major(w.to(e4m3)), w.to(e4m3).t(), col_major(dy.to(e4m3))
            operands = {"fwd": (x8, w8), "dgrad": (dy8, wt8), "wgrad": (xt8, dyc8)}
            cast = timer(lambda: (x * (448.0 / x.abs().amax())).to(e4m3))
            for part, (a8, b8) in operands.items():
                t = timer(lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16))
                extra = dict(cast_input_s=cast) if part == "fwd" else {}
                rows.append(_row(family="gemm", dtype="fp8", part=part, m=m, k=k, n=n, measured_s=t, **extra))
        return rows

    for m in p["m"]:
        for k, n in p["kn"]:
            out.append((f"gemm m={m} k={k} n={n}", partial(gemm, m, k, n)))

    backends = _attention_backends(torch, device)

    def attention(seq, heads, name, backend, causal):
        # the causal kernel of `seq` tokens, or the non-causal block of a context-parallel ring step
        # (seq query rows against seq/2 keys: parts fwd_block, bwd_block); one task each, so a shape
        # a backend refuses costs only its own rows
        d = p["head_dim"]
        kv_len = seq if causal else seq // 2
        q = torch.randn(1, heads, seq, d, device=device, dtype=dt, requires_grad=True)
        k, v = (torch.randn(1, heads, kv_len, d, device=device, dtype=dt, requires_grad=True) for _ in range(2))
        t_f, t_b = time_sdpa(torch, timer, backend, q, k, v, causal)
        common = dict(family="attention", dtype=dname, seq=seq, heads=heads, kv_heads=heads, head_dim=d, backend=name)
        suffix = "" if causal else "_block"
        if not causal:
            common["kv_seq"] = kv_len
        return [
            _row(part="fwd" + suffix, measured_s=t_f, **common),
            _row(part="bwd" + suffix, measured_s=t_b, **common),
        ]

    for name, backend in backends:
        for causal in (True, False):
            for seq in p["seq"]:
                for heads in p["heads"]:
                    what = "attention" if causal else "attention block"
                    out.append(
                        (
                            f"{what} {name} s={seq} heads={heads}",
                            partial(attention, seq, heads, name, backend, causal),
                        )
                    )

    def hbm(nbytes):
        x = torch.empty(int(nbytes) // 4, device=device, dtype=torch.bfloat16)
        return [
            _row(
                family="hbm",
                dtype="bf16",
                part="hbm_elementwise",
                bytes=float(2 * x.numel() * 2),
                measured_s=timer(lambda: x + 1),
            )
        ]

    for nbytes in p["hbm"]:
        out.append((f"hbm {nbytes / 2**20:g} MiB", partial(hbm, nbytes)))
    passes = p["passes"]
    return [
        (f"{label} (pass {i + 1}/{passes})" if passes > 1 else label, fn) for i in range(passes) for label, fn in out
    ]


def time_sdpa(torch, timer, backend, q, k, v, causal: bool, enable_gqa: bool = False) -> tuple[float, float]:
    """(forward, backward) seconds of F.scaled_dot_product_attention(q, k, v) under the context
    manager `backend()` makes; the backward is its kernels alone (autograd.grad of one saved output)."""
    F = torch.nn.functional
    gqa = {"enable_gqa": True} if enable_gqa else {}  # the keyword exists from PyTorch 2.5 (profile takes >= 2.4)

    def fwd():
        with backend():
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, **gqa)

    o = fwd()
    g = torch.randn_like(o)
    return timer(fwd), timer(lambda: torch.autograd.grad(o, (q, k, v), g, retain_graph=True))


def _attention_backends(torch, device):
    """[(table name, context manager factory)] of the SDPA backends that run here."""
    import contextlib

    if device == "cpu":
        return [("sdpa", contextlib.nullcontext)]
    from torch.nn.attention import SDPBackend, sdpa_kernel

    found = []
    for name, b in (("cudnn", getattr(SDPBackend, "CUDNN_ATTENTION", None)), ("flash2", SDPBackend.FLASH_ATTENTION)):
        if b is None:
            continue
        try:
            q = torch.randn(1, 2, 128, 128, device=device, dtype=torch.bfloat16)
            with sdpa_kernel(b):
                torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)
            found.append((name, lambda b=b: sdpa_kernel(b)))
        except RuntimeError:
            continue
    return found


def device_facts(torch, device: str) -> dict:
    """Name, memory, SM count and software versions of the device, for the YAML header."""
    import platform

    facts = {"torch": torch.__version__, "date": time.strftime("%Y-%m-%d", time.gmtime())}
    if device == "cuda":
        prop = torch.cuda.get_device_properties(0)
        facts.update(
            name=prop.name,
            memory_gib=prop.total_memory / 2**30,
            sm_count=prop.multi_processor_count,
            cuda=torch.version.cuda,
            cudnn=_cudnn_version(torch),
            gpus=torch.cuda.device_count(),
        )
    else:
        import os

        facts.update(
            name=f"CPU {platform.processor() or platform.machine()}",
            memory_gib=_cpu_memory_gib(),
            sm_count=os.cpu_count() or 1,
            cuda=None,
            gpus=1,
        )
    return facts


def _cudnn_version(torch):
    """cuDNN as 'major.minor.patch' (the SDPA cuDNN backend's library), or None where absent."""
    v = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    if not v:
        return None
    return f"{v // 10000}.{v // 100 % 100}.{v % 100}" if v >= 10000 else f"{v // 1000}.{v // 100 % 10}.{v % 100}"


def _cpu_memory_gib() -> float:
    try:
        import os

        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError, AttributeError):
        return 16.0
