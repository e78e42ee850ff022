"""Markdown summaries of capacity plans (`plan train`, `plan serve`), and where they are written."""

from __future__ import annotations

from pathlib import Path
from typing import Optional
from ..words import plural


def summary_path(out: Path) -> Path:
    """Where the plan's Markdown summary goes: NAME.summary.md beside the plan table NAME.csv."""
    return out.with_name(out.stem + ".summary.md")


def check_plan_outputs(out: Optional[Path]) -> None:
    """The summary's path passes the output checks too, before the plan is computed."""
    if out is not None:
        from ..errors import UserError
        from .writer import check_writable_target

        try:
            check_writable_target(summary_path(out))
        except UserError as exc:
            raise UserError(f"the plan's summary beside --out (NAME.summary.md): {exc}") from None


def write_plan(table, out: Optional[Path], text: str, console) -> None:
    """The plan table and its Markdown summary beside it (summary_path), both or neither."""
    if out is None:
        return
    from .writer import write_table_and_text

    path = summary_path(out)
    write_table_and_text(table, out, text, path)
    console.print(f"wrote {len(table):,} plan rows to {out}", markup=False)
    console.print(f"wrote the summary to {path}", markup=False)


def train_summary(table, run, plan) -> str:
    hw, model, wl = run.hardware, run.model, run.workload
    lines = [f"# Training plan: {model.name} on {hw.name}, {wl.tokens:.3g} tokens", ""]
    chosen = table[table["chosen"]]
    if len(chosen):
        c = chosen.iloc[0]
        goal = (
            f"exactly {plan.gpus} {plural(plan.gpus, 'GPU')}"
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
        "- step time: the analytical time model: per-op kernel times from the accelerator's kernel table"
        " (measured, or a measured one scaled to it), collectives at its link bandwidths, plus its named"
        f" overheads (the training stack's fit for {hw.name}, conf/stack/NAME.yaml `overheads:`; `show`"
        " names it), one layout for the whole run.",
        "- each GPU count uses its fastest layout that fits in memory.",
        "",
    ]
    return "\n".join(lines)


def serve_summary(table, run, plan, binding: str = "", recommended: str = "") -> str:
    """The serving plan in words: the recommendation (search/serve_recommend.py) when given, the
    limits and what binds, the disaggregated comparison, the colocated plan and the assumptions."""
    from ..search.plan import plan_qps

    hw, model, wl = run.hardware, run.model, run.workload
    qps = plan_qps(plan, wl)
    if len(table) == 0:  # only the disaggregated pools meet the limits
        return "\n".join(
            [
                f"# Serving plan: {model.name} on {hw.name}, {qps:g} requests/s of {wl.input_len} in / "
                f"{wl.output_len} out tokens",
                "",
                *([recommended, ""] if recommended else []),
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
            *([recommended, ""] if recommended else []),
            f"Limits: {limits}.",
            *([binding] if binding else []),
            "",
            f"- replicas: {int(c['replicas']):,} x {int(c['replica_gpus'])} {plural(c['replica_gpus'], 'GPU')} ({layout}, batch {int(c['batch'])})",
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
