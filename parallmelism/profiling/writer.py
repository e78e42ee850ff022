"""Accelerator YAML + kernel table from profiled rows (the `profile` command's output).

Measured: the kernel table (every row), HBM capacity (the device's total memory; usable = total),
the SM count. Estimated from the measurements, stated in the YAML: peak_tflops (the fastest GEMM
÷ cost.kernels.GEMM_PEAK_FRACTION) and hbm_bandwidth_gbps (the fastest transfer ÷ 0.9): the kernel
model divides them out again for measured shapes, so they only steer extrapolation. Not measured
(links, serving efficiencies, overheads, price): copied from the `--base` accelerator, and said so.
"""

from __future__ import annotations

from pathlib import Path

from ..validate.kernel_table import COLUMNS

HBM_FRACTION_OF_FASTEST = 0.9


def kernel_table_text(rows: list[dict], facts: dict) -> str:
    from ..validate.kernel_table import _num

    lines = [
        f"# Kernel table measured by `parallmelism profile` on {facts['name']} ({facts['gpus']} visible), "
        f"PyTorch {facts['torch']}"
        + (f", CUDA {facts['cuda']}" if facts.get("cuda") else "")
        + f", {facts['date']}; median time, L2 flushed on GPUs (parallmelism/profiling/bench.py).",
        ",".join(COLUMNS),
    ]
    for r in rows:
        lines.append(
            ",".join(
                _num(r[c]) if c not in ("family", "dtype", "part", "backend", "source") else (r[c] or "")
                for c in COLUMNS
            )
        )
    return "\n".join(lines) + "\n"


def estimated_peaks(rows: list[dict]) -> tuple[dict, float]:
    """(peak TFLOP/s per GEMM dtype, HBM GB/s) estimated from the fastest measured kernels."""
    from ..cost.kernels import GEMM_PEAK_FRACTION

    peaks: dict[str, float] = {}
    for r in rows:
        if r["family"] == "gemm":
            rate = 2.0 * r["m"] * r["k"] * r["n"] / r["measured_s"] / 1e12
            frac = GEMM_PEAK_FRACTION.get(r["dtype"], GEMM_PEAK_FRACTION["bf16"])
            peaks[r["dtype"]] = max(peaks.get(r["dtype"], 0.0), rate / frac)
    if "fp32" in peaks and "bf16" not in peaks:  # CPU profile: fp32 GEMMs stand in for the bf16 slot
        peaks["bf16"] = peaks["fp32"]
    bw = max((r["bytes"] / r["measured_s"] / 1e9 for r in rows if r["family"] == "hbm"), default=1.0)
    return {k: float(f"{v:.4g}") for k, v in peaks.items()}, float(f"{bw / HBM_FRACTION_OF_FASTEST:.4g}")


def accelerator_yaml(name: str, rows: list[dict], facts: dict, base, table_path: Path, backend: str) -> str:
    from omegaconf import OmegaConf

    peaks, bw = estimated_peaks(rows)
    data = base.model_dump(mode="json")
    data.update(
        name=name,
        display_name=f"{facts['name']} (profiled)",
        source=f"parallmelism profile, {facts['date']}, PyTorch {facts['torch']}"
        + (f", CUDA {facts['cuda']}" if facts.get("cuda") else ""),
        confidence="measured kernels; peaks estimated",
        hbm_capacity_gib=round(facts["memory_gib"], 3),
        hbm_usable_gib=round(facts["memory_gib"], 3),
        hbm_bandwidth_gbps=bw,
        peak_tflops=peaks,
        kernels={"table": str(table_path), "sm_count": int(facts["sm_count"]), "attention_backend": backend},
    )
    header = (
        f"# Written by `parallmelism profile` on {facts['name']} ({facts['date']}).\n"
        f"# Measured: kernels (table), HBM capacity, SM count. Estimated: peak_tflops = fastest GEMM / "
        f"cost.kernels.GEMM_PEAK_FRACTION, hbm_bandwidth_gbps = fastest transfer / {HBM_FRACTION_OF_FASTEST}.\n"
        f"# Copied from {base.name} (not measured here): scale_up, scale_out, efficiency, overheads, "
        f"cost_per_gpu_hour_usd, tdp_w.\n"
    )
    return header + OmegaConf.to_yaml(OmegaConf.create(data))
