"""Training memory per GPU on the most-loaded pipeline stage.

Three candidate stages are evaluated: the first (embedding, most in-flight micro-batches), the
second (a full middle stage when an uneven split shortened the first; pp >= 3) and the last
(output head, logits and cross-entropy). The reported stage is the one with the larger total;
`mem_stage` names it. Everything is in GiB (2**30 bytes).
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from ..specs import AcceleratorSpec, MemStage, ModelSpec, TrainWorkload, labels, moe_layers_in_range
from ..units import GIB
from . import activations as act
from .offload import offloaded_layers, resident_offloaded_layers
from .params import params_per_gpu
from .pipeline import inflight_micro_batches
from .keys import gather, per_key, stacked
from .layout import TrainingLayout
from .select import argmax3
from .shapes import dense_dp_size, dp_shard_ranks, expert_dp_size, expert_tp_size
from .states import (
    GRAD_BYTES,
    MOMENT_BYTES,
    fsdp_gather_bytes,
    group_bytes_per_param,
    host_optimizer_bytes_per_param,
    offloaded_device_bytes,
    model_states_bytes,
    param_gather_bytes,
    working_weight_bytes,
)


MEM_STAGES = labels(MemStage)  # ["first", "second", "last"]: the `mem_stage` column's codes


def _stage_geometry(c: TrainingLayout, L: int, stage: str):
    """(pipeline rank, layers, first layer index, has embedding, has head) of a candidate stage."""
    pp = c.pp
    if stage == "first":
        return np.zeros_like(pp), c.layers_first_stage, np.zeros_like(pp), np.ones(len(pp), bool), pp == 1
    if stage == "second":
        return np.ones_like(pp), c.layers_per_stage, c.layers_first_stage, np.zeros(len(pp), bool), pp == 2
    n = c.layers_last_stage
    return pp - 1, n, L - n, pp == 1, np.ones(len(pp), bool)


# A stage's states depend on these columns (and on the stage split, a function of pp); its
# activations on these. Each is evaluated once per distinct key (cost/keys.py) and the rows
# combine the two.
STATE_KEY = ("tp", "pp", "cp", "ep", "dp", "dp_sharding")
ACTIVATION_KEY = ("micro_batch", "num_micro_batches", "tp", "pp", "cp", "vpp", "sequence_parallel", "recompute")
STATE_COLUMNS = (
    "params_per_gpu",
    "params_embedding_per_gpu",
    "params_attention_per_gpu",
    "params_mlp_per_gpu",
    "params_experts_per_gpu",
    "mem_weights_gib",
    "mem_grads_gib",
    "mem_optimizer_gib",
    "mem_states_gib",
    "mem_states_embedding_gib",
    "mem_fsdp_gather_gib",
)
ACTIVATION_COLUMNS = ("mem_activations_gib", "mem_logits_gib", "pp_inflight_micro_batches")


def _layer_activations(model, wl, c: TrainingLayout) -> dict[str, np.ndarray]:
    """Per-layer activation bytes of one micro-batch: the same on every stage, so computed once."""
    rc = c.recompute
    kw = dict(
        model=model,
        s=wl.seq_len,
        b=c.micro_batch,
        t=c.tp,
        cp=c.cp,
        sp=c.sequence_parallel,
        flash=wl.flash_attention,
    )
    fp8 = act.fp8_saved_inputs(wl)
    out = {
        "dense": act.layer_activation_bytes(recompute=rc, fp8_inputs=fp8, **kw),
        "working": act.layer_activation_bytes(recompute=np.zeros_like(rc), fp8_inputs=fp8, **kw),
    }
    if fp8 and wl.fp8_bf16_edge_layers:  # the layers kept in bf16 save bf16 inputs
        out["dense16"] = act.layer_activation_bytes(recompute=rc, **kw)
    kw["fp8_inputs"] = fp8
    if model.moe is not None:
        out["moe"] = act.layer_activation_bytes(recompute=rc, moe_layer=True, moe_imbalance=wl.moe_imbalance, **kw)
        out["moe_working"] = act.layer_activation_bytes(
            recompute=np.zeros_like(rc), moe_layer=True, moe_imbalance=wl.moe_imbalance, **kw
        )
    out["inflight_first"] = inflight_micro_batches(c.pp, np.ones_like(c.vpp), c.num_micro_batches, wl.schedule, "first")
    return out


def edge_layers_in(lo, hi, edge: int, L: int) -> np.ndarray:
    """Layers of [lo, hi) among the first and last `edge` of the model's L (the layers an fp8
    recipe keeps in bf16, Megatron-Core --first-last-layers-bf16), each counted once."""
    lo, hi = np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)
    head = np.clip(np.minimum(hi, edge) - lo, 0.0, None)
    tail = np.clip(hi - np.maximum(lo, L - edge), 0.0, None)
    both = np.clip(np.minimum(hi, edge) - np.maximum(lo, L - edge), 0.0, None)  # edge ranges overlap (2·edge > L)
    return head + tail - both


def _stage_states(model, wl, c: TrainingLayout, stage: str, per_param, host_per_param) -> dict[str, np.ndarray]:
    """Parameters, model states and FSDP gather buffers of one GPU of a candidate stage
    (STATE_KEY columns); `states_gather` = states + gather bytes, the stage's total without
    activations; host_per_param: (dense, expert) host bytes per parameter under optimizer
    offload, or None."""
    tp, cp, ep, dp, sh = c.tp, c.cp, c.ep, c.dp, c.dp_sharding
    weight_bytes = working_weight_bytes(wl)
    grad_bytes = GRAD_BYTES[wl.grad_reduce_dtype]
    _, n_layers, lo, has_emb, has_head = _stage_geometry(c, model.layers, stage)
    p = params_per_gpu(model, tp, ep, n_layers, lo, has_emb, has_head, expert_tp_size(tp, wl.expert_tp))
    st = model_states_bytes(p["dense"], p["experts"], sh, dp, cp, ep, weight_bytes, per_param, grad_bytes)
    emb_share = model_states_bytes(p["embedding"], 0.0, sh, dp, cp, ep, weight_bytes, per_param, grad_bytes)
    layer_params = (p["attention"] + p["mlp"] + p["experts"]) / n_layers
    gather = fsdp_gather_bytes(
        layer_params,
        sh,
        layers=n_layers,
        reshard_after_forward=wl.fsdp_reshard_after_forward,
        gather_bytes=param_gather_bytes(wl),
    )
    states = st["weights"] + st["grads"] + st["optimizer"]
    host = 0.0 * states
    if host_per_param is not None:
        host = p["dense"] * host_per_param[0] + p["experts"] * host_per_param[1]
    return {
        "mem_host_optimizer_gib": host / GIB,
        "params_per_gpu": p["total"],
        "params_embedding_per_gpu": p["embedding"],
        "params_attention_per_gpu": p["attention"],
        "params_mlp_per_gpu": p["mlp"],
        "params_experts_per_gpu": p["experts"],
        "mem_weights_gib": st["weights"] / GIB,
        "mem_grads_gib": st["grads"] / GIB,
        "mem_optimizer_gib": st["optimizer"] / GIB,
        "mem_states_gib": states / GIB,
        "mem_states_embedding_gib": sum(emb_share.values()) / GIB,
        "mem_fsdp_gather_gib": gather / GIB,
        "states_gather": states + gather,
    }


def _stage_activations(model, wl, c: TrainingLayout, stage: str, acts: dict) -> dict[str, np.ndarray]:
    """Activation bytes one GPU of a candidate stage holds (ACTIVATION_KEY columns)."""
    tp, pp, cp = c.tp, c.pp, c.cp
    b, m, vpp = c.micro_batch, c.num_micro_batches, c.vpp
    sp, rc = c.sequence_parallel, c.recompute
    rank, n_layers, lo, has_emb, has_head = _stage_geometry(c, model.layers, stage)
    n_moe = moe_layers_in_range(model, lo, lo + n_layers)
    n_dense = n_layers - n_moe
    # activation offload (cost/offload.py; dense models only, specs/run.py): the stage's first
    # layers' saved activations go to host, but for the one layer in flight
    n_off = offloaded_layers(wl.activation_offload_layers, n_layers)
    per_mb = (n_dense - n_off) * acts["dense"]
    off_bytes = n_off * acts["dense"]  # the offloaded layers' saved bytes
    resident = acts["dense"]
    if "dense16" in acts:  # fp8 recipe with bf16 edge layers: those save bf16 inputs
        edge = wl.fp8_bf16_edge_layers
        n16 = np.minimum(edge_layers_in(lo, lo + n_layers, edge, model.layers), n_dense)
        n16_off = np.minimum(edge_layers_in(lo, lo + n_off, edge, model.layers), n16)
        extra = acts["dense16"] - acts["dense"]
        per_mb = per_mb + (n16 - n16_off) * extra
        off_bytes = off_bytes + n16_off * extra
        resident = np.where(n16_off > 0, acts["dense16"], acts["dense"])
    working = acts["working"]
    if model.moe is not None:
        per_mb = per_mb + n_moe * acts["moe"]
        working = np.where(n_moe > 0, np.maximum(working, acts["moe_working"]), working)
    inflight = inflight_micro_batches(pp, vpp, m, wl.schedule, rank)
    layers_bytes = per_mb * inflight
    host = off_bytes * inflight
    layers_bytes = layers_bytes + resident_offloaded_layers(n_off) * resident
    # Full recompute rebuilds one layer's activations at a time during backward.
    layers_bytes = layers_bytes + np.where(rc == act.FULL, working, 0.0)

    extra = act.stage_extra_bytes(model, wl.seq_len, b, tp, cp, sp, has_emb, has_head, acts["inflight_first"])
    logits = np.where(has_head, act.logits_bytes(model, wl.seq_len, b, tp, cp), 0.0)
    activations = layers_bytes + extra + logits
    return {
        "mem_activations_gib": activations / GIB,
        "mem_logits_gib": logits / GIB,
        "pp_inflight_micro_batches": inflight,
        "mem_host_offload_gib": host / GIB,
        "activations": activations,
    }


def _states_of_stages(c: TrainingLayout, model, wl) -> dict[str, dict[str, np.ndarray]]:
    per_param = group_bytes_per_param(
        c.dp_sharding,
        dp_shard_ranks(c.dp, c.dp_sharding, wl.dp_shard_size),
        c.cp,
        c.ep,
        working_weight_bytes(wl),
        GRAD_BYTES[wl.grad_reduce_dtype],
        wl.dp_grad_reduce,
        MOMENT_BYTES[wl.optimizer_moments_dtype],
        c.tp,
        expert_tp_size(c.tp, wl.expert_tp),
    )
    host = None
    if wl.optimizer_offload:  # master weights and moments on the host (cost/states.py)
        per_param = tuple(offloaded_device_bytes(x, c.dp_sharding, wl.param_offload) for x in per_param)
        dp_s = dp_shard_ranks(c.dp, c.dp_sharding, wl.dp_shard_size)
        groups = (dense_dp_size(dp_s, c.cp), expert_dp_size(dp_s, c.cp, c.ep, c.tp, expert_tp_size(c.tp, wl.expert_tp)))
        moments = MOMENT_BYTES[wl.optimizer_moments_dtype]
        host = tuple(host_optimizer_bytes_per_param(c.dp_sharding, n, moments, wl.param_offload) for n in groups)
    return {st: _stage_states(model, wl, c, st, per_param, host) for st in MEM_STAGES}


def _activations_of_stages(c: TrainingLayout, model, wl) -> dict[str, dict[str, np.ndarray]]:
    acts = _layer_activations(model, wl, c)
    return {st: _stage_activations(model, wl, c, st, acts) for st in MEM_STAGES}


def training_memory(
    cols: TrainingLayout | Mapping[str, np.ndarray], model: ModelSpec, hw: AcceleratorSpec, wl: TrainWorkload
) -> dict[str, np.ndarray]:
    """Memory columns of the most-loaded stage for every layout row.

    Per stage: total = (states + gather + activations) / GiB, the first two per distinct
    STATE_KEY, the last per distinct ACTIVATION_KEY; every other column is the chosen stage's
    entry of one of the two tables."""
    return dict(memory_columns(cols, model, hw, wl))


def memory_columns(
    cols: TrainingLayout | Mapping[str, np.ndarray], model: ModelSpec, hw: AcceleratorSpec, wl: TrainWorkload
) -> "MemoryColumns":
    """`training_memory`'s columns, those gathered from the per-key tables built when read (or
    only at the rows asked for: `MemoryColumns.at`)."""
    cols = TrainingLayout.of(cols)
    states, K_s, inv_s = per_key(_states_of_stages, STATE_KEY, cols, model, wl)
    acts, K_a, inv_a = per_key(_activations_of_stages, ACTIVATION_KEY, cols, model, wl)
    total = [
        (gather(states[st]["states_gather"], inv_s) + gather(acts[st]["activations"], inv_a)) / GIB for st in MEM_STAGES
    ]
    middle = np.where(cols.pp >= 3, total[1], -np.inf)  # pp <= 2: no middle stage
    # ties keep the first stage (np.argmax over the stacked totals, without the strided stack)
    pick = argmax3(total[0], middle, total[2])
    at_s, at_a = pick * K_s + inv_s, pick * K_a + inv_a  # the chosen stage's entry in `stacked`
    tables = {k: (stacked(states, K_s, k, MEM_STAGES), at_s) for k in STATE_COLUMNS}
    tables.update({k: (stacked(acts, K_a, k, MEM_STAGES), at_a) for k in ACTIVATION_COLUMNS})
    out: dict[str, np.ndarray] = {}
    # np.where chains pick the same values as np.choose(pick, ...) about 5x faster
    on1, on2 = pick == MemStage.SECOND, pick == MemStage.LAST
    out["mem_total_gib"] = np.where(on2, total[2], np.where(on1, total[1], total[0]))
    out["mem_stage"] = pick.astype(np.int8)  # code into MEM_STAGES
    out["hbm_usable_gib"] = np.full(len(pick), hw.hbm_usable_gib)
    out["mem_headroom_gib"] = hw.hbm_usable_gib - out["mem_total_gib"]
    out["fits"] = out["mem_headroom_gib"] >= 0
    host: float | np.ndarray = 0.0
    if wl.activation_offload_layers:  # the offloaded activations must fit the host's memory too
        out["mem_host_offload_gib"] = stacked(acts, K_a, "mem_host_offload_gib", MEM_STAGES)[at_a]
        host = host + out["mem_host_offload_gib"]
    if wl.optimizer_offload:  # and the offloaded optimizer states
        out["mem_host_optimizer_gib"] = stacked(states, K_s, "mem_host_optimizer_gib", MEM_STAGES)[at_s]
        host = host + out["mem_host_optimizer_gib"]
    if (wl.activation_offload_layers or wl.optimizer_offload) and hw.host_memory_gib is not None:
        out["fits"] = out["fits"] & (host <= hw.host_memory_gib)
    return MemoryColumns(tables, out)


class MemoryColumns(Mapping):
    """Memory columns of layout rows in `training_memory`'s order: the chosen stage's entries of
    the per-key tables (`tables`: {name: (table, entry of each row)}), each gathered when first
    read, then the columns computed on every row (`rows`: total, stage, headroom, fits, host).
    A search that keeps few of its rows reads the table columns only at those rows (`at`): a
    row's value is its entry either way."""

    def __init__(self, tables: dict, rows: dict):
        self.tables, self.rows = tables, rows
        self.read: dict[str, np.ndarray] = {}

    def __getitem__(self, name: str) -> np.ndarray:
        if name in self.rows:
            return self.rows[name]
        if name not in self.read:
            table, at = self.tables[name]  # KeyError: not a memory column
            self.read[name] = gather(table, at)
        return self.read[name]

    def __iter__(self):
        return iter([*self.tables, *self.rows])

    def __contains__(self, name) -> bool:  # without building the column (Mapping's reads it)
        return name in self.rows or name in self.tables

    def __len__(self) -> int:
        return len(self.tables) + len(self.rows)

    def at(self, rows: np.ndarray) -> dict[str, np.ndarray]:
        """The columns at `rows` (indices), in order."""
        entries: dict[int, np.ndarray] = {}  # the tables share two entry arrays (states', activations')
        out = {}
        for k, (table, at) in self.tables.items():
            if id(at) not in entries:
                entries[id(at)] = gather(at, rows)
            out[k] = gather(table, entries[id(at)])
        out.update({k: gather(v, rows) for k, v in self.rows.items()})
        return out

    def to_check(self) -> Mapping[str, np.ndarray]:
        """The columns whose finiteness stands for all of them (search/chunks.py check_finite):
        where every entry of every table is finite, the columns computed on every row (a gathered
        column holds table entries only); else all of them, so the check names the same column
        and counts as on the whole table."""
        if all(t.dtype.kind != "f" or np.isfinite(t).all() for t, _ in self.tables.values()):
            return self.rows
        return self
