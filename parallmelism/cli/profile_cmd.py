"""`parallmelism profile`: micro-benchmark the local accelerator, write hardware/NAME.yaml + its kernel table.

parallmelism profile --out myhw                 # the local GPU (CUDA), full grid (minutes)
parallmelism profile --out myhw --quick         # a smaller grid
parallmelism profile --out myhw --device cpu    # tiny sizes on the CPU (seconds; what CI runs)
parallmelism profile --out myhw --ranks 4       # collectives over 4 of the visible GPUs (default: all)
parallmelism sweep --config-dir myhw hardware=NAME ...   # use it at once
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .options import a_path


def profile(
    out: Path = typer.Option(
        Path("."),
        "--out",
        "-o",
        parser=a_path,
        help="config folder to write hardware/NAME.yaml and hardware/kernels/NAME.csv into (use it with --config-dir)",
    ),
    name: Optional[str] = typer.Option(None, "--name", help="accelerator name (default: from the device)"),
    device: str = typer.Option("cuda", "--device", help="cuda | cpu"),
    quick: bool = typer.Option(False, "--quick", help="a smaller grid (seconds to a minute on a GPU)"),
    base: str = typer.Option(
        "h100-sxm-80gb",
        "--base",
        help="shipped accelerator whose scale-out link, serving efficiencies and overheads the new file copies "
        "(not measured here), and its scale-up link when the collectives do not run",
    ),
    ranks: Optional[int] = typer.Option(
        None,
        "--ranks",
        help="processes for the collectives, one per device (default: every visible GPU; 2 with --device cpu; "
        "1 skips them)",
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress bar"),
):
    """Micro-benchmark GEMMs, attention, HBM and (on several GPUs) collectives with PyTorch; write an
    accelerator file + kernel table."""
    from ..errors import UserError
    from .common import console, fail

    try:
        _run(out, name, device, quick, base, quiet, console, ranks)
    except UserError as exc:
        fail(str(exc))


def _ranks(torch, device: str, ranks) -> int:
    """Ranks for the collectives (1: none), or a UserError naming --ranks."""
    import os

    from ..errors import UserError

    if ranks is not None and ranks < 1:
        raise UserError(f"--ranks {ranks}: give at least 1 (1 skips the collectives)")
    if device == "cuda":
        visible = torch.cuda.device_count()
        if ranks is not None and ranks > visible:
            raise UserError(f"--ranks {ranks}: only {visible} CUDA device(s) are visible, and each rank needs one")
        return visible if ranks is None else ranks
    most = max(2, os.cpu_count() or 1)
    if ranks is not None and ranks > most:
        raise UserError(f"--ranks {ranks}: at most {most} processes on this CPU ({most} cores)")
    return 2 if ranks is None else ranks


def _run(out, name, device, quick, base_name, quiet, console, ranks=None):
    import re

    from ..config.compose import load_option
    from ..config.paths import check_option_name
    from ..report.writer import check_writable_target, write_texts
    from ..errors import UserError
    from ..profiling import collectives
    from ..profiling.bench import device_facts, fastest_of_passes, tasks
    from ..profiling.writer import accelerator_yaml, collectives_table_text, kernel_table_text

    # the output folder and the name are checked before minutes of benchmarking
    out = Path(out).expanduser().resolve()
    check_writable_target(out, folder_target=True)
    if name is not None:
        check_option_name(name)
    if device not in ("cuda", "cpu"):
        raise UserError(f"--device {device!r}: use cuda or cpu")
    try:
        import torch
    except ImportError:
        raise UserError("profile needs PyTorch: pip install 'parallmelism[profile]'") from None
    if device == "cuda" and not torch.cuda.is_available():
        raise UserError("no CUDA accelerator is visible to PyTorch; run on a GPU machine or use --device cpu")
    n_ranks = _ranks(torch, device, ranks)
    base = load_option("hardware", base_name)
    facts = device_facts(torch, device)
    name = name or re.sub(r"[^a-z0-9]+", "-", facts["name"].lower()).strip("-") + "-profiled"
    check_option_name(name)
    _check_not_base(out, name, base_name, base)
    todo = tasks(torch, device, quick)
    skip_collectives = _why_no_collectives(torch, device, n_ranks, base_name)
    points = [] if skip_collectives else collectives.point_labels(device, quick)
    err = console(stderr=True)
    rows = []
    bar = None
    if not quiet and err.is_terminal:  # (on a pipe the bar drew nothing and left a blank line: cli/common.py)
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        bar = Progress(
            TextColumn("[bold]profiling"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.description}"),
            TimeElapsedColumn(),
            console=err,
            transient=True,
            auto_refresh=False,  # redrawn between points only: no thread takes the GIL while one is timed
        )
        bar.start()
        task = bar.add_task("", total=len(todo) + len(points))

    def step(label: str) -> None:
        if bar is not None:
            bar.update(task, description=label, advance=1, refresh=True)

    measured = None
    try:
        for label, fn in todo:
            if bar is not None:
                bar.update(task, description=label, refresh=True)
            try:
                rows += fn()
            except RuntimeError as exc:  # e.g. out of memory at the largest size: skip the point, say so
                err.print(f"skipped {label}: {str(exc).splitlines()[0]}", markup=False)
            if bar is not None:
                bar.update(task, advance=1, refresh=True)
        if points:
            if bar is not None:
                bar.update(task, description=f"collectives, {n_ranks} ranks: starting", refresh=True)
            try:
                measured = collectives.run(torch, device, quick, n_ranks, on_point=step)
            except RuntimeError as exc:  # a rank failed (no NCCL, a rendezvous error): keep the kernels
                skip_collectives = f"collectives failed ({exc}); the links come from {base_name}"
    finally:
        if bar is not None:
            bar.stop()
    if skip_collectives:
        err.print(f"note: {skip_collectives}", highlight=False, markup=False)
    for line in measured.skipped if measured else []:
        err.print(f"skipped {line}", highlight=False, markup=False)
    rows = fastest_of_passes(rows)
    if not any(r["family"] == "gemm" for r in rows):
        raise UserError("no GEMM could be measured on this device")
    fit = None
    if measured is not None and len({r["message_bytes"] for r in measured.rows}) >= 2:
        fit = collectives.fit_link(
            [r["collective"] for r in measured.rows],
            [r["ranks"] for r in measured.rows],
            [r["message_bytes"] for r in measured.rows],
            [r["time_s"] for r in measured.rows],
        )
    table = out / "hardware" / "kernels" / f"{name}.csv"
    coll_table = out / "hardware" / "kernels" / f"{name}.collectives.csv"
    yaml_path = out / "hardware" / f"{name}.yaml"
    backends = [r["backend"] for r in rows if r["family"] == "attention"]
    backend = "cudnn" if "cudnn" in backends else (backends[0] if backends else "cudnn")
    link = (fit, measured) if fit is not None else None
    texts = {table: kernel_table_text(rows, facts)}
    if measured is not None and measured.rows:
        texts[coll_table] = collectives_table_text(name, measured, facts)
    # the table's path relative to the YAML's folder: the profiled folder works wherever it is moved
    texts[yaml_path] = accelerator_yaml(name, rows, facts, base, table.relative_to(yaml_path.parent), backend, link)
    write_texts(texts)  # all of them or none
    if coll_table not in texts and coll_table.is_file():
        coll_table.unlink()  # an earlier run's points would sit beside links that now come from --base
    written = [yaml_path, table] + ([coll_table] if coll_table in texts else [])
    _summary(console(), rows, written, out, name, measured, fit)


def _check_not_base(out: Path, name: str, base_name: str, base) -> None:
    """The files profile writes are never the --base accelerator's own (its YAML, kernel table),
    which it reads: `--out` at the shipped folder with `--name` the base's would replace them."""
    from ..config.paths import option_files, user_config_dirs
    from ..config.kernel_tables import resolve_table
    from ..errors import UserError
    from ..report.writer import check_not_an_input

    inputs = [option_files("hardware", user_config_dirs())[base_name]]
    if base.kernels.table:
        try:
            inputs.append(resolve_table(base.kernels.table))
        except UserError:
            pass
    for target in (out / "hardware" / f"{name}.yaml", out / "hardware" / "kernels" / f"{name}.csv"):
        check_not_an_input(target, inputs)


def _why_no_collectives(torch, device: str, ranks: int, base_name: str):
    """None when the collectives can run here, else the one-line note saying why they are skipped."""
    links = f"the links come from {base_name}"
    if ranks == 1:
        if device == "cuda" and torch.cuda.device_count() == 1:
            return f"collectives skipped: one GPU is visible and they need two or more; {links}"
        return f"collectives skipped (--ranks 1); {links}"
    dist = torch.distributed
    available = dist.is_available() and (dist.is_nccl_available() if device == "cuda" else dist.is_gloo_available())
    if not available:
        return f"collectives skipped: this PyTorch has no {'NCCL' if device == 'cuda' else 'gloo'} backend; {links}"
    return None


def _size(nbytes: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            return f"{nbytes / scale:g} {unit}"
    return f"{nbytes} B"


def _summary(console, rows, written, out, name, measured=None, fit=None):
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
    if measured is not None and measured.rows:
        from ..profiling.collectives import KINDS

        kinds = [k for k in KINDS if any(r["collective"] == k for r in measured.rows)]
        cell = {
            (r["collective"], r["message_bytes"]): f"{r['busbw_gbps']:.3g} ({r['algbw_gbps']:.3g})"
            for r in measured.rows
        }
        lines = [
            f"collectives over {measured.ranks} ranks ({measured.backend}), busbw (algbw) GB/s, nccl-tests rules:",
            f"  {'message':>8}" + "".join(f"  {k:>18}" for k in kinds),
        ]
        for S in sorted({r["message_bytes"] for r in measured.rows}):
            lines.append(f"  {_size(S):>8}" + "".join(f"  {cell.get((k, S), '-'):>18}" for k in kinds))
        if fit is not None:
            lines.append(
                f"scale_up fitted: alpha {fit.alpha_us:.3g} us per step, beta {fit.beta_gbps:.3g} GB/s per direction "
                f"({fit.points} points, rms error {fit.rms_rel_err:.0%})"
            )
        console.print("\n".join(lines), highlight=False)
    console.print(
        "\n".join(f"wrote {p}" for p in written)
        + f"\nuse it: parallmelism sweep --config-dir {out} hardware={name} ...",
        markup=False,
    )
