"""Training and serving price the same thing the same way (issue 27, item 7).

Each test pins one drift between the two cost models, or between a time and the `show` table
that explains it, against a reference: nccl-tests' measured all-reduce latency floor
(shared/reference/collectives_measured.csv), DeepSeek-V3's layer pattern (3 dense layers, then
58 MoE layers: model_architectures.csv) and the p2p ring's transfer count (Megatron / Transformer
Engine `AttnFuncWithCPAndKVP2P`: c − 1 K,V hops forward, 2(c − 1) chunks backward).
"""

from __future__ import annotations

import csv
import inspect

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from conftest import PINNED_AXES, shared_reference, stacked
from parallmelism.config.kernel_tables import kernel_model
from parallmelism.config import load_option, option_files
from parallmelism.cost import comm, flops, inference, inference_ops, roofline, states
from parallmelism.cost.layout import ServingLayout
from parallmelism.cost.breakdown import training_breakdown
from parallmelism.cost.collective_ops import TP_HIERARCHICAL, transfer_time_s
from parallmelism.cost.collectives import collective_time_s
from parallmelism.cost.comm import ep_all_to_all_time_s, tp_layer_times_s
from parallmelism.cost.layer_gemms import SERVING_NAMES, head_gemm, layer_gemms
from parallmelism.cost.ops import MATMUL
from parallmelism.cost.steptime import training_time
from parallmelism.grid import enumerate_training_layouts
from parallmelism.specs import BYTES_PER_ELEMENT, GridSpec, InferenceWorkload, TrainWorkload

HW = {name: stacked(load_option("hardware", name)) for name in ("h100-sxm-80gb", "a100-sxm-80gb", "gb200-nvl72")}


def serving_terms(model, hw, wl, tp, pp=1, ep=1, sp=1, dp=1, tokens=1.0):
    """`inference.stage_terms` of one decode pass of `tokens` tokens on one layout."""
    L = model.layers
    cols = {
        "tp": np.array([tp]),
        "pp": np.array([pp]),
        "sp": np.array([sp]),
        "ep": np.array([ep]),
        "dp": np.array([dp]),
        "batch": np.array([1]),
        "layers_per_stage": np.array([-(-L // pp)]),
    }
    T = np.array([tokens])
    return inference.stage_terms(
        model,
        hw,
        wl,
        ServingLayout.of(cols),
        tokens=T,
        attn_pairs=T * 100,
        kv_read_tokens=T * 100,
        kv_write_tokens=T,
        kv_read_bytes=2,
        head_tokens=T,
        km=kernel_model(hw),
        prefill=False,
    )


def training_all_reduce_s(hw, model, tokens, tp):
    """One TP all-reduce of the training model: a layer without SP, recompute or overlap issues
    2 forward and 2 backward all-reduces, so link / 4."""
    link, _ = tp_layer_times_s(hw, model, np.array([tokens]), np.array([tp]), False, False, 0.0, 0.0, False)
    return float(link[0]) / 4


@pytest.mark.parametrize("hw_name", sorted(HW))
@pytest.mark.parametrize("tp", [2, 4, 8])
@pytest.mark.parametrize("tokens", [1.0, 4.0, 512.0])
def test_an_all_reduce_costs_the_same_in_training_and_serving(hw_name, tp, tokens):
    hw, model = HW[hw_name], load_option("model", "llama3.1-8b")
    per_layer = serving_terms(model, hw, InferenceWorkload(), tp, tokens=tokens)["comm"]["tp_all_reduce"]
    serving = float(per_layer[0]) / (2 * model.layers)  # 2 all-reduces per layer
    assert serving == pytest.approx(training_all_reduce_s(hw, model, tokens, tp), rel=1e-12)


def test_small_all_reduce_meets_the_measured_nvlink_latency_floor():
    """8 ranks on NVLink4, 8 bytes: nccl-tests measure 13 us (the floor of 13-21 us up to 512 KB).
    A ring inside the domain gives 12.99 (launch 4.83 + 14 steps of 0.583, hardware/h100-sxm-80gb.yaml)."""
    rows = list(csv.DictReader(open(shared_reference("collectives_measured.csv"))))
    floor_us = next(float(r["time_us"]) for r in rows if r["case"] == "dgxh100-ar-small")
    hw, model = HW["h100-sxm-80gb"], load_option("model", "llama3.1-8b")
    # 16 KiB = 2 bytes × 4096 hidden × 2 tokens; the latency term dominates
    per_layer = serving_terms(model, hw, InferenceWorkload(), 8, tokens=2.0)["comm"]["tp_all_reduce"]
    serving_us = float(per_layer[0]) / (2 * model.layers) * 1e6
    assert serving_us == pytest.approx(training_all_reduce_s(hw, model, 2.0, 8) * 1e6, rel=1e-12)
    assert serving_us == pytest.approx(floor_us, rel=0.02)


@pytest.mark.parametrize("pp", [1, 2, 4, 8, 16])
def test_moe_layers_per_stage_are_integers_in_serving_as_in_training(pp):
    model = load_option("model", "deepseek-v3")
    terms = serving_terms(model, HW["h100-sxm-80gb"], InferenceWorkload(), 8, pp=pp)
    router = next(op for op in terms["ops"] if op.name == "router")
    n_moe = float(np.asarray(router.count)[0])
    assert n_moe.is_integer()
    first, middle, _ = (int(np.asarray(x).reshape(-1)[0]) for x in flops_split(model.layers, pp))
    start = 0 if pp == 1 else first
    # DeepSeek-V3: layers 0-2 dense, 3-60 MoE
    assert n_moe == sum(1 for layer in range(start, start + middle) if layer >= 3)
    # training's middle stage counts the same layers (steptime._stage_layout, flops.moe_layer_counts)
    assert float(flops.moe_layer_counts(model, start, middle)[1]) == n_moe
    # and the weights the memory model holds follow the same integer split
    from parallmelism.cost.inference_ops import weight_elements_per_gpu

    lin_a, _ = weight_elements_per_gpu(model, np.array([8]), np.array([1]), np.array([middle]), np.array([pp]))
    assert np.all(np.isfinite(lin_a))


@pytest.mark.parametrize("tp, dp, inside", [(4, 1, True), (2, 2, True), (8, 1, False), (4, 4, False)])
@pytest.mark.parametrize("tokens", [1.0, 64.0, 4096.0])
def test_a_pipeline_hop_sends_each_tp_rank_its_slice_in_serving_as_in_training(tp, dp, inside, tokens):
    """A pipeline boundary: each TP rank sends its 1/t slice, 2·T·h/t bytes (Megatron's
    scatter-gather, Narayanan et al. 2021 §4.1; vLLM's send-allgather, `send_tensor_dict(...,
    all_gather_group=get_tp_group())`). Serving sent all 2·T·h bytes from every TP rank; the hop
    is now training's function, and both equal launch + alpha + S/beta of the link by hand."""
    hw, model = HW["h100-sxm-80gb"], load_option("model", "llama3.1-70b")
    got = float(serving_terms(model, hw, InferenceWorkload(), tp, pp=2, dp=dp, tokens=tokens)["hop_s"][0])
    S = 2.0 * tokens * model.hidden / tp
    if inside:  # neighbour stage tp·dp ranks away, inside the 8-GPU NVLink domain
        bw, lat = hw.scale_up.bandwidth_gbps * hw.efficiency.scale_up, hw.scale_up.latency_us
    else:  # on the next node: one NIC
        bw, lat = hw.scale_out.bandwidth_gbps * hw.efficiency.scale_out, hw.scale_out.latency_us
    launch = hw.scale_up.collective_launch_us  # once per send/recv call (cost/collectives.py)
    assert got == pytest.approx((launch + lat) * 1e-6 + S / (bw * 1e9), rel=1e-12)
    training = comm.pp_hop_s(hw, model, np.array([tokens]), np.array([tp]), np.array([tp * 1 * dp]), np.array([2]))
    assert got == float(training[0])


def flops_split(L, pp):
    from parallmelism.cost.shapes import stage_layer_split

    return stage_layer_split(L, np.array([pp]))


@pytest.mark.parametrize("ep, tp", [(16, 1), (32, 2), (64, 1)])
def test_serving_expert_all_to_all_is_the_training_dispatch(ep, tp):
    """Across nodes the flex dispatcher (DeepEP) sends a token once per remote node, at most
    DeepSeek-V3's 4 (node-limited routing): cheaper than every copy on the wire, and serving
    prices it with training's function."""
    model, hw = load_option("model", "deepseek-v3"), HW["h100-sxm-80gb"]
    T = 64.0
    for dispatcher in ("alltoall", "flex"):
        wl = InferenceWorkload(moe_dispatcher=dispatcher)
        got = serving_terms(model, hw, wl, tp, ep=ep, tokens=T)
        S_a2a = 2.0 * T * model.moe.top_k * model.hidden
        one = ep_all_to_all_time_s(hw, model, S_a2a, np.array([ep]), np.array([tp]), dispatcher)
        router = next(op for op in got["ops"] if op.name == "router")
        moe_layers = float(np.asarray(router.count)[0])
        assert float(got["comm"]["ep_all_to_all"][0]) == pytest.approx(
            comm.EP_CALLS_PER_MOE_LAYER_FORWARD * moe_layers * float(one[0]), rel=1e-12
        )
    flex = serving_terms(model, hw, InferenceWorkload(moe_dispatcher="flex"), tp, ep=ep, tokens=T)
    a2a = serving_terms(model, hw, InferenceWorkload(), tp, ep=ep, tokens=T)
    assert flex["comm"]["ep_all_to_all"][0] < a2a["comm"]["ep_all_to_all"][0]


def cp_breakdown(recompute, cp_comm_type="p2p", model_name="llama3.1-8b", **grid_kw):
    model, hw = load_option("model", model_name), HW["h100-sxm-80gb"]
    wl = TrainWorkload(seq_len=16384, global_batch=16, cp_comm_type=cp_comm_type)
    grid = {**PINNED_AXES, "ngpus": [16], "tp": [2], "cp": [4], "dp_sharding": ["NO_OP"], "recompute": [recompute]}
    grid.update({"sequence_parallel": [True], **grid_kw})
    cols = enumerate_training_layouts(model, hw, wl, GridSpec(**grid)).columns
    cols = {k: np.asarray(v)[:1] for k, v in cols.items()}
    return (
        training_breakdown(cols, model, hw, wl, kernel_model(hw)),
        training_time(cols, model, hw, wl, kernel_model(hw)),
        model,
        hw,
        wl,
        cols,
    )


@pytest.mark.parametrize("recompute, transfers", [("none", 9), ("selective", 12), ("full", 12)])
def test_show_counts_the_cp_transfers_the_time_model_pays(recompute, transfers):
    """p2p ring, c = 4: 3(c − 1) = 9 transfers per layer and micro-batch, 4(c − 1) = 12 when the
    attention forward reruns (full or selective recompute), each one K,V chunk hop."""
    bd, row, model, hw, wl, cols = cp_breakdown(recompute)
    (rec,) = (c for c in bd["collectives"] if c["axis"] == "cp")
    assert rec["collective"] == "send_recv" and rec["group"] == 4 and rec["stride"] == 2
    layers = int(cols["layers_per_stage"][0]) if int(cols["pp"][0]) > 1 else model.layers
    m = int(cols["num_micro_batches"][0])
    assert rec["calls_per_step"] == transfers * layers * m
    # the time model's link seconds are that many hops of the shown bytes on the shown link
    bw, lat = comm.p2p_link(hw, 4 * 2)
    hop = float(collective_time_s("send_recv", rec["bytes"], 2, bw, lat, launch_us=hw.scale_up.collective_launch_us))
    assert float(row["time_comm_cp_s"][0]) == pytest.approx(transfers * hop * layers * m, rel=1e-9)
    assert rec["wire_bytes"] == rec["bytes"]  # a send/recv puts its bytes on the wire once


def per_layer_calls(bd, cols, model, axis, role=None, layers=None):
    """Calls per layer and micro-batch of an axis's rows (a role's) in `show`'s per-collective table."""
    if layers is None:
        layers = int(cols["layers_per_stage"][0]) if int(cols["pp"][0]) > 1 else model.layers
    m = int(cols["num_micro_batches"][0])
    rows = [c for c in bd["collectives"] if c["axis"] == axis and role in (None, c["role"])]
    return sum(c["calls_per_step"] for c in rows) / (m * layers)


@pytest.mark.parametrize("recompute, calls", [("none", 3), ("selective", 4)])
def test_show_counts_the_cp_all_gathers_the_time_model_pays(recompute, calls):
    bd, _, model, _, _, cols = cp_breakdown(recompute, "all_gather")
    assert per_layer_calls(bd, cols, model, "cp") == calls
    kinds = {c["collective"]: c["calls_per_step"] for c in bd["collectives"] if c["axis"] == "cp"}
    assert (
        set(kinds) == {"all_gather", "reduce_scatter"} and kinds["all_gather"] == (calls - 1) * kinds["reduce_scatter"]
    )


@pytest.mark.parametrize("sp, recompute, calls", [(True, "full", 14), (True, "none", 10), (False, "full", 6)])
def test_show_counts_the_tp_and_ep_calls_the_time_model_pays(sp, recompute, calls):
    """TP (Korthikanti et al. 2022 §4.2.2): SP 4 forward + 2 exposed + 4 hidden backward, the
    forward again under full recompute; no SP 2 + 2, +2. EP: dispatch + combine per pass."""
    bd, _, model, _, _, cols = cp_breakdown(
        recompute, model_name="mixtral-8x7b", cp=[1], ep=[8], sequence_parallel=[sp], ngpus=[16], tp=[2]
    )
    assert per_layer_calls(bd, cols, model, "tp", "tp") == calls
    assert per_layer_calls(bd, cols, model, "ep") == (6 if recompute == "full" else 4)  # every Mixtral layer is MoE
    # the MoE dispatch's TP all-gather and combine's reduce-scatter: their own rows, one each per pass
    passes = 3 if recompute == "full" else 2
    assert per_layer_calls(bd, cols, model, "tp", "tp moe") == (2 * passes if sp else 0)


def test_weight_cast_docstrings_say_the_gemm_casts():
    """fp8 weight casts are the GEMM's (Transformer Engine), placed per micro-batch by
    steptime.weight_casts_per_micro_batch; no docstring may say the optimizer casts them."""
    docs = [
        roofline.low_precision_cast_bytes,
        roofline.weight_cast_bytes,
        flops.optimizer_bytes_per_param,
        states.optimizer_weight_bytes,
    ]
    for fn in docs:
        doc = " ".join(inspect.getdoc(fn).split())
        assert "weight_casts_per_micro_batch" in doc, fn.__name__
        assert "after the optimizer" not in doc and "step's first micro-batch" not in doc, fn.__name__


def test_the_mtp_proposer_layer_is_a_moe_layer_like_the_last():
    """DeepSeek-V3's MTP module is one more transformer block after layer 60, MoE like the layers
    before it (§2.2; HF config: layer 61 has experts): the proposer step prices a MoE layer."""
    from parallmelism.cost.inference_spec import proposer_step_s

    model, hw = load_option("model", "deepseek-v3"), HW["h100-sxm-80gb"]
    wl = InferenceWorkload(spec_method="mtp")
    cols = {k: np.array([v]) for k, v in dict(tp=8, pp=1, sp=1, ep=1, dp=1, batch=8, layers_per_stage=61).items()}
    seen = {}

    def spy(m, hw_, wl_, c, tokens_per_seq=None):
        out = inference.decode_terms(m, hw_, wl_, c, tokens_per_seq, km=kernel_model(hw_))
        seen["router"] = next(float(np.asarray(op.count)[0]) for op in out["ops"] if op.name == "router")
        return out

    proposer_step_s(model, None, hw, wl, cols, spy)
    assert seen["router"] == 1.0


ALL_HW = sorted(option_files("hardware", []))
ALL_MODELS = sorted(option_files("model", []))


@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    hw_name=st.sampled_from(ALL_HW),
    model_name=st.sampled_from(ALL_MODELS),
    log_tp=st.integers(0, 4),
    pp=st.sampled_from([1, 2, 3, 4, 8, 16]),
    tokens=st.sampled_from([1.0, 7.0, 256.0, 8192.0]),
)
def test_every_shipped_model_and_accelerator_prices_training_and_serving_alike(hw_name, model_name, log_tp, pp, tokens):
    """Over every shipped model × accelerator: the same TP all-reduce (bytes, group, link) costs the
    same in both schedules, and the busiest stage holds whole MoE layers, as training's middle
    stage does (issue 27, 'Done when')."""
    hw, model = stacked(load_option("hardware", hw_name)), load_option("model", model_name)
    tp = min(2**log_tp, hw.scale_up.domain_size)
    pp = min(pp, model.layers)
    terms = serving_terms(model, hw, InferenceWorkload(), tp, pp=pp, tokens=tokens)
    n = -(-model.layers // pp)
    if tp > 1:
        serving = float(terms["comm"]["tp_all_reduce"][0]) / (2 * n)
        assert serving == pytest.approx(training_all_reduce_s(hw, model, tokens, tp), rel=1e-12)
    if model.is_moe:
        router = next(op for op in terms["ops"] if op.name == "router")
        n_moe = float(np.asarray(router.count)[0])
        first = 0 if pp == 1 else int(flops_split(model.layers, pp)[0][0])
        assert n_moe.is_integer() and n_moe == float(flops.moe_layer_counts(model, first, n)[1])
    # every serving collective is a record of the inventory; training's builder of the same
    # transfer (its TP layer, its MoE dispatch without SP, its pipeline hop) gives the same bytes,
    # group and stride, and the one link model the same seconds per call
    T, t = np.array([tokens]), np.array([float(tp)])
    training = {
        "tp": comm.tp_layer_ops(hw, model, T, t, {"all_reduce": 1.0})[0],
        "pp hop": comm.pp_hop_op(hw, model, T, t, t, np.array([pp])),
    }
    if model.is_moe:
        training["ep"] = comm.ep_layer_ops(hw, model, T, t, np.array([1.0]), 1.0, False)[0]
    for rec in terms["collectives"]:
        if rec.role not in training:
            continue
        other = training[rec.role]

        def key(op):
            return (op.kind, *(scalar(x) for x in (op.nbytes, op.group, op.stride)))

        assert key(rec) == key(other)
        same = scalar(transfer_time_s(hw, rec.kind, rec.nbytes, rec.group, rec.stride))
        if rec.role == "ep":  # EP inside the TP group needs no all-to-all in serving (ep = 1 here)
            assert scalar(rec.time_s) == 0.0
        else:
            assert scalar(rec.time_s) == scalar(other.time_s) == same


def scalar(x) -> float:
    return float(np.asarray(x).reshape(-1)[0])


NORMS = {"attn_norm", "mlp_norm", "q_a_norm", "kv_a_norm", "final_norm"}  # serving's labels


def gemm_key(op, name) -> tuple:
    """(name, m, k, n, FLOPs) of a GEMM op as plain floats. A grouped expert GEMM's kernel rows are
    each schedule's own (serving: copies per touched expert), so its m (the routed token copies)
    is compared through its FLOPs only."""
    m, k, n = (scalar(x) for x in op.mkn)
    return (name, None if name.startswith("experts_") else m, k, n, scalar(op.flops))


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    model_name=st.sampled_from(ALL_MODELS),
    log_tp=st.integers(0, 4),
    tokens=st.integers(1, 16384),
)
def test_a_prefill_pass_and_a_training_forward_run_the_same_gemms(model_name, log_tp, tokens):
    """One inventory (issue 27 item 1, cost/layer_gemms.py): the GEMMs of a serving prefill pass of
    T tokens (one prompt, no cache, ep 1) and of a training forward of T tokens (no SP, cp 1, one
    rank holding every expert) have the same (name, m, k, n) and FLOPs, layer by layer type and for
    the logits head, and 2·m·k·n FLOPs each (Megatron's convention); their norms move the same
    bytes. Editing one builder's shapes,
    rows or FLOPs alone fails here."""
    model = load_option("model", model_name)
    tp = min(2**log_tp, model.heads)
    T, t = np.array([float(tokens)]), np.array([float(tp)])
    serving = inference_ops.layer_ops(
        model,
        InferenceWorkload(),
        t,
        np.array([1.0]),
        T,
        inference_ops.causal_pairs(T),
        T,
        T,
        2,
        1.0,
        1.0,
        1.0 if model.is_moe else 0.0,
    )
    serving += inference_ops.head_ops(model, t, T, T, True, True)
    served = {op.name: gemm_key(op, op.name) for op in serving if op.kind == MATMUL}
    served_norms = {op.name: scalar(op.other_bytes) for op in serving if op.name in NORMS}
    # the absorbed decode form's per-head GEMMs have no rows in a prefill pass
    assert all(served.pop(name)[-1] == 0.0 for name in ("q_absorb", "v_up") if name in served)
    trained, trained_norms = {}, {}
    for moe_layer in [False, True] if model.is_moe else [False]:
        ops = flops.layer_ops(model, tokens, 1, t, 1, False, True, moe_layer=moe_layer)
        for op in ops + flops.head_ops(model, tokens, 1, t, 1, False):
            if op.kind == MATMUL:
                key = gemm_key(op, SERVING_NAMES[op.name])
                assert trained.setdefault(key[0], key) == key  # attention is the same in both layer types
            elif SERVING_NAMES.get(op.name) in NORMS:  # read + write each element, 2 bytes
                assert trained_norms.setdefault(SERVING_NAMES[op.name], scalar(op.other_bytes)) == scalar(
                    op.other_bytes
                )
    assert served == trained
    assert served_norms == trained_norms and set(served_norms) >= {"attn_norm", "mlp_norm", "final_norm"}
    inventory = [g for moe in ([False, True] if model.is_moe else [False]) for g in layer_gemms(model, T, t, moe)]
    for g in inventory + [head_gemm(model, T, t)]:  # routed_tokens defaults to T·k: one rank, balanced
        m = None if g.group == "experts" else scalar(g.m)
        assert trained[g.serving_name] == (g.serving_name, m, scalar(g.k), scalar(g.n), scalar(g.flops))
    for name, m, k, n, f in trained.values():
        assert f == 2.0 * (m if m is not None else tokens * model.require_moe().top_k) * k * n, name


def core_ops(ops):
    """{name: op} of an op list's attention-core ops (flash core, eager bmm, serving halves)."""
    return {op.name: op for op in ops if op.attention_core}


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    model_name=st.sampled_from(ALL_MODELS),
    log_tp=st.integers(0, 4),
    tokens=st.integers(1, 16384),
    flash=st.booleans(),
)
def test_a_prefill_pass_and_a_training_forward_run_the_same_attention_and_elementwise_ops(
    model_name, log_tp, tokens, flash
):
    """One inventory of attention cores and element-wise ops (cost/layer_cores.py): a serving prefill
    of one T-token prompt (no cache, 16-bit K,V) and a training forward of one T-token sequence (cp 1,
    no SP) score the same FLOPs per query-key pair and move the same Q, K, V, O bytes. Only the causal
    prefix differs, a named parameter: serving counts T(T+1)/2 pairs, a training causal kernel T·T/2
    and eager training the whole T×T block. Serving also appends the new K, V to the cache, and
    without flash attention both write the scores and read the probabilities, 2 bytes per head and
    pair. The embedding row moves the same bytes (+ dropout's mask and output in training). Editing
    one schedule's FLOPs or bytes alone fails here."""
    model = load_option("model", model_name)
    tp = min(2**log_tp, model.heads)
    T, t = np.array([float(tokens)]), np.array([float(tp)])
    wl = InferenceWorkload(flash_attention=flash)
    pairs = inference_ops.causal_pairs(T)
    moe = 1.0 if model.is_moe else 0.0
    serving = inference_ops.layer_ops(model, wl, t, np.array([1.0]), T, pairs, T, T, 2, 1.0, 1.0 - moe, moe)
    trained = flops.layer_ops(model, tokens, 1, t, 1, False, flash, moe_layer=model.is_moe)
    served, core = core_ops(serving), core_ops(trained)
    a_l = model.heads / tp
    if model.mla is None:
        qk, kv_width = model.d, 2.0 * model.d * max(model.g / tp, 1.0)  # K and V per key position
        cache_write = tokens * kv_width * 2  # the new K, V appended at kv_dtype bf16
        qk_ops, pv_ops = ["attention_qk"], ["attention_pv"]
    else:  # the naive (prefill) form; the absorbed latent ops score no pair in a prefill
        m = model.require_mla()
        qk, kv_width = m.qk_head_dim, a_l * (m.qk_head_dim + m.v_head_dim)
        cache_write = 0.0  # the latent is written by kv_a_proj, not by the attention ops
        qk_ops, pv_ops = ["attention_qk", "attention_latent_qk"], ["attention_pv", "attention_latent_pv"]
        assert all(scalar(served[n].flops) == 0 for n in ("attention_latent_qk", "attention_latent_pv"))
    v = model.d if model.mla is None else model.require_mla().v_head_dim
    serving_flops = sum(scalar(served[n].flops) for n in qk_ops + pv_ops)
    serving_bytes = sum(scalar(served[n].other_bytes) for n in qk_ops + pv_ops)
    qkvo_bytes = 2.0 * (tokens * a_l * (qk + v) + tokens * kv_width)  # Q, O and K, V of every position
    score_bytes = 2.0 * 2.0 * a_l  # per pair: scores written (QKᵀ) and read back (·V), 2 B each
    assert serving_flops / scalar(pairs) == pytest.approx(2.0 * a_l * (qk + v), rel=1e-12)
    assert serving_bytes == pytest.approx(
        qkvo_bytes + cache_write + (0.0 if flash else score_bytes * scalar(pairs)), rel=1e-12
    )
    if flash:
        (op,) = core.values()
        assert scalar(op.flops) / (tokens * tokens / 2) == pytest.approx(2.0 * a_l * (qk + v), rel=1e-12)
        assert scalar(op.other_bytes) == pytest.approx(qkvo_bytes, rel=1e-12)
    else:
        f = sum(scalar(op.flops) for op in core.values())
        assert f / (tokens * tokens) == pytest.approx(2.0 * a_l * (qk + v), rel=1e-12)
        b = sum(scalar(op.other_bytes) for op in core.values())
        assert b == pytest.approx(qkvo_bytes + score_bytes * tokens * tokens, rel=1e-12)
    emb = next(op for op in inference_ops.head_ops(model, t, T, T, True, True) if op.name == "embedding")
    (trained_emb,) = flops.embedding_ops(model, tokens, 1, t, 1, False)
    dropout = 3.0 * tokens * model.hidden if model.dropout else 0.0  # 1-byte mask + 2-byte output
    assert scalar(emb.bytes) == scalar(trained_emb.other_bytes) - dropout == 4.0 * tokens * model.hidden


@pytest.mark.parametrize("model_name", [m for m in ALL_MODELS if load_option("model", m).mla is not None])
@pytest.mark.parametrize("tp", [1, 8])
def test_the_absorbed_gemms_are_kv_up_split_in_two(model_name, tp):
    """MLA's absorbed decode form (DeepSeek-V2 §2.1.3) folds W_UK (the K half of kv_b_proj) into the
    query and applies W_UV (its V half) after attention: q_absorb's and v_up's weights together are
    kv_up's, r_kv·a(n+v)/t, and a decode token runs a/t per-head GEMMs of n×r_kv and r_kv×v."""
    from parallmelism.cost.layer_gemms import absorbed_gemms, attention_gemms

    model, T, t = load_option("model", model_name), np.array([16.0]), np.array([float(tp)])
    m = model.require_mla()
    q_absorb, v_up = absorbed_gemms(model, T, t)
    kv_up = next(g for g in attention_gemms(model, T, t) if g.name == "kv_up")
    assert scalar(q_absorb.weight_elements + v_up.weight_elements) == scalar(kv_up.weight_elements)
    assert scalar(q_absorb.flops) == 2 * 16 * (model.heads / tp) * m.qk_nope_head_dim * m.kv_lora_rank
    assert scalar(v_up.flops) == 2 * 16 * (model.heads / tp) * m.kv_lora_rank * m.v_head_dim
    # a decode pass of 16 tokens on 16 sequences of 100 cached positions runs exactly these
    wl = InferenceWorkload()
    ops = inference_ops.layer_ops(
        model, wl, t, np.array([1.0]), T, T * 100, T * 100, T, 2, 1.0, 1.0, 0.0, decode_part=(T, T * 100, T * 100)
    )
    wb = BYTES_PER_ELEMENT[wl.weight_dtype]
    for g in (q_absorb, v_up):
        op = next(o for o in ops if o.name == g.serving_name)
        assert scalar(op.flops) == scalar(g.flops) and scalar(op.weight_bytes) == scalar(g.weight_elements) * wb
        assert scalar(op.other_bytes) == 2.0 * 16 * (model.heads / tp) * scalar(g.k + g.n)  # per-head in, out


@settings(max_examples=30, deadline=None, derandomize=True)
@given(
    hw_name=st.sampled_from(ALL_HW),
    model_name=st.sampled_from(ALL_MODELS),
    ngpus=st.sampled_from([8, 16, 64]),
    tokens=st.sampled_from([1.0, 64.0, 4096.0]),
    pick=st.integers(0, 10**6),
)
def test_sampled_layouts_of_both_schedules_price_alike(hw_name, model_name, ngpus, tokens, pick):
    """Issue 27's 'Done when' on layouts the grids build (every shipped model × accelerator; the
    hand-built ones above fix dp, sp and ep at 1): each collective a serving layout runs (its TP
    all-reduce, EP dispatch across replicas, pipeline hop) is the record training's builder makes
    for the same tokens and group (bytes, group, stride, seconds per call); the busiest serving
    stage and the training step's critical stage hold whole MoE layers, the count of the layers
    they hold (DeepSeek-V3's first 3 are dense)."""
    from parallmelism.grid.inference import enumerate_inference_layouts

    hw, model = HW.get(hw_name) or stacked(load_option("hardware", hw_name)), load_option("model", model_name)
    cols = enumerate_inference_layouts(model, hw, InferenceWorkload(), GridSpec(ngpus=[ngpus])).columns
    if len(cols["tp"]):
        i = pick % len(cols["tp"])
        lay = {k: int(np.asarray(cols[k])[i]) for k in ("tp", "pp", "ep", "sp", "dp")}
        terms = serving_terms(model, hw, InferenceWorkload(), tokens=tokens, **lay)
        T, t, ep = np.array([tokens]), np.array([float(lay["tp"])]), np.array([float(lay["ep"])])
        n = -(-model.layers // lay["pp"])
        training = {
            "tp": comm.tp_layer_ops(hw, model, T, t, {"all_reduce": 1.0})[0],
            # the neighbour stage is tp·sp·dp ranks away in serving's order (tp, sp, dp, pp)
            "pp hop": comm.pp_hop_op(hw, model, T, t, t * lay["sp"] * lay["dp"], np.array([lay["pp"]])),
        }
        if model.is_moe:
            training["ep"] = comm.ep_layer_ops(hw, model, T, t, ep, 1.0, False, False)[0]
        inside = bool(inference_ops.ep_in_tp(lay["tp"], lay["ep"])) or lay["ep"] == 1
        for rec in terms["collectives"]:
            if rec.role != "ep":  # every other serving record (the SP K/V gather and merge too): the one link model
                hier = rec.axis in TP_HIERARCHICAL
                one = transfer_time_s(hw, rec.kind, rec.nbytes, rec.group, rec.stride, hierarchical=hier)
                assert scalar(rec.time_s) == scalar(one), rec.role
                event(f"serving {rec.role} priced by the link model")
            other = training.get(rec.role)
            if other is None or (rec.role == "ep" and inside):  # EP inside TP: no all-to-all
                continue
            event(f"serving {rec.role} record checked")
            assert (rec.kind, *map(scalar, (rec.nbytes, rec.group, rec.stride, rec.time_s))) == (
                other.kind,
                *map(scalar, (other.nbytes, other.group, other.stride, other.time_s)),
            ), rec.role
        if model.is_moe:
            router = next(op for op in terms["ops"] if op.name == "router")
            first = 0 if lay["pp"] == 1 else int(flops_split(model.layers, lay["pp"])[0][0])
            event(f"serving MoE stage checked, pp {lay['pp']}")
            assert scalar(router.count) == float(flops.moe_layer_counts(model, first, n)[1])
    wl = TrainWorkload(seq_len=4096, global_batch=256)
    grid = GridSpec(ngpus=[ngpus], tp=[min(8, hw.scale_up.domain_size)], cp=[1])
    train_cols = enumerate_training_layouts(model, hw, wl, grid).columns
    if model.is_moe and len(train_cols["tp"]):
        one = {k: np.asarray(v)[[pick % len(train_cols["tp"])]] for k, v in train_cols.items()}
        bd = training_breakdown(one, model, hw, wl, kernel_model(hw))
        counts = [r["count"] for r in bd["ops"] if r["op"] == "router"]
        qkv = sum(r["count"] for r in bd["ops"] if r["op"] in ("qkv", "q_down", "q_proj"))
        event("training MoE stage checked")
        assert counts and all(float(c).is_integer() for c in counts)
        assert 0 < sum(counts) <= qkv  # whole MoE layers, no more than the stage's layers
