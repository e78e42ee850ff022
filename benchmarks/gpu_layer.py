"""One Llama transformer layer, forward and forward+backward, timed on the local GPU with PyTorch.

    python benchmarks/gpu_layer.py --out layers.csv               # the cases below, eager and compiled
    python benchmarks/gpu_layer.py --device cpu --tiny            # a smoke run with tiny shapes
    python benchmarks/gpu_layer.py --trace trace.txt              # also a torch.profiler kernel table

What is timed: the per-GPU shard of one layer of a shipped Llama model at tensor-parallel size tp
(heads, KV heads and the FFN width divided by tp; no sequence parallelism, so norms and residuals
see all s·b tokens) and no communication, in bf16: RMSNorm, fused QKV projection, RoPE on q and k,
causal SDPA with GQA (cuDNN backend), output projection, residual, RMSNorm, fused gate/up projection,
SwiGLU, down projection, residual. Forward alone and forward + backward (gradients of the input and
every weight), the median of 20 runs after 5 warm-ups, timed as `profile` times kernels
(parallmelism/profiling/bench.py Timer: CUDA events, the L2 flushed before each run, the CPU's
launches queued ahead). `eager` is plain PyTorch; `compiled` is torch.compile of the same
layer (fused elementwise kernels, as Transformer Engine's fused norms and SwiGLU are).

Each row is a measurement to compare with the cost model's per-op roofline of the same shard
(`parallmelism show ... grid.tp=[TP] workload.sequence_parallel=false`, time_fwd_ms + time_bwd_ms of
the layer ops): tests/test_profiled_h100.py does so against the shipped copy in
hardware/kernels/h100-sxm-80gb-profiled.layers.csv.
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from parallmelism.profiling.bench import Timer  # noqa: E402

# (model, tp, seq, micro-batch): the layer shards of the shipped Llama validation rows, short and long context
CASES = [
    ("llama3.1-8b", 1, 8192, 1),
    ("llama3.1-8b", 1, 2048, 4),
    ("llama3.1-8b", 2, 8192, 1),
    ("llama3.1-70b", 4, 8192, 1),
    ("llama3.1-70b", 8, 8192, 1),
    ("llama3.1-70b", 8, 4096, 1),
    ("llama3.1-70b", 8, 32768, 1),
    ("llama3.1-405b", 8, 8192, 1),
    ("llama3.1-405b", 8, 16384, 1),
]
FIELDS = ["model", "tp", "seq", "micro_batch", "mode", "fwd_ms", "fwd_bwd_ms", "device", "torch", "cuda", "date"]


def shapes(model: str, tp: int) -> dict:
    spec = yaml.safe_load((ROOT / "models" / f"{model}.yaml").read_text())
    return dict(
        hidden=spec["hidden"],
        heads=spec["heads"] // tp,
        kv_heads=max(1, spec["kv_heads"] // tp),
        head_dim=spec.get("head_dim") or spec["hidden"] // spec["heads"],
        ffn=spec["ffn_hidden"] // tp,
    )


def make_layer(torch, sh: dict, device: str, dtype):
    F = torch.nn.functional
    h, nq, nkv, d, f = sh["hidden"], sh["heads"], sh["kv_heads"], sh["head_dim"], sh["ffn"]

    def w(rows, cols):
        return (torch.randn(rows, cols, device=device, dtype=dtype) / cols**0.5).requires_grad_()

    params = dict(
        norm1=torch.ones(h, device=device, dtype=dtype, requires_grad=True),
        qkv=w((nq + 2 * nkv) * d, h),
        out=w(h, nq * d),
        norm2=torch.ones(h, device=device, dtype=dtype, requires_grad=True),
        gate_up=w(2 * f, h),
        down=w(h, f),
    )

    def rope(x, cos, sin):
        x1, x2 = x.chunk(2, dim=-1)
        return x * cos + torch.cat((-x2, x1), dim=-1) * sin

    def layer(x, cos, sin):
        b, s, _ = x.shape
        y = F.rms_norm(x, (h,), params["norm1"])
        q, k, v = F.linear(y, params["qkv"]).split((nq * d, nkv * d, nkv * d), dim=-1)
        q = rope(q.view(b, s, nq, d), cos, sin).transpose(1, 2)
        k = rope(k.view(b, s, nkv, d), cos, sin).transpose(1, 2)
        v = v.view(b, s, nkv, d).transpose(1, 2)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=nkv != nq)
        x = x + F.linear(a.transpose(1, 2).reshape(b, s, nq * d), params["out"])
        g, u = F.linear(F.rms_norm(x, (h,), params["norm2"]), params["gate_up"]).chunk(2, dim=-1)
        return x + F.linear(F.silu(g) * u, params["down"])

    return layer


def measure(torch, model, tp, seq, b, mode, device, reps, warmup, tiny=False):
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    sh = shapes(model, tp)
    if tiny:
        sh = dict(hidden=256, heads=4, kv_heads=2, head_dim=64, ffn=512)
        seq, b = 128, 1
    layer = make_layer(torch, sh, device, dtype)
    x = torch.randn(b, seq, sh["hidden"], device=device, dtype=dtype, requires_grad=True)
    pos = torch.arange(seq, device=device, dtype=torch.float32)[:, None]
    inv = 1.0 / 500000.0 ** (torch.arange(0, sh["head_dim"], 2, device=device, dtype=torch.float32) / sh["head_dim"])
    ang = torch.cat((pos * inv, pos * inv), dim=-1)[None, :, None, :]
    cos, sin = ang.cos().to(dtype), ang.sin().to(dtype)
    fn = torch.compile(layer) if mode == "compiled" else layer
    ctx = _cudnn(torch) if device == "cuda" else _null()
    timer = Timer(torch, device, reps, warmup)

    def run(f) -> float:
        return timer(f) * 1e3

    with ctx:
        fwd = run(lambda: fn(x, cos, sin))
        g = torch.randn(b, seq, sh["hidden"], device=device, dtype=dtype)

        def fwd_bwd():
            torch.autograd.backward(fn(x, cos, sin), g)

        both = run(fwd_bwd)
    return fwd, both, (layer, x, cos, sin, g)


def _cudnn(torch):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel(SDPBackend.CUDNN_ATTENTION)


def _null():
    import contextlib

    return contextlib.nullcontext()


def kernel_trace(torch, model, tp, seq, b, device, path: Path, tiny: bool = False) -> None:
    """torch.profiler's kernel table (CUDA time per kernel name) of five eager forward+backward runs."""
    from torch.profiler import ProfilerActivity, profile

    _, _, (layer, x, cos, sin, g) = measure(torch, model, tp, seq, b, "eager", device, 3, 2, tiny)
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with _cudnn(torch) if device == "cuda" else _null(), profile(activities=acts) as prof:
        for _ in range(5):
            torch.autograd.backward(layer(x, cos, sin), g)
        if device == "cuda":
            torch.cuda.synchronize()
    key = "self_cuda_time_total" if device == "cuda" else "self_cpu_time_total"
    head = f"{model} tp{tp} s{seq} b{b}, eager forward+backward x5, torch.profiler sorted by {key}\n"
    path.write_text(head + prof.key_averages().table(sort_by=key, row_limit=40, max_name_column_width=90))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None, help="CSV to write (default: print only)")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true", help="tiny shapes, one case (a smoke run)")
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--trace", type=Path, default=None, help="also write torch.profiler's kernel table here")
    args = ap.parse_args(argv)
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        print("no CUDA device is visible to PyTorch", file=sys.stderr)
        return 2
    facts = dict(
        device=torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu",
        torch=torch.__version__,
        cuda=torch.version.cuda or "",
        date=time.strftime("%Y-%m-%d", time.gmtime()),
    )
    cases = CASES[:1] if args.tiny else CASES
    rows = []
    for model, tp, seq, b in cases:
        modes = ["eager"] + ([] if args.no_compile else ["compiled"])
        for mode in modes:
            reps, warmup = (3, 1) if args.tiny else (20, 5)
            fwd, both, _ = measure(torch, model, tp, seq, b, mode, args.device, reps, warmup, args.tiny)
            row = dict(
                model=model, tp=tp, seq=seq, micro_batch=b, mode=mode, fwd_ms=f"{fwd:.4f}", fwd_bwd_ms=f"{both:.4f}"
            )
            rows.append({**row, **facts})
            print(f"{model} tp{tp} s{seq} b{b} {mode}: fwd {fwd:.3f} ms, fwd+bwd {both:.3f} ms", flush=True)
    if args.out:
        with args.out.open("w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=FIELDS)
            w.writeheader()
            w.writerows(rows)
    if args.trace:
        kernel_trace(torch, *cases[0], args.device, args.trace, args.tiny)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
