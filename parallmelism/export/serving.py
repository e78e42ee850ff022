"""What the serving engines' exports (vllm.py, sglang.py) share: the layouts both refuse, the request
shape they record, and reading that shape and the dtypes back."""

from __future__ import annotations

import re

from .layout import Planned, refuse

EXPORTED_WEIGHT_DTYPES = ("bf16", "fp16", "fp8")  # dtypes both engines load without a quantization recipe
# workload.quantization -> the --quantization value of vLLM (vllm/model_executor/layers/quantization
# QUANTIZATION_METHODS) and SGLang (server_args.py QUANTIZATION_CHOICES), which spell these alike: fp8 reads
# per-tensor or 128x128 block scales from the checkpoint (its weight_block_size), so the export's comment
# names the scheme (`scheme_comment`) and the reading takes it from there
QUANTIZATION_FLAG = {
    "fp8_tensor": "fp8",
    "fp8_block": "fp8",
    "nvfp4": "modelopt_fp4",
    "int4_awq": "awq_marlin",
    "int4_gptq": "gptq_marlin",
}
# --quantization values read back without the export's comment (the engines' other spellings of a scheme)
FLAG_SCHEME = {"modelopt_fp4": "nvfp4", "awq_marlin": "int4_awq", "awq": "int4_awq", "gptq_marlin": "int4_gptq"}
FLAG_SCHEME |= {"gptq": "int4_gptq"}


def check(p: Planned, engine: str, kv_dtypes) -> None:
    """What both serving engines refuse alike; `kv_dtypes` = the engine's KV-cache dtype flags."""
    a, w = p.axes, p.workload
    if a["sp"] > 1:
        raise refuse(engine, f"it does not shard one prompt's prefill over ranks (sp {a['sp']})")
    if w["batching"] != "continuous":
        raise refuse(engine, "it batches continuously, not workload.batching static")
    if w["spec_method"] != "none":
        raise refuse(engine, f"speculative decoding ({w['spec_method']}) is not exported yet")
    scheme = w.get("quantization", "none")
    if (scheme == "none" and w["weight_dtype"] not in EXPORTED_WEIGHT_DTYPES) or w["kv_dtype"] not in kv_dtypes:
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


def scheme_comment(w: dict, how: str) -> list[str]:
    """The launch script's comment naming workload.quantization (read back by `served_workload`),
    `how` the checkpoint it needs; none without a scheme."""
    scheme = w.get("quantization", "none")
    return [] if scheme == "none" else [f"# quantization {scheme}: {how}"]


def served_workload(text: str, flags: dict) -> dict:
    """Workload overrides of an engine command line: the request shape from the export's comment
    (the engines only know its sum), the weights' scheme from the export's comment or --quantization
    (fp8 alone: fp8 weights, no scheme named), the KV dtype from --kv-cache-dtype."""
    workload: dict = {}
    m = re.search(r"input_len (\d+), output_len (\d+)", text)
    if m:
        workload["input_len"], workload["output_len"] = int(m.group(1)), int(m.group(2))
    flag = str(flags.get("--quantization", ""))
    workload["weight_dtype"] = "fp8" if flag == "fp8" else "bf16"
    m = re.search(r"^# quantization (\w+):", text, re.M)
    scheme = m.group(1) if m else FLAG_SCHEME.get(flag)
    if scheme is not None:
        from ..specs.quantization import SCHEMES

        if scheme not in SCHEMES:
            from ..errors import UserError

            raise UserError(f"quantization {scheme!r} in this file is none of {', '.join(SCHEMES)}")
        workload["quantization"], workload["weight_dtype"] = scheme, SCHEMES[scheme].weight_dtype
    workload["kv_dtype"] = "fp8" if str(flags.get("--kv-cache-dtype", "auto")).startswith("fp8") else "bf16"
    return workload
