"""`python -m parallmelism.validate.kernel_report`: the kernel model's physics constants
(cost/kernels.py) and its error on every row of the shipped H100 kernel table."""

from __future__ import annotations


def report(argv=None) -> int:
    """Print the H100 physics constants and the model's error on every row of the shipped table."""
    import numpy as np
    import pandas as pd

    from ..config.compose import load_option
    from ..config.kernel_tables import kernel_model
    from ..cost.kernels import (
        ATTENTION_LAUNCH_S,
        ATTENTION_PEAK_FRACTION,
        GEMM_HBM_FRACTION,
        GEMM_LAUNCH_S,
        GEMM_PEAK_FRACTION,
        GEMM_SPLIT_K_MIN,
        GEMM_TILE,
        _table_row_flops,
        attention_physics_s,
        gemm_physics_s,
    )

    hw = load_option("hardware", "h100-sxm-80gb")
    km = kernel_model(hw)
    df = pd.read_csv(km.table.path, comment="#")
    pred = np.empty(len(df))
    phys = np.empty(len(df))
    for i, r in enumerate(df.itertuples()):
        pred[i] = km.table_row_s(r)
        if r.family == "gemm":
            phys[i] = gemm_physics_s(r.m, r.k, r.n, r.dtype, km.peak_flops(r.dtype), km.hbm_bps, km.sms)
        elif r.family == "attention":
            phys[i] = attention_physics_s(_table_row_flops(r), r.seq, r.heads, km.peak_flops("bf16"), km.sms)
        else:
            phys[i] = r.bytes / km.hbm_bps / GEMM_HBM_FRACTION
    df["model_err_pct"] = 100 * (pred / df.measured_s - 1)
    df["physics_only_err_pct"] = 100 * (phys / df.measured_s - 1)
    print(
        f"GEMM tile {GEMM_TILE}, split-k min {GEMM_SPLIT_K_MIN}, peak fractions {GEMM_PEAK_FRACTION}, "
        f"HBM {GEMM_HBM_FRACTION}, launch {GEMM_LAUNCH_S * 1e6:.0f} us; attention fraction "
        f"{ATTENTION_PEAK_FRACTION}, launch {ATTENTION_LAUNCH_S * 1e6:.0f} us"
    )
    for (fam, src), g in df.groupby(["family", "source"]):
        e, p = g.model_err_pct.abs(), g.physics_only_err_pct.abs()
        print(
            f"{fam:10s} {src:28s} rows {len(g):4d}  model |err| median {e.median():5.2f} % max {e.max():6.2f} %"
            f"   physics only median {p.median():6.2f} % max {p.max():7.2f} %"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(report())
