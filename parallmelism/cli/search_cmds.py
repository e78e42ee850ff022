"""Search and capacity-planning commands: best, pareto, plan train|serve, merge, plot.

Registered on the typer app by `cli/app.py` (one import). Every command streams the grid through
`parallmelism.search.stream` in bounded chunks, shows a rich progress bar unless --quiet, and
writes its table atomically with `report.writer.write_table`.
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from .app import CONFIG_DIR, EXTRA, OVERRIDES, _console, _fail, app

QUIET = typer.Option(False, "--quiet", "-q", help="no progress bar or tables (CI)")


def _check_out(value: Optional[Path]) -> Optional[Path]:
    """--out is checked when the command line is read, before any computation."""
    if value is None:
        return None
    from ..errors import UserError
    from ..report.writer import check_output_path

    try:
        return check_output_path(value)[0]
    except UserError as exc:
        from .app import _fail

        _fail(str(exc))


OUT = typer.Option(None, "--out", "-o", callback=_check_out, help="write the table here (.csv or .parquet)")
CHUNK = typer.Option(1 << 18, "--chunk-rows", help="rows evaluated at a time (bounds memory)", min=1000)
FULL = typer.Option(
    None,
    "--full-output",
    help="also stream EVERY evaluated row to this folder as a "
    "partitioned Parquet dataset (model=/hardware=/workload=/part-*.parquet)",
)


def _with_sink(collectors, runs, full_output):
    if full_output is None:
        return collectors
    from ..search import ParquetSink

    return [*collectors, ParquetSink(full_output, runs)]


# ----------------------------------------------------------------------------- shared plumbing


def _load(overrides, config_dirs):
    from ..config import load_run_configs

    return [rc for _, rc in load_run_configs(list(overrides or []), config_dirs)]


def _out_of(out: Optional[Path], runs) -> Optional[Path]:
    """--out, or the Hydra spelling output.path= (the two must agree when both are given)."""
    from ..report.writer import check_output_path
    from .app import check_one_output_path

    paths = {r.output.path for r in runs if r.output.path}
    check_one_output_path(out, paths)
    return check_output_path(paths.pop())[0] if paths else out


def stream_with_progress(runs, collectors, quiet: bool, chunk_rows: int = 1 << 18, label: str = "evaluating"):
    """stream_runs with a rich progress bar (partitions done, layouts evaluated) on stderr."""
    from ..search.stream import partitions_of, stream_runs

    total = sum(partitions_of(r) for r in runs)
    if quiet:
        return stream_runs(runs, collectors, chunk_rows)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = [
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rows]:,} layouts"),
        TimeElapsedColumn(),
    ]
    with Progress(*columns, console=_console(stderr=True), transient=True) as bar:
        task = bar.add_task(label, total=total, rows=0)
        done = {"rows": 0}

        def tick(parts: int, rows: int) -> None:
            done["rows"] += rows
            bar.update(task, advance=parts, rows=done["rows"])

        return stream_runs(runs, collectors, chunk_rows, progress=tick)


def _write(df, out: Optional[Path], console, what: str = "rows"):
    if out is None:
        return
    from ..report.writer import write_table

    write_table(df, out)
    console.print(f"wrote {len(df):,} {what} to {out}")


def _empty_message(res) -> str:
    from ..grid import LayoutGrid

    return LayoutGrid({}, res.dropped(), res.considered).explain_empty()


# ----------------------------------------------------------------------------- best

BEST_COLUMNS = [
    "model",
    "hardware",
    "workload",
    "ngpus",
    "rank",
    "tp",
    "pp",
    "cp",
    "ep",
    "dp",
    "vpp",
    "micro_batch",
    "dp_sharding",
    "recompute",
    "sequence_parallel",
    "time_step_s",
    "tokens_per_s",
    "mfu",
    "mem_total_gib",
    "fits",
    "loses_on",
    "why",
]


# `best` lists faster layouts that miss memory only when they need at most this much more than the
# usable HBM (25 %: within reach of a larger micro-batch count, recompute or an 80 -> 96/141 GB part);
# a layout needing several times the memory is not a near miss.
NEAR_MISS_MEMORY_MARGIN = 0.25


def best_table(res_fit, res_any, top: int):
    """Winner and runner-ups per (run, ngpus), plus faster layouts that lose on memory."""
    import pandas as pd

    fit = res_fit
    if len(fit) == 0:
        return fit
    from ..search.explain import additive_time_parts, why_slower

    parts = additive_time_parts(fit.columns)
    rows = []
    for (_, _), grp in fit.groupby(["_run", "ngpus"], sort=True, observed=True):
        grp = grp.sort_values(["time_step_s", "_row"], kind="stable")
        winner = grp.iloc[0]
        for i, (_, r) in enumerate(grp.head(top).iterrows()):
            d = r.to_dict()
            d["rank"] = i + 1
            d["loses_on"], d["why"] = ("", "fastest that fits") if i == 0 else why_slower(winner, r, parts)[:2]
            rows.append(d)
        if res_any is not None and len(res_any):
            usable = res_any["mem_total_gib"] + res_any["mem_headroom_gib"]
            faster = res_any[
                (res_any["_run"] == winner["_run"])
                & (res_any["ngpus"] == winner["ngpus"])
                & (~res_any["fits"])
                & (res_any["time_step_s"] < winner["time_step_s"])
                & (res_any["mem_total_gib"] <= (1.0 + NEAR_MISS_MEMORY_MARGIN) * usable)
            ]
            for _, r in faster.sort_values(["time_step_s", "_row"]).head(max(1, top // 2)).iterrows():
                d = r.to_dict()
                d["rank"] = 0
                d["loses_on"], d["why"] = why_slower(winner, r, parts)[:2]
                d["why"] += (
                    f" (would be {(winner['time_step_s'] - r['time_step_s']) * 1e3:.1f} ms faster; near "
                    f"misses within {NEAR_MISS_MEMORY_MARGIN:.0%} of the memory are listed)"
                )
                rows.append(d)
    out = pd.DataFrame(rows)
    cols = [c for c in BEST_COLUMNS if c in out.columns]
    cols += [c for c in out.columns if c not in cols and not c.startswith("_")]
    return out[cols]


def _time_key(runs) -> str:
    kinds = {r.workload.kind for r in runs}
    return "time_step_s" if kinds == {"train"} else "tpot_ms" if kinds == {"inference"} else "time_step_s"


@app.command(context_settings=EXTRA)
def best(
    overrides: Optional[List[str]] = OVERRIDES,
    top: int = typer.Option(5, "--top", "-k", help="layouts per group: the winner and its runner-ups", min=1),
    out: Optional[Path] = OUT,
    full_output: Optional[Path] = FULL,
    quiet: bool = QUIET,
    chunk_rows: int = CHUNK,
    config_dir: Optional[List[str]] = CONFIG_DIR,
):
    """Fastest layout that fits, per (model, hardware, ngpus, workload), with runner-ups and why they lose."""
    from ..errors import UserError
    from ..report.table import frame_table
    from ..search import TopKCollector
    from ..search.stream import frame_of_kept

    try:
        runs = _load(overrides, config_dir)
        out = _out_of(out, runs)
        if any(r.workload.kind != "train" for r in runs):
            raise UserError(
                "best ranks training layouts by step time; for serving use `parallmelism plan serve` "
                "or `parallmelism pareto workload=inference`"
            )
        key = _time_key(runs)
        fit_c = TopKCollector(top, key, group_by=["ngpus"], where="fits")
        any_c = TopKCollector(max(1, top // 2), key, group_by=["ngpus"], where=None)
        res = stream_with_progress(runs, _with_sink([fit_c, any_c], runs, full_output), quiet, chunk_rows, "searching")
        fit = frame_of_kept(runs, res.kept[0], keep_index_columns=True)
        if res.evaluated == 0:
            raise UserError(_empty_message(res))
        if len(fit) == 0:
            raise UserError(
                f"none of the {res.evaluated:,} valid layouts fits in memory; "
                f"try more GPUs (grid.ngpus) or a larger accelerator"
            )
        table = best_table(fit, frame_of_kept(runs, res.kept[1], keep_index_columns=True), top)
        console = _console()
        if not quiet:
            cols = [
                "model",
                "hardware",
                "ngpus",
                "rank",
                "tp",
                "pp",
                "cp",
                "ep",
                "dp",
                "vpp",
                "micro_batch",
                "dp_sharding",
                "recompute",
                "sequence_parallel",
                "time_step_s",
                "mfu",
                "mem_total_gib",
                "why",
            ]
            where = ""
            if len(runs) == 1:  # one model and accelerator: say it once, in the title
                cols = cols[2:]
                where = f" of {runs[0].model.name} on {runs[0].hardware.name}"
            console.print(
                frame_table(
                    table,
                    columns=cols,
                    width=console.width,
                    title=f"fastest layouts that fit{where} ({res.evaluated:,} layouts evaluated)",
                )
            )
        _write(table, out, console)
    except UserError as exc:
        _fail(str(exc))


# ----------------------------------------------------------------------------- pareto

FRONTS = {
    # name: (workload kind, [(column, sense)], derived column needed)
    "gpus-time": ("train", [("ngpus", "min"), ("time_step_s", "min")]),
    "gpus-cost": ("train", [("ngpus", "min"), ("usd_per_step", "min")]),
    "time-cost": ("train", [("time_step_s", "min"), ("usd_per_step", "min")]),
    "latency-throughput": ("inference", [("tpot_ms", "min"), ("throughput_tokens_per_s_per_gpu", "max")]),
    "ttft-tpot": ("inference", [("ttft_ms", "min"), ("tpot_ms", "min")]),
}


@app.command(context_settings=EXTRA)
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
    chunk_rows: int = CHUNK,
    config_dir: Optional[List[str]] = CONFIG_DIR,
):
    """Pareto front of the layouts that fit: GPUs vs step time or cost (training), latency vs throughput."""
    from ..errors import UserError
    from ..report.table import frame_table
    from ..search import ParetoCollector
    from ..search.stream import frame_of_kept

    try:
        runs = _load(overrides, config_dir)
        out = _out_of(out, runs)
        kinds = {r.workload.kind for r in runs}
        if len(kinds) > 1:
            raise UserError("pareto compares one workload kind at a time; sweep train and inference separately")
        kind = kinds.pop()
        front = front or ("gpus-time" if kind == "train" else "latency-throughput")
        if front not in FRONTS:
            raise UserError(f"unknown --front {front!r}; choose {', '.join(FRONTS)}")
        if FRONTS[front][0] != kind:
            raise UserError(f"--front {front} is for workload={FRONTS[front][0]}, this sweep is workload={kind}")
        objectives = FRONTS[front][1]
        col = ParetoCollector(objectives, group_by=["_run"] if per_run else [], where="fits")
        res = stream_with_progress(runs, _with_sink([col], runs, full_output), quiet, chunk_rows, "front")
        if res.evaluated == 0:
            raise UserError(_empty_message(res))
        df = frame_of_kept(runs, res.kept[0])
        if len(df) == 0:
            raise UserError(f"none of the {res.evaluated:,} valid layouts fits in memory")
        df = df.sort_values([c for c, _ in objectives], kind="stable").reset_index(drop=True)
        console = _console()
        if not quiet:
            show = (
                [
                    "model",
                    "hardware",
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
                show = show[2:]
                where = f" of {runs[0].model.name} on {runs[0].hardware.name}"
            console.print(
                frame_table(
                    df,
                    columns=list(dict.fromkeys(show)),
                    width=console.width,
                    title=f"Pareto front {front}{where} ({len(df):,} of {res.evaluated:,} layouts)",
                )
            )
        _write(df, out, console)
    except UserError as exc:
        _fail(str(exc))


# ----------------------------------------------------------------------------- plan

plan_app = typer.Typer(
    no_args_is_help=True,
    help="Capacity plans: GPUs, days, energy and dollars for a training run; replicas and $/token for serving.",
)
app.add_typer(plan_app, name="plan")

PLAN_SHORT = {
    "days",
    "gpus",
    "budget_usd",
    "ngpus",
    "utilization",
    "pue",
    "qps",
    "tokens_per_s",
    "ttft_ms",
    "tpot_ms",
    "load",
    "prefill_gpus",
    "decode_gpus",
}
PLAN_ALIASES = {"budget": "budget_usd", "itl_ms": "tpot_ms"}  # inter-token latency = time per output token
WORKLOAD_SHORT = {
    "tokens",
    "input_len",
    "output_len",
    "seq_len",
    "global_batch",
    "batch",
    "precision",
    "weight_dtype",
    "kv_dtype",
}
DEFAULT_PLAN_NGPUS = [2**i for i in range(3, 16)]  # 8 .. 32768


def rewrite_plan_overrides(overrides: list[str]) -> list[str]:
    """days=30 -> plan.days=30, tokens=15e12 -> workload.tokens=15e12 (other overrides unchanged)."""
    out = []
    for o in overrides:
        key, sep, value = o.partition("=")
        if sep and key in PLAN_ALIASES:
            key = PLAN_ALIASES[key]
        if sep and key in PLAN_SHORT:
            o = f"plan.{key}={value}"
        elif sep and key in WORKLOAD_SHORT:
            o = f"workload.{key}={value}"
        out.append(o)
    return out


def _summary_path(out: Optional[Path]) -> Optional[Path]:
    return None if out is None else out.with_name(out.stem + ".summary.md")


def _write_summary(text: str, path: Optional[Path], console):
    if path is None:
        return
    import os
    import tempfile

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)
    console.print(f"wrote the summary to {path}")


def train_summary(table, run, plan) -> str:
    hw, model, wl = run.hardware, run.model, run.workload
    lines = [f"# Training plan: {model.name} on {hw.name}, {wl.tokens:.3g} tokens", ""]
    chosen = table[table["chosen"]]
    if len(chosen):
        c = chosen.iloc[0]
        goal = (
            f"exactly {plan.gpus} GPUs"
            if plan.gpus
            else f"finish within {plan.days:g} days"
            if plan.days
            else f"budget ${plan.budget_usd:,.0f}"
            if plan.budget_usd
            else "lowest cost"
        )
        lines += [
            f"Goal: {goal}.",
            "",
            f"- GPUs: {int(c['ngpus']):,}  (tp {c['tp']}, pp {c['pp']}, cp {c['cp']}, ep {c['ep']}, dp {c['dp']},"
            f" vpp {c['vpp']}, micro-batch {c['micro_batch']}, {c['dp_sharding']}, recompute {c['recompute']},"
            f" sequence parallel {c['sequence_parallel']})",
            f"- step time: {c['time_step_s']:.3f} s for {int(c['global_batch'])} x {int(c['seq_len'])} tokens"
            f" ({c['tokens_per_s']:,.0f} tokens/s" + (f", MFU {c['mfu']:.1%}" if "mfu" in c else "") + ")",
            f"- wall-clock: {c['days']:.1f} days ({c['steps']:,.0f} steps)",
            f"- GPU-hours: {c['gpu_hours']:,.0f}",
            f"- energy: {c['energy_mwh']:,.1f} MWh",
            f"- cost: ${c['cost_usd']:,.0f}",
            "",
        ]
    lines += [
        "Assumptions:",
        f"- utilization (goodput) {plan.utilization:.0%}: the rest of the wall-clock goes to failures, restarts,"
        " checkpointing and evaluation; billed GPU-hours include it.",
        f"- energy: every GPU draws its TDP ({hw.tdp_w:g} W) for the whole run (an upper bound for the GPUs);"
        f" hosts, network and cooling enter through PUE {plan.pue:g}.",
        f"- price: ${hw.cost_per_gpu_hour_usd:g} per GPU-hour (hardware/{hw.name}.yaml; override with"
        " hardware.cost_per_gpu_hour_usd=...).",
        "- step time: the analytical time model with the accelerator's efficiency block (achievable fractions"
        " of peak FLOP/s, HBM and link bandwidth), one layout for the whole run.",
        "- each GPU count uses its fastest layout that fits in memory.",
        "",
    ]
    return "\n".join(lines)


@plan_app.command("train", context_settings=EXTRA)
def plan_train(
    overrides: Optional[List[str]] = OVERRIDES,
    out: Optional[Path] = OUT,
    quiet: bool = QUIET,
    chunk_rows: int = CHUNK,
    config_dir: Optional[List[str]] = CONFIG_DIR,
):
    """GPUs, layout, step time, days, GPU-hours, energy and $ to train on TOKENS (tokens=15e12 [days=|gpus=|budget=])."""
    from ..errors import UserError
    from ..report.table import frame_table
    from ..search import TopKCollector
    from ..search.plan import train_plan_failure, train_plan_table
    from ..search.stream import frame_of_kept

    overrides = rewrite_plan_overrides(list(overrides or []))
    try:
        runs = _load(overrides, config_dir)
        out = _out_of(out, runs)
        if len(runs) != 1:
            raise UserError("plan train answers one question at a time; remove the sweep (a,b) from the overrides")
        run = runs[0]
        if run.workload.kind != "train":
            raise UserError("plan train needs workload=train; for serving use `parallmelism plan serve`")
        plan = run.plan
        if run.workload.tokens is None:
            raise UserError("plan train needs the number of training tokens, e.g. tokens=15e12")
        if sum(x is not None for x in (plan.days, plan.gpus, plan.budget_usd)) > 1:
            raise UserError("give at most one of days=, gpus=, budget= (each picks the plan)")
        explicit_ngpus = any(o.split("=", 1)[0].lstrip("+") == "grid.ngpus" for o in overrides)
        counts = (
            [plan.gpus]
            if plan.gpus
            else plan.ngpus
            if plan.ngpus
            else list(run.grid.ngpus)
            if explicit_ngpus
            else DEFAULT_PLAN_NGPUS
        )
        run = run.model_copy(update={"grid": run.grid.model_copy(update={"ngpus": sorted(set(counts))})})
        collector = TopKCollector(1, "time_step_s", group_by=["ngpus"], where="fits")
        res = stream_with_progress([run], [collector], quiet, chunk_rows, "planning")
        best = frame_of_kept([run], res.kept[0])
        table = train_plan_table(best, run.workload.tokens, run.hardware, plan) if len(best) else best
        failure = (
            train_plan_failure(table, plan)
            if len(best)
            else (
                _empty_message(res)
                if res.evaluated == 0
                else f"no layout fits in memory at {', '.join(map(str, run.grid.ngpus))} GPUs; add counts with plan.ngpus=[...]"
            )
        )
        console = _console()
        if not quiet and len(table):
            console.print(
                frame_table(
                    table,
                    width=console.width,
                    columns=[
                        "ngpus",
                        "tp",
                        "pp",
                        "cp",
                        "ep",
                        "dp",
                        "vpp",
                        "micro_batch",
                        "dp_sharding",
                        "recompute",
                        "time_step_s",
                        "days",
                        "gpu_hours",
                        "energy_mwh",
                        "cost_usd",
                        "chosen",
                    ],
                    title="fastest layout per GPU count",
                )
            )
        if failure:  # the table above shows why; nothing is written for a plan that failed
            raise UserError(failure)
        _write(table, out, console, "plan rows")
        text = train_summary(table, run, plan)
        if not quiet:
            console.print(text, markup=False)
        _write_summary(text, _summary_path(out), console)
    except UserError as exc:
        _fail(str(exc))


def serve_summary(table, run, plan, binding: str = "") -> str:
    from ..search.plan import plan_qps

    hw, model, wl = run.hardware, run.model, run.workload
    qps = plan_qps(plan, wl)
    if len(table) == 0:  # only the disaggregated pools meet the limits
        return "\n".join(
            [
                f"# Serving plan: {model.name} on {hw.name}, {qps:g} requests/s of {wl.input_len} in / "
                f"{wl.output_len} out tokens",
                "",
                "No colocated layout meets the limits.",
                binding,
                "",
            ]
        )
    c = table.iloc[0]
    limits = (
        ", ".join(
            x
            for x in (
                f"TTFT <= {plan.ttft_ms:g} ms" if plan.ttft_ms else "",
                f"TPOT <= {plan.tpot_ms:g} ms" if plan.tpot_ms else "",
            )
            if x
        )
        or "no latency limit"
    )
    layout = ", ".join(f"{k} {c[k]}" for k in ("tp", "pp", "sp", "ep") if k in c)
    return "\n".join(
        [
            f"# Serving plan: {model.name} on {hw.name}, {qps:g} requests/s ({qps * wl.output_len:,.0f} output tokens/s) "
            f"of {wl.input_len} in / {wl.output_len} out tokens",
            "",
            f"Limits: {limits}.",
            *([binding] if binding else []),
            "",
            f"- replicas: {int(c['replicas']):,} x {int(c['replica_gpus'])} GPUs ({layout}, batch {int(c['batch'])})",
            f"- total GPUs: {int(c['total_gpus']):,}",
            f"- latency: TTFT {c['ttft_ms']:.1f} ms, TPOT {c['tpot_ms']:.2f} ms, request {c['request_latency_s']:.2f} s",
            f"- cost: ${c['usd_per_hour']:,.2f} per hour, ${c['usd_per_million_output_tokens']:.3f} per million output "
            f"tokens (${c['usd_per_million_tokens']:.3f} per million input+output tokens)",
            "",
            "Assumptions:",
            "- a replica keeps `batch` sequences in flight and serves batch / request latency requests/s"
            + (
                " (continuous batching: mean TTFT and TPOT of the iteration-level model at that closed-loop load:"
                " prefill chunks share the decode iterations, a new request waits for the iteration in flight)."
                if getattr(wl, "batching", "static") == "continuous"
                else " (static batching: the batch is prefilled and decoded together)."
            ),
            f"- each replica is kept at {plan.load:.0%} of its capacity (headroom for bursts).",
            f"- price: ${hw.cost_per_gpu_hour_usd:g} per GPU-hour (hardware/{hw.name}.yaml).",
            "- latencies: the analytical inference model with the accelerator's efficiency block.",
            "",
        ]
    )


@plan_app.command("serve", context_settings=EXTRA)
def plan_serve(
    overrides: Optional[List[str]] = OVERRIDES,
    out: Optional[Path] = OUT,
    quiet: bool = QUIET,
    config_dir: Optional[List[str]] = CONFIG_DIR,
):
    """Replicas x layout, total GPUs and $ per million tokens for QPS requests/s within TTFT/TPOT limits."""
    from ..errors import UserError
    from ..report.table import frame_table
    from ..search import FitsCollector
    from ..search.plan import plan_qps, serve_binding, serve_plan_failure, serve_plan_table
    from ..search.serve_disagg import disaggregated_lines, disaggregated_plan, fixed_split_plan
    from ..search.stream import frame_of_kept

    overrides = rewrite_plan_overrides(list(overrides or []))
    if not any(o.split("=", 1)[0] in ("workload", "+workload") for o in overrides):
        overrides = ["workload=inference", *overrides]
    if not any(o.split("=", 1)[0].lstrip("+") == "grid.batch" for o in overrides):
        overrides.append("grid.batch=[1,2,4,8,16,32,64,128,256]")
    try:
        runs = _load(overrides, config_dir)
        out = _out_of(out, runs)
        if len(runs) != 1:
            raise UserError("plan serve answers one question at a time; remove the sweep (a,b) from the overrides")
        run = runs[0]
        if run.workload.kind != "inference":
            raise UserError("plan serve needs workload=inference")
        if run.plan.qps is None and run.plan.tokens_per_s is None:
            raise UserError(
                "plan serve needs the load, e.g. qps=50 (requests/s) or tokens_per_s=20000 (output tokens/s)"
            )
        plan_qps(run.plan, run.workload)
        res = stream_with_progress([run], [FitsCollector(where=None)], quiet, label="planning")
        rows = frame_of_kept([run], res.kept[0])
        if res.evaluated == 0:
            raise UserError(_empty_message(res))
        table = serve_plan_table(rows, run.workload, run.hardware, run.plan)
        dis = disaggregated_plan(
            rows, run.model, run.hardware, run.workload, run.plan, plan_qps(run.plan, run.workload)
        )
        if run.plan.prefill_gpus or run.plan.decode_gpus:
            dis = fixed_split_plan(
                rows, run.model, run.hardware, run.workload, run.plan, plan_qps(run.plan, run.workload)
            )
        if len(table) == 0 and (dis is None or dis.get("total_gpus") is None):
            raise UserError(serve_plan_failure(rows, run.model.name, run.hardware.name, run.plan))
        binding = serve_binding(rows, run.workload, run.hardware, run.plan) if len(table) else ""
        colocated = int(table.iloc[0]["total_gpus"]) if len(table) else None
        binding = "\n".join([binding, "", *disaggregated_lines(dis, colocated, run.plan)]).strip()
        console = _console()
        if not quiet:
            console.print(
                frame_table(
                    table.head(10),
                    width=console.width,
                    columns=[
                        "replica_gpus",
                        "tp",
                        "pp",
                        "sp",
                        "ep",
                        "batch",
                        "ttft_ms",
                        "tpot_ms",
                        "replicas",
                        "total_gpus",
                        "usd_per_million_output_tokens",
                    ],
                    title="cheapest serving layouts",
                )
            )
        _write(table, out, console, "plan rows")
        text = serve_summary(table, run, run.plan, binding)
        if not quiet:
            console.print(text, markup=False)
        _write_summary(text, _summary_path(out), console)
    except UserError as exc:
        _fail(str(exc))


# ----------------------------------------------------------------------------- merge


def _read_part(path: Path):
    import pandas as pd

    from ..errors import UserError
    from ..report.writer import read_table

    if path.is_dir():
        try:
            return pd.read_parquet(path)
        except Exception as exc:
            raise UserError(f"cannot read {str(path)!r} as a Parquet dataset: {str(exc).splitlines()[0]}") from None
    return read_table(path)


@app.command()
def merge(
    parts: List[Path] = typer.Argument(..., help="part files (.csv, .parquet) or Parquet dataset folders"),
    out: Path = typer.Option(..., "--out", "-o", help="merged table (.csv or .parquet)"),
    quiet: bool = QUIET,
):
    """Concatenate the parts written by a multirun (one per model x hardware x workload shard) into one table."""
    import pandas as pd

    from ..errors import UserError

    try:
        frames = []
        versions = {}
        for p in parts:
            df = _read_part(p)
            if "schema_version" in df.columns and len(df):
                versions[p] = str(df["schema_version"].iloc[0])
            frames.append(df.drop(columns=[c for c in ("tool_version", "schema_version") if c in df.columns]))
        if len(set(versions.values())) > 1:
            (a, va), (b, vb) = list(versions.items())[:1] + [
                next((k, v) for k, v in versions.items() if v != next(iter(versions.values())))
            ]
            raise UserError(f"{b} has schema version {vb} but {a} has {va}; re-run the older part")
        from .. import SCHEMA_VERSION
        from ..report.writer import table_kind

        for p, v in versions.items():
            if v != str(SCHEMA_VERSION):
                raise UserError(
                    f"{p} has schema version {v}, this parallmelism writes {SCHEMA_VERSION}; "
                    "re-run that part with this version"
                )
        kinds = {p: table_kind(f) for p, f in zip(parts, frames)}
        if len(set(kinds.values())) > 1:
            a = next(iter(kinds))
            b = next(p for p, k in kinds.items() if k != kinds[a])
            raise UserError(f"{b} is a {kinds[b]} table but {a} is a {kinds[a]} table; merge one kind at a time")
        for c in ("model", "hardware", "workload", "dp_sharding", "recompute", "mem_stage"):
            for f in frames:
                if c in f.columns:
                    f[c] = f[c].astype(str)
        merged = pd.concat(frames, ignore_index=True, sort=False)
        from .. import schema

        known = [*schema.TRAINING_COLUMNS, *getattr(schema, "INFERENCE_COLUMNS", {})]
        order = [c for c in dict.fromkeys(known) if c in merged.columns]  # Parquet datasets put partition keys last
        merged = merged[order + [c for c in merged.columns if c not in order]]
        console = _console()
        _write(merged, out, console if not quiet else _console(stderr=True), f"rows from {len(parts)} parts")
    except UserError as exc:
        _fail(str(exc))


# ----------------------------------------------------------------------------- plot

PLOT_KINDS = ("memory", "roofline", "pareto", "scaling", "step-time")


@app.command(context_settings=EXTRA)
def plot(
    kind: str = typer.Argument(..., help="memory | roofline | pareto | scaling | step-time"),
    overrides: Optional[List[str]] = OVERRIDES,
    out: Path = typer.Option(..., "--out", "-o", help="picture file: .png or .svg"),
    top: int = typer.Option(8, "--top", help="layouts shown (memory, step-time)", min=1),
    quiet: bool = QUIET,
    config_dir: Optional[List[str]] = CONFIG_DIR,
):
    """Draw a picture: memory, roofline, pareto, scaling or step-time (needs matplotlib: the plot extra)."""
    from ..errors import UserError

    try:
        if kind not in PLOT_KINDS:
            raise UserError(f"unknown plot {kind!r}; choose {', '.join(PLOT_KINDS)}")
        if out.suffix.lower() not in (".png", ".svg"):
            raise UserError(f"--out {str(out)!r}: give a .png or .svg file")
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise UserError("plot needs matplotlib: pip install 'parallmelism[plot]'") from None
        from ..report import plots

        runs = _load(overrides, config_dir)
        path = plots.draw(kind, runs, out, top=top)
        _console().print(f"wrote {path}")
    except UserError as exc:
        _fail(str(exc))
