"""TensorRT-LLM `trtllm-serve` arguments (+ its --config YAML of LLM API fields) for a serving layout.

Field names and value rules: NVIDIA/TensorRT-LLM at commit 00209af149e7774406881a37283dce303571eb11:
tensorrt_llm/commands/serve.py (the click options of `trtllm-serve serve`: --tp_size, --pp_size,
--ep_size (moe_expert_parallel_size), --max_batch_size, --max_num_tokens (one iteration's token
budget), --max_seq_len, --kv_cache_free_gpu_memory_fraction (the KV pool as a fraction of the
memory left free after the weights and buffers), --enable_chunked_prefill, --backend pytorch,
--config (a YAML of LLM API fields that overwrites the options)) and tensorrt_llm/llmapi/llm_args.py
(TorchLlmArgs.enable_attention_dp: attention data-parallel over all tp_size ranks, attention tp 1;
KvCacheConfig.dtype "auto" | "fp8"). fp8 weights are a pre-quantized (ModelOpt) checkpoint, which
the engine reads its quantization from: no flag. One server runs one replica: data-parallel
replicas without expert parallelism across them are that many servers behind a router."""

from __future__ import annotations

import math
import re

from .layout import Planned, pinned_overrides, refuse
from .serving import check, refuse_cross_node_tp, request_shape_comment, scheme_comment, served_workload
from .shell import as_int, flags_of, script

SOURCE = "NVIDIA/TensorRT-LLM tensorrt_llm/commands/serve.py, llmapi/llm_args.py @ 00209af1"
KIND = "inference"

FIELDS: dict[str, tuple[str, str]] = {
    "--backend": ("pytorch (the LLM API's PyTorch flow)", "value"),
    "--tp_size": ("tp (tp*dp with attention DP)", "value"),
    "--pp_size": ("pp", "value"),
    "--ep_size": ("ep", "value"),
    "--max_batch_size": ("batch (per rank with attention DP)", "value"),
    "--max_num_tokens": ("workload.prefill_chunk_tokens (input_len without chunking)", "value"),
    "--max_seq_len": ("workload.input_len + output_len", "value"),
    "--kv_cache_free_gpu_memory_fraction": ("mem_kv_cache_gib / (hbm_capacity_gib - other memory)", "value"),
    "--enable_chunked_prefill": ("workload.chunked_prefill", "switch"),
    "--config": ("the YAML below: enable_attention_dp, kv_cache_config.dtype", "value"),
}
CONFIG_FIELDS = ("enable_attention_dp", "kv_cache_config.dtype")  # LLM API fields the YAML carries
KV_DTYPE = {"bf16": "auto", "fp16": "auto", "fp8": "fp8"}
FP8_CHECKPOINT = "# weights fp8: MODEL is an FP8 (ModelOpt) checkpoint; TensorRT-LLM reads its quantization"
# workload.quantization -> the checkpoint's QuantAlgo (tensorrt_llm/quantization/mode.py; hf_quant_config.json's
# quant_algo): TensorRT-LLM has no flag for it, so the script names it in a comment that is read back
QUANT_ALGO = {
    "fp8_tensor": "FP8",
    "fp8_block": "FP8_BLOCK_SCALES",
    "nvfp4": "NVFP4",
    "int4_awq": "W4A16_AWQ",
    "int4_gptq": "W4A16_GPTQ",
}


def kv_fraction(p: Planned) -> float:
    """The KV pool over the memory the weights and buffers leave free, rounded up to 0.01."""
    kv = p.predicted["mem_kv_cache_gib"]
    free = p.hbm_capacity_gib - (p.predicted["mem_total_gib"] - kv)
    return min(1.0, math.ceil(100 * kv / free) / 100)


def render(p: Planned) -> str:
    a, w = p.axes, p.workload
    check(p, "TensorRT-LLM", KV_DTYPE)
    refuse_cross_node_tp(p, "TensorRT-LLM", "as one MPI job over the nodes (mpirun or srun with trtllm-llmapi-launch)")
    tp, dp, ep = a["tp"], a["dp"], a["ep"]
    attention_dp = ep > 1 and dp > 1 and ep == tp * dp
    if attention_dp and tp > 1:
        raise refuse("TensorRT-LLM", f"its attention data parallelism runs attention on one rank each, not tp {tp}")
    if ep > 1 and ep != tp and not attention_dp:
        raise refuse(
            "TensorRT-LLM", f"its expert parallelism spans tp_size ({tp}, or tp*dp with attention DP), not ep {ep}"
        )
    f: list[tuple[str, object, str]] = [
        ("--backend", "pytorch", ""),
        ("--tp_size", tp * dp if attention_dp else tp, p.note("mem_weights_gib", "tpot_ms")),
        ("--pp_size", a["pp"], p.note("mem_weights_gib", "tpot_ms")),
    ]
    if ep > 1:
        f.append(("--ep_size", ep, p.note("mem_weights_gib", "tpot_ms")))
    per = "per rank; " if attention_dp else ""
    f += [
        ("--max_batch_size", a["batch"], per + p.note("mem_kv_cache_gib", "tpot_ms", "throughput_tokens_per_s")),
        ("--max_seq_len", w["input_len"] + w["output_len"], p.note("mem_kv_cache_gib")),
        (
            "--kv_cache_free_gpu_memory_fraction",
            kv_fraction(p),
            p.note("mem_kv_cache_gib", "mem_total_gib") + f" of {p.hbm_capacity_gib:g} GiB",
        ),
    ]
    if w["chunked_prefill"]:
        f.append(("--enable_chunked_prefill", True, p.note("ttft_ms", "tpot_ms")))
        f.append(("--max_num_tokens", w["prefill_chunk_tokens"], p.note("prefill_ms", "ttft_ms")))
    else:
        f.append(("--max_num_tokens", w["input_len"], "one whole prompt per iteration; " + p.note("prefill_ms")))
    f.append(("--config", ['"${CONFIG:=trtllm_llm_api.yaml}"'], "the LLM API fields written below"))
    yaml = [
        f"enable_attention_dp: {'true' if attention_dp else 'false'}",
        "kv_cache_config:",
        f"  dtype: {KV_DTYPE[w['kv_dtype']]}",
    ]
    launch = [
        request_shape_comment(w),
        *scheme_comment(
            w,
            f"MODEL is a {QUANT_ALGO.get(str(w.get('quantization')))} (ModelOpt) checkpoint; TensorRT-LLM reads its "
            "quantization (hf_quant_config.json quant_algo), no flag",
        ),
        *([FP8_CHECKPOINT] if w["weight_dtype"] == "fp8" else []),
        "cat > \"$CONFIG\" <<'YAML'",
        *yaml,
        "YAML",
    ]
    if dp > 1 and not attention_dp:
        launch.append(f"REPLICAS={dp}  # data-parallel replicas: one such server each, behind a router")
    launch.append(
        f'exec trtllm-serve "${{MODEL:?set MODEL to the checkpoint of {p.model}}}" "${{TRTLLM_ARGS[@]}}" "$@"'
    )
    return script(p.header(), SOURCE, "TRTLLM_ARGS", f, launch)


def parse(text: str, ngpus: int | None = None, layers: int | None = None) -> dict:
    """Pinned overrides from `trtllm-serve` arguments (the long option names read too) and the
    LLM API YAML in the same file (enable_attention_dp, kv_cache_config.dtype)."""
    known = {flag: mode for flag, (_, mode) in FIELDS.items()}
    aliases = {"--tensor_parallel_size": "--tp_size", "--pipeline_parallel_size": "--pp_size"}
    aliases |= {
        "--moe_expert_parallel_size": "--ep_size",
        "--free_gpu_memory_fraction": "--kv_cache_free_gpu_memory_fraction",
    }
    fl = flags_of(text, {**known, **{k: "value" for k in aliases}})
    for long, short in aliases.items():
        if long in fl:
            fl[short] = fl.pop(long)
    attention_dp = re.search(r"^\s*enable_attention_dp:\s*true\b", text, re.M | re.I) is not None
    kv = re.search(r"^\s*dtype:\s*(\S+)", text, re.M)
    tp_all, pp = as_int(fl, "--tp_size"), as_int(fl, "--pp_size")
    ep = as_int(fl, "--ep_size")
    m = re.search(r"^REPLICAS=(\d+)", text, re.M)
    dp = tp_all if attention_dp else (int(m.group(1)) if m else 1)
    tp = 1 if attention_dp else tp_all
    axes = {"tp": tp, "pp": pp, "sp": 1, "ep": ep}
    if "--max_batch_size" in fl:
        axes["batch"] = as_int(fl, "--max_batch_size")
    engine = {"--quantization": "fp8"} if "weights fp8:" in text else {}
    if kv:
        engine["--kv-cache-dtype"] = kv.group(1)
    workload = served_workload(text, engine)
    workload["chunked_prefill"] = bool(fl.get("--enable_chunked_prefill", False))
    if workload["chunked_prefill"] and "--max_num_tokens" in fl:
        workload["prefill_chunk_tokens"] = as_int(fl, "--max_num_tokens")
    return pinned_overrides(KIND, None, None, tp * dp * pp, axes, workload)
