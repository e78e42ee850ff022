"""FLOPs closed forms (formulas.md): Megatron num_floating_point_operations, Korthikanti eq. 7,
Narayanan eq. 3; the per-op inventory must add up to them on the published shapes."""

import numpy as np
import pytest

from parallmelism.config import load_option
from parallmelism.cost.flops import (
    attention_core_forward_flops,
    hardware_flops_per_step,
    head_ops,
    layer_ops,
    model_flops_per_step,
)
from parallmelism.grid import RECOMPUTE_CODE


def korthikanti_eq7(B, L, s, h, V):
    return 72 * B * L * s * h**2 * (1 + s / (6 * h) + V / (12 * h * L))


def narayanan_eq3(B, L, s, h, V):
    return 96 * B * L * s * h**2 * (1 + s / (6 * h) + V / (16 * h * L))


@pytest.fixture(scope="module")
def gpt3():
    return load_option("model", "gpt3-175b")


def test_gpt3_model_flops_equal_korthikanti_eq7(gpt3):
    B, s = 1536, 2048
    assert model_flops_per_step(gpt3, B, s) == pytest.approx(korthikanti_eq7(B, 96, s, 12288, 51200), rel=1e-12)


def test_gpt3_full_recompute_equals_narayanan_eq3(gpt3):
    B, s = 1536, 2048
    hw = hardware_flops_per_step(gpt3, B, s, RECOMPUTE_CODE["full"])
    assert hw == pytest.approx(narayanan_eq3(B, 96, s, 12288, 51200), rel=1e-12)


def test_selective_recompute_adds_the_attention_core_forward(gpt3):
    """We count what runs: + 4·B·s²·h·L. Korthikanti's HFU (1 + s/(3h)) implies three times that."""
    B, s, h, L = 64, 2048, 12288, 96
    F = model_flops_per_step(gpt3, B, s)
    sel = hardware_flops_per_step(gpt3, B, s, RECOMPUTE_CODE["selective"])
    assert sel - F == pytest.approx(4 * B * s * s * h * L)
    published = 72 * B * L * s * h**2 * (1 + s / (3 * h) + 51200 / (12 * h * L))
    assert published - F == pytest.approx(3 * (sel - F))
    assert hardware_flops_per_step(gpt3, B, s, RECOMPUTE_CODE["none"]) == pytest.approx(F)


def test_llama70b_matches_torch_flop_counter():
    """shared/README.md: FlopCounterMode on Llama 3.1 70B, batch 1, s 8192 counts 3.9439e15 (non-causal)."""
    m = load_option("model", "llama3.1-70b")
    assert model_flops_per_step(m, 1, 8192) == pytest.approx(3.9439e15, rel=1e-4)


def test_causal_convention_halves_only_the_score_term():
    m = load_option("model", "llama3.1-70b")
    s = 8192
    diff = model_flops_per_step(m, 1, s) - model_flops_per_step(m, 1, s, causal=True)
    assert diff == pytest.approx(attention_core_forward_flops(m, 1, s) * 3 / 2)


@pytest.mark.parametrize("name", ["gpt3-175b", "llama3.1-70b", "llama3.1-405b"])
def test_op_inventory_adds_up_to_megatron(name):
    """Eager ops (full s×s scores) on one GPU without parallelism, forward + backward (3×), all layers
    plus logits = Megatron's formula (GQA and SwiGLU included)."""
    m = load_option("model", name)
    s, b = 4096, 2
    ops = layer_ops(m, s, b, 1, 1, False, flash=False) + []
    layer = sum(float(np.asarray(o.flops)) * (1 + o.bwd_flops) for o in ops)
    head = sum(float(np.asarray(o.flops)) * (1 + o.bwd_flops) for o in head_ops(m, s, b, 1, 1, False))
    assert layer * m.layers + head == pytest.approx(model_flops_per_step(m, b, s), rel=1e-12)


def test_tp_shards_split_flops_evenly():
    m = load_option("model", "llama3.1-70b")  # g = 8: tp 8 keeps one KV head per rank
    f1 = sum(float(np.asarray(o.flops)) for o in layer_ops(m, 8192, 1, 1, 1, False, flash=True))
    f8 = sum(float(np.asarray(o.flops)) for o in layer_ops(m, 8192, 1, 8, 1, True, flash=True))
    assert f8 == pytest.approx(f1 / 8)


def test_grouped_expert_gemms_read_every_local_experts_weights():
    """Megatron's grouped GEMM runs a rank's experts in one kernel: the FLOPs are the routed tokens',
    and each of the num_experts/ep experts' weights is read (bf16) and its main gradient accumulated
    (fp32 read + write, plus the bf16 weight read for dgrad). Mixtral 8x7B: gate_up is 4096 x
    2·14336, so ep=1 reads 7 more experts' weights than ep=8 on the same tokens."""
    mixtral = load_option("model", "mixtral-8x7b")

    def experts(ep):
        ops = layer_ops(mixtral, 4096, 1, 1, 1, False, True, moe_layer=True, ep=ep)
        return next(op for op in ops if op.name == "experts_up")

    one, eight = experts(1), experts(8)
    w = 4096 * 2 * 14336
    assert float(one.flops) == float(eight.flops)
    assert float(one.other_bytes) - float(eight.other_bytes) == 2.0 * 7 * w
    assert float(one.backward_bytes()) - float(eight.backward_bytes()) == 10.0 * 7 * w
