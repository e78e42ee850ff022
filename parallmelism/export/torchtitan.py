"""torchtitan job TOML for a training layout.

Field names and value rules: pytorch/torchtitan 0.2.2 (PyPI wheel), torchtitan/config/job_config.py:
[parallelism] data_parallel_replicate_degree, data_parallel_shard_degree (-1 = the ranks left),
fsdp_reshard_after_forward "default" | "always" | "never", tensor_parallel_degree,
pipeline_parallel_degree, pipeline_parallel_layers_per_stage, pipeline_parallel_schedule (torch
pipelining names: "1F1B", "Interleaved1F1B", "GPipe", ...), pipeline_parallel_microbatch_size
(divides training.local_batch_size), context_parallel_degree, context_parallel_rotate_method
"allgather" | "alltoall", expert_parallel_degree; [training] local_batch_size, global_batch_size,
seq_len, mixed_precision_param "bfloat16" | "float32"; [activation_checkpoint] mode "selective" |
"full" | "memory_budget" | "none"; [model] converters ["quantize.linear.float8"]
(torchtitan/components/quantization/float8.py registers it) with [quantize.linear.float8].
Pipeline split (torchtitan/distributed/pipeline_parallel.py, generate_llm_fqn_per_model_part):
the embedding counts as pipeline_parallel_first_stage_less_layers layers and the output as
pipeline_parallel_last_stage_less_layers (both default 1), virtual stages =
ceil((layers + first_less + last_less) / layers_per_stage) must be pp x stages per rank, and the
first / last virtual stage holds layers_per_stage - first_less / - last_less transformer layers.
torchtitan 0.3.0 replaced the TOML job files with Python configs; this target pins 0.2.2."""

from __future__ import annotations

from .layout import Planned, pinned_overrides, refuse, unexported_options

SOURCE = "pytorch/torchtitan 0.2.2 torchtitan/config/job_config.py (JobConfig)"
KIND = "train"

# TOML key -> our column or workload field
FIELDS: dict[str, str] = {
    "parallelism.data_parallel_replicate_degree": "dp / dp_shard_size (NO_OP: dp)",
    "parallelism.data_parallel_shard_degree": "dp or workload.dp_shard_size (FULLY_SHARD)",
    "parallelism.fsdp_reshard_after_forward": "workload.fsdp_reshard_after_forward",
    "parallelism.tensor_parallel_degree": "tp",
    "parallelism.pipeline_parallel_degree": "pp",
    "parallelism.pipeline_parallel_schedule": "vpp, workload.schedule",
    "parallelism.pipeline_parallel_layers_per_stage": "layers_per_stage / vpp",
    "parallelism.pipeline_parallel_first_stage_less_layers": "layers_per_stage - layers_first_stage",
    "parallelism.pipeline_parallel_last_stage_less_layers": "layers_per_stage - layers_last_stage",
    "parallelism.pipeline_parallel_microbatch_size": "micro_batch",
    "parallelism.context_parallel_degree": "cp",
    "parallelism.context_parallel_rotate_method": "workload.cp_comm_type",
    "parallelism.expert_parallel_degree": "ep",
    "training.local_batch_size": "global_batch / dp",
    "training.global_batch_size": "workload.global_batch",
    "training.seq_len": "workload.seq_len",
    "training.mixed_precision_param": "workload.precision",
    "activation_checkpoint.mode": "recompute",
    "model.converters": "workload.precision (fp8)",
    "quantize.linear.float8.recipe_name": "workload.fp8_scaling (rowwise)",
}
# ours -> torch context parallel's KV rotation: the ring passes K,V shards (torch implements the
# pass as an all-to-all permute), all_gather gathers them
ROTATE = {"p2p": "alltoall", "all_gather": "allgather"}
SCHEDULE = {"1f1b": "1F1B", "gpipe": "GPipe"}
FP8 = "quantize.linear.float8"


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return str(v)


def render(p: Planned) -> str:
    a, w = p.axes, p.workload
    if unexported_options(w):
        raise refuse("torchtitan 0.2.2", unexported_options(w))
    if a["tp"] > 1 and not a["sequence_parallel"]:
        raise refuse(
            "torchtitan 0.2.2", "its tensor parallelism always shards norms by sequence (sequence_parallel true)"
        )
    sharding = a["dp_sharding"]
    if sharding in ("OPTIMIZER_STATES", "OPTIMIZER_STATES_AND_GRADS"):
        raise refuse(
            "torchtitan 0.2.2",
            f"dp_sharding {sharding} has no equivalent: it shards data-parallel state with FSDP2 (FULLY_SHARD) or not at all (NO_OP)",
        )
    if w["precision"] in ("fp16", "fp4"):
        raise refuse("torchtitan 0.2.2", f"precision {w['precision']} is not one of its recipes (bfloat16, float8)")
    if w["schedule"] == "zero_bubble":
        raise refuse("torchtitan 0.2.2", "its zero-bubble schedules need two stages per rank, not this ZB-H1 layout")
    if a["vpp"] > 1 and w["schedule"] != "1f1b":
        raise refuse("torchtitan 0.2.2", f"interleaving (vpp {a['vpp']}) is written for 1F1B only")
    first, mid, last = (p.extra[k] for k in ("layers_first_stage", "layers_per_stage", "layers_last_stage"))
    per_virtual, less = mid // a["vpp"], (mid - first, mid - last)
    if a["pp"] > 1 and (mid % a["vpp"] or max(less) > per_virtual):
        raise refuse(
            "torchtitan 0.2.2",
            f"its {a['vpp']} virtual stages per rank cannot hold {first}/{mid}/{last} layers on the first/middle/last "
            "stage (pipeline_parallel_layers_per_stage with first/last_stage_less_layers)",
        )
    if sharding == "FULLY_SHARD":
        shard = w.get("dp_shard_size", a["dp"])
        replicate = a["dp"] // shard
    else:
        shard, replicate = 1, a["dp"]
    states = p.note("mem_states_gib", "time_comm_dp_s")
    par: list[tuple[str, object, str]] = [
        ("data_parallel_replicate_degree", replicate, states),
        ("data_parallel_shard_degree", shard, states),
    ]
    if sharding == "FULLY_SHARD":
        reshard = "always" if w["fsdp_reshard_after_forward"] else "never"
        par.append(("fsdp_reshard_after_forward", reshard, p.note("mem_total_gib", "time_comm_dp_s")))
    par += [
        ("tensor_parallel_degree", a["tp"], p.note("mem_weights_gib", "time_comm_tp_s")),
        ("pipeline_parallel_degree", a["pp"], p.note("time_bubble_s", "time_comm_pp_s")),
    ]
    if a["pp"] > 1:
        schedule = "Interleaved1F1B" if a["vpp"] > 1 else SCHEDULE[w["schedule"]]
        par.append(("pipeline_parallel_schedule", schedule, p.note("time_bubble_s")))
        par.append(("pipeline_parallel_layers_per_stage", per_virtual, f"vpp {a['vpp']}; " + p.note("time_bubble_s")))
        split = f"split {first}/{mid}/{last} layers: the embedding"
        par.append(("pipeline_parallel_first_stage_less_layers", less[0], f"{split} takes {less[0]} layers' place"))
        par.append(("pipeline_parallel_last_stage_less_layers", less[1], "the output; " + p.note("mem_total_gib")))
    par.append(("pipeline_parallel_microbatch_size", a["micro_batch"], p.note("mem_activations_gib", "time_compute_s")))
    par.append(("context_parallel_degree", a["cp"], p.note("mem_activations_gib", "time_comm_cp_s")))
    if a["cp"] > 1:
        par.append(("context_parallel_rotate_method", ROTATE[w["cp_comm_type"]], p.note("time_comm_cp_s")))
    if p.moe:
        par.append(("expert_parallel_degree", a["ep"], p.note("mem_states_gib", "time_comm_ep_s")))
    local = w["global_batch"] // a["dp"]
    training = [
        (
            "local_batch_size",
            local,
            f"{a['num_micro_batches']} micro-batches of {a['micro_batch']}; " + p.note("time_step_s"),
        ),
        ("global_batch_size", w["global_batch"], p.note("time_step_s")),
        ("seq_len", w["seq_len"], p.note("mem_activations_gib", "time_step_s")),
        ("mixed_precision_param", "bfloat16", p.note("mem_weights_gib")),
    ]
    lines = [
        *(f"# {h}" for h in p.header()),
        f"# field names: {SOURCE}",
        f"# launch: NGPU={p.ngpus} ./run_train.sh with CONFIG_FILE set to this file",
    ]
    if w["precision"] == "fp8":
        lines += ["", "[model]", f"converters = [{_toml_value(FP8)}]  # fp8 matmuls; {p.note('time_compute_s')}"]
        if w.get("fp8_scaling") == "rowwise":
            lines += ["", f"[{FP8}]", f"recipe_name = {_toml_value('rowwise')}  # {p.note('time_compute_s')}"]
    for table, rows in (("parallelism", par), ("training", training)):
        lines += ["", f"[{table}]"]
        lines += [f"{k} = {_toml_value(v)}" + (f"  # {c}" if c else "") for k, v, c in rows]
    lines += [
        "",
        "[activation_checkpoint]",
        f"mode = {_toml_value(a['recompute'])}  # {p.note('mem_activations_gib', 'time_compute_s')}",
    ]
    return "\n".join(lines) + "\n"


def parse(text: str, ngpus: int | None = None, layers: int | None = None) -> dict:
    """Pinned overrides from a torchtitan job TOML. ngpus: the world size where
    data_parallel_shard_degree is -1; layers: the model's, to count virtual stages."""
    import tomllib

    from ..errors import UserError

    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"the file is not TOML torchtitan can read ({exc})") from None
    par, tr = doc.get("parallelism", {}), doc.get("training", {})
    ac = doc.get("activation_checkpoint", {})
    tp, pp, cp = (
        int(par.get(k, 1)) for k in ("tensor_parallel_degree", "pipeline_parallel_degree", "context_parallel_degree")
    )
    replicate, shard = int(par.get("data_parallel_replicate_degree", 1)), int(par.get("data_parallel_shard_degree", -1))
    if shard == -1:
        if ngpus is None:
            raise UserError(
                "data_parallel_shard_degree is -1 (the ranks left): pass --ngpus to say how many GPUs run it"
            )
        shard = ngpus // (tp * pp * cp * replicate)
    dp = replicate * shard
    world = dp * tp * pp * cp
    schedule = str(par.get("pipeline_parallel_schedule", "1F1B"))
    per_stage = par.get("pipeline_parallel_layers_per_stage")
    vpp = 1
    if schedule.startswith("Interleaved") and per_stage:
        if layers is None:
            raise UserError("an interleaved schedule's virtual stages follow from the model's layers: pass --model")
        first_less = int(par.get("pipeline_parallel_first_stage_less_layers", 1))
        last_less = int(par.get("pipeline_parallel_last_stage_less_layers", 1))
        vpp = -(-(layers + first_less + last_less) // int(per_stage)) // pp  # ceil: torchtitan's stage count
    axes = {
        "tp": tp,
        "pp": pp,
        "cp": cp,
        "ep": int(par.get("expert_parallel_degree", 1)),
        "vpp": vpp,
        "micro_batch": int(par.get("pipeline_parallel_microbatch_size", 1)),
        "dp_sharding": "FULLY_SHARD" if shard > 1 else "NO_OP",
        "recompute": str(ac.get("mode", "selective")),
        "sequence_parallel": tp > 1,
    }
    workload: dict = {"seq_len": int(tr.get("seq_len", 2048))}
    gb = int(tr.get("global_batch_size", -1))
    workload["global_batch"] = gb if gb > 0 else int(tr.get("local_batch_size", 8)) * dp
    workload["precision"] = "fp8" if FP8 in doc.get("model", {}).get("converters", []) else "bf16"
    recipe = doc.get("quantize", {}).get("linear", {}).get("float8", {}).get("recipe_name")
    if workload["precision"] == "fp8" and recipe == "rowwise":
        workload["fp8_scaling"] = "rowwise"
    if cp > 1:
        back = {v: k for k, v in ROTATE.items()}
        workload["cp_comm_type"] = back[str(par.get("context_parallel_rotate_method", "allgather"))]
    if shard > 1 and replicate > 1:
        workload["dp_shard_size"] = shard
    out = pinned_overrides(KIND, None, None, world, axes, workload)
    if shard > 1 and par.get("fsdp_reshard_after_forward", "default") != "default":
        out["workload.fsdp_reshard_after_forward"] = par["fsdp_reshard_after_forward"] == "always"
    return out
