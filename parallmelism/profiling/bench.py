"""Kernel micro-benchmarks with PyTorch on the local device (the `profile` command).

What is timed (median of `reps` runs after `warmup`; CUDA: CUDA events around each run, the L2
flushed by a 256 MiB write before it; CPU: wall clock):
  gemm       C[m,n] = A[m,k]·B[k,n] over a grid of m and (k, n) pairs, bf16 (CUDA) or fp32 (CPU),
             and fp8 e4m3 through torch._scaled_mm with per-tensor scales where the GPU has fp8
             tensor cores (compute capability >= 8.9); the cast of A is timed beside it.
  attention  F.scaled_dot_product_attention(is_causal=True), batch 1, head_dim 128 (CPU: 64),
             forward and backward, per backend available: cudnn, flash2 (FlashAttention-2 through
             SDPA); CPU: PyTorch's own kernel, labelled sdpa.
  hbm        y = x + 1 in bf16 over transfer sizes; bytes = read + write.
Sizes: the full grid on a GPU, a smaller one with --quick, tiny ones on the CPU (seconds).
Rows come out in the kernel-table format of validate/kernel_table.py.
"""

from __future__ import annotations

from functools import partial
from typing import Callable

import statistics
import time

FULL = dict(
    m=[16, 256, 1024, 4096, 8192],
    kn=[(4096, 4096), (4096, 14336), (14336, 4096), (8192, 8192), (8192, 28672), (1024, 8192), (8192, 1280)],
    seq=[1024, 2048, 4096, 8192, 16384],
    heads=[8, 16, 32],
    hbm=[2**21, 2**23, 2**25, 2**27, 2**29, 2**31],
    head_dim=128,
    reps=20,
    warmup=5,
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
)


def plan(device: str, quick: bool) -> dict:
    return CPU if device == "cpu" else (QUICK if quick else FULL)


class Timer:
    """Median seconds of fn() on a device."""

    def __init__(self, torch, device, reps, warmup):
        self.torch, self.device, self.reps, self.warmup = torch, device, reps, warmup
        self.flush = torch.empty(2**28, dtype=torch.uint8, device=device) if device == "cuda" else None

    def __call__(self, fn) -> float:
        torch = self.torch
        for _ in range(self.warmup):
            fn()
        times = []
        for _ in range(self.reps):
            if self.device == "cuda":
                if self.flush is not None:  # allocated for cuda in __init__
                    self.flush.zero_()
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
    )
    base.update(kw)
    return base


def tasks(torch, device: str, quick: bool):
    """[(label, thunk returning a list of rows)]: one task per benchmark point (the progress bar's steps)."""
    p = plan(device, quick)
    timer = Timer(torch, device, p["reps"], p["warmup"])
    dt = torch.bfloat16 if device == "cuda" else torch.float32
    dname = "bf16" if device == "cuda" else "fp32"
    fp8 = device == "cuda" and torch.cuda.get_device_capability() >= (8, 9) and hasattr(torch, "_scaled_mm")
    out: list[tuple[str, Callable[[], list]]] = []

    def gemm(m, k, n):
        a = torch.randn(m, k, device=device, dtype=dt)
        b = torch.randn(k, n, device=device, dtype=dt)
        rows = [_row(family="gemm", dtype=dname, part="fwd", m=m, k=k, n=n, measured_s=timer(lambda: a @ b))]
        if fp8:
            a8 = a.to(torch.float8_e4m3fn)
            b8 = b.t().contiguous().to(torch.float8_e4m3fn).t()
            one = torch.ones((), device=device, dtype=torch.float32)
            t = timer(lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16))
            cast = timer(lambda: (a * (448.0 / a.abs().amax())).to(torch.float8_e4m3fn))
            rows.append(_row(family="gemm", dtype="fp8", part="fwd", m=m, k=k, n=n, measured_s=t, cast_input_s=cast))
        return rows

    for m in p["m"]:
        for k, n in p["kn"]:
            out.append((f"gemm m={m} k={k} n={n}", partial(gemm, m, k, n)))

    backends = _attention_backends(torch, device)

    def attention(seq, heads, name, backend):
        d = p["head_dim"]
        q, k, v = (torch.randn(1, heads, seq, d, device=device, dtype=dt, requires_grad=True) for _ in range(3))
        F = torch.nn.functional

        def fwd():
            with backend():
                return F.scaled_dot_product_attention(q, k, v, is_causal=True)

        o = fwd()
        g = torch.randn_like(o)
        t_f = timer(fwd)
        t_b = timer(lambda: torch.autograd.grad(fwd(), (q, k, v), g)) - t_f  # backward = (fwd + bwd) - fwd
        common = dict(family="attention", dtype=dname, seq=seq, heads=heads, kv_heads=heads, head_dim=d, backend=name)
        return [_row(part="fwd", measured_s=t_f, **common), _row(part="bwd", measured_s=max(t_b, 1e-9), **common)]

    for name, backend in backends:
        for seq in p["seq"]:
            for heads in p["heads"]:
                out.append(
                    (
                        f"attention {name} s={seq} heads={heads}",
                        partial(attention, seq, heads, name, backend),
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
    return out


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


def _cpu_memory_gib() -> float:
    try:
        import os

        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError, AttributeError):
        return 16.0
