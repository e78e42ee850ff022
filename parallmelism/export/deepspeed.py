"""DeepSpeed ds_config JSON (+ launcher line) for a data-parallel training layout.

Field names and value rules: deepspeedai/DeepSpeed 0.19.8 (PyPI sdist): deepspeed/runtime/constants.py
(train_batch_size, train_micro_batch_size_per_gpu, gradient_accumulation_steps, bf16, fp16;
train_batch_size = micro batch x accumulation steps x data-parallel world size),
deepspeed/runtime/zero/config.py (DeepSpeedZeroConfig: stage is ZeroStageEnum disabled=0,
optimizer_states=1, gradients=2, weights=3; overlap_comm). The ds_config carries data parallelism
and ZeRO only: tensor, pipeline, context and expert parallelism live in model code
(Megatron-DeepSpeed, PipelineModule, deepspeed.moe), so a layout using them is refused.
JSON has no comments: the predictions sit under the top-level "_parallmelism" key, which
DeepSpeedConfig does not read."""

from __future__ import annotations

import json

from .layout import Planned, pinned_overrides, refuse

SOURCE = "deepspeedai/DeepSpeed 0.19.8 deepspeed/runtime/zero/config.py (DeepSpeedZeroConfig), deepspeed/runtime/constants.py"
KIND = "train"

# our dp_sharding -> zero_optimization.stage (DeepSpeed's ZeroStageEnum name)
ZERO_STAGE = {"NO_OP": 0, "OPTIMIZER_STATES": 1, "OPTIMIZER_STATES_AND_GRADS": 2, "FULLY_SHARD": 3}
ZERO_STAGE_NAME = {0: "disabled", 1: "optimizer_states", 2: "gradients", 3: "weights"}
# ds_config key -> our column or workload field
FIELDS: dict[str, str] = {
    "train_batch_size": "workload.global_batch",
    "train_micro_batch_size_per_gpu": "micro_batch",
    "gradient_accumulation_steps": "num_micro_batches",
    "bf16.enabled": "workload.precision bf16",
    "fp16.enabled": "workload.precision fp16",
    "zero_optimization.stage": "dp_sharding",
    "zero_optimization.overlap_comm": "workload.overlap_dp_comm",
    "zero_optimization.offload_optimizer": "workload.optimizer_offload (device cpu: ZeRO-Offload, CPU Adam)",
    "zero_optimization.offload_param": "workload.param_offload (device cpu: ZeRO-Infinity, stage 3)",
}


def render(p: Planned) -> str:
    a, w = p.axes, p.workload
    for axis in ("tp", "pp", "cp", "ep"):
        if a[axis] > 1:
            raise refuse(
                "DeepSpeed's ds_config",
                f"{axis} {a[axis]} is set in model code (Megatron-DeepSpeed, PipelineModule or deepspeed.moe), "
                "not in the config; export a layout with tp, pp, cp and ep 1, or use --to megatron",
            )
    if w["precision"] not in ("bf16", "fp16"):
        raise refuse("DeepSpeed's ds_config", f"precision {w['precision']} is not one of its bf16/fp16 switches")
    if "dp_shard_size" in w:
        raise refuse("DeepSpeed's ds_config", "hybrid sharding (workload.dp_shard_size) is not exported")
    stage = ZERO_STAGE[a["dp_sharding"]]
    if w.get("optimizer_offload") and stage == 0:
        raise refuse(
            "DeepSpeed's ds_config", "offload_optimizer is a ZeRO option (stage 1-3), and dp_sharding NO_OP is stage 0"
        )
    zero: dict = {"stage": stage, "overlap_comm": bool(w["overlap_dp_comm"])}
    notes = {}
    if w.get("optimizer_offload"):
        zero["offload_optimizer"] = {"device": "cpu"}
        notes["zero_optimization.offload_optimizer"] = p.note("mem_states_gib", "time_optimizer_offload_s")
    if w.get("param_offload"):
        zero["offload_param"] = {"device": "cpu"}
        notes["zero_optimization.offload_param"] = p.note("mem_states_gib", "time_param_offload_s")
    config = {
        "train_batch_size": w["global_batch"],
        "train_micro_batch_size_per_gpu": a["micro_batch"],
        "gradient_accumulation_steps": a["num_micro_batches"],
        "bf16": {"enabled": w["precision"] == "bf16"},
        "fp16": {"enabled": w["precision"] == "fp16"},
        "zero_optimization": zero,
        "_parallmelism": {
            "export": p.header()[0],
            "layout": p.header()[1],
            "predicted": p.header()[2],
            "field_names": SOURCE,
            "seq_len": w["seq_len"],  # not a ds_config field: the data loader's; kept for import-run
            "recompute": a["recompute"],
            "launch": f"deepspeed --num_gpus {p.ngpus} YOUR_TRAIN_SCRIPT.py --deepspeed --deepspeed_config THIS_FILE"
            if p.ngpus <= 8
            else f"deepspeed --hostfile HOSTFILE YOUR_TRAIN_SCRIPT.py --deepspeed --deepspeed_config THIS_FILE  # {p.ngpus} GPUs",
            "fields": {
                "train_batch_size": p.note("time_step_s"),
                "train_micro_batch_size_per_gpu": p.note("mem_activations_gib", "time_compute_s"),
                "gradient_accumulation_steps": p.note("time_step_s"),
                "zero_optimization.stage": f"{ZERO_STAGE_NAME[stage]}: " + p.note("mem_states_gib", "time_comm_dp_s"),
                "zero_optimization.overlap_comm": p.note("time_comm_dp_exposed_s"),
                "activation_checkpointing": f"recompute {a['recompute']} is applied in model code "
                "(deepspeed.checkpointing); " + p.note("mem_activations_gib"),
                **notes,
            },
        },
    }
    return json.dumps(config, indent=2) + "\n"


def parse(text: str, ngpus: int | None = None, layers: int | None = None) -> dict:
    """Pinned overrides from a ds_config (data parallelism over ngpus, or over
    train_batch_size / (micro batch x accumulation steps) GPUs)."""
    from ..errors import UserError

    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"the file is not JSON DeepSpeed can read ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(doc, dict):
        raise UserError("a ds_config is a JSON object")
    micro = int(doc.get("train_micro_batch_size_per_gpu", 1))
    steps = int(doc.get("gradient_accumulation_steps", 1))
    if "train_batch_size" in doc:
        batch = int(doc["train_batch_size"])
        world = ngpus if ngpus is not None else batch // (micro * steps)
    elif ngpus is not None:
        world, batch = ngpus, micro * steps * ngpus
    else:
        raise UserError("the ds_config has no train_batch_size: pass --ngpus")
    zero = doc.get("zero_optimization", {})
    stage = int(zero.get("stage", 0))
    sharding = {v: k for k, v in ZERO_STAGE.items()}.get(stage)
    if sharding is None:
        raise UserError(f"zero_optimization.stage {stage} is not 0, 1, 2 or 3")
    axes = {
        "tp": 1,
        "pp": 1,
        "cp": 1,
        "ep": 1,
        "vpp": 1,
        "micro_batch": micro,
        "dp_sharding": sharding,
        "sequence_parallel": False,
    }
    meta = doc.get("_parallmelism", {})  # what an export kept beside the fields: recompute, seq_len
    if meta.get("recompute") in ("none", "selective", "full"):
        axes["recompute"] = meta["recompute"]
    workload: dict = {"global_batch": batch, "precision": "fp16" if doc.get("fp16", {}).get("enabled") else "bf16"}
    if isinstance(meta.get("seq_len"), int):
        workload["seq_len"] = meta["seq_len"]
    for key, field in (("offload_optimizer", "optimizer_offload"), ("offload_param", "param_offload")):
        if (zero.get(key) or {}).get("device") == "cpu":
            workload[field] = True
    out = pinned_overrides(KIND, None, None, world, axes, workload)
    if "overlap_comm" in zero:
        out["workload.overlap_dp_comm"] = bool(zero["overlap_comm"])
    return out
