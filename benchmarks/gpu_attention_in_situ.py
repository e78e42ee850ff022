"""Long-context attention kernels timed as a training step runs them, not only as the kernel table was
measured (issue 32: the long-context rows of both stacks need about 1.5x on their attention kernels,
benchmarks/long_context_gap.py; nothing in the model may be fitted to that without a measurement).

    python benchmarks/gpu_attention_in_situ.py                          # cuDNN, 32k causal, 8 heads, 20 s
    python benchmarks/gpu_attention_in_situ.py --backend flash2 --heads 32 --copy-mib 512
    python benchmarks/gpu_attention_in_situ.py --device cpu --seq 256 --heads 2 --seconds 1   # smoke run, no copies

One causal F.scaled_dot_product_attention forward + backward (batch 1, head_dim 128, bf16; the shape of a
context-parallel rank's step 0 at 32k tokens per rank), in three phases:
  short          as shared/reference/h100_attention_long.csv was measured: one warm-up, median of 5
  sustained      back to back for --seconds: the median of the first 5 and of the last 5 iterations
                 (clocks settle under the power limit; nvidia-smi's SM clock read beside, where pynvml is)
  beside-copies  the same with a device-to-device copy of --copy-mib MiB looping on a second stream, the
                 HBM traffic of a CP hop's send and receive (NCCL's SMs are not reproduced on one GPU)
Prints CSV: phase, backend, seq, heads, iterations, ms (forward + backward, median), ratio to short,
sm_clock_mhz (blank where it cannot be read). A ratio near 1.5 in the last two phases would be the
measurement issue 32 lacks; near 1.0 rules these two causes out.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

HEAD_DIM = 128
FIRST_LAST = 5


def _clock_mhz(torch, device) -> str:
    """nvidia-smi's SM clock now, MHz (blank without pynvml or on the CPU)."""
    if device == "cpu":
        return ""
    try:
        return f"{torch.cuda.clock_rate(0):.0f}"
    except Exception:  # no pynvml or no NVML: the column stays blank, the timings stand
        return ""


def _step(torch, backend_ctx, q, k, v, g):
    """One forward + backward of causal SDPA (the backward by autograd.grad of the output)."""
    with backend_ctx():
        o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.autograd.grad(o, (q, k, v), g)


def _timed(torch, device, fn, n: int, pre=None, post=None) -> list[float]:
    """Seconds of each of n calls of fn (CUDA events on a GPU, wall clock on the CPU); pre() runs just
    before the timed region (work launched on another stream overlaps it), post() after it."""
    out = []
    for _ in range(n):
        if pre is not None:
            pre()
        if device == "cpu":
            t0 = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t0)
        else:
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            out.append(a.elapsed_time(b) / 1e3)
        if post is not None:
            post()
    return out


def _sustained(torch, device, fn, seconds: float, pre=None, post=None) -> list[float]:
    """Per-iteration seconds of fn run back to back for `seconds` (at least 2 x FIRST_LAST iterations)."""
    times: list[float] = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end or len(times) < 2 * FIRST_LAST:
        times += _timed(torch, device, fn, 1, pre, post)
    return times


def _backend(torch, name: str, device: str):
    """Context-manager factory pinning SDPA to `name` (cudnn | flash2); the CPU runs PyTorch's own."""
    import contextlib

    if device == "cpu":
        return contextlib.nullcontext
    from torch.nn.attention import SDPBackend, sdpa_kernel

    b = {"cudnn": getattr(SDPBackend, "CUDNN_ATTENTION", None), "flash2": SDPBackend.FLASH_ATTENTION}[name]
    if b is None:
        raise SystemExit(f"this PyTorch has no {name} SDPA backend")
    return lambda: sdpa_kernel(b)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seq", type=int, default=32768, help="query = key tokens (default 32768)")
    parser.add_argument("--heads", type=int, default=8, help="attention heads (default 8)")
    parser.add_argument("--backend", choices=("cudnn", "flash2"), default="cudnn")
    parser.add_argument("--seconds", type=float, default=20.0, help="length of each sustained phase")
    parser.add_argument("--copy-mib", type=float, default=134.0, help="bytes of the looping copy, MiB")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    args = parser.parse_args(argv)

    import torch

    device = args.device
    if device == "cuda" and not torch.cuda.is_available():
        print("no CUDA device is visible to PyTorch (use --device cpu for a smoke run)", file=sys.stderr)
        return 2
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    shape = (1, args.heads, args.seq, HEAD_DIM)
    q, k, v = (torch.randn(shape, device=device, dtype=dtype, requires_grad=True) for _ in range(3))
    g = torch.randn(shape, device=device, dtype=dtype)
    ctx = _backend(torch, args.backend, device)

    def step():
        _step(torch, ctx, q, k, v, g)

    rows = []
    _timed(torch, device, step, 1)  # warm-up (plans, autotuning)
    short = statistics.median(_timed(torch, device, step, FIRST_LAST))
    rows.append(("short", FIRST_LAST, short, _clock_mhz(torch, device)))
    run = _sustained(torch, device, step, args.seconds)
    clock = _clock_mhz(torch, device)
    rows.append(("sustained-first", FIRST_LAST, statistics.median(run[:FIRST_LAST]), ""))
    rows.append(("sustained-last", len(run), statistics.median(run[-FIRST_LAST:]), clock))

    n = max(int(args.copy_mib * 2**20 / 4), 1)
    src, dst = torch.randn(n, device=device), torch.empty(n, device=device)
    side = torch.cuda.Stream() if device == "cuda" else None
    per_step = 1
    if device == "cuda":  # enough copies to cover one attention step at ~2.5 TB/s of read + write
        per_step = max(1, int(short * 2.5e12 / (2 * 4 * n)))

    def launch_copies():  # on the side stream, not waited for inside the timed region
        if side is None:
            return
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(per_step):
                dst.copy_(src)

    def join_copies():
        if side is not None:
            torch.cuda.current_stream().wait_stream(side)
            torch.cuda.synchronize()

    run = _sustained(torch, device, step, args.seconds, launch_copies, join_copies)
    rows.append(("beside-copies", len(run), statistics.median(run[-FIRST_LAST:]), _clock_mhz(torch, device)))

    print("phase,backend,seq,heads,iterations,ms,ratio_to_short,sm_clock_mhz")
    for phase, iters, s, mhz in rows:
        print(f"{phase},{args.backend},{args.seq},{args.heads},{iters},{s * 1e3:.3f},{s / short:.3f},{mhz}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
