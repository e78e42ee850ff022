"""NeMo 2 / Megatron-Bridge recipe overrides (`scripts/training/train.sh ... KEY=VALUE`) for a
training layout.

Field names and value rules: NVIDIA-NeMo/Megatron-Bridge 0.7.0 at commit
067f987df03b8355b03192d88d70f1709fedf51a (2026-08-22). Overrides are OmegaConf dotlist keys of
ConfigContainer (src/megatron/bridge/training/config.py): `model.*` are the model provider's
Megatron-Core TransformerConfig / ModelParallelConfig fields, `train.*` TrainingConfig,
`ddp.*` DistributedDataParallelConfig, `comm_overlap.*` CommOverlapConfig
(training/comm_overlap.py), `mixed_precision` the name of a registered recipe
(training/mixed_precision.py: bf16_mixed, fp16_mixed, bf16_with_fp8_delayed_scaling_mixed);
the Megatron-LM flag each one stands for is the table in scripts/translate_mlm_to_bridge.py and
docs/megatron-lm-to-megatron-bridge.md (`--seq-length` is both model.seq_length and
dataset.seq_length). The value rules are Megatron's (the same TransformerConfig), so the layout
is checked and its fields chosen by megatron.fields; this module only renames them."""

from __future__ import annotations

import re

from ..errors import UserError
from . import megatron
from .layout import Planned, refuse

SOURCE = "NVIDIA-NeMo/Megatron-Bridge 0.7.0 src/megatron/bridge/training/config.py (ConfigContainer) @ 067f987d"
KIND = "train"

# Megatron-LM flag -> Megatron-Bridge override key (None: carried by mixed_precision)
FIELDS: dict[str, str | None] = {
    "--tensor-model-parallel-size": "model.tensor_model_parallel_size",
    "--pipeline-model-parallel-size": "model.pipeline_model_parallel_size",
    "--num-virtual-stages-per-pipeline-rank": "model.virtual_pipeline_model_parallel_size",
    "--decoder-first-pipeline-num-layers": "model.num_layers_in_first_pipeline_stage",
    "--decoder-last-pipeline-num-layers": "model.num_layers_in_last_pipeline_stage",
    "--account-for-embedding-in-pipeline-split": "model.account_for_embedding_in_pipeline_split",
    "--account-for-loss-in-pipeline-split": "model.account_for_loss_in_pipeline_split",
    "--context-parallel-size": "model.context_parallel_size",
    "--cp-comm-type": "model.cp_comm_type",
    "--expert-model-parallel-size": "model.expert_model_parallel_size",
    "--expert-tensor-parallel-size": "model.expert_tensor_parallel_size",
    "--moe-token-dispatcher-type": "model.moe_token_dispatcher_type",
    "--overlap-moe-expert-parallel-comm": "model.overlap_moe_expert_parallel_comm",
    "--sequence-parallel": "model.sequence_parallel",
    "--micro-batch-size": "train.micro_batch_size",
    "--global-batch-size": "train.global_batch_size",
    "--seq-length": "model.seq_length",
    "--recompute-granularity": "model.recompute_granularity",
    "--recompute-method": "model.recompute_method",
    "--recompute-num-layers": "model.recompute_num_layers",
    "--use-distributed-optimizer": "ddp.use_distributed_optimizer",
    "--use-megatron-fsdp": "ddp.use_megatron_fsdp",
    "--data-parallel-sharding-strategy": "ddp.data_parallel_sharding_strategy",
    "--num-distributed-optimizer-instances": "ddp.num_distributed_optimizer_instances",
    "--overlap-grad-reduce": "ddp.overlap_grad_reduce",
    "--overlap-param-gather": "ddp.overlap_param_gather",
    "--tp-comm-overlap": "comm_overlap.tp_comm_overlap",
    "--no-overlap-p2p-communication": "model.overlap_p2p_comm",  # written false
    "--bf16": None,
    "--fp16": None,
    "--fp8-format": None,
}
# mixed_precision recipe <- Megatron's precision flags (fp8: hybrid e4m3/e5m2 with delayed scaling,
# Megatron's default --fp8-recipe)
PRECISION = {"bf16": "bf16_mixed", "fp16": "fp16_mixed", "fp8": "bf16_with_fp8_delayed_scaling_mixed"}
EXTRA_KEYS = ("dataset.seq_length", "mixed_precision")  # written beside the table's keys


def _text(v) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


def render(p: Planned) -> str:
    """The launch script: BRIDGE_OVERRIDES=( key=value ... ) and train.sh over the nodes."""
    lines = ["#!/usr/bin/env bash", *(f"# {h}" for h in p.header()), f"# field names: {SOURCE}", "BRIDGE_OVERRIDES=("]
    if p.workload.get("optimizer_offload"):
        raise refuse(
            "Megatron-Bridge", "optimizer offload (--optimizer-cpu-offload) is not in its translate_mlm_to_bridge table"
        )
    for flag, value, comment in megatron.fields(p, "Megatron-Bridge"):
        key = FIELDS[flag]
        if key is None:
            continue
        if flag == "--no-overlap-p2p-communication":
            value = False
        lines.append(f"  {key}={_text(value)}" + (f"  # {comment}" if comment else ""))
        if flag == "--seq-length":
            lines.append(f"  dataset.seq_length={value}  # the data loader's sequence, equal to the model's")
    precision = p.workload["precision"]
    lines.append(f"  mixed_precision={PRECISION[precision]}  # {p.note('mem_weights_gib', 'time_compute_s')}")
    lines += [
        ")",
        "# model architecture, data, tokenizer and optimizer come from the recipe you name",
        f"NGPUS={p.ngpus}  # world size tp*pp*cp*dp = {p.axes['tp']}*{p.axes['pp']}*{p.axes['cp']}*{p.axes['dp']}",
        ': "${GPUS_PER_NODE:=8}"',
        './scripts/training/train.sh --nodes $((NGPUS / GPUS_PER_NODE)) --gpus-per-node "$GPUS_PER_NODE" '
        f'--recipe "${{RECIPE:?set RECIPE to a Megatron-Bridge recipe of {p.model}}}" "$@" "${{BRIDGE_OVERRIDES[@]}}"',
    ]
    return "\n".join(lines) + "\n"


def overrides_of(text: str) -> dict[str, str]:
    """{key: value} of the KEY=VALUE words in text (an exported script or a train.sh / run_recipe.py
    command line); comments and other words are skipped."""
    import shlex

    try:
        words = shlex.split(text, comments=True)
    except ValueError as exc:
        raise UserError(f"the file is not a command line a shell can read ({exc})") from None
    known = {k for k in FIELDS.values() if k} | set(EXTRA_KEYS)
    out = {}
    for word in words:
        key, eq, value = word.partition("=")
        key = key.lstrip("+")
        if eq and key in known:
            out[key] = value
    return out


def parse(text: str, ngpus: int | None = None, layers: int | None = None) -> dict:
    """Pinned overrides from Megatron-Bridge overrides: each key turned back into its Megatron
    flag (FIELDS), read by megatron.parse."""
    kv = overrides_of(text)
    back = {key: flag for flag, key in FIELDS.items() if key}
    words: list[str] = []
    for key, value in kv.items():
        flag = back.get(key)
        if flag is None:
            continue
        switch = value.lower() in ("true", "false")
        if flag == "--no-overlap-p2p-communication":
            if value.lower() == "false":
                words.append(flag)
        elif switch:
            if value.lower() == "true":
                words.append(flag)
        else:
            words += [flag, value]
    precision = kv.get("mixed_precision", "bf16_mixed").replace("-", "_")
    if "fp8" in precision:
        words += ["--fp8-format", "hybrid"]
    words.append("--fp16" if precision.startswith("fp16") else "--bf16")
    m = re.search(r"^NGPUS=(\d+)", text, re.M)
    nodes = re.search(r"--nodes[= ](\d+).*--gpus-per-node[= ](\d+)", text)
    world = ngpus if ngpus is not None else int(m.group(1)) if m else None
    if world is None and nodes:  # a train.sh command line: --nodes N --gpus-per-node G
        world = int(nodes.group(1)) * int(nodes.group(2))
    import shlex

    return megatron.parse(" ".join(shlex.quote(w) for w in words), world, layers)
