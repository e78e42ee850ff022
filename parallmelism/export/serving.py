"""What the serving engines' exports (vllm.py, sglang.py) share: the layouts both refuse, the request
shape they record, and reading that shape and the dtypes back."""

from __future__ import annotations

import re

from .layout import Planned, refuse

EXPORTED_WEIGHT_DTYPES = ("bf16", "fp16", "fp8")  # dtypes both engines load without a quantization recipe


def check(p: Planned, engine: str, kv_dtypes) -> None:
    """What both serving engines refuse alike; `kv_dtypes` = the engine's KV-cache dtype flags."""
    a, w = p.axes, p.workload
    if a["sp"] > 1:
        raise refuse(engine, f"it does not shard one prompt's prefill over ranks (sp {a['sp']})")
    if w["batching"] != "continuous":
        raise refuse(engine, "it batches continuously, not workload.batching static")
    if w["spec_method"] != "none":
        raise refuse(engine, f"speculative decoding ({w['spec_method']}) is not exported yet")
    if w["weight_dtype"] not in EXPORTED_WEIGHT_DTYPES or w["kv_dtype"] not in kv_dtypes:
        raise refuse(engine, f"weights {w['weight_dtype']} / KV cache {w['kv_dtype']} have no dtype flag here")


def domains_spanned(p: Planned, gpus: int) -> int:
    """The scale-up domains (NVLink nodes) `gpus` GPUs of one server fill: 1 when they fit one domain
    or the domain size is unknown; else gpus / domain size (a TP group across domains is whole
    domains, grid.cross_node_tp)."""
    domain = p.scale_up_gpus
    return 1 if domain <= 0 or gpus <= domain else -(-gpus // domain)


def refuse_cross_node_tp(p: Planned, engine: str, how: str) -> None:
    """One sentence when the layout's tp*pp spans scale-up domains and the engine's pinned field table
    has no flags for a server over several nodes (`how`: what it would take)."""
    a = p.axes
    nodes = domains_spanned(p, a["tp"] * a["pp"])
    if nodes > 1:
        raise refuse(
            engine,
            f"its tp*pp = {a['tp'] * a['pp']} GPUs span {nodes} scale-up domains of {p.scale_up_gpus}, "
            f"which it runs {how}, and the pinned field table has no flags for that",
        )


def request_shape_comment(w: dict) -> str:
    """The launch script's comment with the request shape (read back by `served_workload`)."""
    return f"# input_len {w['input_len']}, output_len {w['output_len']}: the request shape the predictions assume"


def served_workload(text: str, flags: dict) -> dict:
    """Workload overrides of an engine command line: the request shape from the export's comment
    (the engines only know its sum), fp8 weights from --quantization, the KV dtype from
    --kv-cache-dtype."""
    workload: dict = {}
    m = re.search(r"input_len (\d+), output_len (\d+)", text)
    if m:
        workload["input_len"], workload["output_len"] = int(m.group(1)), int(m.group(2))
    workload["weight_dtype"] = "fp8" if str(flags.get("--quantization", "")) == "fp8" else "bf16"
    workload["kv_dtype"] = "fp8" if str(flags.get("--kv-cache-dtype", "auto")).startswith("fp8") else "bf16"
    return workload
