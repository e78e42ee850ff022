"""MaxText `train.py` config overrides (a yml of base.yml keys) for a training layout, TPU or GPU.

Field names and value rules: AI-Hypercomputer/maxtext at commit
e591f30cbbf217ed67ef71263ec0538239f9c3b8 (2026-08-22), src/maxtext/configs/base.yml and the
checks of configs/types.py. The device mesh is ici_<axis>_parallelism x dcn_<axis>_parallelism
per axis: ICI inside one slice (a TPU pod slice; a GPU node), DCN across slices, the product of
the ICI axes the devices of a slice and of the DCN axes the slices. logical_axis_rules shard
'activation_batch' over data, fsdp and expert, 'embed' (every dense weight) over fsdp, context
and expert, 'heads'/'mlp' over tensor and tensor_sequence, and 'activation_norm_length' over
tensor_sequence and context: so our tp with sequence_parallel is tensor_sequence (Megatron's
sequence-sharded norms), without it tensor; cp is context; ep is expert, carved out of dp; and
the weights are sharded over the context and expert ranks whatever the fsdp degree, which is
our FULLY_SHARD. shard_optimizer_over_data is ZeRO-1 over the data axis. Batch:
global_batch_size_to_train_on = per_device_batch_size x devices x gradient_accumulation_steps
(per_device_batch_size may be fractional); with pipeline stages the step's batch is cut into
num_pipeline_microbatches (a multiple of the stages), layers = stages x
num_layers_per_pipeline_stage x num_pipeline_repeats (circular repeats: our vpp), and the SPMD
pipeline runs every microbatch forward, then backward (GPipe order). remat_policy: "full"
recomputes the layer, "minimal" keeps the matmul outputs and recomputes attention (Megatron's
selective), "minimal_with_context" keeps them all (layers/decoders.py: "save all").
context_parallel_strategy "ring" | "all_gather"; quantization "fp8" (GPU fp8 matmuls)."""

from __future__ import annotations

import math
import re
from fractions import Fraction

from ..errors import UserError
from .layout import Planned, pinned_overrides, refuse, unexported_options

SOURCE = "AI-Hypercomputer/maxtext src/maxtext/configs/base.yml, configs/types.py @ e591f30c"
KIND = "train"
WHO = "MaxText"

# mesh axis -> our axis, in Megatron rank order (innermost first): how ICI is filled
MESH = ("tensor", "tensor_sequence", "context", "expert", "fsdp", "data", "stage")
FIELDS: dict[str, str] = {
    **{f"ici_{m}_parallelism": f"{m} ranks inside a slice" for m in MESH},
    **{f"dcn_{m}_parallelism": f"{m} ranks across slices" for m in MESH},
    "num_slices": "ngpus / scale-up domain",
    "per_device_batch_size": "global_batch / (ngpus x gradient_accumulation_steps)",
    "gradient_accumulation_steps": "num_micro_batches (pp 1)",
    "num_pipeline_microbatches": "num_micro_batches (pp > 1)",
    "num_layers_per_pipeline_stage": "layers / (pp x vpp)",
    "num_pipeline_repeats": "vpp",
    "max_target_length": "workload.seq_len",
    "remat_policy": "recompute",
    "shard_optimizer_over_data": "dp_sharding OPTIMIZER_STATES",
    "context_parallel_strategy": "workload.cp_comm_type",
    "dtype": "workload.precision (activations)",
    "weight_dtype": "fp32 master weights",
    "quantization": "workload.precision fp8",
}
REMAT = {"none": "minimal_with_context", "selective": "minimal", "full": "full"}
CP_STRATEGY = {"p2p": "ring", "all_gather": "all_gather"}


def mesh_sizes(p: Planned) -> dict[str, int]:
    """{mesh axis: ranks} of the layout (module docstring), or one sentence why MaxText cannot hold it."""
    a, w = p.axes, p.workload
    dp, ep, sharding = a["dp"], a["ep"], a["dp_sharding"]
    if dp % ep:
        raise refuse(WHO, f"its expert axis is carved out of data parallelism, and ep {ep} does not divide dp {dp}")
    if sharding == "OPTIMIZER_STATES_AND_GRADS":
        raise refuse(WHO, "it shards data-parallel state with FSDP or ZeRO-1 (shard_optimizer_over_data), not ZeRO-2")
    if sharding != "FULLY_SHARD" and (a["cp"] > 1 or ep > 1):
        raise refuse(
            WHO,
            f"its logical_axis_rules shard every weight over the context and expert ranks (FULLY_SHARD), not {sharding}",
        )
    shard = w.get("dp_shard_size", dp) if sharding == "FULLY_SHARD" else ep
    if shard % ep:
        raise refuse(WHO, f"an FSDP group of {shard} ranks does not hold the expert axis of {ep}")
    tensor = "tensor_sequence" if a["sequence_parallel"] else "tensor"
    return {
        "tensor": a["tp"] if tensor == "tensor" else 1,
        "tensor_sequence": a["tp"] if tensor == "tensor_sequence" else 1,
        "context": a["cp"],
        "expert": ep,
        "fsdp": shard // ep,
        "data": dp // shard,
        "stage": a["pp"],
    }


def ici_dcn(sizes: dict[str, int], slice_gpus: int) -> tuple[dict[str, int], dict[str, int]]:
    """Each axis's ranks split into ICI (inside a slice of slice_gpus) and DCN (across slices),
    filling the slice in rank order (MESH): an axis keeps gcd(its ranks, room left) inside."""
    room, ici, dcn = slice_gpus, {}, {}
    for m in MESH:
        ici[m] = math.gcd(sizes[m], room)
        dcn[m] = sizes[m] // ici[m]
        room //= ici[m]
    return ici, dcn


def render(p: Planned) -> str:
    a, w = p.axes, p.workload
    if unexported_options(w):
        raise refuse(WHO, unexported_options(w))
    if w.get("fp8_scaling") == "rowwise":
        raise refuse(WHO, "torchao's rowwise fp8 recipe (workload.fp8_scaling=rowwise) has no quantization equivalent")
    if w["precision"] not in ("bf16", "fp8"):
        raise refuse(WHO, f"precision {w['precision']} is not one of its recipes (bfloat16, fp8 quantization)")
    stages = a["pp"] * a["vpp"]
    if a["pp"] > 1:
        if w["schedule"] != "gpipe":
            raise refuse(
                WHO, f"its SPMD pipeline runs microbatches in GPipe order, not workload.schedule {w['schedule']}"
            )
        if p.layers % stages:
            raise refuse(WHO, f"its SPMD pipeline needs the {p.layers} layers to divide over {stages} stages")
        if a["num_micro_batches"] % a["pp"]:
            raise refuse(WHO, f"num_pipeline_microbatches {a['num_micro_batches']} must be a multiple of pp {a['pp']}")
    sizes = mesh_sizes(p)
    slice_gpus = min(p.ngpus, p.scale_up_gpus or p.ngpus)
    if p.ngpus % slice_gpus:
        raise refuse(WHO, f"{p.ngpus} devices are not whole slices of {slice_gpus}")
    ici, dcn = ici_dcn(sizes, slice_gpus)
    slices = p.ngpus // slice_gpus
    note = {
        "tensor": p.note("mem_weights_gib", "time_comm_tp_s"),
        "tensor_sequence": p.note("mem_weights_gib", "mem_activations_gib", "time_comm_tp_s"),
        "context": p.note("mem_activations_gib", "time_comm_cp_s"),
        "expert": p.note("mem_states_gib", "time_comm_ep_s"),
        "fsdp": p.note("mem_states_gib", "time_comm_dp_s"),
        "data": p.note("time_comm_dp_s"),
        "stage": p.note("time_bubble_s", "time_comm_pp_s"),
    }
    rows: list[tuple[str, object, str]] = []
    for tier, got in (("ici", ici), ("dcn", dcn)):
        for m in MESH:
            rows.append((f"{tier}_{m}_parallelism", got[m], note[m] if got[m] > 1 else ""))
    rows.append(("num_slices", slices, f"{slice_gpus} devices per slice"))
    if a["pp"] > 1:
        accumulation, microbatches = 1, a["num_micro_batches"]
    else:
        accumulation, microbatches = a["num_micro_batches"], 0
    per_device = Fraction(w["global_batch"], p.ngpus * accumulation)
    rows.append(
        (
            "per_device_batch_size",
            float(per_device),
            f"global batch {w['global_batch']}, micro-batch {a['micro_batch']} per data-parallel rank; "
            + p.note("mem_activations_gib", "time_compute_s"),
        )
    )
    rows.append(("gradient_accumulation_steps", accumulation, p.note("time_step_s")))
    if a["pp"] > 1:
        rows += [
            ("num_pipeline_microbatches", microbatches, p.note("time_bubble_s")),
            ("num_layers_per_pipeline_stage", p.layers // stages, f"{p.layers} layers over {stages} stages"),
            ("num_pipeline_repeats", a["vpp"], p.note("time_bubble_s")),
        ]
    rows.append(("max_target_length", w["seq_len"], p.note("mem_activations_gib", "time_step_s")))
    rows.append(("remat_policy", REMAT[a["recompute"]], p.note("mem_activations_gib", "time_compute_s")))
    if a["dp_sharding"] == "OPTIMIZER_STATES":
        rows.append(("shard_optimizer_over_data", True, p.note("mem_states_gib")))
    if a["cp"] > 1:
        rows.append(("context_parallel_strategy", CP_STRATEGY[w["cp_comm_type"]], p.note("time_comm_cp_s")))
    rows.append(("dtype", "bfloat16", p.note("mem_activations_gib")))
    rows.append(("weight_dtype", "float32", "fp32 master weights; " + p.note("mem_states_gib")))
    if w["precision"] == "fp8":
        rows.append(("quantization", "fp8", p.note("time_compute_s")))
    lines = [
        *(f"# {h}" for h in p.header()),
        f"# field names: {SOURCE}",
        "# launch: python3 -m maxtext.trainers.pre_train.train src/maxtext/configs/base.yml "
        "model_name=YOUR_MODEL run_name=... plus these keys (as key=value), on every host",
    ]
    for key, value, comment in rows:
        text = str(value).lower() if isinstance(value, bool) else repr(value) if isinstance(value, str) else value
        lines.append(f"{key}: {text}" + (f"  # {comment}" if comment else ""))
    return "\n".join(lines) + "\n"


def parse(text: str, ngpus: int | None = None, layers: int | None = None) -> dict:
    """Pinned overrides from MaxText overrides: a yml of base.yml keys, or key=value words."""
    doc: dict[str, str] = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0]
        for word in line.split() if "=" in line else [line]:
            m = re.match(r"\s*([a-z_]+)\s*[:=]\s*['\"]?([^'\"\s]+)", word)
            if m and m.group(1) in FIELDS:
                doc[m.group(1)] = m.group(2)

    def num(key: str, default: int = 1) -> int:
        try:
            return int(doc.get(key, default))
        except ValueError:
            raise UserError(f"{key} {doc[key]!r} is not an integer") from None

    sizes = {m: num(f"ici_{m}_parallelism") * num(f"dcn_{m}_parallelism") for m in MESH}
    if any(v < 1 for v in sizes.values()):
        raise UserError("an auto-sharded (-1) mesh axis has no size to read: write every ici_/dcn_ axis")
    world = math.prod(sizes.values())
    tp = sizes["tensor"] * sizes["tensor_sequence"]
    dp = sizes["expert"] * sizes["fsdp"] * sizes["data"]
    pp = sizes["stage"]
    if sizes["fsdp"] > 1 or (sizes["expert"] > 1 or sizes["context"] > 1):
        sharding = "FULLY_SHARD"
    elif doc.get("shard_optimizer_over_data", "false").lower() == "true":
        sharding = "OPTIMIZER_STATES"
    else:
        sharding = "NO_OP"
    per_device = Fraction(doc.get("per_device_batch_size", "1"))
    accumulation = num("gradient_accumulation_steps")
    global_batch = per_device * world * accumulation
    microbatches = num("num_pipeline_microbatches", pp) if pp > 1 else accumulation
    micro = global_batch / (microbatches * dp)
    if global_batch.denominator != 1 or micro.denominator != 1:
        raise UserError(f"per_device_batch_size {per_device} gives no whole micro-batch on {world} devices")
    axes = {
        "tp": tp,
        "pp": pp,
        "cp": sizes["context"],
        "ep": sizes["expert"],
        "vpp": num("num_pipeline_repeats") if pp > 1 else 1,
        "micro_batch": int(micro),
        "dp_sharding": sharding,
        "recompute": {v: k for k, v in REMAT.items()}.get(doc.get("remat_policy", "full"), "full"),
        "sequence_parallel": sizes["tensor_sequence"] > 1,
    }
    workload: dict = {
        "global_batch": int(global_batch),
        "precision": "fp8" if doc.get("quantization") == "fp8" else "bf16",
    }
    if "max_target_length" in doc:
        workload["seq_len"] = num("max_target_length")
    if sizes["context"] > 1:
        back = {v: k for k, v in CP_STRATEGY.items()}
        workload["cp_comm_type"] = back.get(doc.get("context_parallel_strategy", "all_gather"), "all_gather")
    if sharding == "FULLY_SHARD" and sizes["data"] > 1:
        workload["dp_shard_size"] = sizes["expert"] * sizes["fsdp"]
    out = pinned_overrides(KIND, None, None, world, axes, workload)
    if pp > 1:
        out["workload.schedule"] = "gpipe"
    return out
