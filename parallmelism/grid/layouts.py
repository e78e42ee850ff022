"""Training layout grid: every valid (tp, pp, cp, ep, dp, vpp, micro_batch, sharding, recompute, sp).

This module owns every divisibility rule (torchtitan's ParallelDims idea): the same rules build
the valid grid and explain why layouts were dropped. Axes are crossed one at a time; rows that
fail a rule are counted under the first rule they break, multiplied by the number of values of
the axes not crossed yet, so `dropped` adds up to every combination that was considered.

Rank order (Megatron): TP varies fastest, then CP, then DP (EP inside DP x CP), PP slowest. With
MoE parallel folding (workload.expert_tp) the expert layers order the same ranks of a stage as
expert TP, then EP, then expert DP (Megatron-Core parallel_state.initialize_model_parallel @
d98e8a64: world % (etp·ep·pp) == 0, expert_data_parallel_size = world / (etp·ep·pp)).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial

import numpy as np

from ..cost.keys import gather
from ..cost.shapes import kv_replication, stage_layer_split
from ..specs import (
    DP_SHARDING,
    RECOMPUTE,
    AcceleratorSpec,
    DPSharding,
    GridSpec,
    ModelSpec,
    Recompute,
    TrainWorkload,
    labels,
)
from .reasons import DROP_REASONS  # one registry of reason keys (training and serving)


# Integer codes for the string axes (kept as codes in the engine, strings in reports): specs/codes.py.
SHARDING_CODE = {label: code for code, label in enumerate(labels(DPSharding))}
RECOMPUTE_CODE = {label: code for code, label in enumerate(labels(Recompute))}


def add_drop_counts(total: dict[str, int], counts: dict[str, int]) -> dict[str, int]:
    """Add per-reason drop counts into `total` (in place) and return it."""
    for reason, n in counts.items():
        total[reason] = total.get(reason, 0) + n
    return total


def divisors(n: int) -> np.ndarray:
    small = [i for i in range(1, int(n**0.5) + 1) if n % i == 0]
    return np.array(sorted(set(small + [n // i for i in small])), dtype=np.int64)


@dataclass
class LayoutGrid:
    """Valid layouts as array columns, and what was dropped."""

    columns: dict[str, np.ndarray]
    dropped: dict[str, int] = field(default_factory=dict)
    considered: int = 0

    def __len__(self) -> int:
        return len(next(iter(self.columns.values()))) if self.columns else 0

    def explain_empty(self) -> str:
        """One sentence for an empty grid, naming the main reasons."""
        top = sorted(((n, r) for r, n in self.dropped.items() if n), reverse=True)[:3]
        if not top:
            return "no layout to evaluate"
        parts = ", ".join(f"{DROP_REASONS[r]} ({n:,})" for n, r in top)
        every = f"all {self.considered:,} layouts were" if self.considered != 1 else "the one layout was"
        return f"{every} dropped: {parts}"


class _Columns:
    """A growing table's columns at its current rows, each built when read: a column of `base`
    (the table before the latest crossing) is gathered through `rows` (each current row's row
    in base), so a filter moves `rows` and the columns set since (`own`), not every column."""

    def __init__(self, base: dict[str, np.ndarray]):
        self.base = base
        self.rows: np.ndarray | None = None  # None: the base rows themselves
        self.own: dict[str, np.ndarray] = {}  # columns set or crossed in at the current rows
        self.read: dict[str, np.ndarray] = {}  # base columns gathered at the current rows
        self.n = len(next(iter(base.values())))

    def __getitem__(self, name: str) -> np.ndarray:
        if name in self.own:
            return self.own[name]
        if self.rows is None:
            return self.base[name]
        if name not in self.read:
            self.read[name] = self.base[name][self.rows]
        return self.read[name]

    def __setitem__(self, name: str, values: np.ndarray) -> None:
        self.own[name] = values

    def items(self):
        return [(k, self[k]) for k in dict.fromkeys([*self.base, *self.own])]

    def repeat(self, times: int) -> None:
        """Each row `times` times in a row (np.repeat): the columns at the current rows become the
        base (built on the smaller table), the repeats are an index."""
        self.base = dict(self.items())
        self.rows = np.repeat(np.arange(self.n), times)
        self.own, self.read = {}, {}
        self.n *= times

    def keep(self, mask: np.ndarray) -> None:
        """The rows where mask holds."""
        self.rows = np.flatnonzero(mask) if self.rows is None else self.rows[mask]
        self.own = {k: v[mask] for k, v in self.own.items()}
        self.read = {}
        self.n = len(self.rows)


class _Crosser:
    """Crosses axes into a growing table and counts rule failures with their multiplicity."""

    def __init__(self, cols: dict[str, np.ndarray], remaining: int):
        self.cols = _Columns(cols)
        self.remaining = remaining  # product of the sizes of axes not crossed yet
        self.dropped = {r: 0 for r in DROP_REASONS}

    def cross(self, name: str, values) -> None:
        self.cross_all({name: values})

    def cross_all(self, axes: dict) -> None:
        """Cross several axes at once: the same rows as crossing them one after the other."""
        values = [np.asarray(v) for v in axes.values()]
        n, sizes = self.cols.n, [len(v) for v in values]
        self.cols.repeat(int(np.prod(sizes)))
        for i, (name, v) in enumerate(zip(axes, values)):
            self.cols[name] = np.tile(np.repeat(v, int(np.prod(sizes[i + 1 :]))), n * int(np.prod(sizes[:i])))
        self.remaining //= int(np.prod(sizes))

    def rule(self, reason: str, bad: np.ndarray | bool) -> None:
        bad = np.asarray(bad, dtype=bool)
        if bad.ndim == 0:
            bad = np.full(self.cols.n, bool(bad))
        if bad.any():
            self.dropped[reason] += int(bad.sum()) * self.remaining
            self.cols.keep(~bad)


def _candidates(pinned, default) -> np.ndarray:
    return np.asarray(pinned if pinned is not None else default)


def replica_factorizations(
    n: int, axes: dict[str, np.ndarray], pinned: bool, later: int, reason: str
) -> tuple[_Crosser, int]:
    """Cross the three model-parallel axes of one replica (training tp·pp·cp, serving tp·pp·sp)
    and keep the triples whose product divides n; dp = n / product.

    Unpinned axes only ever take factorizations of n, so non-dividing triples are not layouts and
    go unreported; when the user pinned an axis they are counted under `reason`. Returns the
    crosser and the number of combinations considered."""
    names = list(axes)
    mesh = np.meshgrid(*axes.values(), indexing="ij")
    x = _Crosser({k: m.ravel() for k, m in zip(names, mesh)}, later)
    product = x.cols[names[0]] * x.cols[names[1]] * x.cols[names[2]]
    if pinned:
        x.rule(reason, n % product != 0)
    else:
        x.cols.keep(n % product == 0)
    considered = len(x.cols[names[0]]) * later + x.dropped[reason]
    product = x.cols[names[0]] * x.cols[names[1]] * x.cols[names[2]]
    x.cols["ngpus"] = np.full(len(product), n, dtype=np.int64)
    x.cols["dp"] = n // product
    return x, considered


def tensor_parallel_rules(x: _Crosser, model: ModelSpec, hw: AcceleratorSpec, n: int, cross_node_tp: bool) -> None:
    """Rules on tp shared by training and serving: fabric size, NVLink domain, heads, KV heads, FFN.

    A TP group larger than the scale-up domain is dropped unless grid.cross_node_tp asks for it;
    then it must fill whole domains (k = domain_size ranks in each, the hierarchical all-reduce of
    cost/collectives.py) and its collectives are priced on the scale-out link."""
    domain = hw.scale_up.domain_size
    x.rule("ngpus_exceeds_fabric", hw.scale_out is None and n > domain)
    if cross_node_tp:
        x.rule("tp_spans_partial_domain", (x.cols["tp"] > domain) & (x.cols["tp"] % domain != 0))
    else:
        x.rule("tp_exceeds_scale_up_domain", x.cols["tp"] > domain)
    x.rule("heads_not_divisible_by_tp", model.heads % x.cols["tp"] != 0)
    t = x.cols["tp"]
    x.rule("kv_heads_incompatible_with_tp", (model.g % t != 0) & (t % model.g != 0))
    t = x.cols["tp"]
    ffn_bad = model.ffn_hidden % t != 0
    if model.moe is not None:
        ffn_bad |= model.moe.ffn_hidden % t != 0
    x.rule("ffn_not_divisible_by_tp", ffn_bad)


def expert_candidates(pinned, num_experts: int, n: int) -> np.ndarray:
    """ep values a grid tries (training and serving): the pinned list, else the divisors of the
    expert count up to n GPUs (1 for dense models)."""
    if num_experts:
        d = divisors(num_experts)
        return _candidates(pinned, d[d <= n])
    return _candidates(pinned, [1])


def expert_rules(x: _Crosser, num_experts: int) -> None:
    """Rules on ep (after crossing it) shared by training and serving."""
    x.rule("ep_on_dense_model", (num_experts == 0) & (x.cols["ep"] > 1))
    if num_experts:
        x.rule("experts_not_divisible_by_ep", num_experts % x.cols["ep"] != 0)


def per_gpu_count(enumerate_one, model, hw, workload, grid: GridSpec) -> LayoutGrid:
    """Run `enumerate_one(model, hw, workload, grid, n)` for each n in grid.ngpus and stack the
    results: columns concatenated, drop counts and considered combinations added up."""
    parts, dropped, considered = [], {r: 0 for r in DROP_REASONS}, 0
    for n in grid.ngpus:
        g = enumerate_one(model, hw, workload, grid, int(n))
        parts.append(g.columns)
        considered += g.considered
        add_drop_counts(dropped, g.dropped)
    cols = parts[0] if len(parts) == 1 else {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    return LayoutGrid(cols, dropped, considered)


def enumerate_training_layouts(
    model: ModelSpec, hw: AcceleratorSpec, workload: TrainWorkload, grid: GridSpec, stack=None, memo=None
) -> LayoutGrid:
    """All valid training layouts for every GPU count in grid.ngpus (vectorized per GPU count);
    stack (specs StackSpec): only the layouts that software stack runs (`stack_rules`). memo: a
    dict the caller keeps across the grids of one run that differ in their micro-batch sizes (its
    partitions, search/partitions.py): the layouts before the micro-batch axis are then made once
    per GPU count (`_replica_layouts`), not once per grid; the same rows either way."""
    one = _enumerate_one if memo is None else partial(_enumerate_one, memo=memo)
    grid_of = per_gpu_count(one, model, hw, workload, grid)
    return grid_of if stack is None else stack_rules(grid_of, stack.layouts)


# A stack's layout rules (specs StackLayouts, each with its source in conf/stack/NAME.yaml): the
# layout column each tests and the StackLayouts field that allows it.
STACK_RULES = (
    ("stack_no_tp", "tensor_parallel", lambda c: c["tp"] > 1),
    ("stack_no_pp", "pipeline_parallel", lambda c: c["pp"] > 1),
    ("stack_no_vpp", "interleaved_pipeline", lambda c: c["vpp"] > 1),
    ("stack_no_cp", "context_parallel", lambda c: c["cp"] > 1),
    ("stack_no_ep", "expert_parallel", lambda c: c["ep"] > 1),
    ("stack_no_sharding_with_pp", "sharding_with_pipeline", lambda c: (c["pp"] > 1) & (c["dp_sharding"] >= 2)),
)


def stack_rules(layouts: LayoutGrid, rules) -> LayoutGrid:
    """`layouts` less the ones the stack cannot run (StackLayouts `rules`), each drop counted under
    its reason (grid/reasons.py)."""
    c = layouts.columns
    dropped = dict(layouts.dropped)
    keep = np.ones(len(c["tp"]), dtype=bool)
    checks = [(key, test(c)) for key, field, test in STACK_RULES if not getattr(rules, field)]
    if rules.dp_sharding is not None:
        allowed = [SHARDING_CODE[x] for x in rules.dp_sharding]
        checks.append(("stack_dp_sharding", ~np.isin(c["dp_sharding"], allowed)))
    for key, bad in checks:
        hit = keep & bad
        dropped[key] = dropped.get(key, 0) + int(hit.sum())
        keep &= ~bad
    if keep.all():
        return LayoutGrid(c, dropped, layouts.considered)
    return LayoutGrid({k: v[keep] for k, v in c.items()}, dropped, layouts.considered)


def _replica_layouts(model, hw, workload, grid, n, tp_c, pp_c, cp_c, ep_c, later) -> tuple[_Crosser, int]:
    """The tp x pp x cp x ep layouts of n GPUs that pass every rule on those axes (and dp), with
    the combinations considered: the same for every micro-batch size."""
    L, s = model.layers, workload.seq_len
    E = model.moe.num_experts if model.moe else 0
    pinned = not (grid.tp is None and grid.pp is None and grid.cp is None)
    x, considered = replica_factorizations(
        n, {"tp": tp_c, "pp": pp_c, "cp": cp_c}, pinned, later, "product_not_dividing_ngpus"
    )
    tensor_parallel_rules(x, model, hw, n, grid.cross_node_tp)
    c = x.cols
    if grid.uneven_pipeline:
        first, _, last = stage_layer_split(L, c["pp"])
        x.rule("pipeline_stage_empty", (c["pp"] > L) | (first < 1) | (last < 1))
    else:
        x.rule("layers_not_divisible_by_pp", L % c["pp"] != 0)
    c = x.cols
    # the ring and all-gather CP load-balance causal attention over 2·cp chunks (a rank holds chunks i and
    # 2cp-1-i); Ulysses (a2a) hands each rank one contiguous s/cp slice and gives every rank the whole
    # sequence for its heads, so s need only divide by cp (DeepSpeed's UlyssesSPDataLoaderAdapter shards
    # each batch into sp equal slices; ArcticTraining pads samples to a multiple of 256)
    chunks = 1 if workload.cp_comm_type == "a2a" else 2
    x.rule("seq_not_divisible_by_cp", (c["cp"] > 1) & (s % (chunks * c["cp"]) != 0))
    c = x.cols
    x.rule("cp_needs_fused_attention", (c["cp"] > 1) & (not workload.flash_attention))
    if workload.cp_comm_type == "a2a":  # Ulysses splits each TP rank's heads over the CP group
        c = x.cols
        x.rule("cp_a2a_heads_not_divisible", (model.heads // c["tp"]) % c["cp"] != 0)

    x.cross("ep", ep_c)
    expert_rules(x, E)
    c = x.cols
    if workload.expert_tp is None:
        x.rule("ep_not_dividing_dp_cp", (c["dp"] * c["cp"]) % c["ep"] != 0)
    else:  # MoE parallel folding: the expert grid etp x ep x edp over the tp x cp x dp ranks
        x.rule("expert_grid_not_dividing", (c["tp"] * c["cp"] * c["dp"]) % (workload.expert_tp * c["ep"]) != 0)
    return x, considered


def _enumerate_one(model, hw, workload, grid, n, memo=None) -> LayoutGrid:
    B = workload.global_batch
    mb_default = divisors(B)
    if grid.max_micro_batch:
        mb_default = mb_default[mb_default <= grid.max_micro_batch]
    mb_c = _candidates(grid.micro_batch, mb_default)
    if memo is None:
        table = _ReplicaTable(model, hw, workload, grid, n, len(mb_c))
    else:
        # what the layouts before the micro-batch axis depend on: the model, accelerator and
        # workload (the same objects), n, the number of micro-batch sizes (the combinations still
        # to cross), every grid field but the micro-batch sizes (their reprs: model_dump_json
        # would build GridSpec's deferred serializer, ~8 ms of every command that evaluates a
        # training grid)
        key = (n, len(mb_c), repr([kv for kv in grid if kv[0] not in ("micro_batch", "ngpus")]))
        same_run = all(a is b for a, b in zip(memo.get("of", ()), (model, hw, workload)))
        if memo.get("key") != key or not same_run:
            memo.update(key=key, of=(model, hw, workload))
            memo["replicas"] = _ReplicaTable(model, hw, workload, grid, n, len(mb_c))
        table = memo["replicas"]
    dropped = dict(table.dropped)  # the table's counts stay those of the rules before micro_batch
    cols = table.cross_micro_batches(mb_c, B, dropped)
    return LayoutGrid(cols, dropped, table.considered)


LAYOUT_COLUMNS = (
    "ngpus",
    "tp",
    "pp",
    "cp",
    "ep",
    "dp",
    "vpp",
    "micro_batch",
    "num_micro_batches",
    "dp_sharding",
    "recompute",
    "sequence_parallel",
    "kv_replication",
    "layers_first_stage",
    "layers_per_stage",
    "layers_last_stage",
)


class _ReplicaTable:
    """The tp x pp x cp x ep layouts of n GPUs (`_replica_layouts`, one row each: a replica) and
    every rule after the micro-batch axis that does not read the micro-batch size, as masks: on
    (replica, vpp) and on (replica, choice), a choice being one (sharding, recompute, SP), sharding
    slowest. The same for every micro-batch size of a grid, so a run's partitions (one micro-batch
    size each, search/partitions.py) build it once per GPU count (`cross_micro_batches`)."""

    def __init__(self, model, hw, workload, grid, n: int, n_mb: int):
        L, E = model.layers, (model.moe.num_experts if model.moe else 0)
        div_n = divisors(n)
        tp_c, pp_c, cp_c = (_candidates(getattr(grid, a), div_n) for a in ("tp", "pp", "cp"))
        ep_c = expert_candidates(grid.ep, E, n)
        vpp_c = _candidates(grid.vpp, divisors(L))
        sh_c = np.array([SHARDING_CODE[x] for x in (grid.dp_sharding or DP_SHARDING)], dtype=np.int8)
        rc_c = np.array([RECOMPUTE_CODE[x] for x in (grid.recompute or RECOMPUTE)], dtype=np.int8)
        sp_c = np.array(grid.sequence_parallel if grid.sequence_parallel is not None else [False, True])
        later = len(ep_c) * n_mb * len(vpp_c) * len(sh_c) * len(rc_c) * len(sp_c)
        x, self.considered = _replica_layouts(model, hw, workload, grid, n, tp_c, pp_c, cp_c, ep_c, later)
        self.dropped, self.remaining = x.dropped, x.remaining  # remaining: combinations per replica row
        rep = dict(x.cols.items())
        tp, pp, cp, dp = rep["tp"], rep["pp"], rep["cp"], rep["dp"]
        self.pp, self.dp, self.vpp = pp, dp, vpp_c
        self.R, self.V = len(tp), len(vpp_c)
        first, middle, last = stage_layer_split(L, pp)
        self.columns = dict(rep, kv_replication=kv_replication(tp, model.g))  # a replica's own columns
        self.columns.update(layers_first_stage=first, layers_per_stage=middle, layers_last_stage=last)

        # (replica, vpp): the vpp rules but the one on the micro-batch count, each row's first
        # broken rule (as crossing them in turn counts it)
        interleaved = vpp_c[None, :] > 1
        pp2 = pp[:, None]
        alive = np.ones((self.R, self.V), dtype=bool)
        self.vpp_hits = {}
        for reason, bad in (
            ("vpp_needs_pp", interleaved & (pp2 == 1)),
            ("vpp_needs_1f1b", interleaved & (workload.schedule != "1f1b")),
            ("layers_not_divisible_by_pp_vpp", interleaved & (middle[:, None] % vpp_c[None, :] != 0)),
        ):
            self.vpp_hits[reason] = (bad & alive).sum(axis=1)  # per replica
            alive = alive & ~bad
        self.vpp_ok = alive

        # (replica, choice)
        n_rc, n_sp = len(rc_c), len(sp_c)
        self.sh = np.repeat(sh_c, n_rc * n_sp)
        self.rc = np.tile(np.repeat(rc_c, n_sp), len(sh_c))
        self.sp = np.tile(sp_c, len(sh_c) * n_rc)
        self.C = C = len(self.sh)
        sharded = (self.sh != DPSharding.NO_OP)[None, :]
        rules = [("sequence_parallel_needs_tp", self.sp[None, :] & (tp == 1)[:, None])]
        if workload.expert_tp is not None:
            rules.append(("folding_needs_sequence_parallel", (tp > 1)[:, None] & ~self.sp[None, :]))
        rules.append(("sharding_needs_dp", sharded & (dp * cp == 1)[:, None]))
        if workload.param_offload:  # ZeRO-Infinity fetches parameter shards: ZeRO-3 only
            rules.append(("param_offload_needs_fully_shard", (self.sh != DPSharding.FULLY_SHARD)[None, :]))
        if workload.dp_shard_size is not None:  # hybrid sharding: whole shard groups, replicated
            rules.append(("dp_not_multiple_of_dp_shard_size", sharded & (dp % workload.dp_shard_size != 0)[:, None]))
        ok = np.ones((self.R, C), dtype=bool)
        self.choice_hits = {}
        for reason, bad in rules:
            self.choice_hits[reason] = (bad & ok).sum(axis=1)  # per replica
            ok = ok & ~bad
        self.ok = ok
        self.choices = ok.sum(axis=1)  # per replica

    def cross_micro_batches(self, mb_c: np.ndarray, B: int, dropped: dict) -> dict:
        """The layouts of the replicas crossed with the micro-batch sizes, vpp and the choices, in
        the order crossing them one after the other gives (replica slowest, then micro-batch, vpp,
        sharding, recompute, SP), each rule's drops added into `dropped` with the multiplicity
        crossing them in turn counts (the combinations of the axes not crossed yet, or the rows a
        mask entry stands for). Each column repeats the values of its own axes' table (the choices:
        one gather)."""
        R, M, V, C = self.R, len(mb_c), self.V, self.C
        pp, remaining = self.pp, self.remaining // M

        # (replica, micro-batch)
        dp_mb = self.dp[:, None] * mb_c[None, :]
        bad = B % dp_mb != 0
        dropped["batch_not_divisible_by_dp_micro_batch"] += int(bad.sum()) * remaining
        alive_rm = ~bad
        nmb = B // dp_mb

        # (replica, micro-batch, vpp)
        remaining //= V
        per_r = alive_rm.sum(axis=1)  # alive micro-batch sizes per replica
        for reason, hits in self.vpp_hits.items():
            dropped[reason] += int((per_r * hits).sum()) * remaining
        alive = alive_rm[:, :, None] & self.vpp_ok[:, None, :]
        bad3 = (self.vpp[None, None, :] > 1) & (nmb[:, :, None] % pp[:, None, None] != 0)
        hit = bad3 & alive
        dropped["micro_batches_not_divisible_by_pp"] += int(hit.sum()) * remaining
        alive = alive & ~hit

        # (replica, choice): each stands for its replica's alive (micro-batch, vpp) entries
        weight = alive.reshape(R, M * V).sum(axis=1)
        for reason, hits in self.choice_hits.items():
            dropped[reason] += int((weight * hits).sum())

        # the rows: each alive (replica, micro-batch, vpp) with its replica's choices, in that order;
        # a column of the replica, (replica, micro-batch) or (..., vpp) level repeats its values
        # (np.repeat: runs, faster than a gather), the choice columns are gathered
        per_triple = alive * self.choices[:, None, None]  # rows of each (replica, micro-batch, vpp)
        per_rm = per_triple.reshape(R * M, V).sum(axis=1)
        rows_r = per_rm.reshape(R, M).sum(axis=1)
        triples = np.flatnonzero(alive)
        at = np.flatnonzero(self.ok[triples // (M * V)])  # (alive triple, choice) pairs, flat
        choice = at - (at // C) * C
        out = {k: np.repeat(v, rows_r) for k, v in self.columns.items()}
        out.update(
            micro_batch=np.repeat(np.tile(mb_c, R), per_rm),
            num_micro_batches=np.repeat(nmb.ravel(), per_rm),
            vpp=np.repeat(np.tile(self.vpp, R * M), per_triple.ravel()),
            dp_sharding=gather(self.sh, choice),
            recompute=gather(self.rc, choice),
            sequence_parallel=gather(self.sp, choice),
        )
        return {k: out[k] for k in LAYOUT_COLUMNS}
