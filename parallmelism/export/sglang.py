"""SGLang `python -m sglang.launch_server` arguments for a serving layout.

Field names and value rules: sgl-project/sglang python/sglang/srt/server_args.py (ServerArgs; the
flag is the field name, tp_size -> --tp-size; stored version at commit
001067fffe33427bee0ed2f007fb7551a1d76b44): --tp-size, --pp-size, --dp-size, --ep-size,
--enable-dp-attention (attention data-parallel over dp_size groups inside the tp_size ranks, the
MoE layers over all of them), --chunked-prefill-size (the token budget of a prefill pass; -1
disables chunking), --enable-mixed-chunk,
--max-running-requests, --mem-fraction-static (fraction of GPU memory for weights and the KV
pool), --kv-cache-dtype auto | fp8_e4m3 | fp8_e5m2, --context-length, --quantization (workload.quantization: fp8 | modelopt_fp4 | awq_marlin | gptq_marlin,
export/serving.py; QUANTIZATION_CHOICES).

Our layout -> SGLang: ep 1, `--tp-size tp --dp-size dp` (dp router replicas); ep = tp, the same
with `--ep-size tp`; ep = tp*dp with dp > 1, one server of tp*dp ranks with DP attention:
`--tp-size tp*dp --dp-size dp --enable-dp-attention --ep-size tp*dp`, and with it DeepEP
(`--moe-a2a-backend deepep --deepep-mode normal` for moe_dispatcher flex, `auto` for deepep: the
low-latency kernels in decode) and EPLB's `--ep-num-redundant-experts` (server_args.py fields
moe_a2a_backend, deepep_mode, ep_num_redundant_experts).

A replica (tp*pp, or with DP attention tp*dp*pp) wider than one scale-up domain (grid.cross_node_tp,
e.g. DeepSeek-R1 at tp 16 on two 8-GPU H100 nodes) is one server over several nodes: server_args.py
fields nnodes, node_rank, dist_init_addr: `--nnodes` = the server's GPUs /
the domain size, and `--node-rank` / `--dist-init-addr` (host:port of node rank 0) left to the user,
the script stopping with a message until NODE_RANK and DIST_INIT_ADDR are set on each node.

Chunking a prompt and mixing it with decodes are two settings in SGLang (server_args.py of 0.5.9,
the pip wheel: chunked_prefill_size, set to 8192 on 80-160 GiB GPUs when not given;
enable_mixed_chunk: bool = False, "--enable-mixed-chunk ... mixing prefill and decode in a batch
when using chunked prefill"): without it a prefill batch runs as an iteration of its own and the
running decodes wait for it, which is workload.chunked_prefill false. So the budget is always
--chunked-prefill-size workload.prefill_chunk_tokens, and chunked_prefill true adds
--enable-mixed-chunk (a prompt's chunk rides in a decode iteration). Reading a script back,
--chunked-prefill-size -1 (no chunking: each prompt one pass of its own) is chunked_prefill false
with the budget left to the workload default."""

from __future__ import annotations

import math

from .layout import Planned, pinned_overrides, refuse
from .shell import as_int, flags_of, script
from ..errors import UserError
from .serving import QUANTIZATION_FLAG, check, domains_spanned, request_shape_comment, scheme_comment
from .serving import served_workload
from ..words import plural

SOURCE = "sgl-project/sglang python/sglang/srt/server_args.py (ServerArgs) @ 001067ff"
KIND = "inference"

FIELDS: dict[str, tuple[str, str]] = {
    "--tp-size": ("tp (tp*dp with DP attention)", "value"),
    "--pp-size": ("pp", "value"),
    "--dp-size": ("dp", "value"),
    "--ep-size": ("ep", "value"),
    "--enable-dp-attention": ("ep = tp*dp, dp > 1", "switch"),
    "--chunked-prefill-size": ("workload.prefill_chunk_tokens (-1 read back: chunked_prefill false)", "value"),
    "--enable-mixed-chunk": ("workload.chunked_prefill (absent: prefill passes of their own)", "switch"),
    "--max-running-requests": ("batch (x dp with DP attention)", "value"),
    "--mem-fraction-static": ("(mem_weights_gib + mem_kv_cache_gib) / hbm_capacity_gib", "value"),
    "--kv-cache-dtype": ("workload.kv_dtype", "value"),
    "--context-length": ("workload.input_len + output_len", "value"),
    "--quantization": ("workload.quantization (serving.QUANTIZATION_FLAG), else fp8 for weight_dtype fp8", "value"),
    "--moe-a2a-backend": ("deepep for workload.moe_dispatcher flex or deepep", "value"),
    "--deepep-mode": ("normal (moe_dispatcher flex) | auto (deepep: low-latency kernels in decode)", "value"),
    "--ep-num-redundant-experts": ("workload.eplb_redundant_experts", "value"),
    "--nnodes": ("server GPUs / scale-up domain, where tp*pp spans domains", "value"),
    "--node-rank": ("$NODE_RANK, set on each node (0 .. nnodes-1)", "value"),
    "--dist-init-addr": ("$DIST_INIT_ADDR, host:port of node rank 0", "value"),
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
        ("--chunked-prefill-size", w["prefill_chunk_tokens"], p.note("prefill_ms", "ttft_ms")),
    ]
    if w["chunked_prefill"]:
        f.append(("--enable-mixed-chunk", True, "prompt chunks ride in decode iterations; " + p.note("tpot_ms")))
    scheme = w.get("quantization", "none")
    if scheme != "none":
        f.append(("--quantization", QUANTIZATION_FLAG[scheme], f"{scheme}; " + p.note("mem_weights_gib")))
    elif w["weight_dtype"] == "fp8":
        f.append(("--quantization", "fp8", p.note("mem_weights_gib")))
    if dp_attention and w.get("moe_dispatcher") in DEEPEP_MODE:  # DeepEP across the DP-attention ranks
        f.append(("--moe-a2a-backend", "deepep", p.note("tpot_ms")))
        f.append(("--deepep-mode", DEEPEP_MODE[w["moe_dispatcher"]], p.note("tpot_ms")))
    if w.get("eplb_redundant_experts", 0):
        f.append(("--ep-num-redundant-experts", w["eplb_redundant_experts"], p.note("mem_weights_gib", "tpot_ms")))
    f += multi_node_flags(p, (tp * dp if dp_attention else tp) * a["pp"], (tp * dp) * a["pp"])
    launch = [
        request_shape_comment(w),
        *scheme_comment(
            w,
            f"MODEL is a checkpoint quantized so (--quantization {QUANTIZATION_FLAG.get(str(w.get('quantization')))})",
        ),
        f'exec python -m sglang.launch_server --model-path "${{MODEL:?set MODEL to the checkpoint of {p.model}}}" '
        '"${SGLANG_ARGS[@]}" "$@"',
    ]
    return script(p.header(), SOURCE, "SGLANG_ARGS", f, launch)


def multi_node_flags(p: Planned, replica_gpus: int, server_gpus: int) -> list[tuple[str, object, str]]:
    """--nnodes and the per-node placeholders when one replica spans scale-up domains, else none."""
    if domains_spanned(p, replica_gpus) == 1:
        return []
    nodes = domains_spanned(p, server_gpus)
    rank = f'"${{NODE_RANK:?set NODE_RANK to this node rank, 0 to {nodes - 1}}}"'
    addr = '"${DIST_INIT_ADDR:?set DIST_INIT_ADDR to host:port of node rank 0}"'
    where = f"{server_gpus} GPUs on {nodes} nodes of {p.scale_up_gpus}; " + p.note("tpot_ms")
    return [
        ("--nnodes", nodes, where),
        ("--node-rank", [rank], "this node's rank; the same script on each node"),
        ("--dist-init-addr", [addr], "node rank 0's address for the process group"),
    ]


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
    workload["chunked_prefill"] = chunk != -1 and bool(fl.get("--enable-mixed-chunk", False))
    world = (tp_all if dp_attention else tp * dp) * pp
    pinned = pinned_overrides(KIND, None, None, world, axes, workload)
    if chunk > 0:  # the budget of a prefill pass, mixed or not (pinned_overrides drops it without mixing)
        pinned["workload.prefill_chunk_tokens"] = chunk
    nodes = as_int(fl, "--nnodes")
    if nodes < 1 or world % nodes:
        raise UserError(
            f"--nnodes {nodes} does not divide the server's {world} {plural(world, 'GPU')} (tp*pp*dp) into equal nodes"
        )
    if tp > world // nodes:  # the TP group spans nodes: show prices it only when asked
        pinned["grid.cross_node_tp"] = True
    return pinned
