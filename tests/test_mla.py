"""Multi-head latent attention (DeepSeek-V3): spec, exact parameter counts, FLOPs, KV cache, activations.

Reference values: ../shared/reference/model_architectures.csv row deepseek-v3 (shapes; official 671B
total / 37B active) and transformers' DeepseekV3ForCausalLM built on the meta device (exact count,
671,026,404,352; crosscheck extra). Closed forms are written out here term by term from the HF module
list, not taken from parallmelism.
"""

from __future__ import annotations

import csv

import numpy as np
import pytest
from pydantic import ValidationError

from parallmelism.config import load_option
from parallmelism.cost.params import params_per_gpu, total_params
from parallmelism.specs import ModelSpec
from tests.conftest import shared_reference

HF_DEEPSEEK_V3_PARAMS = 671_026_404_352  # transformers 5.x, meta device (test_mla_params_equal_transformers)

# A small DeepSeek-V3-style model: 2 dense layers then MoE with a shared expert; q compression on.
SMALL = dict(
    name="dsv3-small",
    hidden=256,
    layers=4,
    heads=8,
    ffn_hidden=512,
    vocab=1000,
    mla=dict(q_lora_rank=96, kv_lora_rank=64, qk_nope_head_dim=32, qk_rope_head_dim=16, v_head_dim=24),
    moe=dict(num_experts=8, top_k=2, ffn_hidden=128, first_dense_layers=2, num_shared_experts=1),
)
SMALL_NO_QLORA = {**SMALL, "name": "dsv2-lite-style", "mla": {**SMALL["mla"], "q_lora_rank": None}}


def mla_layer_closed_form(h, a, rq, rkv, n, p, v):
    """HF DeepseekV3Attention modules: q_a_proj, q_a_layernorm, q_b_proj (or q_proj), kv_a_proj_with_mqa,
    kv_a_layernorm, kv_b_proj, o_proj."""
    q = h * a * (n + p) if rq is None else h * rq + rq + rq * a * (n + p)
    return q + h * (rkv + p) + rkv + rkv * a * (n + v) + a * v * h


def test_shapes_match_reference():
    ref = {r["model"]: r for r in csv.DictReader(open(shared_reference("model_architectures.csv")))}["deepseek-v3"]
    m = load_option("model", "deepseek-v3")
    assert (m.hidden, m.layers, m.heads, m.ffn_hidden, m.vocab) == tuple(
        int(ref[k]) for k in ("hidden_size", "num_layers", "num_attention_heads", "ffn_hidden_size", "vocab_size")
    )
    assert (m.moe.num_experts, m.moe.top_k, m.moe.ffn_hidden) == (
        int(ref["num_experts"]),
        int(ref["top_k"]),
        int(ref["moe_ffn_hidden_size"]),
    )
    assert m.tie_embeddings == (ref["tie_embeddings"] == "true")
    note = ref["source"]
    mla = m.mla
    for key, val in (
        ("q_lora_rank", mla.q_lora_rank),
        ("kv_lora_rank", mla.kv_lora_rank),
        ("qk_nope", mla.qk_nope_head_dim),
        ("qk_rope", mla.qk_rope_head_dim),
        ("v_head", mla.v_head_dim),
    ):
        assert f"{key} {val}" in note
    assert "first 3 layers dense" in note and m.moe.first_dense_layers == 3
    assert "1 shared expert" in note and m.moe.num_shared_experts == 1


def test_total_params_exact_and_official():
    m = load_option("model", "deepseek-v3")
    assert total_params(m) == HF_DEEPSEEK_V3_PARAMS
    assert total_params(m) == pytest.approx(671e9, rel=0.001)  # official 671B total
    assert total_params(m, active=True) == pytest.approx(37e9, rel=0.02)  # official 37B active (37.55B)


def test_total_params_closed_form():
    h, L, a, I, V, E, Ie, fd = 7168, 61, 128, 18432, 129280, 256, 2048, 3
    attn = mla_layer_closed_form(h, a, 1536, 512, 128, 64, 128)
    assert attn == 187_107_328
    dense = attn + 3 * h * I + 2 * h
    moe = attn + E * 3 * h * Ie + h * E + 3 * h * Ie + 2 * h
    assert total_params(load_option("model", "deepseek-v3")) == fd * dense + (L - fd) * moe + 2 * V * h + h


@pytest.mark.parametrize("spec", [SMALL, SMALL_NO_QLORA])
def test_per_gpu_tp_shards_heads_and_replicates_down_projections(spec):
    m = ModelSpec.model_validate(spec)
    h, a, L = 256, 8, 4
    mla = m.mla
    rq, rkv, n, p, v = mla.q_lora_rank, mla.kv_lora_rank, mla.qk_nope_head_dim, mla.qk_rope_head_dim, mla.v_head_dim
    replicated = h * (rkv + p) + rkv + (0 if rq is None else h * rq + rq)
    sharded = rkv * a * (n + v) + a * v * h + (h * a * (n + p) if rq is None else rq * a * (n + p))
    assert replicated + sharded == mla_layer_closed_form(h, a, rq, rkv, n, p, v)
    pg = params_per_gpu(m, np.array([1, 4]), np.array([1, 1]), L, 0, True, True)
    assert pg["total"][0] == total_params(m)
    assert pg["attention"][0] == L * (replicated + sharded)
    assert pg["attention"][1] == L * (replicated + sharded / 4)


@pytest.mark.parametrize(
    "bad,text",
    [
        (dict(kv_heads=4), "kv_heads=4 must equal heads=8"),
        (dict(head_dim=64), "head_dim=64 must be unset"),
        (dict(qk_norm=True), "not supported with MLA"),
        (dict(mla={**SMALL["mla"], "kv_lora_rank": 0}), "kv_lora_rank"),
    ],
)
def test_bad_mla_specs_refused(bad, text):
    with pytest.raises(ValidationError, match=text):
        ModelSpec.model_validate({**SMALL, **bad})


def test_mla_off_by_default():
    m = load_option("model", "llama3.1-8b")
    assert m.mla is None and m.d == 128
    assert ModelSpec.model_validate({**SMALL, "head_dim": 48}).d == 48  # nope + rope


def test_mla_params_equal_transformers():
    """Ours == transformers DeepseekV3ForCausalLM on the meta device: full DeepSeek-V3 and two small ones."""
    torch = pytest.importorskip("torch", reason="needs the [crosscheck] extra")
    pytest.importorskip("transformers", reason="needs the [crosscheck] extra")
    from tests.crosscheck import hf

    for m in (
        load_option("model", "deepseek-v3"),
        ModelSpec.model_validate(SMALL),
        ModelSpec.model_validate(SMALL_NO_QLORA),
    ):
        with torch.device("meta"):
            built = hf.build(m)
        n = sum(p.numel() for p in built.parameters())
        assert total_params(m) == n, m.name
        if m.name == "deepseek-v3":
            assert n == HF_DEEPSEEK_V3_PARAMS


# The published DeepSeek-V3 config.json (deepseek-ai/DeepSeek-V3), shape and routing keys as shipped.
DEEPSEEK_V3_CONFIG = {
    "architectures": ["DeepseekV3ForCausalLM"],
    "model_type": "deepseek_v3",
    "_name_or_path": "deepseek-ai/DeepSeek-V3",
    "hidden_size": 7168,
    "intermediate_size": 18432,
    "moe_intermediate_size": 2048,
    "num_hidden_layers": 61,
    "num_attention_heads": 128,
    "num_key_value_heads": 128,
    "n_shared_experts": 1,
    "n_routed_experts": 256,
    "num_experts_per_tok": 8,
    "first_k_dense_replace": 3,
    "moe_layer_freq": 1,
    "n_group": 8,
    "topk_group": 4,
    "topk_method": "noaux_tc",
    "scoring_func": "sigmoid",
    "norm_topk_prob": True,
    "routed_scaling_factor": 2.5,
    "q_lora_rank": 1536,
    "kv_lora_rank": 512,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
    "num_nextn_predict_layers": 1,
    "vocab_size": 129280,
    "hidden_act": "silu",
    "tie_word_embeddings": False,
    "attention_bias": False,
    "max_position_embeddings": 163840,
    "rms_norm_eps": 1e-06,
    "rope_theta": 10000,
}


def _import_hf(cfg: dict, tmp_path):
    import json

    import yaml

    from tests.conftest import invoke

    src = tmp_path / "config.json"
    src.write_text(json.dumps(cfg))
    out = tmp_path / "models" / "x.yaml"
    code, text = invoke("import-hf", src, "--out", out)
    assert code == 0, text
    return ModelSpec.model_validate(yaml.safe_load(out.read_text()))


def test_import_hf_deepseek_v3_round_trip(tmp_path):
    """config.json -> YAML -> ModelSpec: the shipped deepseek-v3 shapes and the exact count."""
    spec = _import_hf(DEEPSEEK_V3_CONFIG, tmp_path)
    shipped = load_option("model", "deepseek-v3")
    assert spec.mla == shipped.mla and spec.moe == shipped.moe
    keep = ("hidden", "layers", "heads", "g", "d", "q_dim", "ffn_hidden", "vocab", "tie_embeddings", "gated")
    assert all(getattr(spec, k) == getattr(shipped, k) for k in keep)
    assert total_params(spec) == HF_DEEPSEEK_V3_PARAMS


def test_import_hf_small_deepseek_v3_equals_transformers(tmp_path):
    """A small DeepSeek-V3-style config.json (q_lora_rank null and set): our count == transformers'."""
    torch = pytest.importorskip("torch", reason="needs the [crosscheck] extra")
    transformers = pytest.importorskip("transformers", reason="needs the [crosscheck] extra")
    small = {
        **DEEPSEEK_V3_CONFIG,
        "hidden_size": 256,
        "intermediate_size": 512,
        "moe_intermediate_size": 64,
        "num_hidden_layers": 5,
        "num_attention_heads": 8,
        "num_key_value_heads": 8,
        "n_routed_experts": 16,
        "num_experts_per_tok": 4,
        "n_shared_experts": 2,
        "first_k_dense_replace": 2,
        "n_group": 1,
        "topk_group": 1,
        "q_lora_rank": 96,
        "kv_lora_rank": 64,
        "qk_nope_head_dim": 32,
        "qk_rope_head_dim": 16,
        "v_head_dim": 24,
        "vocab_size": 1000,
    }
    for cfg in (small, {**small, "q_lora_rank": None}):
        spec = _import_hf(cfg, tmp_path)
        with torch.device("meta"):
            m = transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.for_model(**cfg))
        assert total_params(spec) == sum(p.numel() for p in m.parameters())


@pytest.mark.parametrize(
    "bad,text",
    [
        ({"num_key_value_heads": 64}, "num_key_value_heads=64 must equal"),
        ({"moe_layer_freq": 2}, "moe_layer_freq=2"),
        ({"first_k_dense_replace": 61}, "first_k_dense_replace=61"),
        ({"kv_lora_rank": 0}, "kv_lora_rank=0"),
    ],
)
def test_import_hf_bad_deepseek_configs(bad, text, tmp_path):
    import json

    from tests.conftest import invoke

    src = tmp_path / "config.json"
    src.write_text(json.dumps({**DEEPSEEK_V3_CONFIG, **bad}))
    out = tmp_path / "x.yaml"
    code, err = invoke("import-hf", src, "--out", out)
    assert code == 2 and text in err and "Traceback" not in err, err
    assert not out.exists()


# ---- FLOPs (training, non-causal convention unless named) ---------------------------------------


def mla_attention_fwd_flops_per_token(h, a, rq, rkv, n, p, v, s):
    """2 × every attention GEMM weight (norms are not GEMMs) + scores 2·s·a·(n+p) + ·V 2·s·a·v."""
    weights = mla_layer_closed_form(h, a, rq, rkv, n, p, v) - rkv - (rq or 0)
    return 2 * weights + 2 * s * a * (n + p) + 2 * s * a * v


def test_model_flops_closed_form_deepseek_v3():
    from parallmelism.cost.flops import attention_core_forward_flops, model_flops_per_step

    m = load_option("model", "deepseek-v3")
    h, L, I, V, k, Ie, fd, s, B = 7168, 61, 18432, 129280, 8, 2048, 3, 4096, 2
    attn = mla_attention_fwd_flops_per_token(h, 128, 1536, 512, 128, 64, 128, s)
    dense_mlp, moe_mlp = 2 * 3 * h * I, 2 * 3 * h * Ie * (k + 1)  # top-8 routed + 1 shared (router excluded)
    fwd_per_token = L * attn + fd * dense_mlp + (L - fd) * moe_mlp + 2 * h * V
    assert model_flops_per_step(m, B, s) == pytest.approx(3 * B * s * fwd_per_token, rel=1e-12)
    core = 2 * B * s * s * 128 * (192 + 128) * L
    assert attention_core_forward_flops(m, B, s) == pytest.approx(core, rel=1e-12)
    causal_cut = model_flops_per_step(m, B, s) - model_flops_per_step(m, B, s, causal=True)
    assert causal_cut == pytest.approx(3 * core / 2, rel=1e-9)


@pytest.mark.parametrize("which", ["deepseek-v3", "small", "small-no-qlora"])
def test_op_inventory_adds_up_to_closed_form(which):
    """Eager ops on one GPU without parallelism, fwd + bwd, every layer + logits = model FLOPs."""
    from parallmelism.cost.flops import head_ops, layer_ops, model_flops_per_step

    m = {
        "deepseek-v3": load_option("model", "deepseek-v3"),
        "small": ModelSpec.model_validate(SMALL),
        "small-no-qlora": ModelSpec.model_validate(SMALL_NO_QLORA),
    }[which]
    s, b = 1024, 2

    def total(ops):
        return sum(float(np.asarray(o.flops)) * (1 + o.bwd_flops) for o in ops)

    dense = total(layer_ops(m, s, b, 1, 1, False, flash=False))
    moe = total(layer_ops(m, s, b, 1, 1, False, flash=False, moe_layer=True))
    router = 3 * 2 * s * b * m.hidden * m.moe.num_experts  # an op of ours, not in the closed form
    n_moe = m.num_moe_layers
    got = (m.layers - n_moe) * dense + n_moe * (moe - router) + total(head_ops(m, s, b, 1, 1, False))
    assert got == pytest.approx(model_flops_per_step(m, b, s), rel=1e-12)


def test_tp_splits_up_projections_and_replicates_down_projections():
    from parallmelism.cost.flops import MATMUL, layer_ops

    m = load_option("model", "deepseek-v3")
    T, h = 4096.0, 7168

    def gemms(t):
        return {
            o.name: float(np.asarray(o.flops))
            for o in layer_ops(m, 4096, 1, t, 1, t > 1, flash=True)
            if o.kind == MATMUL
        }

    one, eight = gemms(1), gemms(8)
    assert one["q_down"] == eight["q_down"] == 2 * T * h * 1536
    assert one["kv_down"] == eight["kv_down"] == 2 * T * h * (512 + 64)
    for name, flops in (
        ("q_up", 2 * T * 1536 * 128 * 192),
        ("kv_up", 2 * T * 512 * 128 * 256),
        ("out_proj", 2 * T * 128 * 128 * h),
    ):
        assert one[name] == flops and eight[name] == pytest.approx(flops / 8)
    core = [o for o in layer_ops(m, 4096, 1, 8, 1, True, flash=True) if o.name == "attention_core"][0]
    assert float(np.asarray(core.flops)) == pytest.approx(2 * T * 4096 * 128 * (192 + 128) / 8 * 0.5)  # causal


@pytest.mark.parametrize("spec", [SMALL, SMALL_NO_QLORA])
def test_flops_equal_flop_counter_small(spec):
    """FlopCounterMode on the meta device (transformers DeepseekV3, eager bmm attention, grouped_mm
    experts) == ours + the router GEMM, forward and forward+backward, attention core and GEMMs."""
    pytest.importorskip("torch", reason="needs the [crosscheck] extra")
    pytest.importorskip("transformers", reason="needs the [crosscheck] extra")
    from tests.crosscheck import hf
    from tests.crosscheck.test_crosscheck_params_flops import ours_flops

    m = ModelSpec.model_validate(spec)
    got, want = hf.count_flops(m, 512, batch=2), ours_flops(m, 512, 2)
    for key in ("fwd_attention", "fwd_matmul", "fwdbwd_attention", "fwdbwd_matmul", "fwdbwd_total"):
        assert got[key] == pytest.approx(want[key], rel=1e-12), (key, got[key], want[key])
    # and against the hand closed form (router included, 2·T·h·E per MoE layer)
    mla = m.mla
    per_tok = m.layers * mla_attention_fwd_flops_per_token(256, 8, mla.q_lora_rank, 64, 32, 16, 24, 512)
    per_tok += 2 * 2 * 3 * 256 * 512 + 2 * (2 * 3 * 256 * 128 * 3 + 2 * 256 * 8) + 2 * 256 * 1000
    assert got["fwd_total"] == 2 * 512 * per_tok


# ---- serving memory: latent KV cache and weights ------------------------------------------------


def test_kv_cache_is_the_compressed_latent():
    """Absorbed MLA: (kv_lora_rank + qk_rope_head_dim) = 576 values per token per layer, on every TP rank."""
    from parallmelism.cost.inference_memory import kv_cache_bytes_per_sequence
    from parallmelism.specs import InferenceWorkload

    m = load_option("model", "deepseek-v3")
    ctx = 4096 + 1024
    for kv_dtype, nbytes in (("bf16", 2), ("fp8", 1)):
        wl = InferenceWorkload(input_len=4096, output_len=1024, batch=1, kv_dtype=kv_dtype)
        got = kv_cache_bytes_per_sequence(m, wl, np.array([1, 8, 16]), np.array([61, 61, 31]), np.array([1, 1, 2]), ctx)
        want = np.array([61 * 576 * nbytes * ctx, 61 * 576 * nbytes * ctx, 31 * 576 * nbytes * ctx / 2])
        np.testing.assert_allclose(got, want, rtol=1e-15)
    # 70,272 bytes per token for the whole bf16 model; caching the decompressed per-head K (n+p = 192)
    # and V (128) instead would take 128·320 = 40,960 values per layer, 71× more
    assert 61 * 576 * 2 == 70_272 and 61 * 128 * (192 + 128) * 2 / 70_272 == pytest.approx(71.1, abs=0.05)


def test_serving_weights_sum_to_total_and_shard_like_training():
    from parallmelism.cost.inference_ops import weight_elements_per_gpu

    m = load_option("model", "deepseek-v3")
    linear, half = weight_elements_per_gpu(m, 1, 1, m.layers, 1)
    assert linear + half == total_params(m) == HF_DEEPSEEK_V3_PARAMS
    lin8, half8 = weight_elements_per_gpu(m, 8, 1, m.layers, 1)  # ep 1: experts split by tp as in training
    train8 = params_per_gpu(m, np.array([8]), np.array([1]), m.layers, 0, True, True)["total"][0]
    assert float(lin8 + half8) == pytest.approx(train8, rel=1e-12)


# ---- activations (Megatron-style inventory, cost/activations.py) --------------------------------


def test_activation_inventory_closed_form():
    """Per token of one dense DeepSeek-V3 layer, flash, no recompute, bf16 (written out by tensor)."""
    from parallmelism.cost.activations import FULL, NONE, SELECTIVE, layer_activation_bytes

    m = load_option("model", "deepseek-v3")
    h, a, I, s, b = 7168, 128, 18432, 4096, 1
    for t, sp in ((1, False), (8, True)):
        r = t if sp else 1
        attn = (2 * h + 2 * h) / r  # norm input, down-projection input
        attn += 2 * 1536 + 2 * 1536 + 2 * 512 + 2 * 512  # latents: replicated, every token
        attn += (2 * a * 192 + 2 * a * 192 + 2 * a * 128 + 2 * a * 128) / t  # Q, K, V, o_proj input
        lse = 4 * a / t
        mlp = (2 * h + 2 * h) / r + 6 * I / t
        got = {rc: float(layer_activation_bytes(m, s, b, t, 1, sp, rc, flash=True)) for rc in (NONE, SELECTIVE, FULL)}
        assert got[NONE] == pytest.approx(s * b * (attn + lse + mlp), rel=1e-12)
        assert got[SELECTIVE] == pytest.approx(s * b * (attn + mlp), rel=1e-12)
        assert got[FULL] == pytest.approx(s * b * 2 * h / r, rel=1e-12)


@pytest.mark.parametrize("spec", [SMALL, SMALL_NO_QLORA])
def test_activation_inventory_equals_transformers_up_to_named_tensors(spec):
    """Bytes autograd saves in one dense transformers DeepseekV3 layer (eager attention, fake tensors)
    minus ours = exactly the unfused-kernel tensors named in tests/crosscheck/test_crosscheck_activations.py:
    per RMSNorm (2 main + the latent ones) an fp32 upcast (+2·width), rstd (+4) and the normalized input
    before ·w (+2·width); SiLU(gate) +2I; the fp32 softmax copy +4·a·s. MLA adds no other difference."""
    pytest.importorskip("torch", reason="needs the [crosscheck] extra")
    pytest.importorskip("transformers", reason="needs the [crosscheck] extra")
    from parallmelism.cost.activations import NONE, layer_activation_bytes
    from tests.crosscheck import hf

    m = ModelSpec.model_validate(spec)
    s, b = 128, 2
    got = hf.saved_bytes_of_layer(m, s, b, "eager", fake=True)
    ours = float(layer_activation_bytes(m, s, b, 1, 1, False, NONE, flash=False))
    widths = [256, 256, 64] + ([] if m.mla.q_lora_rank is None else [m.mla.q_lora_rank])
    named = sum(2 * w + 4 + 2 * w for w in widths) + 2 * 512 + 4 * 8 * s
    assert got - ours == s * b * named


def test_cp_ring_carries_decompressed_k_and_v_for_mla():
    # GQA: K and V are 2·g·d per token (whole heads per TP rank); MLA's ring passes decompressed
    # per-head K (nope+rope = 192) and V (128): (a/t)·320 per token, 128 heads over tp 8 -> 5120.
    from parallmelism.config import load_option
    from parallmelism.cost.shapes import kv_width_per_rank

    assert float(kv_width_per_rank(load_option("model", "deepseek-v3"), 8)) == 16 * (192 + 128)
    assert float(kv_width_per_rank(load_option("model", "llama3.1-70b"), 8)) == 2 * 1 * 128
    assert float(kv_width_per_rank(load_option("model", "llama3.1-70b"), 16)) == 2 * 1 * 128
