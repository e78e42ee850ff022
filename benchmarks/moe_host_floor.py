"""Megatron-Bridge's Qwen3-30B-A3B runs per MoE layer per micro-batch, and what the dispatcher's host sync can
expose at a launch's price (issue 32; README "The Qwen3-30B-A3B PP 2 x VP 12 row"). Prints figures, asserts
nothing; nothing here is fitted.

    python benchmarks/moe_host_floor.py

Published runs: NVIDIA-NeMo/Megatron-Bridge docs/performance-summary-archive.md (mirror 067f987df), tokens/s/GPU
per release, with the layout the release's preset ran (scripts/performance/configs/qwen*/...workload_base_configs.py
at the release's tag): step = GBS * 4096 / (tokens/s/GPU * GPUs); micro-batches per rank GA = GBS / (MBS * DP);
a rank runs 48 / PP layers per micro-batch, so ms per layer per micro-batch = step / (GA * 48 / PP).

The model's split is the shipped row's (training_long_context_moe.csv) at the stack's overheads. The sync:
Megatron-Core core_v0.15 MoEAlltoAllTokenDispatcher, dropless with EP > 1, blocks the host on d2h_event.synchronize()
before the EP all-to-all ("before_ep_alltoall"), so what the forward launches after it starts on an empty queue.
Those launches, counted: TE GroupedLinear's forward per local expert in fc1 and fc2 (cost/overheads.py
MOE_EXPERT_LAUNCHES forward: 2 GEMMs + 2 x 3 quantize kernels), and the dispatcher's ops after the sync
(POST_SYNC_DISPATCH_OPS). At the stack's stated moe_expert_launch_us that is the host time the sync can expose,
at most, beside the forward's EP all-to-alls the model already times on the GPU.
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
        "v0.1.0rc4 qwen3_30b_a3b_llm_pretrain.yaml h100 fp8_cs mbs 2; run_script.py apply_moe_token_drop",
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
        "v0.3.0 QWEN3_30B_A3B_H100_FP8_CS_V1; table states the same layout",
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
# the dispatcher's host ops after the sync in forward (core_v0.15 token_dispatcher.py dispatch_postprocess /
# combine): the EP all-to-all, sort_chunks_by_idxs, the activation, sort back, the all-to-all back, unpermute
POST_SYNC_DISPATCH_OPS = 6


def ms_per_layer_microbatch(gpus, gbs, mbs, pp, dp, tok_s_gpu) -> tuple[float, float]:
    step = gbs * SEQ / (tok_s_gpu * gpus)
    return step, 1e3 * step / (gbs / (mbs * dp) * LAYERS / pp)


def model_split():
    """(ms per layer per micro-batch: step, kernels, overheads, forward EP all-to-alls; local experts; stated µs)."""
    import pandas as pd

    from parallmelism.validate.cases import evaluate_one
    from parallmelism.validate.runner import _context
    from parallmelism.validate.steptime import step_time_run_of

    path = resources.files("parallmelism") / "cases" / "training_long_context_moe.csv"
    df = pd.read_csv(str(path), dtype=str, keep_default_na=False).replace({"": None})
    row = next(r for r in df.to_dict("records") if r["case"] == CASE)
    run = step_time_run_of(row, _context([], None))
    out = evaluate_one(run)
    gbs, mbs, dp, pp = (int(row[k]) for k in ("global_batch", "micro_batch", "dp", "pp"))
    n = gbs / (mbs * dp) * LAYERS / pp
    ms = {k: 1e3 * float(out[k]) / n for k in ("time_step_s", "time_compute_s", "time_overhead_s", "time_comm_ep_s")}
    local = int(row["experts"]) // int(row["ep"])
    us = run.accelerator().overheads.moe_expert_launch_us
    return ms, float(row["step_time_s"]) * 1e3 / n, local, us


def main() -> int:
    from parallmelism.cost.overheads import MOE_EXPERT_LAUNCHES, moe_expert_launches

    print("release,system,layout,step_s,ms_per_layer_per_microbatch,tokens_per_microbatch,preset")
    for rel, system, layout, gpus, gbs, mbs, pp, dp, tok, note in RUNS:
        step, ms = ms_per_layer_microbatch(gpus, gbs, mbs, pp, dp, tok)
        print(f'{rel},{system},"{layout}",{step:.2f},{ms:.2f},{mbs * SEQ},"{note}"')
    ms, measured, local, us = model_split()
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
