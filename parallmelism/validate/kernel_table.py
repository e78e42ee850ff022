"""Build an accelerator's kernel table (hardware/kernels/NAME.csv) from kernel measurement files.

    python -m parallmelism.validate.kernel_table \
        ../shared/reference/h100_kernels_measured.csv ../shared/reference/h100_kernel_curves.csv \
        --out hardware/kernels/h100-sxm-80gb.csv

One row per measured kernel, in one format for every family (cost.kernels reads it):
  family       gemm | attention | hbm
  dtype        bf16 | fp8 (GEMM inputs; attention and hbm rows are bf16)
  part         fwd | dgrad | wgrad (GEMM; the shapes are labelled by the layer's m, k, n) | fwd | bwd (attention)
  m, k, n      GEMM C[m,n] = A[m,k]·B[k,n]
  seq, heads, kv_heads, head_dim, backend   causal attention, batch 1, heads per GPU; backend
               cudnn | flash2 (cuDNN SDPA as Transformer Engine runs it on Hopper; FlashAttention-2)
  bytes        hbm rows: bytes read + written
  measured_s   median kernel time, seconds
  cast_input_s fp8 GEMM rows of the curves: unfused amax + scale + cast of A (upper bound on TE's fused cast)
  source       file the row comes from
The header lines of the source files (hardware, software versions, date, method) are copied on top.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

COLUMNS = ("family", "dtype", "part", "m", "k", "n", "seq", "heads", "kv_heads", "head_dim", "backend", "bytes",
           "measured_s", "cast_input_s", "source")
BACKENDS = {"cudnn_attention": "cudnn", "flash_attention": "flash2", "cudnn": "cudnn"}


def _header(path: Path) -> list[str]:
    with open(path, encoding="utf-8") as fh:
        return [line.rstrip("\n") for line in fh if line.startswith("#")]


def _num(x):
    import math

    return "" if x is None or (isinstance(x, float) and math.isnan(x)) else repr(float(x)).removesuffix(".0")


def _head_dim(r) -> float:
    """head_dim column, or 128 where a file states it in its header only (the curves)."""
    d = r.get("head_dim")
    return 128.0 if d is None or d != d else d


def rows_from(path: Path):
    """Kernel-table rows (dicts of COLUMNS) of one measurement file (either shared format)."""
    import pandas as pd

    df = pd.read_csv(path, comment="#")
    src = path.name
    out = []
    for r in df.to_dict("records"):
        fam = r["family"]
        base = {c: None for c in COLUMNS}
        base["source"] = src
        if fam == "gemm":
            dtype = "fp8" if str(r["dtype"]).startswith("fp8") else r["dtype"]  # fp8_e4m3 -> fp8
            base.update(family="gemm", dtype=dtype, part=r.get("part", "fwd"), m=r["m"], k=r["k"], n=r["n"],
                        measured_s=r["measured_s"], cast_input_s=r.get("cast_input_s"))
            out.append(base)
        elif fam == "attention_causal":
            backend = BACKENDS[r.get("backend", "cudnn")] if isinstance(r.get("backend"), str) else "cudnn"
            common = dict(family="attention", dtype="bf16", seq=r["seq"], heads=r["heads"], kv_heads=r["kv_heads"],
                          head_dim=_head_dim(r),
                          backend=backend)
            if "part" in r and isinstance(r["part"], str):
                out.append({**base, **common, "part": r["part"], "measured_s": r["measured_s"]})
            else:  # curves: forward and backward in one row
                out.append({**base, **common, "part": "fwd", "measured_s": r["measured_s"]})
                out.append({**base, **common, "part": "bwd", "measured_s": r["measured_bwd_s"]})
        elif fam in ("hbm_copy", "hbm_elementwise", "rmsnorm_compiled", "swiglu_compiled"):
            nbytes = r["bytes"] if "bytes" in r and r["bytes"] == r["bytes"] else r.get("bytes_moved")
            out.append({**base, "family": "hbm", "dtype": "bf16", "part": fam, "bytes": nbytes,
                        "measured_s": r["measured_s"]})
        else:
            raise ValueError(f"{path}: unknown kernel family {fam!r}")
    return out


def build(sources: list[Path], out: Path) -> int:
    lines = ["# Kernel table for parallmelism.cost.kernels (format: parallmelism/validate/kernel_table.py).",
             "# Built by: python -m parallmelism.validate.kernel_table " + " ".join(p.name for p in sources)]
    for p in sources:
        lines.append(f"# --- from {p.name} (shared/reference; measured by the project on one H100 SXM) ---")
        lines += _header(p)
    lines.append(",".join(COLUMNS))
    n = 0
    for p in sources:
        for r in rows_from(p):
            lines.append(",".join(_num(r[c]) if c not in ("family", "dtype", "part", "backend", "source")
                                  else (r[c] or "") for c in COLUMNS))
            n += 1
    tmp = out.with_suffix(out.suffix + ".tmp")
    tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tmp.replace(out)
    return n


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sources", nargs="+", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args(argv)
    try:
        n = build(a.sources, a.out)
    except (OSError, ValueError, KeyError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {a.out} ({n} kernels)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
