"""`parallmelism profile`: micro-benchmark the local accelerator, write hardware/NAME.yaml + its kernel table.

parallmelism profile --out myhw                 # the local GPU (CUDA), full grid (minutes)
parallmelism profile --out myhw --quick         # a smaller grid
parallmelism profile --out myhw --device cpu    # tiny sizes on the CPU (seconds; what CI runs)
parallmelism sweep --config-dir myhw hardware=NAME ...   # use it at once
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer


def profile(
    out: Path = typer.Option(
        Path("."),
        "--out",
        "-o",
        help="config folder to write hardware/NAME.yaml and hardware/kernels/NAME.csv into (use it with --config-dir)",
    ),
    name: Optional[str] = typer.Option(None, "--name", help="accelerator name (default: from the device)"),
    device: str = typer.Option("cuda", "--device", help="cuda | cpu"),
    quick: bool = typer.Option(False, "--quick", help="a smaller grid (seconds to a minute on a GPU)"),
    base: str = typer.Option(
        "h100-sxm-80gb",
        "--base",
        help="shipped accelerator whose links, serving "
        "efficiencies and overheads the new file copies (not measured here)",
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress bar"),
):
    """Micro-benchmark GEMMs, attention and HBM with PyTorch; write an accelerator file + kernel table."""
    from ..errors import UserError
    from .common import console, fail

    try:
        _run(out, name, device, quick, base, quiet, console)
    except UserError as exc:
        fail(str(exc))


def _run(out, name, device, quick, base_name, quiet, console):
    import re

    from ..config.compose import load_option
    from ..config.import_hf import write_text_atomic
    from ..errors import UserError
    from ..profiling.bench import device_facts, tasks
    from ..profiling.writer import accelerator_yaml, kernel_table_text

    if device not in ("cuda", "cpu"):
        raise UserError(f"--device {device!r}: use cuda or cpu")
    try:
        import torch
    except ImportError:
        raise UserError("profile needs PyTorch: pip install 'parallmelism[profile]'") from None
    if device == "cuda" and not torch.cuda.is_available():
        raise UserError("no CUDA accelerator is visible to PyTorch; run on a GPU machine or use --device cpu")
    base = load_option("hardware", base_name)
    facts = device_facts(torch, device)
    name = name or re.sub(r"[^a-z0-9]+", "-", facts["name"].lower()).strip("-") + "-profiled"
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}", name):
        raise UserError(f"--name {name!r}: use letters, digits, '-', '_' or '.'")
    todo = tasks(torch, device, quick)
    rows = []
    bar = None
    if not quiet:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        bar = Progress(
            TextColumn("[bold]profiling"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.description}"),
            TimeElapsedColumn(),
            console=console(stderr=True),
            transient=True,
        )
        bar.start()
        task = bar.add_task("", total=len(todo))
    try:
        for label, fn in todo:
            if bar is not None:
                bar.update(task, description=label)
            try:
                rows += fn()
            except RuntimeError as exc:  # e.g. out of memory at the largest size: skip the point, say so
                console(stderr=True).print(f"skipped {label}: {str(exc).splitlines()[0]}")
            if bar is not None:
                bar.advance(task)
    finally:
        if bar is not None:
            bar.stop()
    if not any(r["family"] == "gemm" for r in rows):
        raise UserError("no GEMM could be measured on this device")
    out = Path(out).expanduser().resolve()
    table = out / "hardware" / "kernels" / f"{name}.csv"
    yaml_path = out / "hardware" / f"{name}.yaml"
    backends = [r["backend"] for r in rows if r["family"] == "attention"]
    backend = "cudnn" if "cudnn" in backends else (backends[0] if backends else "cudnn")
    write_text_atomic(kernel_table_text(rows, facts), table)
    write_text_atomic(accelerator_yaml(name, rows, facts, base, table, backend), yaml_path)
    _summary(console(), rows, yaml_path, table, out, name)


def _summary(console, rows, yaml_path, table, out, name):
    g = [r for r in rows if r["family"] == "gemm"]
    best = max(g, key=lambda r: 2 * r["m"] * r["k"] * r["n"] / r["measured_s"])
    tf = 2 * best["m"] * best["k"] * best["n"] / best["measured_s"] / 1e12
    h = [r for r in rows if r["family"] == "hbm"]
    bw = max((r["bytes"] / r["measured_s"] / 1e9 for r in h), default=float("nan"))
    n_att = sum(r["family"] == "attention" for r in rows)
    console.print(
        f"measured {len(g)} GEMMs (fastest {tf:,.1f} TFLOP/s, {best['dtype']} m={best['m']} k={best['k']} "
        f"n={best['n']}), {n_att} attention kernels, {len(h)} HBM transfers (fastest {bw:,.1f} GB/s)"
    )
    console.print(
        f"wrote {yaml_path}\nwrote {table}\nuse it: parallmelism sweep --config-dir {out} hardware={name} ..."
    )
