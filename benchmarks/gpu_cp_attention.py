"""The attention kernels of one context-parallel rank, timed on the local GPU (cuDNN and FlashAttention-2).

    python benchmarks/gpu_cp_attention.py > blocks.csv          # the ring kernels of a 405B rank (below)
    python benchmarks/gpu_cp_attention.py --grid > grid.csv     # causal and non-causal over q, kv, heads

Transformer Engine's load-balanced ring (cp_comm_type p2p) splits a sequence of s tokens into 2·cp
chunks and gives rank r chunks r and 2·cp-1-r. Per layer a rank runs, forward and backward:
  step 0        its two chunks against themselves: one causal kernel of s/cp tokens;
  steps 1..cp-1 a non-causal block: both query chunks against one earlier key/value chunk
                (q s/cp × kv s/(2cp)), or its later query chunk against both (q s/(2cp) × kv s/cp).
With chunks of 4,096 tokens (s = 8192·cp) every step is one of three measured kernels: causal
8192, non-causal 8192×4096 and non-causal 4096×8192. Heads are a Llama 3.1 405B rank at tp 8:
16 query heads, 1 KV head, head_dim 128, batch 1, bf16. Timed as `profile` times kernels
(parallmelism/profiling/bench.py Timer). Prints CSV: backend, q_len, kv_len, heads, kv_heads,
causal, fwd_s, bwd_s (backward kernels alone). tests/test_profiled_h100.py compares the cost
model's per-rank attention with the sums of these kernels
(hardware/kernels/h100-sxm-80gb-profiled.cp-attention.csv). --grid times causal kernels and
non-causal blocks over q_len 1k-16k, kv_len q/2..2q and 8-64 query heads (GQA 8:1), the data a
per-block attention model needs (hardware/kernels/h100-sxm-80gb-profiled.attention-grid.csv).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from parallmelism.profiling.bench import Timer, time_sdpa  # noqa: E402

SHAPES = [  # (q_len, kv_len, causal)
    (4096, 4096, True),
    (4096, 4096, False),
    (4096, 8192, False),
    (8192, 4096, False),
    (8192, 8192, True),
    (2048, 2048, False),
    (16384, 16384, True),
    (32768, 32768, True),
    (65536, 65536, True),
]


GRID = [
    (q, kv, False, h) for q in (1024, 2048, 4096, 8192, 16384) for kv in (q // 2, q, 2 * q) for h in (8, 16, 32, 64)
] + [(q, q, True, h) for q in (1024, 2048, 4096, 8192, 16384) for h in (8, 16, 32, 64)]


def main(argv=None) -> int:
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    if not torch.cuda.is_available():
        print("no CUDA device is visible to PyTorch", file=sys.stderr)
        return 2
    timer = Timer(torch, "cuda", 20, 5)
    cudnn = torch.backends.cudnn.version()
    print(
        f"# {torch.cuda.get_device_name(0)}, PyTorch {torch.__version__}, CUDA {torch.version.cuda}, cuDNN {cudnn}, "
        f"{time.strftime('%Y-%m-%d', time.gmtime())}; benchmarks/gpu_cp_attention.py"
    )
    print("backend,q_len,kv_len,heads,kv_heads,causal,fwd_s,bwd_s")
    grid = "--grid" in (sys.argv[1:] if argv is None else argv)
    points = GRID if grid else [(q, kv, c, 16) for q, kv, c in SHAPES]
    d = 128
    for name, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash2", SDPBackend.FLASH_ATTENTION)):
        for q_len, kv_len, causal, heads in points:
            kv_heads = max(1, heads // 8) if grid else 1
            q = torch.randn(1, heads, q_len, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
            k, v = (
                torch.randn(1, kv_heads, kv_len, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                for _ in range(2)
            )

            try:
                t_f, t_b = time_sdpa(torch, timer, lambda: sdpa_kernel(backend), q, k, v, causal, enable_gqa=True)
            except RuntimeError as exc:  # a backend that refuses a shape: say so, go on
                print(f"# skipped {name} {q_len}x{kv_len} heads {heads}: {str(exc).splitlines()[0]}", flush=True)
                continue
            print(f"{name},{q_len},{kv_len},{heads},{kv_heads},{causal},{t_f:.6g},{t_b:.6g}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
