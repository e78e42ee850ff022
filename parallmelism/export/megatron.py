"""Megatron-LM `pretrain_gpt.py` arguments for a training layout.

Field names and value rules: NVIDIA/Megatron-LM at commit d98e8a64ddf34856e74b24714e3bedb2f5a39553
(core_v0.15.0rc7-2333, 2026-08-22). The parallel sizes, sequence_parallel, bf16/fp16 and
tp_comm_overlap are ModelParallelConfig fields (megatron/core/model_parallel_config.py), the
recompute fields and fp8 (`--fp8-format`, 'e4m3' | 'hybrid') TransformerConfig fields
(megatron/core/transformer/transformer_config.py), micro/global batch TrainingConfig
(megatron/training/config/training_config.py), all turned into flags by ArgumentGroupFactory;
the rest are add_argument calls in megatron/training/arguments.py (`--num-virtual-stages-per-pipeline-rank`,
`--cp-comm-type` p2p | a2a | allgather | a2a+p2p, `--use-distributed-optimizer`,
`--data-parallel-sharding-strategy` no_shard | optim | optim_grads | optim_grads_params,
`--num-distributed-optimizer-instances`, `--overlap-grad-reduce`, `--overlap-param-gather`,
`--no-overlap-p2p-communication`, `--decoder-first/last-pipeline-num-layers`, `--seq-length`), and
TransformerConfig's account_for_embedding_in_pipeline_split / account_for_loss_in_pipeline_split
(`--account-for-embedding-in-pipeline-split`, `--account-for-loss-in-pipeline-split`: the embedding
and the loss each count as one layer of the split; with virtual stages (layers + 2) / pp layers per
rank must divide by vpp, and the first and last rank then hold one transformer layer fewer)."""

from __future__ import annotations

import re

from ..errors import UserError
from .layout import Planned, pinned_overrides, refuse
from .shell import as_int, flags_of, script

SOURCE = "NVIDIA/Megatron-LM megatron/training/arguments.py @ d98e8a64 (core_v0.15.0rc7-2333)"
KIND = "train"

# flag -> (our column or workload field it carries, "value" | "switch")
FIELDS: dict[str, tuple[str, str]] = {
    "--tensor-model-parallel-size": ("tp", "value"),
    "--pipeline-model-parallel-size": ("pp", "value"),
    "--num-virtual-stages-per-pipeline-rank": ("vpp", "value"),
    "--num-layers-per-virtual-pipeline-stage": ("layers / (pp*vpp) (read only: the older spelling)", "value"),
    "--num-layers": ("model.layers (read only)", "value"),
    "--decoder-first-pipeline-num-layers": ("layers_first_stage", "value"),
    "--decoder-last-pipeline-num-layers": ("layers_last_stage", "value"),
    "--account-for-embedding-in-pipeline-split": ("layers_first_stage = layers_per_stage - 1", "switch"),
    "--account-for-loss-in-pipeline-split": ("layers_last_stage = layers_per_stage - 1", "switch"),
    "--context-parallel-size": ("cp", "value"),
    "--cp-comm-type": ("workload.cp_comm_type", "value"),
    "--expert-model-parallel-size": ("ep", "value"),
    "--expert-tensor-parallel-size": ("workload.expert_tp", "value"),
    "--optimizer-cpu-offload": ("workload.optimizer_offload", "switch"),
    "--optimizer-offload-fraction": ("workload.optimizer_offload (all of it)", "value"),
    "--use-precision-aware-optimizer": ("workload.optimizer_offload (required with it)", "switch"),
    "--sequence-parallel": ("sequence_parallel", "switch"),
    "--micro-batch-size": ("micro_batch", "value"),
    "--global-batch-size": ("workload.global_batch", "value"),
    "--seq-length": ("workload.seq_len", "value"),
    "--recompute-granularity": ("recompute", "value"),
    "--recompute-method": ("recompute (full)", "value"),
    "--recompute-num-layers": ("recompute (full)", "value"),
    "--use-distributed-optimizer": ("dp_sharding", "switch"),
    "--use-megatron-fsdp": ("dp_sharding", "switch"),
    "--data-parallel-sharding-strategy": ("dp_sharding", "value"),
    "--num-distributed-optimizer-instances": ("workload.dp_shard_size", "value"),
    "--bf16": ("workload.precision", "switch"),
    "--fp16": ("workload.precision", "switch"),
    "--fp8-format": ("workload.precision", "value"),
    "--overlap-grad-reduce": ("workload.overlap_dp_comm", "switch"),
    "--overlap-param-gather": ("workload.overlap_dp_comm", "switch"),
    "--tp-comm-overlap": ("workload.overlap_tp_comm", "switch"),
    "--no-overlap-p2p-communication": ("workload.overlap_pp_comm (off)", "switch"),
    "--overlap-moe-expert-parallel-comm": ("workload.overlap_ep_comm", "switch"),
    "--moe-token-dispatcher-type": ("workload.moe_dispatcher", "value"),
}
CP_COMM = {"p2p": "p2p", "all_gather": "allgather"}  # ours -> Megatron's --cp-comm-type
FSDP_STRATEGY = {"OPTIMIZER_STATES_AND_GRADS": "optim_grads", "FULLY_SHARD": "optim_grads_params"}


def split_refusal(layers: int, pp: int, vpp: int, first: int, mid: int, last: int) -> str:
    """Why Megatron cannot place this layer split, or "" (TransformerConfig's uneven-PP checks,
    megatron/core/transformer/transformer_config.py: with virtual stages the first and last
    stage's layers divide by vpp, the middle layers divide over the pp - 2 middle ranks and each
    middle rank's layers by vpp; an even split puts layers / pp on each rank, divisible by vpp)."""
    split = f"{first}/{mid}/{last} layers on the first/middle/last stage"
    if pp == 1 or (first == mid == last and mid * pp == layers):
        return "" if mid % vpp == 0 else f"{mid} layers per stage do not divide into vpp {vpp} virtual stages"
    middle_ranks, middle = pp - 2, layers - first - last
    if not middle_ranks and middle:
        return f"two stages cannot hold {split}"
    if middle_ranks and (middle % middle_ranks or middle // middle_ranks != mid):
        return f"the middle stages cannot hold {split}"
    for where, n in (("first", first), ("last", last), ("middle", mid if middle_ranks else vpp)):
        if n % vpp:
            return f"the {where} stage's {n} layers do not divide into vpp {vpp} virtual stages ({split})"
    return ""


def embedding_and_loss_split(layers: int, pp: int, vpp: int, first: int, mid: int, last: int) -> bool:
    """Whether the split is Megatron's account-for-embedding-and-loss placement (module docstring):
    first = last = mid - 1 and (layers + 2) = pp * mid, mid divisible by vpp (Llama 3 405B's
    126 layers on pp 64, vpp 2: 1/2/1, the embedding and the loss in the first and last virtual stage)."""
    return pp > 1 and first == last == mid - 1 and layers + 2 == pp * mid and mid % vpp == 0


def fields(p: Planned, who: str) -> list[tuple[str, object, str]]:
    """The layout as Megatron arguments (flag, value, comment), or one sentence (UserError) why
    `who` (Megatron-LM, or Megatron-Bridge, which takes the same fields) cannot run it."""
    a, w = p.axes, p.workload
    if w["schedule"] != "1f1b":
        raise refuse(who, f"workload.schedule {w['schedule']} is not one of its 1F1B schedules")
    if w["precision"] == "fp4":
        raise refuse(who, "fp4 matmuls have no --fp8-format equivalent here")
    if w.get("fp8_scaling") == "rowwise":
        raise refuse(
            who, "torchao's rowwise fp8 recipe (workload.fp8_scaling=rowwise) is not one of its --fp8-recipe values"
        )
    if w.get("param_offload"):
        raise refuse(
            who, "parameter offload (workload.param_offload) has no Megatron argument; its optimizer offload has"
        )
    first, mid, last = (p.extra[k] for k in ("layers_first_stage", "layers_per_stage", "layers_last_stage"))
    account = a["vpp"] > 1 and embedding_and_loss_split(p.layers, a["pp"], a["vpp"], first, mid, last)
    why = "" if account else split_refusal(p.layers, a["pp"], a["vpp"], first, mid, last)
    if why:
        raise refuse(who, why)
    f: list[tuple[str, object, str]] = [
        ("--tensor-model-parallel-size", a["tp"], p.note("mem_weights_gib", "time_comm_tp_s")),
        ("--pipeline-model-parallel-size", a["pp"], p.note("time_bubble_s", "time_comm_pp_s")),
    ]
    if a["vpp"] > 1:
        f.append(("--num-virtual-stages-per-pipeline-rank", a["vpp"], "interleaved 1F1B; " + p.note("time_bubble_s")))
    if account:
        split = f"split {first}/{mid}/{last} layers"
        f.append(("--account-for-embedding-in-pipeline-split", True, f"{split}: the embedding is a layer"))
        f.append(("--account-for-loss-in-pipeline-split", True, "the loss is a layer; " + p.note("mem_total_gib")))
    elif a["pp"] > 1 and (first != mid or last != mid):
        f.append(("--decoder-first-pipeline-num-layers", first, f"uneven split {first}/{mid}/{last} layers"))
        f.append(("--decoder-last-pipeline-num-layers", last, p.note("mem_total_gib")))
    f.append(("--context-parallel-size", a["cp"], p.note("mem_activations_gib", "time_comm_cp_s")))
    if a["cp"] > 1:
        f.append(("--cp-comm-type", CP_COMM[w["cp_comm_type"]], p.note("time_comm_cp_s")))
    if p.moe:
        f.append(("--expert-model-parallel-size", a["ep"], p.note("mem_states_gib", "time_comm_ep_s")))
        if w.get("expert_tp") is not None:  # MoE parallel folding (ModelParallelConfig.expert_tensor_parallel_size)
            f.append(("--expert-tensor-parallel-size", w["expert_tp"], p.note("mem_states_gib", "time_comm_ep_s")))
        f.append(("--moe-token-dispatcher-type", w["moe_dispatcher"], p.note("time_comm_ep_s")))
        if w["overlap_ep_comm"]:
            f.append(("--overlap-moe-expert-parallel-comm", True, p.note("time_comm_ep_exposed_s")))
    if a["sequence_parallel"]:
        f.append(("--sequence-parallel", True, p.note("mem_activations_gib")))
    f += [
        ("--micro-batch-size", a["micro_batch"], p.note("mem_activations_gib", "time_compute_s")),
        (
            "--global-batch-size",
            w["global_batch"],
            f"{a['num_micro_batches']} micro-batches per DP rank; " + p.note("time_step_s", "time_bubble_s"),
        ),
        ("--seq-length", w["seq_len"], p.note("mem_activations_gib", "time_step_s")),
    ]
    if a["recompute"] == "selective":
        f.append(("--recompute-granularity", "selective", p.note("mem_activations_gib", "time_compute_s")))
    elif a["recompute"] == "full":
        f.append(("--recompute-granularity", "full", p.note("mem_activations_gib", "time_compute_s")))
        f.append(("--recompute-method", "uniform", "every layer's input is the only activation kept"))
        f.append(("--recompute-num-layers", 1, "one layer per checkpoint"))
    sharding = a["dp_sharding"]
    if sharding == "OPTIMIZER_STATES":
        f.append(("--use-distributed-optimizer", True, p.note("mem_states_gib", "time_comm_dp_s")))
    elif sharding in FSDP_STRATEGY:
        f.append(("--use-megatron-fsdp", True, p.note("mem_states_gib", "time_comm_dp_s")))
        f.append(("--data-parallel-sharding-strategy", FSDP_STRATEGY[sharding], p.note("mem_states_gib")))
    if "dp_shard_size" in w:
        if sharding != "OPTIMIZER_STATES":
            raise refuse(
                who,
                f"hybrid sharding (workload.dp_shard_size {w['dp_shard_size']}) of {sharding} is not exported; "
                "only the distributed optimizer's --num-distributed-optimizer-instances is",
            )
        instances = a["dp"] // w["dp_shard_size"]
        f.append(("--num-distributed-optimizer-instances", instances, p.note("mem_states_gib", "time_comm_dp_s")))
    if w.get("optimizer_offload"):  # HybridDeviceOptimizer; arguments.py asserts the precision-aware optimizer
        f.append(("--optimizer-cpu-offload", True, p.note("mem_states_gib", "time_optimizer_offload_s")))
        f.append(("--optimizer-offload-fraction", 1.0, "the whole optimizer on the host"))
        f.append(("--use-precision-aware-optimizer", True, "required with --optimizer-cpu-offload"))
    if w["precision"] == "fp16":
        f.append(("--fp16", True, p.note("time_compute_s")))
    else:
        f.append(("--bf16", True, p.note("mem_weights_gib", "time_compute_s")))
    if w["precision"] == "fp8":
        f.append(("--fp8-format", "hybrid", "e4m3 forward, e5m2 gradients; " + p.note("time_compute_s")))
    if w["overlap_dp_comm"]:
        f.append(("--overlap-grad-reduce", True, p.note("time_comm_dp_exposed_s")))
        if sharding == "OPTIMIZER_STATES":
            f.append(("--overlap-param-gather", True, p.note("time_comm_dp_exposed_s")))
    if w["overlap_tp_comm"] and a["tp"] > 1:
        f.append(("--tp-comm-overlap", True, p.note("time_comm_tp_exposed_s")))
    if not w["overlap_pp_comm"] and a["pp"] > 1:
        f.append(("--no-overlap-p2p-communication", True, p.note("time_comm_pp_exposed_s")))
    return f


def render(p: Planned) -> str:
    """The launch script: MEGATRON_ARGS=( ... ) and a torchrun line over NGPUS processes."""
    a = p.axes
    f = fields(p, "Megatron-LM")
    launch = [
        "# model architecture, data, tokenizer and optimizer arguments come from your recipe",
        f"NGPUS={p.ngpus}  # world size tp*pp*cp*dp = {a['tp']}*{a['pp']}*{a['cp']}*{a['dp']}",
        ': "${NPROC_PER_NODE:=8}"',
        "export CUDA_DEVICE_MAX_CONNECTIONS=1",
        'torchrun --nnodes $((NGPUS / NPROC_PER_NODE)) --nproc-per-node "$NPROC_PER_NODE" pretrain_gpt.py '
        '"${MEGATRON_ARGS[@]}" "$@"',
    ]
    return script(p.header(), SOURCE, "MEGATRON_ARGS", f, launch)


def parse(text: str, ngpus: int | None = None, layers: int | None = None) -> dict:
    """Pinned overrides from Megatron arguments (an exported script or a command line).
    ngpus: the world size when the text has no NGPUS= line."""
    known = {flag: mode for flag, (_, mode) in FIELDS.items()}
    fl = flags_of(text, known)
    m = re.search(r"^NGPUS=(\d+)", text, re.M)
    world = ngpus if ngpus is not None else (int(m.group(1)) if m else None)
    axes: dict = {
        k: as_int(fl, flag)
        for k, flag in (
            ("tp", "--tensor-model-parallel-size"),
            ("pp", "--pipeline-model-parallel-size"),
            ("cp", "--context-parallel-size"),
            ("ep", "--expert-model-parallel-size"),
            ("vpp", "--num-virtual-stages-per-pipeline-rank"),
            ("micro_batch", "--micro-batch-size"),
        )
    }
    if "--num-layers-per-virtual-pipeline-stage" in fl:  # vpp = layers per rank / layers per virtual stage
        total = as_int(fl, "--num-layers", layers or 0)
        if not total:
            raise UserError("--num-layers-per-virtual-pipeline-stage needs the model's layers: pass --model")
        axes["vpp"] = total // axes["pp"] // as_int(fl, "--num-layers-per-virtual-pipeline-stage")
    axes["sequence_parallel"] = bool(fl.get("--sequence-parallel", False))
    axes["recompute"] = str(fl.get("--recompute-granularity", "none"))
    strategy = {v: k for k, v in FSDP_STRATEGY.items()}
    if fl.get("--use-megatron-fsdp"):
        axes["dp_sharding"] = strategy.get(
            str(fl.get("--data-parallel-sharding-strategy", "optim_grads_params")), "NO_OP"
        )
    elif fl.get("--use-distributed-optimizer"):
        axes["dp_sharding"] = "OPTIMIZER_STATES"
    else:
        axes["dp_sharding"] = "NO_OP"
    workload: dict = {}
    if "--seq-length" in fl:
        workload["seq_len"] = as_int(fl, "--seq-length")
    if "--global-batch-size" in fl:
        workload["global_batch"] = as_int(fl, "--global-batch-size")
    workload["precision"] = "fp8" if "--fp8-format" in fl else ("fp16" if fl.get("--fp16") else "bf16")
    if axes["cp"] > 1:
        back = {v: k for k, v in CP_COMM.items()}
        workload["cp_comm_type"] = back.get(str(fl.get("--cp-comm-type", "p2p")), str(fl.get("--cp-comm-type")))
    if "--expert-tensor-parallel-size" in fl:
        workload["expert_tp"] = as_int(fl, "--expert-tensor-parallel-size")
    if fl.get("--optimizer-cpu-offload"):
        workload["optimizer_offload"] = True
    instances = as_int(fl, "--num-distributed-optimizer-instances")
    if instances > 1 and world is not None:
        dp = world // (axes["tp"] * axes["pp"] * axes["cp"])
        workload["dp_shard_size"] = dp // instances
    out = pinned_overrides(KIND, None, None, world or 0, axes, workload)
    if world is None:
        del out["grid.ngpus"]
    for key, flag in (
        ("overlap_dp_comm", "--overlap-grad-reduce"),
        ("overlap_tp_comm", "--tp-comm-overlap"),
        ("overlap_ep_comm", "--overlap-moe-expert-parallel-comm"),
    ):
        out[f"workload.{key}"] = bool(fl.get(flag, False))
    if "--no-overlap-p2p-communication" in fl:
        out["workload.overlap_pp_comm"] = False
    if "--moe-token-dispatcher-type" in fl:
        out["workload.moe_dispatcher"] = str(fl["--moe-token-dispatcher-type"])
    return out
