"""`vllm serve` arguments for a serving layout.

Field names and value rules: vllm-project/vllm vllm/engine/arg_utils.py (EngineArgs and its
argument groups; stored version at commit 99d7eb5d6a512cfcc5a2b104f24ebf2d6cda772b):
--tensor-parallel-size, --pipeline-parallel-size, --data-parallel-size, --enable-expert-parallel
(the MoE layers' experts split over the tp x dp ranks instead of tensor-sharded), --max-num-seqs,
--max-num-batched-tokens (one iteration's token budget), --max-model-len, --gpu-memory-utilization
(fraction of the GPU's memory for weights, activations and the KV pool), --kv-cache-dtype auto | fp8,
--quantization (workload.quantization: fp8 | modelopt_fp4 | awq_marlin | gptq_marlin, export/serving.py), --enable-chunked-prefill / --no-enable-chunked-prefill.
vLLM has no prompt sharding over ranks (our sp) and batches continuously."""

from __future__ import annotations

import math

from .layout import Planned, pinned_overrides, refuse
from .serving import QUANTIZATION_FLAG, check, refuse_cross_node_tp, request_shape_comment, scheme_comment
from .serving import served_workload
from .shell import as_int, flags_of, script

SOURCE = "vllm-project/vllm vllm/engine/arg_utils.py (EngineArgs) @ 99d7eb5d"
KIND = "inference"

FIELDS: dict[str, tuple[str, str]] = {
    "--tensor-parallel-size": ("tp", "value"),
    "--pipeline-parallel-size": ("pp", "value"),
    "--data-parallel-size": ("dp", "value"),
    "--enable-expert-parallel": ("ep = tp*dp", "switch"),
    "--max-num-seqs": ("batch", "value"),
    "--max-num-batched-tokens": ("workload.prefill_chunk_tokens", "value"),
    "--max-model-len": ("workload.input_len + output_len", "value"),
    "--gpu-memory-utilization": ("mem_total_gib / hbm_capacity_gib", "value"),
    "--kv-cache-dtype": ("workload.kv_dtype", "value"),
    "--quantization": ("workload.quantization (serving.QUANTIZATION_FLAG), else fp8 for weight_dtype fp8", "value"),
    "--enable-chunked-prefill": ("workload.chunked_prefill", "switch"),
}
KV_DTYPE = {"bf16": "auto", "fp16": "auto", "fp8": "fp8"}
WEIGHTS = {"fp8": "fp8"}  # bf16/fp16: no --quantization


def memory_fraction(p: Planned) -> float:
    """The predicted memory per GPU as a fraction of its capacity, rounded up to 0.01."""
    return math.ceil(100 * p.predicted["mem_total_gib"] / p.hbm_capacity_gib) / 100


def flags(p: Planned) -> list[tuple[str, object, str]]:
    """The layout as `vllm serve` arguments (flag, value, comment), or one sentence (UserError) why
    vLLM cannot run it. Also the worker arguments of a Dynamo manifest (dynamo.py)."""
    a, w = p.axes, p.workload
    check(p, "vLLM", KV_DTYPE)
    if w.get("moe_dispatcher") == "deepep" or w.get("eplb_redundant_experts", 0):
        raise refuse("vLLM", "its DeepEP low-latency and EPLB settings are not exported yet")
    if a["ep"] > 1 and a["ep"] != a["tp"] * a["dp"]:
        raise refuse(
            "vLLM",
            f"its expert parallelism spans tp*dp = {a['tp'] * a['dp']} ranks and this layout has ep {a['ep']}",
        )
    f: list[tuple[str, object, str]] = [
        ("--tensor-parallel-size", a["tp"], p.note("mem_weights_gib", "tpot_ms")),
        ("--pipeline-parallel-size", a["pp"], p.note("mem_weights_gib", "tpot_ms")),
        ("--data-parallel-size", a["dp"], p.note("throughput_tokens_per_s")),
    ]
    if a["ep"] > 1:
        f.append(("--enable-expert-parallel", True, f"ep {a['ep']}; " + p.note("mem_weights_gib", "tpot_ms")))
    f += [
        ("--max-num-seqs", a["batch"], p.note("mem_kv_cache_gib", "tpot_ms", "throughput_tokens_per_s")),
        ("--max-model-len", w["input_len"] + w["output_len"], p.note("mem_kv_cache_gib")),
        ("--gpu-memory-utilization", memory_fraction(p), p.note("mem_total_gib") + f" of {p.hbm_capacity_gib:g} GiB"),
        ("--kv-cache-dtype", KV_DTYPE[w["kv_dtype"]], p.note("mem_kv_cache_gib")),
    ]
    scheme = w.get("quantization", "none")
    if scheme != "none":
        f.append(("--quantization", QUANTIZATION_FLAG[scheme], f"{scheme}; " + p.note("mem_weights_gib")))
    elif w["weight_dtype"] in WEIGHTS:
        f.append(("--quantization", WEIGHTS[w["weight_dtype"]], p.note("mem_weights_gib")))
    if w["chunked_prefill"]:
        f.append(("--enable-chunked-prefill", True, p.note("ttft_ms", "tpot_ms")))
        f.append(("--max-num-batched-tokens", w["prefill_chunk_tokens"], p.note("prefill_ms", "ttft_ms")))
    else:
        f.append(("--no-enable-chunked-prefill", True, p.note("ttft_ms")))
    return f


def render(p: Planned) -> str:
    """One `vllm serve` script; a replica over several nodes is refused here, not in `flags` (a
    Dynamo manifest places its workers over nodes itself, multinode.nodeCount)."""
    f, w = flags(p), p.workload
    refuse_cross_node_tp(p, "vLLM", "on a Ray cluster over the nodes (--distributed-executor-backend ray)")
    launch = [
        request_shape_comment(w),
        *scheme_comment(
            w,
            f"MODEL is a checkpoint quantized so (--quantization {QUANTIZATION_FLAG.get(str(w.get('quantization')))})",
        ),
        f'exec vllm serve "${{MODEL:?set MODEL to the checkpoint of {p.model}}}" "${{VLLM_ARGS[@]}}" "$@"',
    ]
    return script(p.header(), SOURCE, "VLLM_ARGS", f, launch)


def parse(text: str, ngpus: int | None = None, layers: int | None = None) -> dict:
    """Pinned overrides from `vllm serve` arguments. input_len/output_len come from the export's
    comment when present (vLLM only knows their sum, --max-model-len)."""
    known = {flag: mode for flag, (_, mode) in FIELDS.items()}
    fl = flags_of(text, {**known, "-tp": "value", "-pp": "value", "-dp": "value"})
    tp = as_int(fl, "--tensor-parallel-size", as_int(fl, "-tp"))
    pp = as_int(fl, "--pipeline-parallel-size", as_int(fl, "-pp"))
    dp = as_int(fl, "--data-parallel-size", as_int(fl, "-dp"))
    axes = {"tp": tp, "pp": pp, "sp": 1, "ep": tp * dp if fl.get("--enable-expert-parallel") else 1}
    if "--max-num-seqs" in fl:
        axes["batch"] = as_int(fl, "--max-num-seqs")
    workload = served_workload(text, fl)
    workload["chunked_prefill"] = bool(fl.get("--enable-chunked-prefill", True))
    if "--max-num-batched-tokens" in fl:
        workload["prefill_chunk_tokens"] = as_int(fl, "--max-num-batched-tokens")
    return pinned_overrides(KIND, None, None, tp * pp * dp, axes, workload)
