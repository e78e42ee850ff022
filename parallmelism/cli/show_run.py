"""`parallmelism show`'s body: one layout explained (fit, every column, where the step time goes).
No typer here (its options: cli/show_cmd.py), so a plain command line runs it without typer
(cli/app.py `plain_call`)."""

from __future__ import annotations

FIT_COLUMNS = ("fits", "mem_total_gib", "mem_headroom_gib")


def _fit_first(row: dict) -> dict:
    """show's record with fit and memory headroom first: the first thing to know about a layout."""
    first = {k: row[k] for k in FIT_COLUMNS if k in row}
    return {**first, **{k: v for k, v in row.items() if k not in first}}


def _print_fit_line(out, row: dict, hw) -> None:
    if "fits" not in row or "mem_total_gib" not in row:
        return
    usable = hw.hbm_usable_gib
    need = float(row["mem_total_gib"])
    if bool(row["fits"]):
        out.print(
            f"fits: {need:,.1f} GiB per GPU of {usable:,.1f} GiB usable on {hw.name} "
            f"({usable - need:,.1f} GiB headroom)",
            markup=False,
        )
    elif need <= usable and ("mem_host_offload_gib" in row or "mem_host_optimizer_gib" in row):
        # HBM holds it; the host memory does not
        host = sum(float(row[k]) for k in ("mem_host_offload_gib", "mem_host_optimizer_gib") if k in row)
        what = " and ".join(
            w
            for k, w in (("mem_host_offload_gib", "activations"), ("mem_host_optimizer_gib", "optimizer states"))
            if k in row
        )
        out.print(
            f"warning: this layout does not fit: its offloaded {what} need "
            f"{host:,.1f} GiB of host memory per GPU and {hw.name} has "
            f"{hw.host_memory_gib:,.1f} GiB (hardware.host_memory_gib); its times describe a layout that cannot run",
            style="bold red",
            markup=False,
        )
    else:
        out.print(
            f"warning: this layout does not fit: it needs {need:,.1f} GiB per GPU and {hw.name} has "
            f"{usable:,.1f} GiB usable; its times describe a layout that cannot run",
            style="bold red",
            markup=False,
        )


def under_load(run, layout, km) -> list[str]:
    """The pinned layout at workload.request_rate (split over its dp replicas) or the trace's send
    times: p50/p90/p99 TTFT and ITL and goodput (search.serve_load), as lines."""
    from ..config.length_trace import workload_requests
    from ..cost.layout import ServingLayout
    from ..report.load_lines import load_lines
    from ..cost.serving_load import replica_share
    from ..search.serve_load import loaded_point

    wl, plan = run.workload, run.plan
    lay = ServingLayout.of(layout)
    dp = int(lay.dp[0])
    reqs = replica_share(workload_requests(wl), dp)
    rate = None if wl.request_rate is None else wl.request_rate / dp
    s = loaded_point(
        run.model,
        run.hardware,
        wl,
        lay,
        km,
        run.serving_engine(),
        reqs,
        rate_per_replica=rate,
        seed=wl.load_seed,
        ttft_slo_ms=plan.ttft_ms,
        itl_slo_ms=plan.tpot_ms,
    )
    if reqs.arrival_s is not None:
        sent = f"the trace's send times ({wl.length_trace})"
    else:
        sent = f"Poisson {wl.request_rate:g} requests/s over {dp} replica(s)"
    lengths = (
        "the trace's lengths"
        if wl.length_trace is not None
        else (
            f"{wl.length_dist} lengths {wl.input_len}/{wl.output_len}"
            + (f" ±{wl.length_spread:.0%}" if wl.length_dist == "uniform" else "")
        )
    )
    head = (
        f"under load (cost/serving_load.py, seed {wl.load_seed}): {len(reqs.input_len):,} requests, {sent}, "
        f"{lengths}; at most batch={int(lay.batch[0])} in flight per replica, capacity "
        f"{s['replica_capacity_requests_per_s']:,.3g} requests/s per replica"
    )
    return load_lines(s, head, plan.ttft_ms, plan.tpot_ms)


def show(
    overrides: list[str] | None = None,
    cfg: bool = False,
    resolve: bool = False,
    info: bool = False,
    config_dir: list[str] | None = None,
):
    """The pinned layout's fit line, its columns and where its step time goes (or, for serving, its
    breakdown and its percentiles under load); --cfg/--info answer instead when given."""
    from ..errors import UserError
    from ..report.table import record_table
    from ..schema import INFERENCE_COLUMNS, TRAINING_COLUMNS
    from .common import config_flags, fail, fastest_pinned_record
    from .console import stdout_console

    overrides = list(overrides or [])
    try:
        if config_flags(cfg, resolve, info, overrides, config_dir):
            return
        record, layout, run, n = fastest_pinned_record(
            overrides, config_dir, "show explains one configuration; remove the sweep (a,b) from the overrides"
        )
        row = _fit_first(record)
        out = stdout_console()
        title = "layout" if n == 1 else f"best of {n:,} matching layouts (pin more grid keys to choose)"
        if run.workload.kind == "inference":
            from ..config.drafts import draft_model_of
            from ..config.kernel_tables import serving_kernel_model
            from ..cost.inference import breakdown_for_row
            from ..report.breakdown import breakdown_table

            hw = run.accelerator()
            km = serving_kernel_model(hw, run.serving_engine())
            wl = run.workload
            # simulated before anything is printed: a refusal (an unstable rate, a bad trace) is the only output
            load = under_load(run, layout, km) if wl.request_rate is not None or wl.length_trace is not None else []
            _print_fit_line(out, row, run.hardware)
            out.print(weights_line(wl, row), markup=False)
            out.print(record_table(row, title=title, descriptions=INFERENCE_COLUMNS, width=out.width), crop=False)
            records = breakdown_for_row(
                row,
                run.model,
                hw,
                run.workload,
                km,
                run.serving_engine(),
                draft_model_of(run.model, run.workload),
            )
            out.print(breakdown_table(records, width=out.width), crop=False)
            for line in load:
                out.print(line, markup=False)
            return
        _print_fit_line(out, row, run.hardware)
        out.print(record_table(row, title=title, descriptions=TRAINING_COLUMNS, width=out.width), crop=False)
        # where the step time goes (cost/breakdown.py) for the chosen layout's coded columns
        from ..config.kernel_tables import kernel_model, kernel_source
        from ..cost.breakdown import training_breakdown
        from ..report.steptime_tables import step_time_tables

        out.print(kernel_source(run.hardware), markup=False)  # pinned by a measured table, or by spec
        out.print(stack_line(run), markup=False)  # the software stack, its attention kernel and whose overheads
        hw = run.accelerator()
        bd = training_breakdown(layout, run.model, hw, run.training_workload(), kernel_model(hw))
        for table in step_time_tables(bd, width=out.width):
            out.print(table, crop=False)
    except UserError as exc:
        fail(str(exc))


def weights_line(wl, row) -> str:
    """One line: the serving weights' quantization scheme, bytes per linear weight (element + scales),
    GEMM and KV-cache dtypes, and the weights per GPU (specs/quantization.py)."""
    from ..specs.quantization import SCHEMES, linear_weight_bytes

    scheme = SCHEMES.get(wl.quantization)
    per = linear_weight_bytes(wl)
    how = (
        f"{wl.quantization} ({scheme.what}): {per:.6g} B per linear weight ({per - scheme.scale_bytes_per_element:g} "
        f"+ {scheme.scale_bytes_per_element:.4g} of scales)"
        if scheme is not None
        else f"quantization none: {wl.weight_dtype} linear weights, {per:g} B each"
    )
    return (
        f"weights: {how}; GEMMs {wl.precision}, KV cache {wl.kv_dtype}; "
        f"{float(row['mem_weights_gib']):.2f} GiB of weights per GPU"
    )


def stack_line(run) -> str:
    """One line: the training stack, the attention kernel the step is timed with, and which fit its
    named overheads are (the stack's own for this accelerator, a named one, the fallback, or the
    hardware file's own block)."""
    _, where = run.overheads()
    stack, wl = run.training_stack(), run.training_workload()
    unfused = ", ".join(f"{k} x{v:g}" for k, v in (wl.unfused_elementwise or {}).items()) or "none"
    return (
        f"stack: {stack.name} ({stack.display_name or stack.name}); attention kernel "
        f"{run.attention_backend()}; compile {'on' if wl.compile else 'off'}, unfused element-wise ops "
        f"(HBM bytes x) {unfused}; named overheads: {where}"
    )
