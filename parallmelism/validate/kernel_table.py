"""Build an accelerator's kernel table (hardware/kernels/NAME.csv) from kernel measurement files.

    python -m parallmelism.validate.kernel_table \
        ../shared/reference/h100_kernels_measured.csv ../shared/reference/h100_kernel_curves.csv \
        --out hardware/kernels/h100-sxm-80gb.csv

One row per measured kernel, in one format for every family (cost.kernels reads it):
  family       gemm | attention | hbm
  dtype        bf16 | fp8 (GEMM inputs; attention and hbm rows are bf16)
  Also reads aiconfigurator's parquet tables (rows_from_aiconfigurator).
  part         fwd | dgrad | wgrad (GEMM; the shapes are labelled by the layer's m, k, n) | fwd | bwd (attention)
  m, k, n      GEMM C[m,n] = A[m,k]·B[k,n]
  seq, heads, kv_heads, head_dim, backend   causal attention, batch 1, heads per GPU; backend
               cudnn | flash2 (cuDNN SDPA as Transformer Engine runs it on Hopper; FlashAttention-2)
  part         fwd_block | bwd_block (attention): a NON-causal block, seq query rows against
               kv_seq keys (a context-parallel ring step); read from benchmarks/gpu_cp_attention.py
               --grid files (rows_from_attention_grid; their causal rows only in the other files' gaps)
  bytes        hbm rows: bytes read + written
  measured_s   median kernel time, seconds
  cast_input_s fp8 GEMM rows of the curves: unfused amax + scale + cast of A (upper bound on TE's fused cast)
  source       file the row comes from
Decode regime (rows_from_decode: shared/reference/h100_decode_kernels.csv, one-token-at-a-time kernels):
  gemm_decode  forward GEMM at m = 1-256 tokens (part fwd, m, k, n): the skinny, weight-streaming regime
  moe_grouped  one MoE layer's routed experts as one torch._grouped_mm (part grouped): m = rows per
               expert that got tokens (routed copies / experts, at least 1), k = hidden, n = expert FFN
               width, experts = experts that got tokens; gate+up and down in one time (3 k×n matrices)
  attention    part decode: one query per sequence against a KV cache (seq 1, kv_seq = context,
               heads and kv_heads = per GPU × sequences, bytes = K+V bytes read)
Long context and training MoE (issue 32 item 2):
  attention    rows_from_attention_long (shared/reference/h100_attention_long.csv): causal kernels and
               unmasked all-gather CP blocks at 32k-128k tokens, cuDNN and FlashAttention-2
  moe_grouped  rows_from_moe_experts (shared/reference/h100_moe_experts.csv): the same grouped layer at
               64-4096 tokens per expert (training's and prefill's regime), and part dense: one dense
               GEMM pair of the same FLOPs measured beside it
  moe_permute  part permute: one token gather (index_select or index_add_) of m token copies of k =
               hidden elements, bytes = 4·m·k; measured_s = half the measured permute + unpermute
The header lines of the source files (hardware, software versions, date, method) are copied on top.
"""

from __future__ import annotations

from typing import Any

import argparse
import sys
from pathlib import Path

COLUMNS = (
    "family",
    "dtype",
    "part",
    "m",
    "k",
    "n",
    "seq",
    "heads",
    "kv_heads",
    "head_dim",
    "backend",
    "bytes",
    "measured_s",
    "cast_input_s",
    "source",
    "kv_seq",
    "experts",
)
BACKENDS = {"cudnn_attention": "cudnn", "flash_attention": "flash2", "cudnn": "cudnn", "flash2": "flash2"}


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


# aiconfigurator (ai-dynamo/aiconfigurator, Apache-2.0) GEMM tables: a log-spaced subset of its grid
AIC_GEMM_M = (1, 16, 64, 256, 1024, 2048, 4096, 8192, 16384, 32768)
AIC_GEMM_NK = (128, 256, 512, 1024, 2048, 4096, 8192, 16384, 51200)


def rows_from_aiconfigurator(path: Path):
    """Rows of an aiconfigurator measurement table (`gemm_perf.parquet`: bf16 GEMM latency in ms over
    m, n, k; `context_attention_perf.parquet`: causal prefill attention latency in ms over batch,
    isl, heads, kv heads), as forward kernels. Attention: heads = heads × batch (parallel CTAs, the
    kernel model's convention), the median over KV-head counts; the backend is recorded as flash2
    (its `kernel_source` flash_attention on A100)."""
    import pandas as pd

    df = pd.read_parquet(path)
    src = f"aiconfigurator {df['framework'].iloc[0]} {df['version'].iloc[0]} {path.name}"
    out = []
    if "gemm_dtype" in df.columns:
        g = df[(df.gemm_dtype == "bfloat16") & df.m.isin(AIC_GEMM_M) & df.n.isin(AIC_GEMM_NK) & df.k.isin(AIC_GEMM_NK)]
        g = g.groupby(["m", "k", "n"], as_index=False).latency.median()
        for r in g.itertuples():
            out.append(
                {
                    **{c: None for c in COLUMNS},
                    "family": "gemm",
                    "dtype": "bf16",
                    "part": "fwd",
                    "m": r.m,
                    "k": r.k,
                    "n": r.n,
                    "measured_s": r.latency * 1e-3,
                    "source": src,
                }
            )
    elif "isl" in df.columns:
        a = df[(df.attn_dtype == "bfloat16") & (df.isl >= 256)].copy()
        a["heads_x_batch"] = a.num_heads * a.batch_size
        a = a[a.heads_x_batch <= 256].groupby(["isl", "heads_x_batch", "head_dim"], as_index=False).latency.median()
        for r in a.itertuples():
            out.append(
                {
                    **{c: None for c in COLUMNS},
                    "family": "attention",
                    "dtype": "bf16",
                    "part": "fwd",
                    "seq": r.isl,
                    "heads": r.heads_x_batch,
                    "kv_heads": None,
                    "head_dim": r.head_dim,
                    "backend": "flash2",
                    "measured_s": r.latency * 1e-3,
                    "source": src,
                }
            )
    else:
        raise ValueError(f"{path}: not an aiconfigurator gemm_perf or context_attention_perf table")
    return out


def rows_from_attention_grid(df, src: str):
    """Rows of a benchmarks/gpu_cp_attention.py file: its non-causal blocks, forward and backward
    (parts fwd_block, bwd_block), and its causal kernels (parts fwd, bwd) at a length that falls in a
    gap of the other files (build's `_gap_only`): no other file timed that backend's causal kernel at
    that length, and they timed it both shorter and longer. The table's causal rows stay the runs the
    rest of it was measured with; what the grid adds is where those leave an interpolation between
    files: FlashAttention-2 at 16k tokens, which the short table measures to 8k and the long one from
    32k (the residuals between came out 6 % slower forward and 17 % backward than the grid's kernel at
    16 heads). Its lengths outside the others' range (1k, 2k) are not taken: the residuals interpolate
    in log2 of the shape over every row, so a short kernel's would reach the extrapolation to 1M+
    tokens (4 % on FlashAttention-2's backward at 1.1M tokens and 4 heads)."""
    out = []
    for r in df.to_dict("records"):
        causal = str(r["causal"]).lower() == "true"
        common = {c: None for c in COLUMNS} | dict(
            family="attention",
            dtype="bf16",
            seq=r["q_len"],
            kv_seq=None if causal else r["kv_len"],
            heads=r["heads"],
            kv_heads=r["kv_heads"],
            head_dim=128,
            backend=BACKENDS[r["backend"]],
            source=src,
        )
        if causal and r["q_len"] != r["kv_len"]:
            raise ValueError(f"{src}: a causal kernel of {r['q_len']} queries against {r['kv_len']} keys")
        fwd, bwd = ("fwd", "bwd") if causal else ("fwd_block", "bwd_block")
        gap = {"_gap_only": causal}
        out.append({**common, **gap, "part": fwd, "measured_s": r["fwd_s"]})
        out.append({**common, **gap, "part": bwd, "measured_s": r["bwd_s"]})
    return out


def _causal_lengths(rows) -> dict[str, set[float]]:
    """Lengths at which the rows time each backend's causal attention kernel (parts fwd, bwd), the
    `_gap_only` rows left out."""
    out: dict[str, set[float]] = {}
    for r in rows:
        if r["family"] == "attention" and r["part"] in ("fwd", "bwd") and not r.get("_gap_only"):
            out.setdefault(r["backend"], set()).add(float(r["seq"]))
    return out


def _fills_gap(r, lengths: dict[str, set[float]]) -> bool:
    """A `_gap_only` row's length is one no other file timed for its backend, between two they did."""
    timed = lengths.get(r["backend"], set())
    seq = float(r["seq"])
    return seq not in timed and any(t < seq for t in timed) and any(t > seq for t in timed)


def rows_from_attention_long(df, src: str):
    """Rows of the long-context attention file (shared/reference/h100_attention_long.csv): its causal
    kernels (parts fwd, bwd; q_len = kv_len, heads = kv_heads: no GQA) and its unmasked blocks of
    kv_len/4 queries against kv_len keys (parts fwd_block, bwd_block: the block an all-gather
    context-parallel rank runs). bwd_s is the backward alone (fwd+bwd minus fwd), as every table's.
    A causal kernel an earlier source of the build already timed (the curves' cuDNN rows at 32k-128k,
    8-16 heads) is not taken again (build): the two runs differ by up to 17 % in backward at 32k,
    and the curves' are the runs the rest of the table was measured with."""
    out = []
    for r in df.to_dict("records"):
        causal = r["mask"] == "causal"
        common = {c: None for c in COLUMNS} | dict(
            family="attention",
            dtype="bf16",
            seq=r["q_len"],
            kv_seq=None if causal else r["kv_len"],
            heads=r["heads"],
            kv_heads=r["heads"],
            head_dim=r["head_dim"],
            backend=BACKENDS[r["backend"]],
            source=src,
        )
        if not causal and r["mask"] != "block_q_quarter":
            raise ValueError(f"{src}: unknown attention mask {r['mask']!r}")
        fwd, bwd = ("fwd", "bwd") if causal else ("fwd_block", "bwd_block")
        new_only = {"_only_if_new": causal}  # build(): a causal kernel an earlier source timed is not taken twice
        out.append({**common, **new_only, "part": fwd, "measured_s": r["fwd_s"]})
        out.append({**common, **new_only, "part": bwd, "measured_s": r["bwd_s"]})
    return out


def _attention_key(r) -> tuple:
    return (
        r["family"],
        r["part"],
        r["backend"],
        float(r["seq"] or 0),
        float(r["heads"] or 0),
        float(r["head_dim"] or 0),
    )


def rows_from_moe_experts(df, src: str):
    """Rows of the MoE expert file (shared/reference/h100_moe_experts.csv), one MoE layer's expert work
    on a rank at 64-4096 tokens per expert:
      moe_grouped  part grouped: the torch._grouped_mm time of gate+up and down (the decode regime's
                   convention: m = tokens per expert, k = hidden, n = expert FFN width, experts)
      moe_grouped  part dense: the same layer's FLOPs as one dense GEMM pair over all tokens with one
                   expert's weights (the large-GEMM assumption), the grouped kernel's comparison
      moe_permute  part permute: ONE token gather of m = tokens copies of k = hidden (bytes = 4·m·k,
                   read + write in bf16): half the measured permute + unpermute pair (index_select
                   into expert order, index_add_ back; a gather's backward is the other kernel)
    The per-expert loop is a comparison, not a kernel a stack runs for a grouped layer: not taken."""
    from ..cost.kernels import PERMUTE_RW_BYTES

    out = []
    for r in df.to_dict("records"):
        base: dict[str, Any] = {c: None for c in COLUMNS} | {"source": src, "dtype": "bf16"}
        tpe, e, h = r["tokens_per_expert"], r["experts"], r["hidden"]
        out.append(
            {**base, "family": "moe_grouped", "part": "grouped", "m": tpe, "k": h, "n": r["ffn"]}
            | {"experts": e, "measured_s": r["grouped_mm_s"]}
        )
        out.append(
            {**base, "family": "moe_grouped", "part": "dense", "m": tpe, "k": h, "n": r["ffn"]}
            | {"experts": e, "measured_s": r["dense_same_flops_s"]}
        )
        out.append(
            {**base, "family": "moe_permute", "part": "permute", "m": tpe * e, "k": h}
            | {"bytes": PERMUTE_RW_BYTES * tpe * e * h, "measured_s": r["permute_unpermute_s"] / 2.0}
        )
    return out


def rows_from_decode(df, src: str):
    """Rows of the decode-kernel file (module docstring, decode regime). Its MoE rows time the same
    layer as a per-expert loop of launches too; the table keeps the grouped kernel, the one fused-MoE
    serving kernels run (the loop is 20x slower for 128 small experts)."""
    import re

    out = []
    for r in df.to_dict("records"):
        base: dict[str, Any] = {c: None for c in COLUMNS} | {"source": src, "dtype": "bf16"}
        if r["kind"] == "gemm":
            out.append(
                {**base, "family": "gemm_decode", "part": "fwd", "m": r["tokens_or_batch"], "k": r["k"]}
                | {"n": r["n"], "measured_s": r["s"]}
            )
        elif r["kind"] == "moe":
            # routed copies on the rank: tokens·top_k, over the EP size the shape names (experts spread over ep ranks)
            ep = re.search(r"-ep(\d+)$", r["shape"])
            copies = r["tokens_or_batch"] * r["top_k"] / (int(ep.group(1)) if ep else 1)
            touched = r["experts_touched"]
            out.append(
                {**base, "family": "moe_grouped", "part": "grouped", "m": max(copies / touched, 1.0), "k": r["k"]}
                | {"n": r["n"], "experts": touched, "measured_s": r["grouped_mm_s"]}
            )
        elif r["kind"] == "attention":
            b = r["tokens_or_batch"]
            out.append(
                {**base, "family": "attention", "part": "decode", "seq": 1, "kv_seq": r["context"]}
                | {"heads": r["q_heads"] * b, "kv_heads": r["kv_heads"] * b, "head_dim": 128, "backend": "sdpa"}
                | {"bytes": r["bytes"], "measured_s": r["s"]}
            )
        else:
            raise ValueError(f"{src}: unknown decode kernel kind {r['kind']!r}")
    return out


def rows_from(path: Path):
    """Kernel-table rows (dicts of COLUMNS) of one measurement file (either shared format, an
    attention-block grid, or an aiconfigurator parquet table)."""
    import pandas as pd

    if path.suffix == ".parquet":
        return rows_from_aiconfigurator(path)
    df = pd.read_csv(path, comment="#")
    if "mask" in df.columns:
        return rows_from_attention_long(df, path.name)
    if "tokens_per_expert" in df.columns:
        return rows_from_moe_experts(df, path.name)
    if "q_len" in df.columns:
        return rows_from_attention_grid(df, path.name)
    if "kind" in df.columns:
        return rows_from_decode(df, path.name)
    src = path.name
    out = []
    for r in df.to_dict("records"):
        fam = r["family"]
        base: dict[str, Any] = {c: None for c in COLUMNS}
        base["source"] = src
        if fam == "gemm":
            dtype = "fp8" if str(r["dtype"]).startswith("fp8") else r["dtype"]  # fp8_e4m3 -> fp8
            base.update(
                family="gemm",
                dtype=dtype,
                part=r.get("part", "fwd"),
                m=r["m"],
                k=r["k"],
                n=r["n"],
                measured_s=r["measured_s"],
                cast_input_s=r.get("cast_input_s"),
            )
            out.append(base)
        elif fam == "attention_causal":
            backend = BACKENDS[r.get("backend", "cudnn")] if isinstance(r.get("backend"), str) else "cudnn"
            common = dict(
                family="attention",
                dtype="bf16",
                seq=r["seq"],
                heads=r["heads"],
                kv_heads=r["kv_heads"],
                head_dim=_head_dim(r),
                backend=backend,
            )
            if "part" in r and isinstance(r["part"], str):
                out.append({**base, **common, "part": r["part"], "measured_s": r["measured_s"]})
            else:  # curves: forward and backward in one row
                out.append({**base, **common, "part": "fwd", "measured_s": r["measured_s"]})
                out.append({**base, **common, "part": "bwd", "measured_s": r["measured_bwd_s"]})
        elif fam in ("hbm_copy", "hbm_elementwise", "rmsnorm_compiled", "swiglu_compiled"):
            nbytes = r["bytes"] if "bytes" in r and r["bytes"] == r["bytes"] else r.get("bytes_moved")
            out.append(
                {**base, "family": "hbm", "dtype": "bf16", "part": fam, "bytes": nbytes, "measured_s": r["measured_s"]}
            )
        else:
            raise ValueError(f"{path}: unknown kernel family {fam!r}")
    return out


def build(sources: list[Path], out: Path, notes: list[str] | None = None) -> int:
    lines = [
        "# Kernel table for parallmelism.cost.kernels (format: parallmelism/validate/kernel_table.py).",
        "# Built by: python -m parallmelism.validate.kernel_table " + " ".join(p.name for p in sources),
    ]
    lines += [f"# {n}" for n in notes or []]
    for p in sources:
        if p.suffix == ".parquet":
            lines.append(
                f"# --- from {p.name}: NVIDIA aiconfigurator measurements (github.com/ai-dynamo/aiconfigurator, "
                "Apache-2.0; see `source` per row) ---"
            )
        else:
            where = "shared/reference" if p.parent.name == "reference" else "this repository"
            lines.append(f"# --- from {p.name} ({where}; measured by the project on one H100 SXM) ---")
            lines += _header(p)
    lines.append(",".join(COLUMNS))
    n = 0
    seen: set[tuple] = set()
    rows = [r for p in sources for r in rows_from(p)]
    lengths = _causal_lengths(rows)
    for r in rows:
        if r.get("_gap_only") and not _fills_gap(r, lengths):
            continue
        if r["family"] == "attention":
            if r.get("_only_if_new") and _attention_key(r) in seen:
                continue
            seen.add(_attention_key(r))
        lines.append(
            ",".join(
                _num(r.get(c)) if c not in ("family", "dtype", "part", "backend", "source") else (r[c] or "")
                for c in COLUMNS
            )
        )
        n += 1
    tmp = out.with_suffix(out.suffix + ".tmp")
    tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tmp.replace(out)
    return n


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sources", nargs="+", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--note", action="append", default=[], help="a header line (source, version, commit)")
    a = ap.parse_args(argv)
    try:
        n = build(a.sources, a.out, a.note)
    except (OSError, ValueError, KeyError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {a.out} ({n} kernels)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
