"""Parameter counts against ../shared/reference/model_architectures.csv and official totals."""

import csv

import numpy as np
import pytest

from parallmelism.config import load_option
from parallmelism.cost.params import norm_params_total, params_per_gpu, total_params
from tests.conftest import shared_reference

SHIPPED = ["llama3.1-8b", "llama3.1-70b", "llama3.1-405b", "grok-1", "mixtral-8x7b", "mixtral-8x22b", "gpt3-175b"]


def reference_rows():
    with open(shared_reference("model_architectures.csv")) as f:
        return {r["model"]: r for r in csv.DictReader(f)}


@pytest.mark.parametrize("name", SHIPPED)
def test_shapes_match_reference(name):
    ref = reference_rows()[name]
    m = load_option("model", name)
    assert (m.hidden, m.layers, m.heads, m.ffn_hidden, m.vocab) == tuple(
        int(ref[k]) for k in ("hidden_size", "num_layers", "num_attention_heads", "ffn_hidden_size", "vocab_size")
    )
    assert m.g == int(ref["num_kv_heads"])
    assert m.tie_embeddings == (ref["tie_embeddings"] == "true")
    if ref["num_experts"]:
        assert (m.moe.num_experts, m.moe.top_k, m.moe.ffn_hidden) == (
            int(ref["num_experts"]),
            int(ref["top_k"]),
            int(ref["moe_ffn_hidden_size"]),
        )


@pytest.mark.parametrize("name", [n for n in SHIPPED if n not in ("mixtral-8x22b", "gpt3-175b")])
def test_exact_total_params(name):
    assert total_params(load_option("model", name)) == int(reference_rows()[name]["total_params"])


def test_official_totals_without_exact_reference():
    # Mixtral 8x22B: 141B total, 39B active (Mistral AI); GPT-3: "175B" (174.6B with V=51200, learned positions)
    m = load_option("model", "mixtral-8x22b")
    assert total_params(m) == pytest.approx(141e9, rel=0.005)
    assert total_params(m, active=True) == pytest.approx(39e9, rel=0.01)
    assert total_params(load_option("model", "gpt3-175b")) == pytest.approx(175e9, rel=0.005)
    # Mixtral 8x7B: 12.9B active (Mistral AI)
    assert total_params(load_option("model", "mixtral-8x7b"), active=True) == pytest.approx(12.9e9, rel=0.005)


def test_llama_closed_form_per_layer():
    # formulas.md: attention h·q + 2·h·g·d + q·h, SwiGLU 3·h·I, norms 2h, + embeddings 2·V·h + final h
    m = load_option("model", "llama3.1-8b")
    h, q, g, d, I, V, L = 4096, 4096, 8, 128, 14336, 128256, 32
    per_layer = h * q + 2 * h * g * d + q * h + 3 * h * I + 2 * h
    assert total_params(m) == L * per_layer + 2 * V * h + h == 8_030_261_248
    assert norm_params_total(m) == (2 * L + 1) * h


def test_per_gpu_shards_sum_to_total():
    m = load_option("model", "llama3.1-70b")
    tp = np.array([1, 8])
    p = params_per_gpu(m, tp, np.array([1, 1]), 80, 0, True, True)
    assert p["total"][0] == total_params(m)
    # TP=8 with 8 KV heads: every matrix splits 8 ways; norms stay replicated on every rank
    norms = (2 * 80 + 1) * 8192
    assert p["total"][1] == pytest.approx((total_params(m) - norms) / 8 + norms)


def test_kv_heads_replicate_above_kv_head_count():
    m = load_option("model", "llama3.1-70b")  # 8 KV heads of 128
    p = params_per_gpu(m, np.array([8, 16]), np.array([1, 1]), 80, 0, True, True)
    kv_per_rank = 2 * 8192 * 128  # one whole KV head (K and V) per rank at tp 8 and at tp 16
    q_o = 2 * 8192 * 8192 * 80
    assert p["attention"][0] == q_o / 8 + 80 * kv_per_rank
    assert p["attention"][1] == q_o / 16 + 80 * kv_per_rank


def test_experts_shard_over_ep():
    m = load_option("model", "mixtral-8x7b")
    p = params_per_gpu(m, np.array([1, 1]), np.array([1, 8]), 32, 0, True, True)
    experts_total = 32 * 8 * 3 * 4096 * 14336
    assert p["experts"][0] == experts_total
    assert p["experts"][1] == experts_total / 8


def test_uneven_pipeline_split_llama3_405b():
    # Llama 3 (Dubey et al. 2024, section 3.3.2): 126 layers on 16 stages, one layer fewer on the
    # first and the last stage, which carry the embedding and the output head.
    from parallmelism.grid import stage_layer_split

    first, middle, last = stage_layer_split(126, np.array([16]))
    assert (int(first[0]), int(middle[0]), int(last[0])) == (7, 8, 7)
    assert 7 + 14 * 8 + 7 == 126
    m = load_option("model", "llama3.1-405b")
    stages = [
        params_per_gpu(m, 8, 1, n, lo, i == 0, i == 15)["total"]
        for i, (n, lo) in enumerate([(7, 0)] + [(8, 7 + 8 * k) for k in range(14)] + [(7, 119)])
    ]
    norms = (2 * 126 + 1) * 16384
    assert float(sum(stages)) == pytest.approx((total_params(m) - norms) / 8 + norms)
