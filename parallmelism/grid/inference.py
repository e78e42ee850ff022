"""Serving layout grid: every valid (tp, pp, sp, ep, dp, batch) for workload=inference.

A replica is tp x pp x sp GPUs serving `batch` concurrent sequences; dp = ngpus/(tp·pp·sp)
replicas run independently. Expert parallelism lives either inside the TP group (ep | tp: the
seed's EP, vLLM's --enable-expert-parallel with one replica: attention split by heads, whole
experts spread over the same ranks) or across replicas (ep | dp·sp: Megatron's "EP inside DP",
DeepSeek/SGLang's "DP attention + EP MoE", tokens exchanged by all-to-all); inside TP wins when
both hold.

Axes:
  tp     tensor parallel (heads, FFN, vocabulary split; KV heads replicate when tp > kv heads)
  pp     pipeline stages (contiguous layers; an uneven split puts ceil(L/pp) on the busiest stage)
  sp     prompt sharding for prefill (seed's SP: the prompt is split into sp load-balanced causal
         chunks); each rank keeps the KV cache of its chunk, so KV memory divides by sp
  ep     expert parallel (MoE only), ep | experts, ep | tp or ep | dp·sp
  dp     independent replicas
  batch  concurrent sequences per replica (grid.batch, default workload.batch)

All divisibility rules are checked here with a reason key (grid.layouts style), reusing the
training rules where they are the same rule (reason keys: grid/reasons.py).
"""

from __future__ import annotations

import numpy as np

from ..cost.shapes import kv_replication, layers_on_busiest_stage
from ..schema import INFERENCE_LAYOUT_COLUMNS
from ..specs import AcceleratorSpec, GridSpec, InferenceWorkload, ModelSpec
from .layouts import (
    LayoutGrid,
    _candidates,
    divisors,
    expert_candidates,
    expert_rules,
    per_gpu_count,
    replica_factorizations,
    tensor_parallel_rules,
)


def enumerate_inference_layouts(
    model: ModelSpec, hw: AcceleratorSpec, workload: InferenceWorkload, grid: GridSpec
) -> LayoutGrid:
    """All valid serving layouts for every GPU count in grid.ngpus (vectorized per GPU count)."""
    return per_gpu_count(_enumerate_one, model, hw, workload, grid)


def _enumerate_one(model, hw, workload, grid, n) -> LayoutGrid:
    L, g, S = model.layers, model.g, workload.input_len
    # EPLB's redundant slots (cost/eplb.py): ep divides the physical expert count E + R
    E = model.moe.num_experts + workload.eplb_redundant_experts if model.moe else 0
    div_n = divisors(n)
    tp_c = _candidates(grid.tp, div_n)
    pp_c = _candidates(grid.pp, div_n)
    sp_c = _candidates(grid.sp, div_n)
    ep_c = expert_candidates(grid.ep, E, n)
    b_c = _candidates(grid.batch, [workload.batch])

    later = len(ep_c) * len(b_c)
    pinned = not (grid.tp is None and grid.pp is None and grid.sp is None)
    x, considered = replica_factorizations(
        n, {"tp": tp_c, "pp": pp_c, "sp": sp_c}, pinned, later, "replica_not_dividing_ngpus"
    )
    tensor_parallel_rules(x, model, hw, n, grid.cross_node_tp)
    x.rule("pp_exceeds_layers", x.cols["pp"] > L)
    sp = x.cols["sp"]
    x.rule("prompt_not_divisible_by_sp", (sp > 1) & (S % (2 * sp) != 0))

    x.cross("ep", ep_c)
    expert_rules(x, E)
    c = x.cols
    x.rule("ep_not_dividing_tp_or_dp_sp", (c["tp"] % c["ep"] != 0) & ((c["dp"] * c["sp"]) % c["ep"] != 0))

    x.cross("batch", b_c)
    c = x.cols
    c["kv_replication"] = kv_replication(c["tp"], g)
    c["layers_per_stage"] = layers_on_busiest_stage(L, c["pp"])
    return LayoutGrid({k: np.asarray(c[k], dtype=np.int64) for k in INFERENCE_LAYOUT_COLUMNS}, x.dropped, considered)
