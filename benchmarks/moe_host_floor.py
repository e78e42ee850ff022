"""Megatron-Bridge's Qwen3-30B-A3B runs per MoE layer per micro-batch, what the dispatcher's host sync can
expose at a launch's price, and what each candidate host term would have to cost to close the gap (issue 32;
README "The Qwen3-30B-A3B PP 2 x VP 12 row"). Prints figures, asserts nothing; nothing here is fitted.

    python benchmarks/moe_host_floor.py

Published runs: NVIDIA-NeMo/Megatron-Bridge docs/performance-summary-archive.md (mirror 067f987df), tokens/s/GPU
per release, with the layout the release's preset ran (scripts/performance/configs/qwen*/...workload_base_configs.py
at the release's tag): step = GBS * 4096 / (tokens/s/GPU * GPUs); micro-batches per rank GA = GBS / (MBS * DP);
a rank runs 48 / PP layers per micro-batch, so ms per layer per micro-batch = step / (GA * 48 / PP).
CUDA graphs: no H100 FP8 preset of these releases captures any (QWEN3_30B_A3B_H100_FP8_CS_* at v0.2.0, v0.3.0,
v0.3.1 and v0.4.0 set no cuda_graph_impl, and scripts/performance/utils/utils.py WorkloadBaseConfig defaults it
to None; only the H100 BF16 presets graph moe_router and moe_preprocess), so graphs do not tell the H100 rows apart.

The model's split is the shipped row's (training_long_context_moe.csv) at the stack's overheads. The sync:
Megatron-Core core_v0.15 MoEAlltoAllTokenDispatcher, dropless with EP > 1, blocks the host on d2h_event.synchronize()
before the EP all-to-all ("before_ep_alltoall"), so what the forward launches after it starts on an empty queue.
Those launches, counted: TE GroupedLinear's forward per local expert in fc1 and fc2 (cost/overheads.py
MOE_EXPERT_LAUNCHES forward: 2 GEMMs + 2 x 3 quantize kernels), and the dispatcher's ops after the sync
(POST_SYNC_DISPATCH_OPS). At the stack's stated moe_expert_launch_us that is the host time the sync can expose,
at most, beside the forward's EP all-to-alls the model already times on the GPU.

Same software, two layouts: 26.02 and 26.02.01 run the same Megatron-Core (core_r0.16.0 b0cc2706 and 55ac7082,
13 commits apart, none in the transformer or pipeline code); Megatron-Bridge f29a269f8 (#2477, "Update Qwen3 30B
H100 Base Configs with HybridEP") changed only the H100 preset, PP2 VP12 EP8 DeepEP with A2A overlap to EP16
HybridEP without. The model is evaluated at both layouts (the shipped rows' at GBS 1024) to compare ratios.

Kernel and link candidates first (worst_case_bound): the row's model with every one of them at its worst at
once, though the row's recipe rules each out (grouped GEMM, fused permute, the A2A overlap): the expert GEMMs as
the H100's per-expert loop, permute/unpermute unfused (both from h100_moe_experts.csv at the row's 2,048 tokens
per expert), the EP all-to-alls exposed, and the combined 1F1B schedule's P2P hops
(benchmarks/combined_1f1b_hops.py). They leave the row about a fifth short: what is missing is not a kernel.

Candidate host terms, each priced as what the shipped megatron-te MoE rows would need (their residual per layer
per micro-batch, measured - model): a cost per virtual pipeline stage per micro-batch (residual x layers per
virtual stage: one constant would have to fit every interleaved row), and a cost per local expert (the two
Qwen3-30B-A3B rows, 16 and 8 local experts, fp8 current scaling). Last, the host floor the EP-only runs show (the
B200 and the H100 take about the same time per layer per micro-batch on kernels 2.2x apart), and what a floor at
the H100 EP16 runs' mean would do to each row: printed, not applied (it is read off end-to-end times).
"""

from __future__ import annotations

import sys
from importlib import resources
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SEQ, LAYERS = 4096, 48
# (release, system, layout as its preset ran it, GPUs, GBS, MBS, PP, DP, tokens/s/GPU, note)
RUNS = (
    (
        "25.09",
        "H100",
        "PP2 VP12 EP8, token drop (capacity 1.0, padded: no sync)",
        16,
        512,
        2,
        2,
        8,
        10494,
        "v0.1.0rc4 qwen3_30b_a3b_llm_pretrain.yaml h100 fp8_cs mbs 2, cuda_graphs false; run_script.py "
        "apply_moe_token_drop",
    ),
    (
        "25.11",
        "H100",
        "PP2 VP12 EP8, dropless alltoall, A2A overlap",
        16,
        512,
        1,
        2,
        8,
        5275,
        "v0.2.0 QWEN3_30B_A3B_H100_FP8_CS_BASE_CONFIG (MBS default 1); the shipped row",
    ),
    (
        "26.02",
        "H100",
        "PP2 VP12 EP8, dropless DeepEP, A2A overlap",
        16,
        1024,
        1,
        2,
        8,
        5113,
        "v0.3.0 QWEN3_30B_A3B_PRETRAIN_CONFIG_H100_FP8_CS_V1; table states the same layout",
    ),
    (
        "26.02.01",
        "H100",
        "EP16, dropless HybridEP, no A2A overlap",
        16,
        1024,
        1,
        1,
        16,
        9058,
        "v0.3.1 QWEN3_30B_A3B_PRETRAIN_CONFIG_H100_FP8_CS_V1 (f29a269f8); the table keeps 26.02's PP2 VP12 EP8 columns",
    ),
    (
        "26.04",
        "H100",
        "EP16, dropless HybridEP, no A2A overlap",
        16,
        1024,
        1,
        1,
        16,
        8901,
        "table layout",
    ),
    (
        "26.04.01",
        "H100",
        "EP16, dropless HybridEP, no A2A overlap",
        16,
        1024,
        1,
        1,
        16,
        8960,
        "v0.4.0 QWEN3_30B_A3B_PRETRAIN_CONFIG_H100_FP8_CS_V1; the shipped mb2604p1 row",
    ),
    (
        "26.06",
        "H100",
        "EP16, dropless HybridEP, no A2A overlap",
        16,
        1024,
        1,
        1,
        16,
        8826,
        "table layout",
    ),
    (
        "25.09",
        "B200",
        "EP8, token drop, whole-layer CUDA graphs",
        8,
        512,
        1,
        1,
        8,
        18066,
        "v0.1.0rc4 yaml b200 mbs 1 cuda_graphs true (enable_cuda_graph)",
    ),
    (
        "25.11",
        "B200",
        "EP8, dropless alltoall, graphs of router+preprocess only",
        8,
        512,
        1,
        1,
        8,
        9299,
        "v0.2.0 QWEN3_30B_A3B_B200_FP8_MX_BASE_CONFIG (= FP8_CS): cuda_graph_scope moe_router, moe_preprocess",
    ),
)
CASE = "mb2511-qwen3-30b-h100-16gpu-pp2-vp12-ep8-fp8cs"
EP16_CASE = "mb2604p1-qwen3-30b-h100-16gpu-ep16-fp8"
EP16_RELEASES = ("26.02.01", "26.04", "26.04.01", "26.06")  # the H100 runs of the EP16 preset
# the dispatcher's host ops after the sync in forward (core_v0.15 token_dispatcher.py dispatch_postprocess /
# combine): the EP all-to-all, sort_chunks_by_idxs, the activation, sort back, the all-to-all back, unpermute
POST_SYNC_DISPATCH_OPS = 6
TRAINING_CASE_FILES = ("training_measured.csv", "training_stacks.csv", "training_long_context_moe.csv")


def ms_per_layer_microbatch(gpus, gbs, mbs, pp, dp, tok_s_gpu) -> tuple[float, float]:
    step = gbs * SEQ / (tok_s_gpu * gpus)
    return step, 1e3 * step / (gbs / (mbs * dp) * LAYERS / pp)


def _rows(file_name):
    import pandas as pd

    path = resources.files("parallmelism") / "cases" / file_name
    df = pd.read_csv(str(path), dtype=str, keep_default_na=False).replace({"": None})
    return df.to_dict("records")


def _evaluate(row, ctx):
    """(the model's output row, micro-batch passes of one layer per step on a rank) for a case row."""
    from parallmelism.validate.cases import evaluate_one
    from parallmelism.validate.steptime import step_time_run_of

    run = step_time_run_of(row, ctx)
    out = evaluate_one(run)
    mbs, dp, pp = int(out["micro_batch"]), int(row["dp"]), int(row["pp"])
    return run, out, int(row["global_batch"]) / (mbs * dp) * run.model.layers / pp


def model_split(ctx):
    """(ms per layer per micro-batch: step, kernels, overheads, forward EP all-to-alls; local experts; stated µs)."""
    row = next(r for r in _rows("training_long_context_moe.csv") if r["case"] == CASE)
    run, out, n = _evaluate(row, ctx)
    ms = {k: 1e3 * float(out[k]) / n for k in ("time_step_s", "time_compute_s", "time_overhead_s", "time_comm_ep_s")}
    local = int(row["experts"]) // int(row["ep"])
    us = run.accelerator().overheads.moe_expert_launch_us
    return ms, float(row["step_time_s"]) * 1e3 / n, local, us


def same_software_pair(ctx) -> tuple[float, float]:
    """The model's ms per layer per micro-batch at 26.02's layout (the shipped 25.11 row at GBS 1024, DeepEP)
    and at 26.02.01's (the shipped EP16 row)."""
    rows = {r["case"]: r for r in _rows("training_long_context_moe.csv")}
    pp2 = {**rows[CASE], "global_batch": "1024", "moe_dispatcher": "flex"}
    _, out_pp2, n_pp2 = _evaluate(pp2, ctx)
    _, out_ep16, n_ep16 = _evaluate(rows[EP16_CASE], ctx)
    return 1e3 * float(out_pp2["time_step_s"]) / n_pp2, 1e3 * float(out_ep16["time_step_s"]) / n_ep16


def ep8_kernels(ctx) -> dict:
    """The model's kernel ms per layer per micro-batch at the 25.11 B200 preset's layout (EP 8, no pipeline, no A2A
    overlap, MBS 1, GBS 512: the shipped EP16 row re-laid), on the H100 and on the B200."""
    rows = {r["case"]: r for r in _rows("training_long_context_moe.csv")}
    ep8 = {**rows[EP16_CASE], "gpus": "8", "ep": "8", "dp": "8", "global_batch": "512"}
    ep8 |= {"moe_dispatcher": "alltoall", "overlap_ep_comm": "false"}
    out = {}
    for acc in ("h100-sxm-80gb", "b200-180gb"):
        _, res, n = _evaluate({**ep8, "accelerator": acc}, ctx)
        out[acc] = 1e3 * float(res["time_compute_s"]) / n
    return out


def moe_rows(ctx):
    """Every shipped megatron-te MoE step-time row: (case, local experts, layers per virtual stage, measured and
    model ms per layer per micro-batch)."""
    out = []
    for name in TRAINING_CASE_FILES:
        for row in _rows(name):
            if (row.get("stack") or "megatron-te") != "megatron-te" or row.get("step_time_s") is None:
                continue
            run, res, n = _evaluate(row, ctx)
            moe = run.model.moe
            if moe is None or moe.num_experts <= 1:
                continue
            vp = int(row["vpp"] or 1)
            per_vstage = run.model.layers / (int(row["pp"]) * vp)
            measured = 1e3 * float(row["step_time_s"]) / n
            out.append(
                (
                    row["case"],
                    moe.num_experts // int(row["ep"]),
                    per_vstage,
                    vp,
                    measured,
                    1e3 * float(res["time_step_s"]) / n,
                )
            )
    return out


# the H100's MoE expert measurements, shipped copy of ../shared/reference/h100_moe_experts.csv
MOE_EXPERTS_CSV = Path(__file__).resolve().parent.parent / "tests" / "data" / "reference" / "h100_moe_experts.csv"
# the combined 1F1B schedule's P2P hops the model hides, seconds a step on this row (benchmarks/combined_1f1b_hops.py)
COMBINED_1F1B_HOPS_S = 0.273


def worst_case_bound(ctx) -> dict:
    """ms per layer per micro-batch the PP 2 x VP 12 row's model would take with every kernel and link candidate
    at its worst (each a term of issue 32's list, none of them the row's stated recipe): the expert GEMMs at the
    H100's per-expert Python loop instead of grouped (h100_moe_experts.csv loop_s - grouped_mm_s at the row's
    tokens per expert, forward x 3 for forward and backward, scaled to the local experts), permute and unpermute
    unfused (the table's index_select / index_add_ forward x 3, less the fused ops the model prices), the EP
    all-to-alls exposed instead of hidden by the A2A overlap (less the contention charged for hiding them), and
    the combined 1F1B schedule's exposed P2P hops."""
    import pandas as pd

    from parallmelism.config.kernel_tables import kernel_model
    from parallmelism.cost.breakdown import training_breakdown
    from parallmelism.search import RowsCollector, stream_runs

    row = next(r for r in _rows("training_long_context_moe.csv") if r["case"] == CASE)
    run, out, n = _evaluate(row, ctx)
    res = stream_runs([run], [RowsCollector()], workers=1, derive=False)
    cols = {k: v[[0]] for k, v in res.kept[0].items() if k not in ("_run", "_row")}
    hw = run.accelerator()
    ops = training_breakdown(cols, run.model, hw, run.training_workload(), kernel_model(hw))["ops"]
    per = {op["op"]: 1e3 * op["time_step_s"] / n for op in ops}  # ms per layer per micro-batch
    experts, ep, seq = int(row["experts"]), int(row["ep"]), int(row["seq_len"])
    tokens_per_expert = seq * int(row["top_k"]) * ep // experts
    table = pd.read_csv(MOE_EXPERTS_CSV, comment="#")
    t = table[(table["model"] == "qwen3-30b-a3b") & (table["tokens_per_expert"] == tokens_per_expert)].iloc[0]
    share = (experts // ep) / int(t["experts"])  # the rank's local experts of the table's layer
    loop = 3e3 * (float(t["loop_s"]) - float(t["grouped_mm_s"])) * share
    permute = 3e3 * float(t["permute_unpermute_s"]) * share - per["permute"] - per["unpermute"]
    ep_link = 1e3 * float(out["time_comm_ep_s"]) / n
    contention = run.accelerator().overheads.comm_contention
    adds = {
        "expert GEMMs as a per-expert loop": loop,
        "permute/unpermute unfused": permute,
        "EP all-to-alls exposed": ep_link * (1.0 - contention),
        "combined 1F1B P2P hops": 1e3 * COMBINED_1F1B_HOPS_S / n,
    }
    return {"model": 1e3 * float(out["time_step_s"]) / n, "measured": float(row["step_time_s"]) * 1e3 / n, **adds}


def main() -> int:
    from parallmelism.cost.overheads import MOE_EXPERT_LAUNCHES, moe_expert_launches
    from parallmelism.validate.runner import _context

    ctx = _context([], None)
    print("release,system,layout,step_s,ms_per_layer_per_microbatch,tokens_per_microbatch,preset")
    per_release = {}
    for rel, system, layout, gpus, gbs, mbs, pp, dp, tok, note in RUNS:
        step, ms = ms_per_layer_microbatch(gpus, gbs, mbs, pp, dp, tok)
        per_release[(rel, system)] = ms
        print(f'{rel},{system},"{layout}",{step:.2f},{ms:.2f},{mbs * SEQ},"{note}"')
    bound = worst_case_bound(ctx)
    model_ms, measured_ms = bound.pop("model"), bound.pop("measured")
    print(f"\n{CASE}: every kernel and link candidate at its worst, ms per layer per micro-batch")
    for name, ms_ in bound.items():
        print(f"  + {ms_:.2f}  {name}")
    total = model_ms + sum(bound.values())
    print(
        f"  model {model_ms:.2f} -> {total:.2f} against {measured_ms:.2f} measured ({100 * (total / measured_ms - 1):+.1f} %)"
    )
    ms, measured, local, us = model_split(ctx)
    fwd_per_expert = MOE_EXPERT_LAUNCHES["gemm"][0] + MOE_EXPERT_LAUNCHES["fp8_quantize"][0]
    post_sync = fwd_per_expert * local + POST_SYNC_DISPATCH_OPS
    all_expert = float(moe_expert_launches(local, True))
    gap = measured - ms["time_step_s"]
    print(
        f"\n{CASE}: measured {measured:.2f} ms per layer per micro-batch; model {ms['time_step_s']:.2f} "
        f"(kernels {ms['time_compute_s']:.2f}, named overheads {ms['time_overhead_s']:.2f}, of them "
        f"{all_expert:.0f} per-expert launches x {us:g} us = {all_expert * us / 1e3:.2f}); missing {gap:.2f}"
    )
    print(
        f"after the sync the forward launches {post_sync:.0f} kernels: {post_sync * us / 1e3:.2f} ms of host at "
        f"{us:g} us, beside the forward EP all-to-alls alone {ms['time_comm_ep_s'] / 2:.2f} ms on the GPU"
    )
    print(
        f"the gap would take {us + gap * 1e3 / all_expert:.0f} us for each of the {all_expert:.0f} per-expert "
        f"launches, or {us + gap * 1e3 / post_sync:.0f} us for each of the {post_sync:.0f} after the sync"
    )

    pp2_model, ep16_model = same_software_pair(ctx)
    pp2_meas, ep16_meas = per_release[("26.02", "H100")], per_release[("26.02.01", "H100")]
    print(
        f"\nsame software (core_r0.16.0), two presets: 26.02 PP2 VP12 EP8 A2A overlap {pp2_meas:.2f} ms per layer "
        f"per micro-batch, 26.02.01 EP16 {ep16_meas:.2f}: {pp2_meas / ep16_meas:.2f}x; the model "
        f"{pp2_model:.2f} and {ep16_model:.2f}: {pp2_model / ep16_model:.2f}x"
    )

    rows = moe_rows(ctx)
    print(
        "\ncase,local_experts,layers_per_virtual_stage,measured_ms,model_ms,residual_ms,residual_per_virtual_stage_ms"
    )
    need = []
    for case, local_e, per_vstage, vp, meas, model in rows:
        res = meas - model
        per_stage = f"{res * per_vstage:+.2f}" if vp > 1 else ""  # no pipeline chunks without interleaving
        if vp > 1:
            need.append(res * per_vstage)
        print(f"{case},{local_e},{per_vstage:.2f},{meas:.2f},{model:.2f},{res:+.2f},{per_stage}")
    print(
        f"a cost per virtual stage per micro-batch: the interleaved rows need {min(need):+.1f} to {max(need):+.1f} ms"
    )
    by_case = {r[0]: r for r in rows}
    a, b = by_case[CASE], by_case[EP16_CASE]
    extra = ((a[4] - a[5]) - (b[4] - b[5])) / (a[1] - b[1])
    launches = float(moe_expert_launches(1, True))
    print(
        f"a cost per local expert (fp8, {a[1]} vs {b[1]} local): {1e3 * extra:.0f} us per expert per layer per "
        f"micro-batch beyond the {launches:.0f} launches x {us:g} us charged, {us + 1e3 * extra / launches:.0f} us a launch"
    )
    kernels = ep8_kernels(ctx)
    h100_ep16 = [per_release[(rel, "H100")] for rel in EP16_RELEASES]
    floor = sum(h100_ep16) / len(h100_ep16)
    print(
        f"\nhost floor: 25.11 B200 EP8 {per_release[('25.11', 'B200')]:.2f} ms per layer per micro-batch where the "
        f"model's kernels take {kernels['b200-180gb']:.2f} ms ({kernels['h100-sxm-80gb']:.2f} on the H100 at that "
        f"layout); H100 EP16 {min(h100_ep16):.2f}-{max(h100_ep16):.2f} ms over {len(h100_ep16)} releases"
    )
    print(f"not applied: a floor max(model, {floor:.2f} ms) per MoE layer per micro-batch would read")
    for case, _, _, _, meas, model in rows:
        if max(model, floor) != model:
            print(f"  {case}: {100 * (model / meas - 1):+.1f} -> {100 * (max(model, floor) / meas - 1):+.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
