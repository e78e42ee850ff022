"""Accelerator YAML + kernel table from profiled rows (the `profile` command's output).

Measured: the kernel table (every row), HBM capacity (the device's total memory; usable = total),
the SM count. Estimated from the measurements, stated in the YAML: peak_tflops (the fastest GEMM
÷ cost.kernels.GEMM_PEAK_FRACTION) and hbm_bandwidth_gbps (the fastest transfer ÷ 0.9): the kernel
model divides them out again for measured shapes, so they only steer extrapolation. Measured when the
collectives ran (several GPUs, or gloo on the CPU): the scale-up link, whose latency_us (α) and
bandwidth_gbps (β) are fitted to the collective times (profiling/collectives.py), with
domain_size = the ranks measured and efficiency.scale_up = 1 (β is already the achieved rate); the
points go to a case file in the columns of shared/reference/collectives_measured.csv. Not measured
(scale-out link, serving efficiencies, price): copied from the `--base` accelerator, and said so;
training overheads are the stack's (conf/stack/).
"""

from __future__ import annotations

from pathlib import Path

from ..validate.kernel_table import COLUMNS

HBM_FRACTION_OF_FASTEST = 0.9
CASE_COLUMNS = (  # shared/reference/collectives_measured.csv, the case-file format `validate` reads
    "case",
    "accelerator",
    "ranks",
    "nodes",
    "fabric",
    "collective",
    "message_bytes",
    "busbw_gbps",
    "time_us",
    "source",
    "notes",
)


def kernel_table_text(rows: list[dict], facts: dict) -> str:
    from ..validate.kernel_table import _num

    lines = [
        f"# Kernel table measured by `parallmelism profile` on {facts['name']} ({facts['gpus']} visible), "
        f"PyTorch {facts['torch']}"
        + (f", CUDA {facts['cuda']}" if facts.get("cuda") else "")
        + (f", cuDNN {facts['cudnn']}" if facts.get("cudnn") else "")
        + f", {facts['date']}; median time, L2 flushed on GPUs (parallmelism/profiling/bench.py).",
        ",".join(COLUMNS),
    ]
    for r in rows:
        lines.append(
            ",".join(
                _num(r.get(c)) if c not in ("family", "dtype", "part", "backend", "source") else (r[c] or "")
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


def collectives_table_text(name: str, measured, facts: dict) -> str:
    """The measured collective points as a case file (CASE_COLUMNS), one row per (collective, size),
    with a comment line on top saying how they were measured."""
    import csv
    import io

    software = ", ".join(f"{k} {v}" for k, v in sorted(measured.versions.items()))
    buf = io.StringIO()
    buf.write(
        f"# Collectives measured by `parallmelism profile` on {facts['name']}, {measured.ranks} ranks in one node, "
        f"{measured.backend} ({software}), {facts['date']}; median of {measured.reps} runs after {measured.warmup} warm-up, "
        f"barrier before each, a run lasts until its slowest rank ends (parallmelism/profiling/collectives.py).\n"
    )
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CASE_COLUMNS)
    fabric = f"{measured.backend} in one node (scale_up)"
    for r in measured.rows:
        w.writerow(
            [
                f"{name}-{r['collective']}-{r['ranks']}r-{r['message_bytes']}B",
                name,
                r["ranks"],
                1,
                fabric,
                r["collective"],
                r["message_bytes"],
                f"{r['busbw_gbps']:.6g}",
                f"{r['time_s'] * 1e6:.6g}",
                f"parallmelism profile {facts['date']}",
                "busbw = algbw * factor (nccl-tests); algbw = message_bytes / time",
            ]
        )
    return buf.getvalue()


def accelerator_yaml(name: str, rows: list[dict], facts: dict, base, table_path: Path, backend: str, link=None) -> str:
    """The accelerator file: `base` with the measured and estimated fields replaced (module
    docstring); `link` (a collectives.LinkFit and the Measured it came from) replaces scale_up."""
    from omegaconf import OmegaConf

    peaks, bw = estimated_peaks(rows)
    data = base.model_dump(mode="json")
    data.update(
        name=name,
        display_name=f"{facts['name']} (profiled)",
        source=f"parallmelism profile, {facts['date']}, PyTorch {facts['torch']}"
        + (f", CUDA {facts['cuda']}" if facts.get("cuda") else "")
        + (f", cuDNN {facts['cudnn']}" if facts.get("cudnn") else ""),
        confidence="measured kernels; peaks estimated",
        hbm_capacity_gib=round(facts["memory_gib"], 3),
        hbm_usable_gib=round(facts["memory_gib"], 3),
        hbm_bandwidth_gbps=bw,
        peak_tflops=peaks,
        kernels={"table": str(table_path), "sm_count": int(facts["sm_count"]), "attention_backend": backend},
    )
    if data.get("overheads") is None:  # training overheads are the stack's (conf/stack/), not the part's
        data.pop("overheads", None)
    measured, copied = "kernels (table), HBM capacity, SM count", "scale_up, scale_out, efficiency"
    if link is not None:
        fit, coll = link
        data["scale_up"] = dict(
            name=f"profiled: {coll.backend} over {coll.ranks} ranks in one node",
            domain_size=coll.ranks,
            bandwidth_gbps=float(f"{fit.beta_gbps:.4g}"),
            latency_us=float(f"{fit.alpha_us:.4g}"),
            collective_launch_us=0.0,
        )
        data["efficiency"]["scale_up"] = 1.0
        measured += (
            f", scale_up link:\n#   latency_us = alpha per ring step (the launch folded in: collective_launch_us = 0) and "
            f"bandwidth_gbps = beta per direction, "
            f"least squares over {fit.points} collective times\n#   (rms error {fit.rms_rel_err:.0%}, points in "
            f"kernels/{name}.collectives.csv); domain_size = the ranks measured;\n#   efficiency.scale_up = 1 "
            f"because beta is the achieved rate"
        )
        copied = "scale_out, efficiency (except scale_up)"
    header = (
        f"# Written by `parallmelism profile` on {facts['name']} ({facts['date']}).\n"
        f"# Measured: {measured}.\n"
        f"# Estimated: peak_tflops = fastest GEMM / "
        f"cost.kernels.GEMM_PEAK_FRACTION, hbm_bandwidth_gbps = fastest transfer / {HBM_FRACTION_OF_FASTEST}.\n"
        f"# Copied from {base.name} (not measured here): {copied}, "
        f"cost_per_gpu_hour_usd, tdp_w. Training overheads: the stack's fit (conf/stack/, `show` names it).\n"
    )
    return header + OmegaConf.to_yaml(OmegaConf.create(data))
