"""Serving time: prefill (TTFT) and decode step (TPOT) roofline over serving layouts.

One op on one GPU takes its forward kernel time from the accelerator's kernel model, the same
kernels training's forward runs (`cost.roofline.serving_ops_times`, ops in `cost.inference_ops`):
GEMMs at (tokens, k, n) in the workload precision, decode-sized ones (m <= 256) from measured
skinny GEMMs; MoE experts as one grouped kernel over the experts that got tokens; attention as the
prompt's causal kernel plus a one-query kernel over the KV cache for decode tokens (measured on
H100 at batch 1-64, context 1k-32k, `h100_decode_kernels.csv`); memory ops at the measured HBM
fraction. Other accelerators: the H100 residuals on their own peak, bandwidth and SMs (cost.kernels).
An op is compute- or memory-bound by the roofline's ridge (FLOPs at peak vs bytes at bandwidth).

Collectives per layer: the training model's functions, so one collective of the same bytes, group
and link costs the same in both (`collectives.group_collective_time_s`: NCCL ring inside the
scale-up domain, the faster of ring, tree and PAT across domains):
  TP    2 all-reduces of T·h·2 bytes (after output_proj and after down_proj/experts), group tp
        (`comm.tp_layer_calls`, forward without sequence parallelism)
  EP    across replicas: dispatch + combine all-to-all of T·k·h·2 bytes × imbalance per MoE
        layer, group ep (stride tp), `comm.ep_all_to_all_time_s` (workload.moe_dispatcher: alltoall,
        or flex = DeepEP with node-limited routing; deepep: flex for passes with prompt tokens,
        DeepEP's low-latency kernels for decode passes, `collective_ops.deepep_low_latency_times_s`,
        FP8 dispatch and bf16 combine, the record's time their mean); inside the TP group (ep | tp): none (the TP
        all-reduce sums). MoE layers on the busiest stage are whole (`flops.busiest_stage_layer_counts`)
  SP    prefill: all-gather of the prompt's K and V (b·S·2·g_l·d·2 bytes) over sp, overlapped
        with the attention of the layer (only the excess is exposed); decode: all-gather of
        the partial attention outputs and log-sum-exps (b·(q_l·2 + a_l·4) bytes per rank), for
        the decode tokens of a mixed iteration too
  PP    send/recv of T·h·2/tp bytes per TP rank and stage boundary (stride tp·sp·dp): vLLM's
        send-allgather, the training hop (`comm.pp_hop_s`)

Phases (per replica; dp replicas run independently, so throughput scales with dp; the pipeline
schedules are cost/pipeline.py's):
  prefill  static batching: the batch's b prompts, split over sp ranks (load-balanced causal
           chunks): `prefill_ms`. With pp > 1 the prompt goes through the stages in n_c chunks
           (sequence pipeline):
           prefill = (n_c + pp − 1)·(stage time of one chunk + one hop); n_c is the best of
           1, 2, 4, ..., 64 per row (more chunks: smaller bubble, but weights re-read per chunk).
           Chunks use the average context (later chunks attend to more keys).
  decode   the b sequences form m = min(b, pp) micro-batches; each token must pass all stages:
           step = pp·(stage time of one micro-batch + one hop) (pp = 1: one stage time), the
           `decode_step_ms`. With b < pp stages idle (`decode_pp_idle`); each micro-batch re-reads
           the stage's weights. Context = input_len + output_len/2 (mean over the decode steps).
  serving  continuous batching (default): iteration-level model of `cost.inference_iteration`:
           decode iterations (decode_step_ms) and mixed iterations carrying a prompt chunk under
           the per-iteration token budget (iteration_mixed_ms), each + engine.iteration_overhead_ms;
           closed-loop steady state with b sequences per replica gives the MEAN ITL (tpot_ms), the
           MEAN TTFT = wait for the iteration in flight + queue + the prompt's chunks +
           engine.request_overhead_ms + the first token's send delay (cost/first_token.py: one
           iteration under engine.overlap_scheduler), and serving_load = share of iterations carrying a chunk.
           Static batching: the batch's prompts are prefilled together (sequence pipeline above),
           then decode steps; TTFT = prefill + one iteration overhead + request overhead + the send
           delay (the next iteration: the first decode step), ρ = 0.
  request  e2e = TTFT − send delay + (output_len − 1)·TPOT (the first token comes from prefill; the
           last is sent when computed).
Calibration (`parallmelism validate`, cases/inference_*.csv; kernels from kernel measurements
only; named overheads of the serving engine (specs/engine.py, conf/engine/) fitted once per engine by
benchmarks/fit_serving_overhead.py: iteration_overhead_ms, moe_layer_overhead_us, request_overhead_ms): the error per
case is in the committed validation table tests/golden/validation.csv. TTFT at higher concurrency
in those closed-loop benchmarks is not validated (it follows the load generator's arrival bursts).
Throughput (tokens/s over all dp replicas): prefill phase counts input tokens per TTFT, decode
phase b per TPOT, request phase output tokens b·output_len per e2e latency.
cost_per_million_tokens = ngpus · cost_per_gpu_hour_usd / (3600 · throughput) · 1e6.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial

import numpy as np

from ..specs import BYTES_PER_ELEMENT, AcceleratorSpec, Bound, EngineSpec, InferenceWorkload, ModelSpec
from ..specs.quantization import linear_weight_bytes
from .collective_ops import (
    DEEPEP_FP8_SCALE_BYTES_PER_ELEMENT,
    CollectiveOp,
    collective,
    deepep_low_latency_times_s,
    engine_tp_all_reduce_ops,
)
from .comm import EP_CALLS_PER_MOE_LAYER_FORWARD, ep_layer_ops, pp_hop_op, tp_layer_calls, tp_layer_ops
from .flops import busiest_stage_layer_counts, moe_layer_counts
from .eplb import eplb_imbalance, physical_experts_model
from .inference_memory import inference_memory
from .inference_ops import causal_pairs, ep_in_tp, expert_tp, head_ops, layer_ops, local_heads
from .layout import ServingLayout
from . import pipeline
from .ops import ACT_BYTES
from .inference_iteration import iteration_overhead_s
from .inference_spec import expected_tokens_per_step, proposer_step_s
from .kernels import KernelModel
from .mla_context import mla_shape
from .moe_routing import routing_imbalance
from .roofline import LOW_PRECISION_BYTES, Rates, serving_ops_times
from .ops import MATMUL, OpKind
from .shapes import kv_cache_width_per_rank, moe_token_load

PREFILL_CHUNKS = (1, 2, 4, 8, 16, 32, 64)
LSE_BYTES = float(BYTES_PER_ELEMENT["fp32"])  # B per head and token: a partial attention's log-sum-exp in fp32
BOUNDS = np.array([b.label for b in (Bound.COMPUTE, Bound.MEMORY, Bound.COMMUNICATION)])  # _bound's stack order


# serving's per-layer collectives by role (cost/collective_ops.py ROLES): the names `stage_terms`'
# "comm" and the per-op explanation give them
COMM_NAMES = {
    "tp": "tp_all_reduce",
    "tp custom": "tp_custom_all_reduce",
    "ep": "ep_all_to_all",
    "sp kv gather": "sp_kv_all_gather",
    "sp attention merge": "sp_attention_merge",
}


def serving_imbalance(model, wl: InferenceWorkload, ep, T):
    """The busiest EP rank's load over the mean at T tokens a pass: wl.moe_imbalance, or under
    wl.moe_routing's power law its ratio (cost/moe_routing.py), capped by EPLB's packing bound
    when wl.eplb_redundant_experts > 0 (`model` already holds the E + R physical slots, cost/eplb.py)."""
    if model.moe is None:
        return wl.moe_imbalance
    imbalance = wl.moe_imbalance
    if wl.moe_routing != "balanced":
        imbalance = routing_imbalance(wl.moe_routing, model.moe.num_experts, model.moe.top_k, ep, T)
    return eplb_imbalance(imbalance, model.moe.num_experts, ep, wl.eplb_redundant_experts)


def serving_collectives(
    model, hw, wl, lay: ServingLayout, T, n, moe_layers, prefill: bool, prompt_tokens, decode_part, ops, times, engine
) -> list[CollectiveOp]:
    """The collectives of one pass through the busiest stage (`n` layers, `moe_layers` of them
    MoE), built and timed as training builds and times its own (cost/collective_ops.py): calls
    and exposed seconds per stage pass ("layer" scope: summed over the stage's layers), and the
    pipeline hop per boundary ("stage" scope, placed by cost/pipeline.py). The TP all-reduces run
    as `engine` runs them (collective_ops.engine_tp_all_reduce_ops; None: NCCL's)."""
    tp, pp, sp, ep, dp = (np.asarray(x, dtype=np.float64) for x in (lay.tp, lay.pp, lay.sp, lay.ep, lay.dp))
    # forward only, no sequence parallelism: 2 all-reduces per layer (comm.tp_layer_calls)
    (ar,) = tp_layer_ops(hw, model, T, tp, {"all_reduce": tp_layer_calls(False, False)["all_reduce"][0]})
    colls = engine_tp_all_reduce_ops(hw, replace(ar, calls=ar.calls * n), engine)
    if model.moe is not None:
        # EP across replicas: every TP rank holds the replica's T tokens (no sequence parallelism)
        # and dispatches them, the training model's dispatch (comm.ep_layer_ops). EP inside TP
        # needs no all-to-all: the TP all-reduce sums the experts' partial outputs
        low_latency = wl.moe_dispatcher == "deepep" and not prefill
        dispatcher = "flex" if wl.moe_dispatcher == "deepep" else wl.moe_dispatcher
        a2a = ep_layer_ops(hw, model, T, tp, ep, serving_imbalance(model, wl, ep, T), False, False, dispatcher)[0]
        if low_latency:  # DeepEP's decode kernels: FP8 dispatch, bf16 combine; the record holds their mean
            dispatch_s, combine_s = deepep_low_latency_times_s(hw, a2a.nbytes, ep, tp)
            fp8 = np.asarray(a2a.nbytes) / ACT_BYTES * (1.0 + DEEPEP_FP8_SCALE_BYTES_PER_ELEMENT)
            a2a = replace(a2a, nbytes=(fp8 + a2a.nbytes) / 2.0, time_s=(dispatch_s + combine_s) / 2.0)
        colls.append(
            replace(
                a2a,
                calls=EP_CALLS_PER_MOE_LAYER_FORWARD * moe_layers,
                time_s=np.where(ep_in_tp(tp, ep), 0.0, a2a.time_s),
            )
        )
    a_l, _ = local_heads(model, tp)
    # per position: K and V of the local KV heads, or MLA's latent + rope key (all heads share it)
    kv_width = kv_cache_width_per_rank(model, tp)
    out_width = model.mla.kv_lora_rank if model.mla is not None else model.d  # absorbed output per head
    if prefill:
        kv_all = prompt_tokens * kv_width * ACT_BYTES
        attn_s = sum(t for op, (t, _) in zip(ops, times) if op.kind == OpKind.ATTENTION)
        ag = collective(hw, "sp", "sp kv gather", "all_gather", kv_all, sp, tp, n)
        colls.append(replace(ag, exposed_s=n * np.maximum(ag.time_s - attn_s, 0.0)))  # under the layer's attention
    if decode_part is not None:  # decode tokens (a decode pass, or those riding in a mixed one)
        partial = np.asarray(decode_part[0], dtype=np.float64) * (a_l * out_width * ACT_BYTES + a_l * LSE_BYTES) * sp
        colls.append(collective(hw, "sp", "sp attention merge", "all_gather", partial, sp, tp, n))
    colls = [op if op.exposed_s is not None else replace(op, exposed_s=op.link_s) for op in colls]
    # each TP rank sends its 1/t slice across a boundary (vLLM send-allgather, comm.pp_hop_op)
    colls.append(pp_hop_op(hw, model, T, tp, tp * sp * dp, pp))
    return colls


def spread_layer_time(times, indices, layer_s) -> list:
    """`times` with a measured layer's seconds (`layer_s`, per layout; NaN: not measured, the kernel
    model's times stand) spread over the ops at `indices` by the kernel model's shares of their sum
    (equal shares where that sum is 0): the engine tables' layer times (fused_moe_times, mla_context_times)."""
    model_s = sum(times[i][0] for i in indices)
    out = list(times)
    for i in indices:
        t, bound = times[i]
        share = np.where(model_s > 0, t / np.where(model_s > 0, model_s, 1.0), 1.0 / len(indices))
        out[i] = (np.where(np.isnan(layer_s), t, layer_s * share), bound)
    return out


def fused_moe_times(model, wl: InferenceWorkload, tp, ep, T, ops, times, km: KernelModel) -> list:
    """`times` with the routed experts' ops (gate+up, down) timed by the engine's measured fused-MoE
    op where it has one (km.fused_moe, cost/fused_moe.py) for this model shape, dtype and layout:
    the experts on the TP group's ranks (EP 1 or inside TP: moe_tp = tp/ep, moe_ep = ep; every rank
    takes the pass's T tokens) under wl.moe_routing's routing (the table's `routing`; moe_imbalance 1). The layer's time is split over the two ops as the kernel model
    splits it; elsewhere (NaN from the table) the kernel model's times stand.
    Passes with prompt tokens only (stage_terms): there the measured op is what TensorRT-LLM's TTFT shows
    (issue 5929's DeepSeek-R1 rows: EP 1 at 8192 tokens, 5.0 ms a layer where the grouped-GEMM model gave
    1.0). At decode sizes its times disagree with both TensorRT-LLM sources' measured ITL in opposite
    directions (0.21 at EP 4/8 15-25 % slower than the op, 1.x at TP 8 7-18 % faster): decode passes keep
    the kernel model's decode regime (measured decode MoE kernels) and the engine's per-MoE-layer overhead."""
    table = km.fused_moe
    moe = model.moe
    if table is None or moe is None or wl.moe_imbalance != 1.0:
        return times
    key = (wl.moe_routing, wl.precision, model.hidden, moe.ffn_hidden, moe.top_k, moe.num_experts)
    if not table.covers(*key):
        return times
    experts = [i for i, op in enumerate(ops) if op.experts is not None]
    if not experts:
        return times
    tp, ep = np.asarray(tp, dtype=np.float64), np.asarray(ep, dtype=np.float64)
    local = ep_in_tp(tp, ep) | (ep == 1)  # the experts on the TP group's ranks (no all-to-all)
    layer_s = table.layer_s(T, *key, np.where(local, expert_tp(tp, ep), 0.0), np.where(local, ep, 0.0))
    return spread_layer_time(times, experts, layer_s)


def engine_gemm_times(model, wl: InferenceWorkload, ops, times, km: KernelModel) -> list:
    """`times` with the GEMMs whose weights are in the checkpoint's fp8 scheme (1 byte a weight: the
    decoder's linear layers; router and head stay 16-bit) timed by the engine's measured linear layer
    where it has one (km.engine_gemm, cost/engine_gemm.py) for that scheme: fp8 with the model's
    `fp8_block_size` block scales (DeepSeek-V3/R1: 128x128). Routed experts are not plain GEMMs
    (fused_moe_times); where the table has no such n or k (NaN) the kernel model's times stand.
    Passes with prompt tokens only (stage_terms), as fused_moe_times: TensorRT-LLM's measured fp8
    block-scale GEMMs run DeepSeek's prefill shapes 1.2-1.6x the kernel model's (q_a at 8192 tokens
    241 us against 146, o_proj 257 against 206), which is what its TTFT shows; decode passes keep the
    kernel model's decode regime, as the two TensorRT-LLM sources' ITL pull apart there (issue 33)."""
    table = km.engine_gemm
    block = model.fp8_block_size
    if table is None or wl.precision != "fp8" or block is None or not table.covers("fp8", block):
        return times
    out = list(times)
    # an fp8 weight's bytes: 1, or 1 + 1/4096 with workload.quantization=fp8_block's scales
    fp8_bytes = linear_weight_bytes(wl) if wl.weight_dtype == "fp8" else LOW_PRECISION_BYTES["fp8"]
    for i, op in enumerate(ops):
        if op.kind != MATMUL or op.mkn is None or op.experts is not None:
            continue
        m, k, n = (np.asarray(x, dtype=np.float64) for x in op.mkn)
        per_weight = np.asarray(op.weight_bytes, dtype=np.float64) / np.maximum(k * n, 1.0)
        fp8 = np.isclose(per_weight, fp8_bytes) & (m > 0)
        if not np.any(fp8):
            continue
        t, bound = times[i]
        measured = table.gemm_s(np.maximum(m, 1.0), k, n, "fp8", block)
        out[i] = (np.where(fp8 & ~np.isnan(measured), measured, t), bound)
    return out


def mla_context_times(model, wl: InferenceWorkload, tp, sp, T, attn_pairs, decode_part, ops, times, km) -> list:
    """`times` with the MLA attention module's ops (`Op.mla_module`, cost/inference_mla.py) timed by the engine's
    measured module in prefill where it has one (km.mla_context, cost/mla_context.py) for this model
    shape and the checkpoint's fp8 block-scaled weights, on model.heads/tp heads, for the pass's fresh
    prompts (no prefix cache hit, no sequence parallelism). Their shape: where the token budget
    (workload.prefill_chunk_tokens) holds the longest prompt, no prompt is cut and a pass's Tp prompt
    tokens are whole prompts of min(S, Tp) tokens each (S = workload.input_len; a pass of fewer tokens
    is a shorter prompt of the lengths' spread, not a chunk); otherwise the shape the pass's causal pairs
    give, isl = 2 pairs/Tp - 1 (b isl(isl+1)/2 pairs), where b = Tp/isl < 1 is a chunk attending to the
    chunks before it, which the table did not measure. Decode tokens riding in the pass (a mixed
    iteration) keep their absorbed-attention ops; the module's projections are timed at the prompts'
    shape (their few extra rows are not in the table). The layer's time is split over the ops as the
    kernel model splits it; elsewhere (NaN from the table) the kernel model's times stand. Passes with
    prompt tokens only (stage_terms), as fused_moe_times: SGLang's decode attention is another module
    (absorbed, under CUDA graphs)."""
    table = km.mla_context
    if table is None or model.mla is None or wl.prefix_cache_hit != 0.0:
        return times
    if wl.precision != "fp8" or model.fp8_block_size != 128:  # the table's fp8 is 128x128 block-scaled
        return times
    shape = mla_shape(model)
    if not table.covers("fp8", shape):
        return times
    module = [i for i, op in enumerate(ops) if op.mla_module]
    T = np.asarray(T, dtype=np.float64)
    Td, Pd = (0.0 * T, 0.0 * T) if decode_part is None else (np.asarray(x, dtype=np.float64) for x in decode_part[:2])
    Tp = T - Td
    S = float(wl.input_len)
    longest = S if wl.length_dist == "fixed" else round((1 + wl.length_spread) * S)
    from_pairs = 2.0 * (np.asarray(attn_pairs, dtype=np.float64) - Pd) / np.where(Tp > 0, Tp, 1.0) - 1.0
    isl = np.minimum(S, Tp) if wl.prefill_chunk_tokens >= longest else from_pairs
    batch = Tp / np.where(isl > 0, isl, 1.0)
    heads = model.heads / np.asarray(tp, dtype=np.float64)
    fresh = (np.asarray(sp, dtype=np.float64) == 1) & (Tp > 0) & (isl >= 1.0) & (batch >= 1.0 - 1e-9)
    measured = table.layer_s(np.where(fresh, np.maximum(batch, 1.0), 1.0), np.maximum(isl, 1.0), heads, "fp8", shape)
    layer_s = np.where(fresh, measured, np.nan)
    return spread_layer_time(times, module, layer_s)


def stage_terms(
    model: ModelSpec,
    hw: AcceleratorSpec,
    wl: InferenceWorkload,
    lay: ServingLayout,
    *,
    tokens,
    attn_pairs,
    kv_read_tokens,
    kv_write_tokens,
    kv_read_bytes,
    head_tokens,
    km: KernelModel,
    prefill: bool,
    prompt_tokens=None,
    decode_part=None,
    engine: EngineSpec | None = None,
):
    """Ops, their times and the per-layer collectives of one pass of `tokens` through the busiest
    stage on one GPU, each op timed by the kernel model `km` (config.kernel_tables.kernel_model)
    and the TP all-reduces as `engine` runs them (None: NCCL's).
    Returns a dict of arrays (seconds, FLOPs, bytes)."""
    tp, pp, sp, ep, dp = (np.asarray(x, dtype=np.float64) for x in (lay.tp, lay.pp, lay.sp, lay.ep, lay.dp))
    n = np.asarray(lay.layers_per_stage, dtype=np.float64)
    if lay.first_layer is not None:  # a stage placed explicitly (the MTP module: the layer after the last)
        dense_layers, moe_layers = moe_layer_counts(model, lay.first_layer, lay.layers_per_stage)
    else:
        dense_layers, moe_layers = busiest_stage_layer_counts(model, lay.pp, lay.layers_per_stage)
    T = np.asarray(tokens, dtype=np.float64)
    if decode_part is None and not prefill:  # a decode pass: every token reads the cache
        decode_part = (T, attn_pairs, kv_read_tokens)
    ops = layer_ops(
        model,
        wl,
        tp,
        ep,
        T,
        attn_pairs,
        kv_read_tokens,
        kv_write_tokens,
        kv_read_bytes,
        moe_token_load(model.moe, serving_imbalance(model, wl, ep, T)),
        dense_layers,
        moe_layers,
        decode_part=decode_part,
    )
    ops += head_ops(model, tp, T, head_tokens, pp == 1, True)
    times = serving_ops_times(ops, Rates(hw, wl.precision, km))
    if prefill:  # passes with prompt tokens (prefill, mixed): fused_moe_times says why not decode passes
        times = fused_moe_times(model, wl, tp, ep, T, ops, times, km)
        times = engine_gemm_times(model, wl, ops, times, km)
        times = mla_context_times(model, wl, tp, sp, T, attn_pairs, decode_part, ops, times, km)
    compute_s = sum(op.count * np.where(cb, t, 0.0) for op, (t, cb) in zip(ops, times))
    memory_s = sum(op.count * np.where(cb, 0.0, t) for op, (t, cb) in zip(ops, times))
    flops = sum(op.count * op.flops for op in ops)
    hbm = sum(op.count * op.bytes for op in ops)

    colls = serving_collectives(
        model, hw, wl, lay, T, n, moe_layers, prefill, prompt_tokens, decode_part, ops, times, engine
    )
    comm = {COMM_NAMES[op.role]: op.exposed_s for op in colls if op.scope == "layer"}
    hop = next(op.time_s for op in colls if op.role == "pp hop")
    comm_s = sum(comm.values())
    return {
        "ops": ops,
        "times": times,
        "compute_s": compute_s,
        "memory_s": memory_s,
        "comm": comm,
        "collectives": colls,
        "comm_s": comm_s,
        "stage_s": compute_s + memory_s + comm_s,
        "hop_s": hop,
        "flops": flops,
        "hbm_bytes": hbm,
    }


def prefill_sequences(lay: ServingLayout, wl: InferenceWorkload) -> np.ndarray:
    """Prompts prefilled in one step: 1 with continuous batching (each new request's prompt is
    prefilled on its own; its interference with the others' decode is `serving_load`), b with
    static batching (the batch's prompts together)."""
    b = np.asarray(lay.batch, dtype=np.float64)
    return np.ones_like(b) if wl.batching == "continuous" else b


def prefill_terms(
    model: ModelSpec,
    hw: AcceleratorSpec,
    wl: InferenceWorkload,
    lay: ServingLayout,
    chunks,
    *,
    km: KernelModel,
    engine: EngineSpec | None = None,
) -> dict:
    """Stage terms of one prefill chunk when the prompts are cut into `chunks` (array) pieces."""
    sp = np.asarray(lay.sp, dtype=np.float64)
    c = np.asarray(chunks, dtype=np.float64)
    S = wl.input_len
    hit = wl.prefix_cache_hit * S  # prompt tokens found in the prefix cache: attended to, not recomputed
    n_pre = prefill_sequences(lay, wl)
    tokens = n_pre * (S - hit) / sp / c
    pairs = n_pre * (causal_pairs(S) - causal_pairs(hit)) / sp / c
    # keys a chunk reads: the cached prefix + the new tokens before it, averaged over chunks
    kv_read = n_pre * (hit + (S - hit) * (c + 1) / (2 * c))
    return stage_terms(
        model,
        hw,
        wl,
        lay,
        tokens=tokens,
        attn_pairs=pairs,
        kv_read_tokens=kv_read,
        kv_write_tokens=tokens,
        kv_read_bytes=ACT_BYTES,
        head_tokens=n_pre / c,
        km=km,
        prefill=True,
        prompt_tokens=n_pre * S,
        engine=engine,
    )


def decode_micro_batches(lay: ServingLayout) -> np.ndarray:
    """Decode micro-batches in flight, min(batch, pp) (`pipeline.decode_micro_batches`)."""
    return pipeline.decode_micro_batches(lay.batch, lay.pp)


def spec_positions(wl: InferenceWorkload) -> int:
    """Query positions per sequence in one decode pass: k+1 when speculating (verify), else 1."""
    return wl.spec_tokens + 1 if wl.spec_method != "none" else 1


def decode_terms(
    model: ModelSpec,
    hw: AcceleratorSpec,
    wl: InferenceWorkload,
    lay: ServingLayout,
    tokens_per_seq: int | None = None,
    *,
    km: KernelModel,
    engine: EngineSpec | None = None,
) -> dict:
    """Stage terms of one decode micro-batch (ceil(b/m) sequences) at the mean context; with
    speculative decoding the verify pass carries tokens_per_seq = k+1 positions per sequence (the
    cache is read once per sequence, k+1 positions written)."""
    q = spec_positions(wl) if tokens_per_seq is None else tokens_per_seq
    m = decode_micro_batches(lay)
    seqs = np.ceil(lay.batch / m).astype(np.float64)
    Td = seqs * q
    sp = np.asarray(lay.sp, dtype=np.float64)
    ctx = wl.input_len + wl.output_len / 2
    return stage_terms(
        model,
        hw,
        wl,
        lay,
        tokens=Td,
        attn_pairs=Td * ctx / sp,
        kv_read_tokens=seqs * ctx / sp,
        kv_write_tokens=Td / sp,
        kv_read_bytes=BYTES_PER_ELEMENT[wl.kv_dtype],
        head_tokens=Td,
        km=km,
        prefill=False,
        engine=engine,
    )


def best_prefill(
    model: ModelSpec,
    hw: AcceleratorSpec,
    wl: InferenceWorkload,
    lay: ServingLayout,
    km: KernelModel,
    engine: EngineSpec | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(TTFT seconds, chunk count) minimizing (n_c + pp − 1)·(stage + hop) over PREFILL_CHUNKS."""
    pp = np.asarray(lay.pp, dtype=np.float64)
    best_t = np.full(len(pp), np.inf)
    best_c = np.ones(len(pp), dtype=np.int64)
    for c in PREFILL_CHUNKS:
        if c * 2 > wl.input_len:
            break
        r = prefill_terms(model, hw, wl, lay, np.full(len(pp), c), km=km, engine=engine)
        t = pipeline.prefill_pipeline_s(c, pp, r["stage_s"], r["hop_s"])
        t = np.where((pp == 1) & (c > 1), np.inf, t)
        better = t < best_t
        best_t = np.where(better, t, best_t)
        best_c = np.where(better, c, best_c)
    return best_t, best_c


def _bound(terms):
    stack = np.stack([terms["compute_s"], terms["memory_s"], terms["comm_s"]])
    return BOUNDS[np.argmax(stack, axis=0)]


def decode_iteration(
    model: ModelSpec,
    hw: AcceleratorSpec,
    wl: InferenceWorkload,
    lay: ServingLayout,
    km: KernelModel,
    engine: EngineSpec,
    draft: ModelSpec | None = None,
):
    """One decode iteration, the same for continuous and static batching: the decode pass's terms
    and its seconds, the step pipelined over the pp stages (pipeline.decode_step_s) + the draft's
    spec_tokens proposals when speculating + the engine's iteration overhead."""
    dec = decode_terms(model, hw, wl, lay, km=km, engine=engine)
    t_prop = wl.spec_tokens * proposer_step_s(model, draft, hw, wl, lay, partial(decode_terms, km=km, engine=engine))
    pp = np.asarray(lay.pp, dtype=np.float64)
    return dec, pipeline.decode_step_s(pp, dec["stage_s"], dec["hop_s"]) + t_prop + iteration_overhead_s(model, engine)


def continuous_terms(
    model: ModelSpec,
    hw: AcceleratorSpec,
    wl: InferenceWorkload,
    lay: ServingLayout,
    km: KernelModel,
    engine: EngineSpec,
    draft: ModelSpec | None = None,
):
    """Iteration-level serving (cost.inference_iteration): decode and mixed iteration times, the
    prompt's chunk plan and the closed-loop steady state, plus the prefill-only terms of one chunk
    (FLOPs, collectives and bound of the prompt's own work)."""
    from .inference_iteration import closed_loop, mixed_stage_terms, prefill_chunk_plan

    pp = np.asarray(lay.pp, dtype=np.float64)
    b = np.asarray(lay.batch, dtype=np.float64)
    t_iter = iteration_overhead_s(model, engine)
    dec, t_dec = decode_iteration(model, hw, wl, lay, km, engine, draft)
    m = decode_micro_batches(lay)
    n_p, _ = prefill_chunk_plan(wl, b)
    # decode tokens (k+1 positions per sequence when speculating) in the micro-batch with the chunk
    td_mix = np.ceil((b - 1) / m) * spec_positions(wl)
    pre = prefill_terms(model, hw, wl, lay, n_p, km=km, engine=engine)
    if wl.chunked_prefill:
        mix = mixed_stage_terms(partial(stage_terms, km=km, engine=engine), model, hw, wl, lay, td_mix, n_p)
        # a chunk never shortens the iteration
        t_mix = pipeline.mixed_iteration_s(t_dec, pp, mix["stage_s"], dec["stage_s"])
    else:  # the chunk is a forward pass of its own through every stage
        mix = pre
        t_mix = pipeline.decode_step_s(pp, pre["stage_s"], pre["hop_s"]) + t_iter
    state = closed_loop(
        t_dec,
        t_mix,
        n_p,
        b,
        wl.output_len,
        engine.request_overhead_ms * 1e-3,
        fused=wl.chunked_prefill,
        pp=pp,
        tokens_per_iter=expected_tokens_per_step(wl.spec_acceptance, wl.spec_tokens)
        if wl.spec_method != "none"
        else 1.0,
        steps=wl.scheduler_steps,
        overlap=engine.overlap_scheduler,
        batch_wait=(
            engine.batch_wait_timeout_iters,
            engine.batch_wait_max_tokens_ratio,
            wl.prefill_chunk_tokens,
            wl.input_len,
            spec_positions(wl) - 1,  # draft tokens per decoding sequence (TensorRT-LLM counts 1 + them)
        ),
    )
    return dec, pre, mix, m, n_p.astype(np.int64), t_dec, t_mix, state


def static_terms(
    model: ModelSpec,
    hw: AcceleratorSpec,
    wl: InferenceWorkload,
    lay: ServingLayout,
    km: KernelModel,
    engine: EngineSpec,
    draft: ModelSpec | None = None,
) -> dict:
    """Static batching: the batch's prefill (best sequence-pipeline chunking, + one iteration
    overhead: prefill_s, chunks, its terms `pre`), the decode step (step_s, its terms `dec`, m
    micro-batches) and the first token's send delay send_s (cost/first_token.py: the next iteration
    is the first decode step; none with one output token)."""
    from .first_token import first_token_delay_s

    t_iter = iteration_overhead_s(model, engine)
    prefill_s, chunks = best_prefill(model, hw, wl, lay, km, engine)
    dec, step_s = decode_iteration(model, hw, wl, lay, km, engine, draft)
    return {
        "prefill_s": prefill_s + t_iter,
        "chunks": chunks,
        "pre": prefill_terms(model, hw, wl, lay, chunks, km=km, engine=engine),
        "dec": dec,
        "m": decode_micro_batches(lay),
        "step_s": step_s,
        "send_s": first_token_delay_s(engine.overlap_scheduler, step_s if wl.output_len > 1 else 0 * step_s),
    }


def inference_columns(
    cols: dict[str, np.ndarray],
    model: ModelSpec,
    hw: AcceleratorSpec,
    wl: InferenceWorkload,
    km: KernelModel,
    engine: EngineSpec,
    draft: ModelSpec | None = None,
) -> dict[str, np.ndarray]:
    """Every serving cost column for layout rows (see schema.INFERENCE_COLUMNS); `km`: the
    accelerator's kernel model (config.kernel_tables.kernel_model), as training_time takes it;
    `engine`: the serving engine (its host-side overheads); `draft` is the draft model when wl.spec_method == "draft". `cols` is returned with the cost columns added;
    the cost model reads its layout as a ServingLayout."""
    model = physical_experts_model(model, wl.eplb_redundant_experts)
    lay = ServingLayout.of(cols)
    pp = np.asarray(lay.pp, dtype=np.float64)
    b = np.asarray(lay.batch, dtype=np.float64)
    overhead_s = engine.request_overhead_ms * 1e-3
    spec_e = expected_tokens_per_step(wl.spec_acceptance, wl.spec_tokens) if wl.spec_method != "none" else 1.0
    if wl.batching == "continuous":
        dec, pre, _, m, chunks, step_s, mixed_s, state = continuous_terms(model, hw, wl, lay, km, engine, draft)
        prefill_s = pipeline.chunked_prefill_s(chunks, pp, mixed_s)
        load = state["mixed_fraction"]
        ttft_s, tpot_s, e2e_s = state["ttft_s"], state["itl_s"], state["e2e_s"]
        wait_s = state["wait_s"] + state["hold_s"]
        computed_s = state["computed_s"]
    else:
        st = static_terms(model, hw, wl, lay, km, engine, draft)
        prefill_s, chunks, pre, dec, m, step_s = (st[k] for k in ("prefill_s", "chunks", "pre", "dec", "m", "step_s"))
        mixed_s = prefill_s
        load = np.zeros_like(step_s)
        wait_s = np.zeros_like(step_s)
        computed_s = prefill_s + overhead_s
        ttft_s = computed_s + st["send_s"]
        tpot_s = step_s / spec_e
        e2e_s = computed_s + (wl.output_len - 1) * tpot_s if wl.output_len > 1 else ttft_s
    dp = lay.dp
    if wl.phase == "prefill":
        tput = dp * prefill_sequences(lay, wl) * wl.input_len / computed_s  # the prompts' work, not the send delay
    elif wl.phase == "decode":
        tput = dp * b / tpot_s
    else:
        tput = dp * b * wl.output_len / e2e_s
    ngpus = lay.dp * lay.tp * lay.pp * lay.sp  # the job's GPUs: dp replicas of tp·pp·sp (grid/inference.py)
    gpus_per_replica = np.asarray(lay.tp * lay.pp * lay.sp, dtype=np.float64)
    out = dict(cols)
    out.update(inference_memory(lay, model, hw, wl, chunks, prefill_sequences(lay, wl)))
    out.update(
        {
            "input_len": np.full(len(pp), wl.input_len),
            "output_len": np.full(len(pp), wl.output_len),
            "prefill_chunks": chunks,
            "decode_micro_batches": m,
            "decode_pp_idle": pipeline.decode_pp_idle(b, pp),
            "prefill_ms": prefill_s * 1e3,
            "decode_step_ms": step_s * 1e3,
            "spec_tokens_per_step": np.full(len(pp), spec_e),
            "serving_load": load,
            "iteration_mixed_ms": mixed_s * 1e3,
            "ttft_wait_ms": wait_s * 1e3,
            "ttft_ms": ttft_s * 1e3,
            "tpot_ms": tpot_s * 1e3,
            "e2e_latency_ms": e2e_s * 1e3,
            "throughput_tokens_per_s": tput,
            "throughput_tokens_per_s_per_gpu": tput / ngpus,
            "cost_per_million_tokens": ngpus * hw.cost_per_gpu_hour_usd / (3600.0 * tput) * 1e6,
            "flops_prefill_per_gpu": chunks * pre["flops"],
            "flops_decode_per_gpu": m * dec["flops"],
            # every GPU of the replica moves its stage's bytes for each of the m micro-batches
            "hbm_bytes_per_token": dec["hbm_bytes"] * m * gpus_per_replica / b,
            "arithmetic_intensity": dec["flops"] / dec["hbm_bytes"],
            "time_comm_prefill_ms": chunks * pre["comm_s"] * 1e3,
            "time_comm_decode_ms": pp * dec["comm_s"] * 1e3,
            "bound_prefill": _bound(pre),
            "bound_decode": _bound(dec),
        }
    )
    return out


def inference_breakdown(
    lay: ServingLayout,
    model: ModelSpec,
    hw: AcceleratorSpec,
    wl: InferenceWorkload,
    km: KernelModel,
    engine: EngineSpec,
    draft: ModelSpec | None = None,
) -> list[dict]:
    """Per-op explanation of the FIRST row of `lay`: one record per (phase, op or collective)
    with calls per stage, FLOPs, weight and other HBM bytes per call, total time on the stage in
    ms and the bound. Phases: `prefill` (one chunk of the prompt alone), `decode` (one decode
    iteration's micro-batch) and, with continuous batching and chunked prefill, `mixed` (the
    micro-batch carrying a prompt chunk with the other b−1 decode tokens); each iteration phase
    ends with its fixed `iteration_overhead` (engine.iteration_overhead_ms + engine.moe_layer_overhead_us
    per MoE layer whose gate or shared expert runs outside the fused-MoE op: `iteration_overhead_s`). Then the `ttft` phase, the row's ttft_ms in its parts
    (ttft_records)."""
    model = physical_experts_model(model, wl.eplb_redundant_experts)
    one = lay.rows(1)
    t_iter_ms = iteration_overhead_s(model, engine) * 1e3
    if wl.batching == "continuous":
        from .inference_iteration import mixed_stage_terms, prefill_chunk_plan

        b = np.asarray(one.batch, dtype=np.float64)
        chunks, _ = prefill_chunk_plan(wl, b)
        phases = [
            ("prefill", prefill_terms(model, hw, wl, one, chunks, km=km, engine=engine)),
            ("decode", decode_terms(model, hw, wl, one, km=km, engine=engine)),
        ]
        if wl.chunked_prefill:
            td_mix = np.ceil((b - 1) / decode_micro_batches(one)) * spec_positions(wl)
            phases.append(
                (
                    "mixed",
                    mixed_stage_terms(partial(stage_terms, km=km, engine=engine), model, hw, wl, one, td_mix, chunks),
                )
            )
    else:
        _, chunks = best_prefill(model, hw, wl, one, km, engine)
        phases = [
            ("prefill", prefill_terms(model, hw, wl, one, chunks, km=km, engine=engine)),
            ("decode", decode_terms(model, hw, wl, one, km=km, engine=engine)),
        ]
    records = []
    for phase, terms in phases:
        for op, (t, cb) in zip(terms["ops"], terms["times"]):
            count = float(op.count[0])
            if count == 0 or (float(op.flops[0]) == 0 and float(op.bytes[0]) == 0):  # op not run this pass
                continue
            records.append(
                {
                    "phase": phase,
                    "op": op.name,
                    "calls": count,
                    "flops": float(op.flops[0]),
                    "weight_bytes": float(op.weight_bytes[0]),
                    "other_bytes": float(op.other_bytes[0]),
                    "time_ms": count * float(t[0]) * 1e3,
                    "bound": "compute" if cb[0] else "memory",
                }
            )
        for coll in terms["collectives"]:  # calls per stage pass (summed over its layers), or per boundary
            name, t = (
                (COMM_NAMES[coll.role], coll.exposed_s) if coll.scope == "layer" else ("pp_send_recv", coll.time_s)
            )
            if float(np.asarray(t).reshape(-1)[0]) > 0:
                records.append(
                    {
                        "phase": phase,
                        "op": name,
                        "calls": float(np.asarray(coll.calls).reshape(-1)[0]),
                        "flops": 0.0,
                        "weight_bytes": 0.0,
                        "other_bytes": 0.0,
                        "time_ms": float(np.asarray(t).reshape(-1)[0]) * 1e3,
                        "bound": "communication",
                    }
                )
        if phase != "prefill" and wl.spec_method != "none":
            t_prop = wl.spec_tokens * float(
                proposer_step_s(model, draft, hw, wl, one, partial(decode_terms, km=km, engine=engine))[0]
            )
            records.append(
                {
                    "phase": phase,
                    "op": f"spec_proposer_{wl.spec_method}",
                    "calls": float(wl.spec_tokens),
                    "flops": float("nan"),
                    "weight_bytes": float("nan"),
                    "other_bytes": float("nan"),
                    "time_ms": t_prop * 1e3,
                    "bound": "proposer",
                }
            )
        if t_iter_ms > 0 and (phase != "prefill" or wl.batching == "static" or not wl.chunked_prefill):
            records.append(
                {
                    "phase": phase,
                    "op": "iteration_overhead",
                    "calls": 1.0,
                    "flops": 0.0,
                    "weight_bytes": 0.0,
                    "other_bytes": 0.0,
                    "time_ms": t_iter_ms,
                    "bound": "overhead",
                }
            )
    return records + ttft_records(model, hw, wl, one, km, engine, draft)


def ttft_records(model, hw, wl, one: ServingLayout, km, engine, draft) -> list[dict]:
    """The mean TTFT of the first row of `one` in its parts (one record each, phase `ttft`, ms;
    they sum to ttft_ms): the wait for the iteration in flight and the queue (continuous batching),
    batch waiting's mean hold (cost/batch_wait.py, engine.batch_wait_*),
    the prompt's prefill (prefill_ms), engine.request_overhead_ms and the first token's send delay
    (cost/first_token.py, engines with overlap scheduling). A part of 0 ms is left out."""
    if wl.batching == "continuous":
        *_, n_p, _, _, state = continuous_terms(model, hw, wl, one, km, engine, draft)
        chunks = float(n_p[0])
        wait, hold, prefill, send = (float(state[k][0]) for k in ("wait_s", "hold_s", "prefill_s", "send_s"))
    else:
        st = static_terms(model, hw, wl, one, km, engine, draft)
        wait, prefill, send, chunks = 0.0, float(st["prefill_s"][0]), float(st["send_s"][0]), float(st["chunks"][0])
        hold = 0.0
    parts = [
        ("wait_iteration_and_queue", 1.0, wait, "queue"),
        ("batch_wait_hold", 1.0, hold, "queue"),
        ("prefill", chunks, prefill, "prefill"),
        ("request_overhead", 1.0, engine.request_overhead_ms * 1e-3, "overhead"),
        ("first_token_send_overlap", 1.0, send, "overlap"),
    ]
    return [
        {
            "phase": "ttft",
            "op": op,
            "calls": calls,
            "flops": float("nan"),
            "weight_bytes": float("nan"),
            "other_bytes": float("nan"),
            "time_ms": t * 1e3,
            "bound": bound,
        }
        for op, calls, t, bound in parts
        if t > 0 or op == "prefill"
    ]


def breakdown_for_row(
    row: dict,
    model: ModelSpec,
    hw: AcceleratorSpec,
    wl: InferenceWorkload,
    km: KernelModel,
    engine: EngineSpec,
    draft: ModelSpec | None = None,
) -> list[dict]:
    """`inference_breakdown` of one evaluated row (a dict with the layout columns); `draft`: the
    draft model of spec_method=draft (loaded by config.draft_model_of)."""
    from ..schema import INFERENCE_LAYOUT_COLUMNS

    if wl.spec_method == "draft" and draft is None:
        raise ValueError("spec_method=draft needs the draft model (config.draft_model_of)")
    cols = {k: np.array([int(row[k])], dtype=np.int64) for k in INFERENCE_LAYOUT_COLUMNS}
    return inference_breakdown(ServingLayout.of(cols), model, hw, wl, km, engine, draft)
