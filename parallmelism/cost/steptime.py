"""Training step time: roofline compute per stage, exposed communication, pipeline schedule.

For each pipeline stage kind (first: embedding; middle; last: output head and loss; one stage
when pp = 1) with its layer count (`grid.stage_layer_split`):
  per micro-batch   T_mb = Σ ops (fwd + bwd + recompute fwd)           [flops.py, roofline.py]
                         + exposed TP + CP + EP time                      [comm.py]
  per stage         m·T_mb + exposed DP + optimizer step (Adam bytes ÷ HBM)
  step              max over stages + bubble + exposed PP send/recv
  bubble            rate·m·T_mb(typical stage) + fill/drain P2P hops, rate = (p−1)/(v·m)
                    (1F1B, interleaved), (p−1)/m (GPipe), (p−1)/(3m) (ZB-H1)  [pipeline.py]
which is m·T_mb(slowest) + (p−1)/v·T_mb(middle) for 1F1B: the steady state runs at the slowest
stage's pace (the last stage with the output head, or a fuller middle stage), warm-up and
cool-down pass through the other stages at a middle stage's pace.

Columns (per row): time_* in seconds; `flops_model_per_step` and `flops_hardware_per_step` are
whole-job totals in the non-causal convention (flops.py); `tflops_per_gpu` = model FLOPs ÷
(time·ngpus) (Megatron's throughput convention); `mfu` and `hfu` divide model and hardware
FLOP/s per GPU by the dense peak of the workload precision (fp8: the fp8 peak), `mfu_bf16_peak`
by the bf16 peak;
`hbm_bytes_per_step` and `arithmetic_intensity` (executed FLOPs ÷ HBM bytes) are per GPU of the
critical stage; `bound` names the largest of: compute-bound op time, memory-bound op time,
exposed communication, bubble.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Mapping

import numpy as np

from .comm import (
    cp_layer_times_s,
    dp_step_times_s,
    ep_layer_time_s,
    fsdp_gather_passes,
    hsdp_replica_reduce_s,
    pp_hop_s,
    tp_layer_nic_s,
    tp_layer_times_s,
)
from .links import axes_on_scale_out, axis_spans, bind_rows, hidden_on_link, link_busy_s, scale_up_port_share
from .flops import (
    embedding_ops,
    hardware_flops_per_step,
    head_ops,
    layer_ops,
    model_flops_per_step,
    moe_layer_counts,
    optimizer_bytes_per_param,
)
from .params import params_per_gpu
from .activations import fp8_saved_inputs, layer_activation_bytes
from .offload import host_ranks, offload_exposed_s, offloaded_layers, optimizer_offload_s, param_fetch_s
from .ops import MEMORY
from .overheads import (
    dp_contention_s,
    micro_batch_overhead_s,
    moe_layer_overhead_s,
    step_overhead_s,
    straggler_doublings,
)
from .pipeline import bubble_rate, fill_drain_stage_s, pp_times_s, training_bubble_s
from .roofline import LOW_PRECISION_BYTES, Rates, training_ops_times, training_ops_variants
from .keys import gather, per_key, stacked, to_shape
from .select import argmax3, argmax4
from .shapes import dense_dp_size, dp_shard_ranks, expert_dp_size, expert_tp_size, experts_per_rank, tokens_per_rank
from .states import (
    FS,
    GRAD_BYTES,
    MOMENT_BYTES,
    NO_OP,
    optimizer_weight_bytes,
    param_gather_bytes,
    reduces_every_micro_batch,
)
from ..specs import Recompute
from .layout import TrainingLayout

NONE, FULL, SELECTIVE = int(Recompute.NONE), int(Recompute.FULL), int(Recompute.SELECTIVE)
AXES = ("tp", "cp", "ep", "dp", "pp")


def ops_time(ops, times, recompute):
    """Sum over ops of one micro-batch: seconds fwd, bwd, recompute, plus what overlap and `bound` need
    (core_first_*: the attention core's first p2p ring step, the window of the first hop), and one
    weight cast of the fp8/fp4 GEMMs (cast seconds, cast_bytes; cast_colpar: of the column-parallel
    ones), which `_with_weight_casts` places in the micro-batch.
    times: `roofline.training_ops_times` of each op, on the same rows."""
    full = recompute == FULL
    sel = recompute == SELECTIVE
    acc: dict[str, np.ndarray | float] = dict(
        fwd=0.0,
        bwd=0.0,
        rc=0.0,
        gemm=0.0,
        colpar_bwd=0.0,
        core_fwd=0.0,
        core_bwd=0.0,
        core_first_fwd=0.0,
        core_first_bwd=0.0,
        cbound=0.0,
        mbound=0.0,
        flops=0.0,
        bytes=0.0,
        cast=0.0,
        cast_bytes=0.0,
        cast_colpar=0.0,
        low_experts=0.0,
    )
    for op, (f, b, cb, first_f, first_b, cast, cast_bytes, low) in zip(ops, times):
        rc_on = full | sel if op.selective else full
        rc = np.where(rc_on, f, 0.0)
        tot = f + b + rc
        acc["fwd"] = acc["fwd"] + f
        acc["bwd"] = acc["bwd"] + b
        acc["rc"] = acc["rc"] + rc
        if op.attention_core:
            acc["core_fwd"] = acc["core_fwd"] + f
            acc["core_bwd"] = acc["core_bwd"] + b
            acc["core_first_fwd"] = acc["core_first_fwd"] + first_f
            acc["core_first_bwd"] = acc["core_first_bwd"] + first_b
        elif op.dim is not None:
            acc["gemm"] = acc["gemm"] + tot
            if op.column_parallel:  # its backward hides the TP input-grad collectives
                acc["colpar_bwd"] = acc["colpar_bwd"] + b
        acc["cbound"] = acc["cbound"] + np.where(cb, tot, 0.0)
        acc["mbound"] = acc["mbound"] + np.where(cb, 0.0, tot)
        n_f = 1.0 + np.where(rc_on, 1.0, 0.0)
        acc["flops"] = acc["flops"] + np.asarray(op.flops) * (n_f + op.bwd_flops)
        acc["bytes"] = acc["bytes"] + np.asarray(op.bytes) * n_f + op.backward_bytes()
        acc["cast"] = acc["cast"] + cast
        acc["cast_bytes"] = acc["cast_bytes"] + cast_bytes
        if op.column_parallel:
            acc["cast_colpar"] = acc["cast_colpar"] + cast
        if op.rank_experts is not None:  # 1 where the grouped expert GEMMs run in fp8/fp4
            acc["low_experts"] = np.maximum(acc["low_experts"], np.asarray(low, dtype=np.float64))
    return acc


def weight_casts_per_micro_batch(cols: TrainingLayout, wl):
    """(forward, backward) fp8/fp4 weight casts per micro-batch, or None where there are none
    (bf16, or fp8 parameters: `workload.fp8_param_gather`). A rank that keeps its weights casts
    them once per step, in the first micro-batch (Transformer Engine caches the copies, Megatron's
    `is_first_microbatch`): 1/m per micro-batch. Under FULLY_SHARD each use gathers bf16 weights
    afresh: a cast in every forward, and in every backward too when they are resharded after
    forward (`workload.fsdp_reshard_after_forward`)."""
    if not casts_weights(wl):
        return None
    fully = np.asarray(cols.dp_sharding) == FS
    m = np.asarray(cols.num_micro_batches, dtype=np.float64)
    return np.where(fully, 1.0, 1.0 / m), np.where(fully & wl.fsdp_reshard_after_forward, 1.0, 0.0)


def casts_weights(wl) -> bool:
    """Whether the workload's low-precision GEMMs cast their weights (`weight_casts_per_micro_batch`)."""
    return wl.precision in LOW_PRECISION_BYTES and not wl.fp8_param_gather


# The op sets chosen for a weight cast in backward as well (FULLY_SHARD rows), by this suffix.
RECAST = "|recast"


def recasts_in_backward(wl) -> bool:
    """Whether FULLY_SHARD rows cast their weights in backward too, so the choice of fp8 GEMMs
    (`roofline.training_ops_variants`) is made for that as well."""
    return casts_weights(wl) and wl.fsdp_reshard_after_forward and wl.low_precision_gemms == "where_faster"


def _with_weight_casts(acc, casts):
    """A layer's micro-batch sums (`ops_time`) with its GEMMs' weight casts in their forward and
    backward (`weight_casts_per_micro_batch`): in compute, in the GEMM windows that hide TP
    collectives, and as memory-bound time."""
    f, b = casts
    out = dict(acc)
    out["fwd"] = acc["fwd"] + acc["cast"] * f
    out["bwd"] = acc["bwd"] + acc["cast"] * b
    out["gemm"] = acc["gemm"] + acc["cast"] * (f + b)
    out["colpar_bwd"] = acc["colpar_bwd"] + acc["cast_colpar"] * b
    out["mbound"] = acc["mbound"] + acc["cast"] * (f + b)
    out["bytes"] = acc["bytes"] + acc["cast_bytes"] * (f + b)
    return out


def _combine(parts, keys=None):
    """Σ count·acc over (count, acc) pairs, for `keys` (default: every key of the accs)."""
    out: dict[str, np.ndarray | float] = {}
    for count, acc in parts:
        for k in acc if keys is None else keys:
            out[k] = out.get(k, 0.0) + count * acc[k]
    return out


# the sums a stage needs from its ops (`ops_time`): the GEMM and attention-core sums only size
# each layer's overlap windows (`layer_comm`)
STAGE_OP_SUMS = ("fwd", "bwd", "rc", "cbound", "mbound", "flops", "bytes")


def training_time(
    cols: TrainingLayout | Mapping[str, np.ndarray], model, hw, wl, kernels, ops_table: "ShapeOpSums | None" = None
) -> dict[str, np.ndarray]:
    """Step-time columns for every layout row (module docstring); `kernels`: the accelerator's
    cost.kernels.KernelModel (config.kernel_tables.kernel_model(hw)); ops_table: op sums already
    evaluated for these rows' shapes (`ShapeOpSums`), or None."""
    return _training_time(TrainingLayout.of(cols), model, hw, wl, kernels, ops_table)[0]


STAGES = ("first", "middle", "last")
STAGE_MB_KEYS = (
    "compute_mb",
    "t_mb",
    "fwd",
    "bwd_rc",
    "cbound",
    "mbound",
    "flops",
    "bytes",
    "tp",
    "tp_exp",
    "tp_nic",
    "cp",
    "cp_exp",
    "ep",
    "ep_exp",
    "overhead_mb",
    "offload_mb",
)


def _stage_layout(cols: TrainingLayout, L):
    first_n = np.asarray(cols.layers_first_stage, dtype=np.int64)
    mid_n = np.asarray(cols.layers_per_stage, dtype=np.int64)
    last_n = np.asarray(cols.layers_last_stage, dtype=np.int64)
    single = np.asarray(cols.pp) == 1
    return {
        "first": (first_n, np.zeros_like(first_n), np.ones_like(single), single),
        "middle": (mid_n, first_n, np.zeros_like(single), np.zeros_like(single)),
        "last": (last_n, L - last_n, single, np.ones_like(single)),
    }


# An op's shape, hence its kernel time, depends on these columns alone (`layer_ops`, `head_ops`,
# `embedding_ops`): op times are evaluated once per distinct shape key and gathered.
SHAPE_KEY = ("micro_batch", "tp", "cp", "sequence_parallel")


def shape_key(model) -> tuple:
    """SHAPE_KEY, and ep for a MoE model (its experts' weights per GPU)."""
    return SHAPE_KEY + (("ep",) if model.is_moe else ())


def _op_sets(cols: TrainingLayout, model, wl) -> dict[str, list]:
    """The ops of one micro-batch on these rows: a dense layer, a MoE layer, the head, the embedding."""
    tp, cp = (np.asarray(x, dtype=np.float64) for x in (cols.tp, cols.cp))
    b = np.asarray(cols.micro_batch, dtype=np.float64)
    sp = np.asarray(cols.sequence_parallel, dtype=bool)
    s = wl.seq_len
    kw = dict(
        model=model,
        s=s,
        b=b,
        t=tp,
        cp=cp,
        sp=sp,
        flash=wl.flash_attention,
        cp_comm_type=wl.cp_comm_type,
        cp_implementation=wl.cp_implementation or "transformer_engine",
    )
    sets = {
        "dense": layer_ops(**kw),
        "head": head_ops(model, s, b, tp, cp, sp),
        "emb": embedding_ops(model, s, b, tp, cp, sp),
    }
    if model.is_moe:
        ep = np.asarray(cols.ep, dtype=np.float64)
        etp = None if wl.expert_tp is None else expert_tp_size(tp, wl.expert_tp)
        sets["moe"] = layer_ops(
            moe_layer=True,
            moe_imbalance=wl.moe_imbalance,
            ep=ep,
            etp=etp,
            permute_fusion=wl.moe_permute_fusion,
            **kw,
        )
    unfused = getattr(wl, "unfused_elementwise", None) or {}
    if unfused:
        sets = {name: [eager(op, unfused) for op in ops] for name, ops in sets.items()}
    return sets


def eager(op, unfused: dict):
    """An element-wise op as a stack runs it without torch.compile: its HBM bytes (forward and
    backward) times the bytes of its eager kernels over the fused op's (specs StackKernels.
    unfused_elementwise: an eager RMSNorm upcasts to fp32 and makes seven passes, RoPE's rotate_half
    five, SwiGLU's silu and mul two); other ops unchanged."""
    factor = unfused.get(op.name)
    if factor is None or op.kind != MEMORY:
        return op
    bwd = None if op.bwd_bytes_abs is None else factor * np.asarray(op.bwd_bytes_abs)
    return dataclasses.replace(op, other_bytes=factor * np.asarray(op.other_bytes), bwd_bytes_abs=bwd)


def _op_times_of_sets(sets: dict[str, list], rates, wl, edge: int) -> dict[str, list]:
    """`roofline.training_ops_times` of every op of `sets` (`_op_sets`); NAME|recast: the same ops
    with the fp8 GEMMs chosen for a weight cast in backward too (`recasts_in_backward`); "dense16":
    the dense layer in bf16 when fp8/fp4 recipes keep `edge` layers in bf16."""
    # one `ops_times` call for every set: the kernel model's fixed cost per call is paid once
    variants = (False, True) if recasts_in_backward(wl) else (False,)
    every = training_ops_variants([op for ops in sets.values() for op in ops], rates, wl, variants)
    out = {}
    for variant in variants:
        times = iter(every[variant])
        out.update({name + (RECAST if variant else ""): [next(times) for _ in ops] for name, ops in sets.items()})
    if edge:
        out["dense16"] = training_ops_times(sets["dense"], rates.at_precision("bf16"), wl)
    return out


# An op set's sums over one micro-batch (`ops_time`) depend on its ops' shapes and the recompute
# choice alone: evaluated once per distinct shape key for every recompute mode (axis 0, at the
# Recompute code: codes are 0..n-1) and gathered at (recompute, shape key).
RECOMPUTE_MODES = np.arange(len(Recompute))[:, None]


def _ops_sums(cols: TrainingLayout, model, hw, wl, rates, edge: int) -> dict[str, dict]:
    """`ops_time` of each op set of `_op_times_of_sets` (shape_key columns): the sums that depend
    on the recompute mode as (mode, key) arrays (RECOMPUTE_MODES), the others per key; the head
    and the embedding are not recomputed."""
    sets = _op_sets(cols, model, wl)
    times = _op_times_of_sets(sets, rates, wl, edge)
    sets.update({name + RECAST: ops for name, ops in list(sets.items())})  # the same ops (`recasts_in_backward`)
    sets["dense16"] = sets["dense"]  # the same ops, in bf16 (when `edge`)
    return {
        name: ops_time(sets[name], t, NONE if name.removesuffix(RECAST) in ("head", "emb") else RECOMPUTE_MODES)
        for name, t in times.items()
    }


@dataclass(frozen=True)
class ShapeOpSums:
    """`_ops_sums` of some distinct shape keys, for later calls on rows among them: the bound
    (cost/step_bound.py) evaluates every shape key of a call, and search/bounded.py then times the
    call's rows in batches; a batch whose keys are all in the table gathers their sums instead of
    evaluating them again (the same numbers: a key's sums depend on its own columns alone).
    Values: as `_ops_sums` gives them, arrays with the key on their last axis, scalars as they are."""

    columns: tuple  # the shape key's columns
    dims: tuple  # per column, one more than its largest value among the keys
    codes: np.ndarray  # np.ravel_multi_index of the keys, ascending
    at: np.ndarray  # each code's key (index on the values' last axis)
    sums: dict
    edge: int

    @classmethod
    def of(cls, cols: TrainingLayout, model, sums: dict, edge: int) -> "ShapeOpSums":
        """The table of `sums` = `_ops_sums(cols, ...)` on distinct shape-key rows `cols`."""
        columns = shape_key(model)
        values = [np.asarray(cols.column(c), dtype=np.int64) for c in columns]
        dims = tuple(int(v.max(initial=0)) + 1 for v in values)
        codes = np.ravel_multi_index(values, dims) if len(values[0]) else np.zeros(0, dtype=np.int64)
        order = np.argsort(codes, kind="stable")
        return cls(columns, dims, codes[order], order, sums, edge)

    def keys_of(self, cols: TrainingLayout) -> np.ndarray | None:
        """Each row's key in the table, or None when a row's key is not in it."""
        values = [np.asarray(cols.column(c), dtype=np.int64) for c in self.columns]
        if any(((v < 0) | (v >= d)).any() for v, d in zip(values, self.dims)) or not len(self.codes):
            return None
        codes = np.ravel_multi_index(values, self.dims)
        pos = np.minimum(np.searchsorted(self.codes, codes), len(self.codes) - 1)
        if not (self.codes[pos] == codes).all():
            return None
        return self.at[pos]

    def sums_of(self, cols: TrainingLayout, model, hw, wl, rates, edge: int) -> dict[str, dict]:
        """`_ops_sums(cols, ...)`: gathered from the table when every key of `cols` is in it."""
        keys = self.keys_of(cols) if edge == self.edge else None
        if keys is None:
            return _ops_sums(cols, model, hw, wl, rates, edge)
        return {
            name: {k: v if np.ndim(v) == 0 else np.take(v, keys, axis=-1) for k, v in acc.items()}
            for name, acc in self.sums.items()
        }


def _ops_sums_at_rows(cols: TrainingLayout, model, hw, wl, rates, edge: int) -> dict[str, dict]:
    """`_ops_sums` of every row: per shape key, gathered at the row's key (and recompute mode);
    from `rates.ops_table` (`ShapeOpSums`) where it holds the keys."""
    table = rates.ops_table
    sums = _ops_sums if table is None else table.sums_of
    by_key, K, at = per_key(sums, shape_key(model), cols, model, hw, wl, rates, edge)
    at_rows = per_key_at_rows(cols, K, at)
    return {name: {k: at_rows(v) for k, v in acc.items()} for name, acc in by_key.items()}


def per_key_at_rows(cols: TrainingLayout, K: int, at: np.ndarray):
    """A function taking a value per shape key (`_ops_sums`' kind: (recompute mode, key), (key,) or
    a scalar) to the rows of `cols`, whose keys are `at` among K: the row's recompute mode's entry
    of its key, its key's entry, or the scalar as it is."""
    at_mode = np.asarray(cols.recompute, dtype=np.int64) * K + at
    n_modes = len(RECOMPUTE_MODES)

    def at_rows(v):
        if np.ndim(v) == 0:
            return v
        if np.ndim(v) == 2:  # (mode, key)
            return gather(np.broadcast_to(v, (n_modes, K)).ravel(), at_mode)
        return gather(to_shape(v, (K,)), at)

    return at_rows


def bf16_edge_layers(wl) -> int:
    """Layers at each end an fp8/fp4 recipe keeps in bf16 (Megatron-Core --first-last-layers-bf16;
    `workload.fp8_bf16_edge_layers`): dense layers on the first and last stage. 0 in bf16."""
    return wl.fp8_bf16_edge_layers if wl.precision in ("fp8", "fp4") else 0


# The op sets of a transformer layer (`_op_sets`; "dense16": a dense layer kept in bf16): they are
# recomputed and issue the per-layer TP, CP and EP collectives. The embedding and head are neither.
LAYER_SETS = ("dense", "dense16", "moe")


def stage_op_counts(cols: TrainingLayout, model, edge: int) -> dict[str, list[tuple[str, np.ndarray]]]:
    """Per stage kind (`_stage_layout`), the op sets one micro-batch runs on it, as (set name,
    count) pairs: dense layers (flops.moe_layer_counts), of which the `edge` layers at each end of
    the model are "dense16" on the first and last stage (`bf16_edge_layers`), the embedding, the
    head, and MoE layers. The step time sums count x set over these pairs (`_micro_batch_terms`)
    and `show` lists the same ops (cost/breakdown.py): one list, so the two cannot disagree."""
    out = {}
    for name, (n_layers, lo, has_emb, has_head) in _stage_layout(cols, model.layers).items():
        n_dense, n_moe = moe_layer_counts(model, lo, n_layers)
        emb, head = np.where(has_emb, 1.0, 0.0), np.where(has_head, 1.0, 0.0)
        parts: list[tuple[str, np.ndarray]] = [("dense", n_dense), ("emb", emb), ("head", head)]
        if edge:
            n_edge = np.minimum(n_dense, edge * (emb + head))
            parts[0] = ("dense", n_dense - n_edge)
            parts.append(("dense16", n_edge))
        if model.is_moe:
            parts.append(("moe", n_moe))
        out[name] = parts
    return out


def stage_ops(cols: TrainingLayout, model, hw, wl, rates, stage: str) -> list[tuple[str, np.ndarray, list, list]]:
    """The op list the step time sums on `stage` for these rows: (set name, count on the stage,
    ops of one micro-batch, their `roofline.training_ops_times`), the times chosen as the step
    time chooses them (FULLY_SHARD rows: the ops picked for a weight cast in backward too,
    `recasts_in_backward`; the bf16 edge layers at bf16). Each op's seconds per micro-batch are
    fwd + cast·f, bwd + cast·b, and its forward again where recomputed (`ops_time`,
    `_with_weight_casts`, `weight_casts_per_micro_batch`)."""
    edge = bf16_edge_layers(wl)
    sets = _op_sets(cols, model, wl)
    times = _op_times_of_sets(sets, rates, wl, edge)
    if edge:
        sets["dense16"] = sets["dense"]
    fs = np.asarray(cols.dp_sharding) == FS
    out = []
    for name, count in stage_op_counts(cols, model, edge)[stage]:
        chosen = times[name]
        if name + RECAST in times:
            chosen = [tuple(np.where(fs, r, t) for r, t in zip(rt, tt)) for rt, tt in zip(times[name + RECAST], chosen)]
        out.append((name, count, sets[name], chosen))
    return out


def layer_comm(cols: TrainingLayout, acc, is_moe: bool, model, hw, wl) -> dict:
    """A layer's TP, CP and EP link and exposed seconds per micro-batch, and TP's NIC seconds, on
    these rows; acc: the layer's op sums on them (`ops_time`), which size the overlap windows."""
    tp, cp, ep = (np.asarray(x, dtype=np.float64) for x in (cols.tp, cols.cp, cols.ep))
    b = np.asarray(cols.micro_batch, dtype=np.float64)
    sp = np.asarray(cols.sequence_parallel, dtype=bool)
    rc = np.asarray(cols.recompute)
    s = wl.seq_len
    full = rc == FULL
    T = tokens_per_rank(s, b, cp)
    etp = None if wl.expert_tp is None else expert_tp_size(tp, wl.expert_tp)
    tp_layer, tp_exp = tp_layer_times_s(hw, model, T, tp, sp, full, acc["colpar_bwd"], acc["gemm"], wl.hides("tp"))
    cp_link, cp_exp = cp_layer_times_s(
        hw,
        model,
        s,
        b,
        tp,
        cp,
        (acc["core_fwd"], acc["core_first_fwd"]),
        (acc["core_bwd"], acc["core_first_bwd"]),
        rc != NONE,
        wl.cp_comm_type,
        wl.cp_implementation or "transformer_engine",
    )
    ep_link, ep_tp = (
        ep_layer_time_s(hw, model, T, tp, ep, wl.moe_imbalance, full, sp, wl.moe_dispatcher, etp)
        if is_moe
        else (0.0, 0.0)
    )
    tp_layer, tp_exp = tp_layer + ep_tp, tp_exp + ep_tp
    # the NIC's part (cost/links.py): a hierarchical all-reduce's inter-node phase, the rest whole
    tp_on_out = axes_on_scale_out(hw, tp, 1.0, 1.0, 1.0, 0.0)["tp"]
    tp_nic = tp_layer_nic_s(hw, model, T, tp, sp, full) + ep_tp * tp_on_out
    if wl.launch_blocking:  # nothing runs beside a kernel: the async backward TP and the CP ring wait too
        tp_exp, cp_exp = tp_layer, cp_link
    ep_exp = ep_link
    if wl.hides("ep"):
        # hidden under the other micro-batch in flight: its layer's compute and the TP and CP
        # collectives it waits on (on their own links), so the window shrinks no more than the layer
        ep_exp = np.maximum(0.0, ep_link - (acc["fwd"] + acc["bwd"] + acc["rc"] + tp_exp + cp_exp))
    return {
        "tp": tp_layer,
        "tp_exp": tp_exp,
        "tp_nic": tp_nic,
        "cp": cp_link,
        "cp_exp": cp_exp,
        "ep": ep_link,
        "ep_exp": ep_exp,
    }


def _layer_terms(cols: TrainingLayout, model, hw, wl, rates, edge: int) -> dict[str, dict]:
    """The op sums of every op set (`_ops_sums_at_rows`) and the TP/CP/EP seconds of every layer
    set (`layer_comm`) on these rows, without weight casts (`weight_casts_per_micro_batch`): then
    both are functions of the ops key (shape_key + recompute), and `_micro_batch_terms` evaluates
    them once per ops key (a dense model's layers repeat on every pp)."""
    sums = _ops_sums_at_rows(cols, model, hw, wl, rates, edge)
    comms = {name: layer_comm(cols, sums[name], name == "moe", model, hw, wl) for name in LAYER_SETS if name in sums}
    return {"sums": sums, "comms": comms}


def _micro_batch_terms(cols: TrainingLayout, model, hw, wl, rates):
    """Per stage kind, per micro-batch: compute and exposed TP/CP/EP seconds (STAGE_MB_KEYS)."""
    tp, ep = (np.asarray(x, dtype=np.float64) for x in (cols.tp, cols.ep))
    rc = np.asarray(cols.recompute)
    full = rc == FULL
    edge = bf16_edge_layers(wl)
    casts = weight_casts_per_micro_batch(cols, wl)
    if casts is None and not recasts_in_backward(wl):
        # the sums and collectives of a layer are functions of the ops key alone: once per ops key
        by_ops, _, at = per_key(_layer_terms, shape_key(model) + ("recompute",), cols, model, hw, wl, rates, edge)
        sums, comms = (
            {name: {k: v if np.ndim(v) == 0 else gather(v, at) for k, v in acc.items()} for name, acc in part.items()}
            for part in (by_ops["sums"], by_ops["comms"])
        )
    else:
        sums = _ops_sums_at_rows(cols, model, hw, wl, rates, edge)
        if recasts_in_backward(wl):  # FULLY_SHARD rows take the ops chosen for a cast in backward too
            recast = np.asarray(cols.dp_sharding) == FS
            sums = {
                name: {k: np.where(recast, sums[name + RECAST][k], v) for k, v in acc.items()}
                if name + RECAST in sums
                else acc
                for name, acc in sums.items()
                if not name.endswith(RECAST)
            }
        if casts is not None:
            sums = {name: _with_weight_casts(acc, casts) for name, acc in sums.items()}
        comms = {
            name: layer_comm(cols, sums[name], name == "moe", model, hw, wl) for name in LAYER_SETS if name in sums
        }
    dense, head, emb, moe = sums["dense"], sums["head"], sums["emb"], sums.get("moe")
    local_experts = experts_per_rank(model.require_moe().num_experts, ep) if model.is_moe else 0.0
    low_precision = wl.precision in LOW_PRECISION_BYTES

    accs = {"dense": dense, "emb": emb, "head": head, "moe": moe}
    if edge:
        accs["dense16"] = sums["dense16"]
    out = {}
    layout = _stage_layout(cols, model.layers)
    for name, set_counts in stage_op_counts(cols, model, edge).items():
        n_layers = layout[name][0]
        c = _combine([(n, accs[s]) for s, n in set_counts], STAGE_OP_SUMS)
        k = _combine([(n, comms[s]) for s, n in set_counts if s in LAYER_SETS])
        compute_mb = c["fwd"] + c["bwd"] + c["rc"]
        hidden = sum(k[ax] - k[ax + "_exp"] for ax in ("tp", "cp", "ep"))
        compiled = bool(getattr(wl, "compile", False))  # the layer's kernel count (cost/overheads.py)
        overhead_mb = micro_batch_overhead_s(hw, n_layers, hidden, compiled)  # named overheads
        if moe is not None:  # the MoE layers' per-expert launches behind the dispatcher's sync
            n_moe = sum((n for s_, n in set_counts if s_ == "moe"), np.zeros(()))
            low_experts = moe["low_experts"] if low_precision else 0.0  # where_faster may keep them bf16
            overhead_mb = overhead_mb + moe_layer_overhead_s(hw, n_moe, local_experts, low_experts, full)
        offload_mb = _offload_exposed_mb(cols, model, hw, wl, n_layers, dense)
        r = {
            "compute_mb": compute_mb,
            "t_mb": compute_mb + k["tp_exp"] + k["cp_exp"] + k["ep_exp"] + overhead_mb + offload_mb,
            "overhead_mb": overhead_mb,
            "offload_mb": offload_mb,
            "fwd": c["fwd"],
            "bwd_rc": c["bwd"] + c["rc"],
        }
        r.update({key: c[key] for key in ("cbound", "mbound", "flops", "bytes")})
        r.update({key: k[key] for key in ("tp", "tp_exp", "tp_nic", "cp", "cp_exp", "ep", "ep_exp")})
        out[name] = {key: to_shape(r[key], tp.shape) for key in STAGE_MB_KEYS}
    return out


def _offload_exposed_mb(cols: TrainingLayout, model, hw, wl, n_layers, dense):
    """Exposed activation-offload seconds per micro-batch of a stage of `n_layers` layers
    (cost/offload.py): its offloaded layers' saved activations (cost/activations.py) to host in
    forward and back in backward, each copy hidden under one dense layer's forward (`dense`:
    one layer's op sums) or backward with its recompute. 0 without offload."""
    if not wl.activation_offload_layers:
        return 0.0
    layer_bytes = layer_activation_bytes(
        model,
        wl.seq_len,
        cols.micro_batch,
        cols.tp,
        cols.cp,
        cols.sequence_parallel,
        cols.recompute,
        wl.flash_attention,
        fp8_inputs=fp8_saved_inputs(wl),
    )
    n_off = offloaded_layers(wl.activation_offload_layers, n_layers)
    return offload_exposed_s(layer_bytes, hw.host_link_gbps, dense["fwd"], dense["bwd"] + dense["rc"], n_off)


def _dp_terms(cols: TrainingLayout, model, hw, wl, rates, group: str | None = None):
    """Per stage kind, per step: DP link seconds by role (FSDP per micro-batch) and optimizer step.
    The three stage kinds go through one pass, their rows laid end to end (first, middle, last).
    group "dense" or "experts": the link seconds of that parameter group's DP group alone (`show`
    lists the two groups' collectives apart); None: both, as the step time takes them."""
    K = len(cols.tp)
    tp, cp, ep, dp = (np.tile(np.asarray(x, dtype=np.float64), 3) for x in (cols.tp, cols.cp, cols.ep, cols.dp))
    sh = np.tile(np.asarray(cols.dp_sharding), 3)
    full = np.tile(np.asarray(cols.recompute) == FULL, 3)
    layout = _stage_layout(cols, model.layers)
    n_layers, lo, has_emb, has_head = (
        np.concatenate([np.broadcast_to(layout[st][i], (K,)) for st in STAGES]) for i in range(4)
    )
    etp = None if wl.expert_tp is None else expert_tp_size(tp, wl.expert_tp)
    p = params_per_gpu(model, tp.astype(np.int64), ep.astype(np.int64), n_layers, lo, has_emb, has_head, etp)
    if group is not None:  # the other group's parameters reduce nothing
        p = {**p, ("experts" if group == "dense" else "dense"): 0.0 * p["dense"]}
    grad_bytes = GRAD_BYTES[wl.grad_reduce_dtype]
    units = n_layers + np.where(has_emb, 1.0, 0.0) + np.where(has_head, 1.0, 0.0)  # FSDP units of the stage
    dp_s = dp_shard_ranks(dp, sh, wl.dp_shard_size)  # the sharding group's DP ranks (HSDP: fewer)
    reduce, zero_gather, fsdp = dp_step_times_s(
        hw,
        p["dense"],
        p["experts"],
        sh,
        tp,
        cp,
        dp_s,
        ep,
        1.0,
        full,
        fsdp_units=units,
        bucket_params=wl.dp_bucket_params,
        gather_passes=fsdp_gather_passes(full, wl),
        grad_bytes=grad_bytes,
        param_bytes=param_gather_bytes(wl),
        etp=etp,
    )
    replica = (
        np.zeros_like(reduce)
        if wl.dp_shard_size is None
        else hsdp_replica_reduce_s(
            hw, p["dense"], p["experts"], sh, tp, cp, dp, dp_s, ep, units, grad_bytes, wl.dp_bucket_params, etp
        )
    )
    shard_d = np.where(sh == NO_OP, 1.0, dense_dp_size(dp_s, cp))
    shard_e = np.where(
        sh == NO_OP, 1.0, expert_dp_size(dp_s, cp, ep) if etp is None else expert_dp_size(dp_s, cp, ep, tp, etp)
    )
    shard_params = p["dense"] / shard_d + p["experts"] / shard_e  # the parameters this GPU's optimizer updates
    opt_bytes = (
        optimizer_bytes_per_param(optimizer_weight_bytes(wl), grad_bytes, MOMENT_BYTES[wl.optimizer_moments_dtype])
        * shard_params
    )
    if wl.optimizer_offload:  # the step runs on the host (cost/offload.py): nothing on the GPU
        opt_bytes = 0.0 * opt_bytes
    # gradient reductions per step: m where each micro-batch's gradients are reduced (cost/states.py)
    per_mb = reduces_every_micro_batch(sh, wl.dp_grad_reduce).astype(np.float64)
    terms = {
        "reduce": reduce + replica,
        "replica": replica,
        "shard_out": (axis_spans(tp, cp, dp_s, ep, 1)["dp"] > hw.scale_up.domain_size) & (hw.scale_out is not None),
        "reduce_per_mb": per_mb,
        "zero_gather": zero_gather,
        "fsdp_per_mb": fsdp,
        "opt_bytes": opt_bytes,
        "shard_params": shard_params,
    }
    if group is not None:  # what `show` needs to rebuild the group's collectives (cost/breakdown.py)
        terms.update(params=p[group], units=units, dp_shard=dp_s)
    terms = {k: to_shape(v, (3 * K,)) for k, v in terms.items()}
    return {st: {k: v[i * K : (i + 1) * K] for k, v in terms.items()} for i, st in enumerate(STAGES)}


def _column(x, shape) -> np.ndarray:
    """x as a float64 output column of `shape`: itself when it already is one (every caller hands
    a new array that no other column shares), else a copy."""
    if isinstance(x, np.ndarray) and x.shape == shape and x.dtype == np.float64 and x.flags.owndata:
        return x
    return np.array(np.broadcast_to(x, shape), dtype=np.float64)


# the DP terms a stage's step needs (_dp_terms), and hybrid sharding's link split
DP_ROW_KEYS = ("reduce", "reduce_per_mb", "zero_gather", "fsdp_per_mb", "opt")
HSDP_ROW_KEYS = ("replica", "shard_out")

# The micro-batch terms depend on LAYER_KEY, the DP terms on DP_KEY. A stage's step, all but its
# pipeline transfers, depends on their union STAGE_KEY (with num_micro_batches = global_batch /
# (dp·micro_batch) and the stage layer split, a function of pp): it is evaluated once per distinct
# STAGE_KEY and gathered. vpp, outside it, changes the pipeline transfers and the bubble alone.
LAYER_KEY = ("micro_batch", "tp", "cp", "sequence_parallel", "recompute", "ep", "pp")
DP_KEY = ("tp", "pp", "cp", "dp", "ep", "dp_sharding", "recompute")
STAGE_KEY = ("micro_batch", "tp", "cp", "sequence_parallel", "recompute", "ep", "pp", "dp", "dp_sharding")


def layer_key(wl) -> tuple:
    """LAYER_KEY, and the micro-batch count and DP sharding where GEMM weights are cast
    (`weight_casts_per_micro_batch`): both are functions of STAGE_KEY."""
    return LAYER_KEY + (("num_micro_batches", "dp_sharding") if casts_weights(wl) else ())


def _dp_reductions(d, m):
    """Gradient reductions per step: m where each micro-batch's gradients are reduced, else 1."""
    return np.where(d["reduce_per_mb"] > 0, m, 1.0)


def _dp_link_exposed(d, r, m, reductions, overlap: bool):
    """A stage's per-step DP link seconds (all roles) and exposed seconds from its DP terms `d`
    and micro-batch terms `r`. The gradient reduce hides under the backward of the micro-batches
    that issue it: the last one (per step), or each one (per micro-batch, m reductions)."""
    fsdp = d["fsdp_per_mb"] * m
    reduce = d["reduce"] * reductions
    link = reduce + d["zero_gather"] + fsdp
    if not overlap:
        return link, link
    # Each role hides under its own window (`dp_role_exposed_s`); together they share one link and
    # the stage's timeline, so at most m·T_mb of DP traffic hides in all, and at most T_mb of what
    # one micro-batch carries (`shared_micro_batch_exposed_s`).
    reduce_exp, gather_exp, fsdp_exp = dp_role_exposed_s(d, r, m, reductions)
    dp_exp = np.maximum(reduce_exp + gather_exp, shared_micro_batch_exposed_s(d, r, m, reductions)) + fsdp_exp
    return link, np.maximum(dp_exp, link - m * r["t_mb"])


def dp_role_exposed_s(d, r, m, reductions):
    """(gradient reduce, ZeRO parameter gather, FSDP gathers) exposed seconds per step of a stage,
    each under its own window, with overlap_dp_comm (`_dp_link_exposed`):

      ZeRO gather  all-gathers the updated parameters in the first micro-batch's forward, each bucket
                   before the layers that read it (Megatron-Core overlap_param_gather, ZeRO-1/2's
                   all-gather): window = T_mb − bwd_rc, that forward's compute plus what else holds
                   the micro-batch (`other`: exposed TP/CP/EP on their own links, launch overheads),
                   during which the NIC moves DP traffic too
      reduce       each bucket's reduce-scatter / all-reduce is issued once its gradients are ready in
                   the backward (Megatron-Core overlap_grad_reduce, DeepSpeed overlap_comm) and hides
                   under the rest of that micro-batch: window = T_mb − fwd per reduction
      FSDP         gathers and reduce-scatters per unit, prefetched: the stage's timeline m·T_mb

    Each window shrinks by no more than T_mb does (faster compute, fp8) and grows by no more than it
    (recompute). Both take the micro-batch's `other`: where one micro-batch carries both roles they
    share its T_mb (`shared_micro_batch_exposed_s`)."""
    other = r["t_mb"] - r["compute_mb"]
    timeline = m * r["t_mb"]
    return (
        np.maximum(0.0, d["reduce"] * reductions - reductions * (r["bwd_rc"] + other)),
        np.maximum(0.0, d["zero_gather"] - (r["fwd"] + other)),
        np.maximum(0.0, d["fsdp_per_mb"] * m - timeline),
    )


def shared_micro_batch_exposed_s(d, r, m, reductions):
    """The least the ZeRO gather and gradient reduce expose per step where the first micro-batch
    carries both (reduce every micro-batch, or m = 1): that micro-batch hides at most its T_mb of
    the two, gather + reduce − T_mb, and each of the other reductions exposes what its own window
    leaves, (reductions − 1)·max(0, reduce − (T_mb − fwd)). 0 where they fall in different
    micro-batches (one reduce per step, m > 1: the first micro-batch's forward, the last one's
    backward).

    Without it the two windows (`dp_role_exposed_s`) each took the micro-batch's whole non-compute
    time, so together they hid T_mb + other in it: work that lengthens only the backward also
    lengthened the gather's window. With comm_contention 0, full recompute came out faster than none
    (DeepSeek-V3, 64 A100-40GB, ZeRO-2, cp 2: 335.57 s against 335.88 s; its recomputed forward's
    MoE launches widened the forward's window by 0.30 s). With this bound a longer micro-batch
    hides at most what it adds, once per reduction: the step never shortens."""
    t = r["t_mb"]
    shared = reductions >= m
    rest = (reductions - 1.0) * np.maximum(0.0, d["reduce"] - (t - r["fwd"]))
    return np.where(shared, np.maximum(0.0, d["zero_gather"] + d["reduce"] - t) + rest, 0.0)


def _dp_nic_share(d, reductions, link, on_out_dp, hybrid: bool):
    """The DP axis's share on the NIC (cost/links.py): all of it when its group, or under hybrid
    sharding its shard group, leaves the domain; else the replica all-reduce's share when the
    replicas do; else none."""
    if not hybrid:
        return on_out_dp
    replica = d["replica"] * reductions
    split = np.where(link > 0, replica / np.where(link > 0, link, 1.0), 0.0)
    return np.where(d["shard_out"] > 0, 1.0, np.where(on_out_dp > 0, split, 0.0))


def _stage_terms(cols: TrainingLayout, model, hw, wl, rates):
    """Per stage kind, per step, everything but the pipeline transfers (STAGE_KEY columns):
      total       m·T_mb + exposed DP + optimizer step
      busy_<link> link seconds of the TP, CP, EP and DP transfers on each link
    and the columns the critical stage gives the row (compute, link and exposed seconds per axis,
    overhead, FLOPs, bytes, compute- and memory-bound seconds). Also the terms common to the
    stages: one pipeline hop (`pp_hop_s`), each axis's NIC share, the T_mb of a typical stage."""
    pp, cp, dp, ep, tp = (np.asarray(x, dtype=np.float64) for x in (cols.pp, cols.cp, cols.dp, cols.ep, cols.tp))
    m = np.asarray(cols.num_micro_batches, dtype=np.float64)
    mb, _, inv_mb = per_key(_micro_batch_terms, layer_key(wl), cols, model, hw, wl, rates)
    dpt, _, inv_dp = per_key(_dp_terms, DP_KEY, cols, model, hw, wl, rates)
    for d in dpt.values():
        # under optimizer offload the step runs on the host (`opt_offload`), not the GPU
        d["opt"] = 0.0 * d["opt_bytes"] if wl.optimizer_offload else rates.memory_s(d["opt_bytes"])
    etp = None if wl.expert_tp is None else expert_tp_size(tp, wl.expert_tp)
    on_out = axes_on_scale_out(hw, tp, cp, dp, ep, pp, etp)
    port = scale_up_port_share(hw, tp, cp, dp, ep, pp, etp)
    hybrid = wl.dp_shard_size is not None
    dp_keys: tuple[str, ...] = DP_ROW_KEYS + HSDP_ROW_KEYS if hybrid else DP_ROW_KEYS
    if wl.optimizer_offload:
        dp_keys = dp_keys + ("shard_params",)
    stages = {}
    for name in STAGES:
        r = {k: gather(mb[name][k], inv_mb) for k in STAGE_MB_KEYS if k not in PICKED_MB_KEYS}
        d = {k: gather(dpt[name][k], inv_dp) for k in dp_keys}
        reductions = _dp_reductions(d, m)
        dp_link, dp_exp = _dp_link_exposed(d, r, m, reductions, wl.hides("dp"))
        opt_offload = 0.0
        if wl.optimizer_offload:  # exposed host copies and the CPU step (cost/offload.py)
            opt_offload, _ = optimizer_offload_s(
                d["shard_params"],
                GRAD_BYTES[wl.grad_reduce_dtype],
                optimizer_weight_bytes(wl),
                MOMENT_BYTES[wl.optimizer_moments_dtype],
                hw,
                reductions,
                r["bwd_rc"],
                wl.param_offload,
                host_ranks(hw, cols.ngpus),
            )
        param_fetch: float | np.ndarray = 0.0
        if wl.param_offload:  # each FSDP gather's shard fetched from the host first (cost/offload.py)
            passes = fsdp_gather_passes(np.asarray(cols.recompute) == FULL, wl)
            param_fetch, _ = param_fetch_s(
                d["shard_params"], param_gather_bytes(wl), m * passes, hw.host_link_gbps, m * r["t_mb"]
            )
            param_fetch = np.where(np.asarray(cols.dp_sharding) == FS, param_fetch, 0.0)
        comm = {ax: m * r[ax] for ax in ("tp", "cp", "ep")}
        comm["dp"] = dp_link
        dp_share = _dp_nic_share(d, reductions, dp_link, on_out["dp"], hybrid)
        tp_nic = m * r["tp_nic"]
        tp_share = np.where(comm["tp"] > 0, tp_nic / np.where(comm["tp"] > 0, comm["tp"], 1.0), on_out["tp"])
        busy = link_busy_s(comm, {**on_out, "dp": dp_share, "tp": tp_share}, ("tp", "cp", "ep", "dp"), port)
        t = {
            "t_mb": r["t_mb"],
            "total": m * r["t_mb"] + dp_exp + d["opt"] + opt_offload + param_fetch,
            "opt_offload": opt_offload,
            "param_fetch": param_fetch,
            "busy_scale_up": busy["scale_up"],
            "busy_scale_out": busy["scale_out"],
            "dp_share": dp_share,
            "tp_share": tp_share,
            "dp_exp": dp_exp,
            **comm,
        }
        t.update({ax + "_exp": m * r[ax + "_exp"] for ax in ("tp", "cp", "ep")})
        stages[name] = {k: to_shape(v, tp.shape) for k, v in t.items()}
    # Fill and drain run through the other stages: a middle stage's pace (first/last mean when pp <= 2).
    t_mb = {name: stages[name]["t_mb"] for name in STAGES}
    shared = {
        "t_mb_typical": fill_drain_stage_s(pp, t_mb["first"], t_mb["middle"], t_mb["last"]),
        "pp_hop_s": pp_hop_s(hw, model, tokens_per_rank(wl.seq_len, cols.micro_batch, cp), tp, tp * cp * dp, pp),
        **{"on_out_" + ax: on_out[ax] for ax in AXES},
    }
    per_mb_and_dp = dict(mb=mb, at_mb=inv_mb, dp=dpt, at_dp=inv_dp)
    return stages, {k: to_shape(v, tp.shape) for k, v in shared.items()}, per_mb_and_dp


# The stage terms only the critical stage's row reports, from its micro-batch terms r and DP terms
# d: term = m·r[mb key] (+ d[dp key]). They are picked at the rows' micro-batch and DP keys and
# formed on the rows (the same products and sums, on the one stage that is reported).
PICKED_TERMS = {
    "compute": ("compute_mb", "opt"),
    "overhead": ("overhead_mb", None),
    "offload": ("offload_mb", None),
    "flops": ("flops", None),
    "bytes": ("bytes", "opt_bytes"),
    "cbound": ("cbound", None),
    "mbound": ("mbound", "opt"),
    "opt": (None, "opt"),
}
# the micro-batch terms only those need (compute_mb also sizes the DP windows)
PICKED_MB_KEYS = ("overhead_mb", "offload_mb", "flops", "bytes", "cbound", "mbound")


def _training_time(cols: TrainingLayout, model, hw, wl, kernels, ops_table: ShapeOpSums | None = None):
    pp, m, vpp = (np.asarray(x, dtype=np.float64) for x in (cols.pp, cols.num_micro_batches, cols.vpp))
    ngpus = np.asarray(cols.ngpus, dtype=np.float64)
    s = wl.seq_len
    n = len(pp)
    shape = pp.shape
    rates = Rates(hw, wl.precision, kernels, wl.fp8_scaling)
    rates.ops_table = ops_table
    (stages, shared, per_mb_and_dp), K, inv = per_key(_stage_terms, STAGE_KEY, cols, model, hw, wl, rates)
    pp_out = gather(shared["on_out_pp"], inv)
    pp_link, pp_exp, pp_fill_drain = pp_times_s(gather(shared["pp_hop_s"], inv), pp, vpp, m, wl.hides("pp"))
    pp_port = scale_up_port_share(hw, cols.tp, cols.cp, cols.dp, cols.ep, cols.pp)["pp"]
    # the pipeline's share of each link (the stages' other axes: their busy_<link>)
    pp_busy = link_busy_s({"pp": pp_link}, {"pp": pp_out}, ("pp",), {"pp": pp_port})
    rate = bubble_rate(pp, vpp, m, wl.schedule)
    bubble = training_bubble_s(rate, m, gather(shared["t_mb_typical"], inv), pp_fill_drain)

    # The step: the slowest stage, each no faster than its busiest link (cost/links.py), with its
    # own step-level overheads (contention of the DP traffic it hides, stragglers): each
    # stage's step is what the row would report were it critical, and the slowest is, so adding
    # work to any stage never shortens the step. Each stage's step needs its link columns only on
    # the rows the link bound raises (`links.bind_rows`); the columns reported are the critical
    # stage's, gathered once it is known.
    doublings = straggler_doublings(hw, ngpus)  # once: the three step_overhead_s calls share it
    hybrid = wl.dp_shard_size is not None  # hybrid sharding: the DP axis's NIC share differs by stage
    candidates = []
    for name in STAGES:
        t = stages[name]

        def nic_shares(take, t=t):
            """The stage's per-key NIC share of each of TP, CP, EP, DP, each through `take` (a gather,
            or the per-key column itself)."""
            on = {ax: take(shared["on_out_" + ax]) for ax in ("tp", "cp", "ep", "dp")}
            on["tp"] = take(t["tp_share"])  # a hierarchical TP all-reduce: partly on the NIC
            if hybrid:
                on["dp"] = take(t["dp_share"])
            return on

        def at_rows(rows, t=t, nic_shares=nic_shares):
            """A stage's link and exposed seconds and NIC shares per axis on some rows (`bind_rows`)."""
            keys = gather(inv, rows)
            comm = {ax: gather(t[ax], keys) for ax in ("tp", "cp", "ep", "dp")}
            comm_exp = {ax: gather(t[ax + "_exp"], keys) for ax in ("tp", "cp", "ep", "dp")}
            comm["pp"], comm_exp["pp"] = gather(pp_link, rows), gather(pp_exp, rows)
            on = nic_shares(lambda column: gather(column, keys))
            on["pp"] = gather(pp_out, rows)
            return comm, comm_exp, on

        per_key_hidden: dict = {}  # {link: the hidden seconds of the stage's TP, CP, EP, DP per key}

        def hidden_at(rows, link, t=t, per_key_hidden=per_key_hidden, nic_shares=nic_shares):
            """`at_rows`' exposed and `hidden_on_link` seconds on some rows: each key's computed
            once per link and gathered (the same formula on the same numbers)."""
            if link not in per_key_hidden:
                axes = ("tp", "cp", "ep", "dp")
                per_key_hidden[link] = hidden_on_link(
                    link, {ax: t[ax] for ax in axes}, {ax: t[ax + "_exp"] for ax in axes}, nic_shares(lambda c: c)
                )
            keys = gather(inv, rows)
            exp = {ax: gather(t[ax + "_exp"], keys) for ax in ("tp", "cp", "ep", "dp")}
            hidden = {ax: gather(h, keys) for ax, h in per_key_hidden[link].items()}
            exp["pp"] = gather(pp_exp, rows)
            pp_hidden = hidden_on_link(link, {"pp": gather(pp_link, rows)}, exp, {"pp": gather(pp_out, rows)})
            hidden["pp"] = pp_hidden["pp"]
            return exp, hidden

        busy = {link: gather(t["busy_" + link], inv) + pp_busy[link] for link in ("scale_up", "scale_out")}
        # The DP traffic hidden under the stage's windows takes SMs from its compute (comm_contention):
        # it lengthens the compute side, as TP/CP/EP's does inside T_mb, and the link bound applies
        # to that. Added after the bound, it had lengthened a link-bound step too: turning on
        # overlap_dp_comm made DeepSeek-V3 on 64 A100-40GB (torchtitan, cp 64, ep 32, FSDP) slower,
        # 451.50 s against 450.58 s, its 50 s of newly hidden DP charged 40 s of contention under a
        # step the NIC's 411 s held anyway.
        contention = dp_contention_s(hw, gather(t["dp"] - t["dp_exp"], inv))
        bound = gather(t["total"], inv) + bubble + pp_exp + contention
        updates = bind_rows(bound, busy, at_rows, hidden_at)
        extra = step_overhead_s(hw, bound, ngpus, doublings)  # fixed per step, stragglers
        candidates.append(dict(step=bound + extra, extra=contention + extra, updates=updates))
    candidates[1]["step"] = np.where(pp > 2, candidates[1]["step"], 0.0)  # the middle stage exists only when pp > 2
    crit = argmax3(*(c["step"] for c in candidates))
    at = crit * K + inv  # the critical stage's entry in stacked(stages, K, name, STAGES)

    at_keys: dict = {}  # the critical stage's entries in the micro-batch and DP terms laid end to end

    def at_key(level):
        if level not in at_keys:
            size = len(per_mb_and_dp[level]["first"]["t_mb" if level == "mb" else "reduce"])
            at_keys[level] = (crit * size + gather(per_mb_and_dp["at_" + level], inv), size)
        return at_keys[level]

    def term_at(level, key):
        where, size = at_key(level)
        return gather(stacked(per_mb_and_dp[level], size, key, STAGES), where)

    def pick(name):
        """The critical stage's per-row value of a stage term (_stage_terms, PICKED_TERMS)."""
        if name not in PICKED_TERMS:
            return gather(stacked(stages, K, name, STAGES), at)
        mb_key, dp_key = PICKED_TERMS[name]
        if mb_key is None:
            return term_at("dp", dp_key)
        value = m * term_at("mb", mb_key)
        return value if dp_key is None else value + term_at("dp", dp_key)

    at_row = crit * n + np.arange(n)  # the critical stage's entry in three per-row columns laid end to end

    def chosen(get):
        """The critical stage's value of a per-row candidate quantity (one gather: ~3x faster than
        two nested np.where on a chunk whose critical stage varies from row to row)."""
        return gather(np.concatenate([np.broadcast_to(get(c), shape) for c in candidates]), at_row)

    step = chosen(lambda c: c["step"])
    step_extra = chosen(lambda c: c["extra"])
    comm = {ax: pick(ax) for ax in ("tp", "cp", "ep", "dp")}
    comm["pp"] = pp_link
    comm_exp = {ax: pick(ax + "_exp") for ax in ("tp", "cp", "ep", "dp")}
    comm_exp["pp"] = np.array(pp_exp, dtype=np.float64)
    for i, c in enumerate(candidates):  # the rows whose critical stage's bound raised its exposed seconds
        for rows, exp in c["updates"]:
            on = np.flatnonzero(crit[rows] == i)
            for ax in AXES:
                comm_exp[ax][rows[on]] = exp[ax][on]
    busy = {link: pick("busy_" + link) + pp_busy[link] for link in ("scale_up", "scale_out")}
    compute = pick("compute")
    exposed = sum(comm_exp.values())
    overhead = pick("overhead") + step_extra

    B = wl.global_batch
    f_model = np.full(n, float(model_flops_per_step(model, B, s)))
    f_hw = hardware_flops_per_step(model, B, s, np.asarray(cols.recompute)) * np.ones(n)
    peak = hw.peak_flops("bf16")
    peak_precision = hw.peak_flops(wl.precision)  # fp8/fp4: that dtype's own peak (checked in Rates)
    flops_gpu = pick("flops")
    bytes_gpu = pick("bytes")
    bound = argmax4(pick("cbound"), pick("mbound"), exposed, bubble)  # argument order = Bound codes (specs/codes.py)

    out = {
        "time_step_s": step,
        "time_compute_s": compute,
        "time_bubble_s": bubble,
        "time_comm_exposed_s": exposed,
        "time_overhead_s": _column(overhead, shape),
    }
    for ax in AXES:
        out[f"time_comm_{ax}_s"] = comm[ax]
    for ax in AXES:
        out[f"time_comm_{ax}_exposed_s"] = _column(comm_exp[ax], shape)
    if wl.activation_offload_layers:  # the column exists only where the workload offloads
        out["time_offload_exposed_s"] = _column(pick("offload"), shape)
    if wl.optimizer_offload:
        out["time_optimizer_offload_s"] = _column(pick("opt_offload"), shape)
    if wl.param_offload:
        out["time_param_offload_s"] = _column(pick("param_fetch"), shape)
    out["link_scale_up_busy_s"] = busy["scale_up"]
    out["link_scale_out_busy_s"] = busy["scale_out"]
    out.update(
        {
            "tokens_per_s": B * s / step,
            "tokens_per_s_per_gpu": B * s / step / ngpus,
            "tflops_per_gpu": f_model / (step * ngpus) / 1e12,
            "mfu": f_model / (step * ngpus * peak_precision),
            "mfu_bf16_peak": f_model / (step * ngpus * peak),
            "hfu": f_hw / (step * ngpus * peak_precision),
            "flops_model_per_step": f_model,
            "flops_hardware_per_step": f_hw,
            "hbm_bytes_per_step": bytes_gpu,
            "arithmetic_intensity": flops_gpu / bytes_gpu,
            "bound": bound,
        }
    )
    return out, dict(pick=pick, crit=crit, rates=rates, bubble=bubble)
