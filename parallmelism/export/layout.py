"""The layout an export writes: axes, the workload fields it assumes, the predicted columns.

`Planned` is built once from show's record of the pinned layout and its RunConfig; every target
reads it and nothing else. `pinned()` is the canonical set of overrides that pins it again (what
`import-run` must give back); `note()` words the predicted columns a field's comment names."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import UserError

# Training axes and serving axes pinned on the grid (grid.<axis>=[value]).
TRAIN_AXES = ("tp", "pp", "cp", "ep", "vpp", "micro_batch", "dp_sharding", "recompute", "sequence_parallel")
SERVE_AXES = ("tp", "pp", "sp", "ep", "batch")
TRAIN_WORKLOAD = ("seq_len", "global_batch", "precision")
SERVE_WORKLOAD = ("input_len", "output_len", "weight_dtype", "kv_dtype", "chunked_prefill", "prefill_chunk_tokens")

GRID_SCALARS = ("grid.cross_node_tp",)  # grid options, not axes: no one-element list

# column -> (words, unit, format) for field comments
LABELS: dict[str, tuple[str, str, str]] = {
    "mem_total_gib": ("memory", "GiB/GPU", ".1f"),
    "mem_weights_gib": ("weights", "GiB/GPU", ".1f"),
    "mem_states_gib": ("weights+grads+optimizer", "GiB/GPU", ".1f"),
    "mem_activations_gib": ("activations", "GiB/GPU", ".1f"),
    "mem_kv_cache_gib": ("KV cache", "GiB/GPU", ".1f"),
    "mem_workspace_gib": ("prefill workspace", "GiB/GPU", ".1f"),
    "time_step_s": ("step", "s", ".3f"),
    "time_compute_s": ("compute", "s/step", ".3f"),
    "time_bubble_s": ("bubble", "s/step", ".3f"),
    "time_comm_tp_s": ("TP comm", "s/step", ".3f"),
    "time_comm_cp_s": ("CP comm", "s/step", ".3f"),
    "time_comm_ep_s": ("EP comm", "s/step", ".3f"),
    "time_comm_dp_s": ("DP comm", "s/step", ".3f"),
    "time_comm_pp_s": ("PP comm", "s/step", ".3f"),
    "time_comm_dp_exposed_s": ("DP comm exposed", "s/step", ".3f"),
    "time_comm_tp_exposed_s": ("TP comm exposed", "s/step", ".3f"),
    "time_comm_ep_exposed_s": ("EP comm exposed", "s/step", ".3f"),
    "time_comm_pp_exposed_s": ("PP comm exposed", "s/step", ".3f"),
    "ttft_ms": ("TTFT", "ms", ".1f"),
    "tpot_ms": ("TPOT", "ms", ".2f"),
    "prefill_ms": ("prefill", "ms", ".1f"),
    "decode_step_ms": ("decode step", "ms", ".2f"),
    "throughput_tokens_per_s": ("throughput", "tokens/s", ",.0f"),
}


@dataclass(frozen=True)
class Planned:
    """One layout as an export sees it. kind: "train" | "inference"; axes: the grid axes
    (+ dp, num_micro_batches, layer split); workload: the workload fields the targets read;
    predicted: the record's numeric columns; layers/moe: the model facts targets check."""

    kind: str
    model: str
    hardware: str
    ngpus: int
    axes: dict
    workload: dict
    predicted: dict
    layers: int
    moe: bool
    hbm_capacity_gib: float
    hbm_usable_gib: float
    extra: dict = field(default_factory=dict)
    scale_up_gpus: int = 0  # GPUs of one scale-up domain (NVLink node, TPU ICI slice)
    runs_on: str = ""  # the run's stack (training) or engine (serving): export's default target

    def note(self, *columns: str) -> str:
        """The predicted columns a field assumes, worded: 'weights 16.4 GiB/GPU, TP comm 0.412 s/step'."""
        parts = []
        for c in columns:
            if c in self.predicted and c in LABELS:
                words, unit, fmt = LABELS[c]
                parts.append(f"{words} {format(self.predicted[c], fmt)} {unit}")
        return ", ".join(parts)

    def summary(self) -> str:
        """One line with the predictions the whole file assumes."""
        p = self.predicted
        head = f"{p['mem_total_gib']:.1f} GiB per GPU of {self.hbm_usable_gib:.1f} usable"
        if self.kind == "train":
            return f"{head}, {p['time_step_s']:.3f} s per step, MFU {p.get('mfu', float('nan')):.3f}"
        return (
            f"{head}, TTFT {p['ttft_ms']:.1f} ms, TPOT {p['tpot_ms']:.2f} ms, "
            f"{p['throughput_tokens_per_s']:,.0f} tokens/s"
        )

    def header(self) -> list[str]:
        """The lines every exported file starts with (as comments): what `import-run` reads back
        for model and hardware, and the predictions."""
        axes = " ".join(f"{k}={v}" for k, v in self.axes.items())
        return [
            f"parallmelism export: model={self.model} hardware={self.hardware} workload={self.kind} ngpus={self.ngpus}",
            f"layout: {axes}",
            f"predicted: {self.summary()}",
        ]

    def pinned(self) -> dict:
        """The canonical overrides that pin this layout again: {key: value}; grid.cross_node_tp where
        the TP group is wider than a scale-up domain (show refuses it otherwise)."""
        out = pinned_overrides(self.kind, self.model, self.hardware, self.ngpus, self.axes, self.workload)
        if 0 < self.scale_up_gpus < int(self.axes["tp"]):
            out["grid.cross_node_tp"] = True
        return out


def pinned_overrides(kind: str, model, hardware, ngpus: int, axes: dict, workload: dict) -> dict:
    """{override key: value} for a layout: model/hardware (when known), grid axes, workload fields."""
    out: dict = {}
    if kind == "inference":
        out["workload"] = "inference"
    if model:
        out["model"] = model
    if hardware:
        out["hardware"] = hardware
    out["grid.ngpus"] = int(ngpus)
    for k in TRAIN_AXES if kind == "train" else SERVE_AXES:
        if k in axes:
            out[f"grid.{k}"] = axes[k]
    for k in TRAIN_WORKLOAD if kind == "train" else SERVE_WORKLOAD:
        if k == "prefill_chunk_tokens" and not workload.get("chunked_prefill", True):
            continue  # no chunk budget without chunked prefill
        if k in workload:
            out[f"workload.{k}"] = workload[k]
    if workload.get("quantization", "none") != "none":  # only where a scheme is named
        out["workload.quantization"] = workload["quantization"]
    for k in ("cp_comm_type", "dp_shard_size", "expert_tp"):  # only where they matter
        if workload.get(k) is not None:
            out[f"workload.{k}"] = workload[k]
    for k in ("optimizer_offload", "param_offload"):  # only where on
        if workload.get(k):
            out[f"workload.{k}"] = True
    if workload.get("fp8_scaling", "tensorwise") != "tensorwise":
        out["workload.fp8_scaling"] = workload["fp8_scaling"]
    if kind == "inference":  # serving's MoE dispatch and EPLB, where not the defaults
        if workload.get("moe_dispatcher", "alltoall") != "alltoall":
            out["workload.moe_dispatcher"] = workload["moe_dispatcher"]
        if workload.get("eplb_redundant_experts", 0):
            out["workload.eplb_redundant_experts"] = workload["eplb_redundant_experts"]
    return out


def override_strings(pinned: dict) -> list[str]:
    """Hydra override strings: grid axes as one-element lists, booleans lower-case."""

    def text(v) -> str:
        return str(v).lower() if isinstance(v, bool) else str(v)

    return [
        f"{k}=[{text(v)}]" if k.startswith("grid.") and k not in GRID_SCALARS else f"{k}={text(v)}"
        for k, v in pinned.items()
    ]


def planned_of(record: dict, run) -> Planned:
    """The Planned layout of show's record (`columns.record_of`) on `run`."""
    wl, model, hw = run.workload, run.model, run.hardware
    kind = wl.kind
    if kind == "train":
        axes = {k: record[k] for k in TRAIN_AXES}
        axes["dp"] = record["dp"]
        axes["num_micro_batches"] = record["num_micro_batches"]
        workload = {k: getattr(wl, k) for k in TRAIN_WORKLOAD}
        for k in (
            "overlap_dp_comm",
            "overlap_tp_comm",
            "overlap_pp_comm",
            "overlap_ep_comm",
            "moe_dispatcher",
            "schedule",
            "fsdp_reshard_after_forward",
        ):
            workload[k] = getattr(wl, k)
        if int(record["cp"]) > 1:
            workload["cp_comm_type"] = wl.cp_comm_type
        if wl.dp_shard_size is not None and record["dp_sharding"] != "NO_OP":
            workload["dp_shard_size"] = wl.dp_shard_size
        if wl.expert_tp is not None:  # MoE parallel folding
            workload["expert_tp"] = wl.expert_tp
        for k in ("optimizer_offload", "param_offload"):
            if getattr(wl, k):
                workload[k] = True
        if wl.fp8_scaling != "tensorwise":  # torchao's rowwise recipe
            workload["fp8_scaling"] = wl.fp8_scaling
        extra = {k: record[k] for k in ("layers_first_stage", "layers_per_stage", "layers_last_stage")}
    else:
        axes = {k: record[k] for k in SERVE_AXES}
        axes["dp"] = record["dp"]
        workload = {k: getattr(wl, k) for k in SERVE_WORKLOAD}
        for k in ("batching", "spec_method", "precision", "moe_dispatcher", "eplb_redundant_experts", "quantization"):
            workload[k] = getattr(wl, k)
        extra = {}
    predicted = {k: v for k, v in record.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    if not bool(record.get("fits", True)):
        raise UserError(
            f"this layout does not fit: it needs {float(record['mem_total_gib']):,.1f} GiB per GPU and "
            f"{hw.name} has {hw.hbm_usable_gib:,.1f} GiB usable; export writes only layouts that fit"
        )
    return Planned(
        kind=kind,
        model=model.name,
        hardware=hw.name,
        ngpus=int(record["ngpus"]),
        axes={k: (v.item() if hasattr(v, "item") else v) for k, v in axes.items()},
        workload=workload,
        predicted=predicted,
        layers=int(model.layers),
        moe=model.moe is not None,
        hbm_capacity_gib=float(hw.hbm_capacity_gib),
        hbm_usable_gib=float(hw.hbm_usable_gib),
        extra=extra,
        scale_up_gpus=int(hw.scale_up.domain_size),
        runs_on=(run.training_stack().name if kind == "train" else run.engine.name if run.engine else ""),
    )


def unexported_options(w: dict) -> str:
    """The first of the training options a target without them cannot write, as the clause of its
    refusal, or "": MoE parallel folding and host offload of the optimizer or parameters."""
    if w.get("expert_tp") is not None:
        return f"MoE parallel folding (workload.expert_tp {w['expert_tp']}) is not exported to it"
    for k, what in (("optimizer_offload", "optimizer"), ("param_offload", "parameter")):
        if w.get(k):
            return f"{what} offload (workload.{k}) is not exported to it"
    return ""


def refuse(target: str, why: str) -> UserError:
    """The one sentence for a layout a target cannot run (exit 2)."""
    return UserError(f"{target} cannot run this layout: {why}")


def header_fields(text: str) -> dict:
    """model/hardware/workload/ngpus from an exported file's first header line (any comment style)."""
    import re

    m = re.search(r"parallmelism export: ([^\n\"]*)", text)
    if not m:
        return {}
    return dict(kv.split("=", 1) for kv in m.group(1).split() if "=" in kv)
