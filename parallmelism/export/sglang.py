"""SGLang `python -m sglang.launch_server` arguments for a serving layout.

Field names and value rules: sgl-project/sglang python/sglang/srt/server_args.py (ServerArgs; the
flag is the field name, tp_size -> --tp-size; stored version at commit
001067fffe33427bee0ed2f007fb7551a1d76b44): --tp-size, --pp-size, --dp-size, --ep-size,
--enable-dp-attention (attention data-parallel over dp_size groups inside the tp_size ranks, the
MoE layers over all of them), --chunked-prefill-size (-1 disables chunking),
--max-running-requests, --mem-fraction-static (fraction of GPU memory for weights and the KV
pool), --kv-cache-dtype auto | fp8_e4m3 | fp8_e5m2, --context-length, --quantization fp8.

Our layout -> SGLang: ep 1, `--tp-size tp --dp-size dp` (dp router replicas); ep = tp, the same
with `--ep-size tp`; ep = tp*dp with dp > 1, one server of tp*dp ranks with DP attention:
`--tp-size tp*dp --dp-size dp --enable-dp-attention --ep-size tp*dp`, and with it DeepEP
(`--moe-a2a-backend deepep --deepep-mode normal` for moe_dispatcher flex, `auto` for deepep: the
low-latency kernels in decode) and EPLB's `--ep-num-redundant-experts` (server_args.py fields
moe_a2a_backend, deepep_mode, ep_num_redundant_experts)."""

from __future__ import annotations

import math

from .layout import Planned, pinned_overrides, refuse
from .shell import as_int, flags_of, script
from .serving import check, request_shape_comment, served_workload

SOURCE = "sgl-project/sglang python/sglang/srt/server_args.py (ServerArgs) @ 001067ff"
KIND = "inference"

FIELDS: dict[str, tuple[str, str]] = {
    "--tp-size": ("tp (tp*dp with DP attention)", "value"),
    "--pp-size": ("pp", "value"),
    "--dp-size": ("dp", "value"),
    "--ep-size": ("ep", "value"),
    "--enable-dp-attention": ("ep = tp*dp, dp > 1", "switch"),
    "--chunked-prefill-size": ("workload.prefill_chunk_tokens (-1: workload.chunked_prefill false)", "value"),
    "--max-running-requests": ("batch (x dp with DP attention)", "value"),
    "--mem-fraction-static": ("(mem_weights_gib + mem_kv_cache_gib) / hbm_capacity_gib", "value"),
    "--kv-cache-dtype": ("workload.kv_dtype", "value"),
    "--context-length": ("workload.input_len + output_len", "value"),
    "--quantization": ("workload.weight_dtype", "value"),
    "--moe-a2a-backend": ("deepep for workload.moe_dispatcher flex or deepep", "value"),
    "--deepep-mode": ("normal (moe_dispatcher flex) | auto (deepep: low-latency kernels in decode)", "value"),
    "--ep-num-redundant-experts": ("workload.eplb_redundant_experts", "value"),
}
DEEPEP_MODE = {"flex": "normal", "deepep": "auto"}  # moe_dispatcher -> --deepep-mode
KV_DTYPE = {"bf16": "auto", "fp16": "auto", "fp8": "fp8_e4m3"}


def render(p: Planned) -> str:
    a, w = p.axes, p.workload
    check(p, "SGLang", KV_DTYPE)
    tp, dp, ep = a["tp"], a["dp"], a["ep"]
    dp_attention = ep > 1 and ep == tp * dp and dp > 1
    if ep > 1 and ep != tp and not dp_attention:
        raise refuse(
            "SGLang",
            f"its expert parallelism spans the tp group ({tp}) or, with DP attention, tp*dp = {tp * dp}, not ep {ep}",
        )
    static = p.predicted["mem_weights_gib"] + p.predicted["mem_kv_cache_gib"]
    fraction = math.ceil(100 * static / p.hbm_capacity_gib) / 100
    f: list[tuple[str, object, str]] = [
        ("--tp-size", tp * dp if dp_attention else tp, p.note("mem_weights_gib", "tpot_ms")),
        ("--pp-size", a["pp"], p.note("mem_weights_gib", "tpot_ms")),
        ("--dp-size", dp, p.note("throughput_tokens_per_s")),
    ]
    if dp_attention:
        f.append(("--enable-dp-attention", True, f"attention tp {tp} in {dp} groups; " + p.note("mem_kv_cache_gib")))
    if ep > 1:
        f.append(("--ep-size", ep, p.note("mem_weights_gib", "tpot_ms")))
    f += [
        (
            "--max-running-requests",
            a["batch"] * dp if dp_attention else a["batch"],
            f"{a['batch']} per replica; " + p.note("mem_kv_cache_gib", "tpot_ms", "throughput_tokens_per_s"),
        ),
        ("--context-length", w["input_len"] + w["output_len"], p.note("mem_kv_cache_gib")),
        ("--mem-fraction-static", fraction, f"weights + KV {static:.1f} GiB of {p.hbm_capacity_gib:g} GiB"),
        ("--kv-cache-dtype", KV_DTYPE[w["kv_dtype"]], p.note("mem_kv_cache_gib")),
        (
            "--chunked-prefill-size",
            w["prefill_chunk_tokens"] if w["chunked_prefill"] else -1,
            p.note("prefill_ms", "ttft_ms"),
        ),
    ]
    if w["weight_dtype"] == "fp8":
        f.append(("--quantization", "fp8", p.note("mem_weights_gib")))
    if dp_attention and w.get("moe_dispatcher") in DEEPEP_MODE:  # DeepEP across the DP-attention ranks
        f.append(("--moe-a2a-backend", "deepep", p.note("tpot_ms")))
        f.append(("--deepep-mode", DEEPEP_MODE[w["moe_dispatcher"]], p.note("tpot_ms")))
    if w.get("eplb_redundant_experts", 0):
        f.append(("--ep-num-redundant-experts", w["eplb_redundant_experts"], p.note("mem_weights_gib", "tpot_ms")))
    launch = [
        request_shape_comment(w),
        f'exec python -m sglang.launch_server --model-path "${{MODEL:?set MODEL to the checkpoint of {p.model}}}" '
        '"${SGLANG_ARGS[@]}" "$@"',
    ]
    return script(p.header(), SOURCE, "SGLANG_ARGS", f, launch)


def parse(text: str, ngpus: int | None = None, layers: int | None = None) -> dict:
    """Pinned overrides from SGLang server arguments (--tp/--dp/--ep aliases read too)."""
    known = {flag: mode for flag, (_, mode) in FIELDS.items()}
    fl = flags_of(text, {**known, "--tp": "value", "--dp": "value", "--ep": "value"})
    tp_all = as_int(fl, "--tp-size", as_int(fl, "--tp"))
    dp = as_int(fl, "--dp-size", as_int(fl, "--dp"))
    ep = as_int(fl, "--ep-size", as_int(fl, "--ep"))
    dp_attention = bool(fl.get("--enable-dp-attention", False))
    tp = tp_all // dp if dp_attention else tp_all
    pp = as_int(fl, "--pp-size")
    axes = {"tp": tp, "pp": pp, "sp": 1, "ep": ep}
    if "--max-running-requests" in fl:
        running = as_int(fl, "--max-running-requests")
        axes["batch"] = running // dp if dp_attention else running
    workload = served_workload(text, fl)
    if fl.get("--moe-a2a-backend") == "deepep":
        workload["moe_dispatcher"] = "flex" if fl.get("--deepep-mode") == "normal" else "deepep"
    if "--ep-num-redundant-experts" in fl:
        workload["eplb_redundant_experts"] = as_int(fl, "--ep-num-redundant-experts")
    chunk = as_int(fl, "--chunked-prefill-size", 0)
    workload["chunked_prefill"] = chunk != -1
    if chunk > 0:
        workload["prefill_chunk_tokens"] = chunk
    world = (tp_all if dp_attention else tp * dp) * pp
    return pinned_overrides(KIND, None, None, world, axes, workload)
