"""`parallmelism pareto`: the front of the layouts that fit (GPUs, time, cost; latency, throughput)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from .options import CHUNK, CONFIG_DIR, FULL, OUT, OVERRIDES, QUIET, WIDE, WORKERS
from ..words import counted


def pareto(
    overrides: Optional[List[str]] = OVERRIDES,
    front: Optional[str] = typer.Option(
        None,
        "--front",
        help="training: gpus-time (default) | gpus-cost | "
        "time-cost; inference: latency-throughput (default) | ttft-tpot",
    ),
    per_run: bool = typer.Option(
        False, "--per-run", help="one front per model x hardware x workload point instead of one across the sweep"
    ),
    out: Optional[Path] = OUT,
    full_output: Optional[Path] = FULL,
    quiet: bool = QUIET,
    wide: bool = WIDE,
    chunk_rows: int = CHUNK,
    workers: Optional[int] = WORKERS,
    config_dir: Optional[List[str]] = CONFIG_DIR,
):
    """Pareto front of the layouts that fit: GPUs vs step time or cost (training), latency vs throughput."""
    from ..errors import UserError
    from ..report.table import frame_table, show_table, run_columns
    from ..search import ParetoCollector, frame_of_kept
    from ..search.pareto import FRONTS
    from .common import console, fail, load_runs, stream, warn_load_not_simulated
    from .outputs import check_distinct_outputs, out_of, say_full_output, with_full_output, write_frame

    try:
        runs = load_runs(overrides, config_dir)
        warn_load_not_simulated(runs, "pareto")
        out = out_of(out, runs, config_dir)
        check_distinct_outputs(out, full_output)
        kinds = {r.workload.kind for r in runs}
        if len(kinds) > 1:
            raise UserError("pareto compares one workload kind at a time; sweep train and inference separately")
        kind = kinds.pop()
        if front is not None and not front.strip():
            raise UserError("--front is empty; leave it out for the default or choose one by name")
        front = front or ("gpus-time" if kind == "train" else "latency-throughput")
        if front not in FRONTS:
            raise UserError(f"unknown --front {front!r}; choose {', '.join(FRONTS)}")
        if FRONTS[front][0] != kind:
            raise UserError(f"--front {front} is for workload={FRONTS[front][0]}, this sweep is workload={kind}")
        objectives = FRONTS[front][1]
        col = ParetoCollector(objectives, group_by=["_run"] if per_run else [], where="fits")
        res = stream(runs, with_full_output([col], runs, full_output), quiet, chunk_rows, "front", workers)
        if res.evaluated == 0:
            raise UserError(res.explain_empty())
        df = frame_of_kept(runs, res.kept[0])
        if len(df) == 0:
            raise UserError(f"none of the {res.evaluated:,} valid layouts fits in memory")
        df = df.sort_values([c for c, _ in objectives], kind="stable").reset_index(drop=True)
        to = console()
        if not quiet:
            show = (
                [
                    "ngpus",
                    "tp",
                    "pp",
                    "cp",
                    "sp",
                    "ep",
                    "dp",
                    "vpp",
                    "micro_batch",
                    "batch",
                    "dp_sharding",
                    "recompute",
                ]
                + [c for c, _ in objectives]
                + ["mem_total_gib"]
            )
            where = ""
            if len(runs) == 1:
                where = f" of {runs[0].model.name} on {runs[0].hardware.name}"
            show_table(
                to,
                frame_table(
                    df,
                    columns=list(dict.fromkeys(show)),
                    width=None if wide else to.width,
                    answers=[c for c, _ in objectives],
                    lead=run_columns(runs),
                    title=f"Pareto front {front}{where} ({len(df):,} of {counted(res.evaluated, 'layout')})",
                ),
                wide,
            )
        write_frame(df, out, to)
        say_full_output(full_output, res.evaluated, to)
    except UserError as exc:
        fail(str(exc))
