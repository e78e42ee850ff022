"""`parallmelism plan train|serve`: capacity plans for a training run and for serving."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from .common import EXTRA
from .options import CHUNK, CONFIG_DIR, OUT, OVERRIDES, QUIET, WIDE, WORKERS

plan_app = typer.Typer(
    no_args_is_help=True,
    help="Capacity plans: GPUs, days, energy and dollars for a training run; replicas and $/token for serving.",
)


@plan_app.command("train", context_settings=EXTRA)
def plan_train(
    overrides: Optional[List[str]] = OVERRIDES,
    out: Optional[Path] = OUT,
    quiet: bool = QUIET,
    wide: bool = WIDE,
    chunk_rows: int = CHUNK,
    workers: Optional[int] = WORKERS,
    config_dir: Optional[List[str]] = CONFIG_DIR,
):
    """GPUs, layout, step time, days, GPU-hours, energy and $ to train on TOKENS (tokens=15e12; days=, gpus= or budget= picks the plan)."""
    from ..errors import UserError
    from ..report.table import frame_table, show_table
    from ..config.plan_shorthands import rewrite_plan_overrides
    from ..report.plan_summary import check_plan_outputs, train_summary, write_plan
    from ..schema import LAYOUT_AXES
    from ..search import TopKCollector, frame_of_kept
    from ..search.plan import train_plan_failure, train_plan_table
    from ..words import plural
    from .common import console, fail, load_runs, stream
    from .outputs import out_of

    try:
        overrides = rewrite_plan_overrides(list(overrides or []), "train")
        runs = load_runs(overrides, config_dir)
        out = out_of(out, runs, config_dir)
        check_plan_outputs(out)
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
            else plan.default_ngpus
        )
        run = run.model_copy(update={"grid": run.grid.model_copy(update={"ngpus": sorted(set(counts))})})
        collector = TopKCollector(1, "time_step_s", group_by=["ngpus"], where="fits")
        res = stream([run], [collector], quiet, chunk_rows, "planning", workers)
        best = frame_of_kept([run], res.kept[0])
        table = train_plan_table(best, run.workload.tokens, run.hardware, plan) if len(best) else best
        failure = (
            train_plan_failure(table, plan)
            if len(best)
            else (
                res.explain_empty()
                if res.evaluated == 0
                else f"no layout fits in memory at {', '.join(map(str, run.grid.ngpus))} {plural(run.grid.ngpus[-1], 'GPU')}; add counts with plan.ngpus=[...]"
            )
        )
        to = console()
        if not quiet and len(table):
            show_table(
                to,
                frame_table(
                    table,
                    width=None if wide else to.width,
                    columns=[
                        "ngpus",
                        *LAYOUT_AXES,
                        "time_step_s",
                        "days",
                        "gpu_hours",
                        "energy_mwh",
                        "cost_usd",
                        "chosen",
                    ],
                    title="fastest layout per GPU count",
                ),
                wide,
            )
        if failure:  # the table above shows why; nothing is written for a plan that failed
            raise UserError(failure)
        text = train_summary(table, run, plan)
        if not quiet:
            to.print(text, markup=False)
        write_plan(table, out, text, to)
    except UserError as exc:
        fail(str(exc))


@plan_app.command("serve", context_settings=EXTRA)
def plan_serve(
    overrides: Optional[List[str]] = OVERRIDES,
    out: Optional[Path] = OUT,
    quiet: bool = QUIET,
    wide: bool = WIDE,
    workers: Optional[int] = WORKERS,
    config_dir: Optional[List[str]] = CONFIG_DIR,
    engine_choice: Optional[str] = typer.Option(
        None,
        "--engine",
        help="auto: plan the question with every serving engine (conf/engine/), say which is cheapest and "
        "which fastest, and show the cheapest's plan (one engine: engine=NAME)",
    ),
):
    """Replicas x layout, total GPUs and $ per million tokens for QPS requests/s within TTFT/TPOT limits."""
    from ..errors import UserError
    from ..report.table import frame_table, show_table
    from ..config.plan_shorthands import rewrite_plan_overrides
    from ..report.plan_summary import check_plan_outputs, serve_summary, write_plan
    from ..search import RowsCollector, frame_of_kept
    from ..search.plan import plan_qps, serve_binding, serve_binding_counts, serve_plan_failure, serve_plan_table
    from ..search.serve_disagg import disaggregated_lines, disaggregated_plan, fixed_split_plan, pool_bindings
    from ..search.serve_recommend import colocated_deployment, disaggregated_deployment, plans_frame, recommend
    from ..config.kernel_tables import serving_kernel_model
    from ..config.length_trace import workload_requests
    from ..search.serve_load import colocated_under_load
    from .common import console, fail, load_runs, stream
    from .outputs import out_of

    try:
        given = rewrite_plan_overrides(list(overrides or []), "serve")
    except UserError as exc:
        fail(str(exc))
        raise  # pragma: no cover - fail() raises
    overrides = given
    if not any(o.split("=", 1)[0] in ("workload", "+workload") for o in overrides):
        overrides = ["workload=inference", *overrides]
    explicit_batch = any(o.split("=", 1)[0].lstrip("+") == "grid.batch" for o in overrides)
    explicit_sp = any(o.split("=", 1)[0].lstrip("+") == "grid.sp" for o in overrides)
    try:
        runs = load_runs(overrides, config_dir)
        out = out_of(out, runs, config_dir)
        check_plan_outputs(out)
        if not explicit_batch:  # plan.serve_batch: the batch sizes a serving plan considers
            runs = [
                r.model_copy(update={"grid": r.grid.model_copy(update={"batch": list(r.plan.serve_batch)})})
                for r in runs
            ]
        # a plan names what `export` can launch: no serving engine shards a prompt (export/serving.check)
        if not explicit_sp:
            runs = [r.model_copy(update={"grid": r.grid.model_copy(update={"sp": [1]})}) for r in runs]
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
        if engine_choice is not None:
            from .engine_auto import auto_engine

            run, verdict = auto_engine(engine_choice, overrides, run, config_dir, workers)
            if not quiet:
                console().print("\n".join(verdict), markup=False)
        res = stream([run], [RowsCollector()], quiet, label="planning", workers=workers)
        rows = frame_of_kept([run], res.kept[0])
        if res.evaluated == 0:
            raise UserError(res.explain_empty())
        table = serve_plan_table(rows, run.workload, run.hardware, run.plan)
        split = fixed_split_plan if run.plan.prefill_gpus or run.plan.decode_gpus else disaggregated_plan
        dis = split(
            rows,
            run.model,
            run.hardware,
            run.workload,
            run.serving_engine(),
            run.plan,
            plan_qps(run.plan, run.workload),
        )
        if len(table) == 0 and (dis is None or dis.get("total_gpus") is None):
            raise UserError(serve_plan_failure(rows, run.model.name, run.hardware.name, run.plan))
        qps = plan_qps(run.plan, run.workload)
        counts = serve_binding_counts(rows, run.workload, run.hardware, run.plan) if len(table) else None
        binding = serve_binding(rows, run.workload, run.hardware, run.plan, counts) if len(table) else ""
        c = table.iloc[0] if len(table) else None
        colocated = int(c["total_gpus"]) if c is not None else None
        binding = "\n".join([binding, "", *disaggregated_lines(dis, colocated, run.plan)]).strip()
        pools = (
            pool_bindings(rows, run.model, run.hardware, run.workload, run.serving_engine(), run.plan, qps, dis)
            if dis is not None and dis.get("total_gpus") is not None
            else ("", "")
        )
        deployments = [
            colocated_deployment(c, counts, run.plan, qps),
            disaggregated_deployment(dis, pools, run.plan, qps),
        ]
        rec = recommend(*deployments)
        plans = plans_frame(run.model.name, run.hardware, run.workload, run.plan, qps, c, dis, deployments, rec.pick)
        load = (
            colocated_under_load(
                c,
                run,
                qps,
                plans,
                workload_requests(run.workload),
                serving_kernel_model(run.hardware, run.serving_engine()),
            )
            if run.plan.load_percentiles
            else []
        )
        to = console()
        if not quiet:
            to.print(rec.line, markup=False)
            show_table(
                to,
                frame_table(
                    table.head(10),
                    width=None if wide else to.width,
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
                ),
                wide,
            )
        if not quiet:  # the recommendation is already above the table
            to.print(serve_summary(table, run, run.plan, binding), markup=False)
            for line in load:
                to.print(line, markup=False)
        summary = serve_summary(table, run, run.plan, binding, rec.line)
        write_plan(plans, out, "\n".join([summary, *load]) if load else summary, to)
    except UserError as exc:
        fail(str(exc))
