"""Cross-check against PyTorch/transformers: exact parameter counts and FLOPs of every shipped model.

Models are built from configs only (no weights, no network; HF_HUB_OFFLINE=1) on the meta device.
Grok-1 is built as a Mixtral-style MoE with Grok-1's shapes (Llama-style layers, tied embeddings);
GPT-3 175B as GPT-2 code (LayerNorm + biases + learned positions, n_positions = 2048, tied head).

FLOPs convention: multiply-add = 2 FLOPs, attention scores counted WITHOUT causal masking (the
meta-device attention is a plain bmm over the full s×s matrix), backward = 2× forward. Megatron-LM's
`num_floating_point_operations` (formulas.md) in the same convention:
  F = 12·B·s·L·h²·[(1 + g/a + s/h)·(q/h) + (I/h)·k·(3/2 if gated else 1) + V/(2·L·h)]
with one named addition the closed form leaves out: the MoE router, 2·s·b·h·E per MoE layer forward.
"""

from __future__ import annotations

import csv

import pytest

torch = pytest.importorskip("torch", reason="cross-checks need the [crosscheck] extra (torch==2.13.0)")
pytest.importorskip("transformers", reason="cross-checks need the [crosscheck] extra (transformers)")

from conftest import shared_reference  # noqa: E402
from parallmelism.config import load_option  # noqa: E402
from parallmelism.config.paths import option_files, user_config_dirs  # noqa: E402
from parallmelism.cost.params import total_params  # noqa: E402

from . import hf  # noqa: E402

SHIPPED = sorted(option_files("model", user_config_dirs(None)))
GQA = [n for n in SHIPPED if load_option("model", n).mla is None]  # MLA models: closed form in tests/test_mla.py
SEQS = (2048, 8192)


def megatron_flops(model, seq: int, batch: int = 1) -> dict[str, float]:
    """formulas.md closed form (non-causal), split into attention core and matmuls, fwd and fwd+bwd."""
    h, L, a, g, q, V, s, B = (model.hidden, model.layers, model.heads, model.g, model.q_dim, model.vocab, seq, batch)
    gate = 1.5 if model.gated else 1.0
    n_moe = model.num_moe_layers
    mlp = (L - n_moe) * model.ffn_hidden * gate
    router = 0
    if model.moe is not None:
        mlp += n_moe * model.moe.ffn_hidden * model.moe.top_k * gate
        router = 6 * B * s * h * model.moe.num_experts * n_moe  # fwd+bwd, not in Megatron's form
    F = 12 * B * s * L * h * h * ((1 + g / a + s / h) * (q / h) + mlp / (L * h) + V / (2 * L * h))
    attn = 12 * B * s * L * h * h * (s / h) * (q / h)
    total = F + router
    return {
        "fwdbwd_total": total,
        "fwdbwd_attention": attn,
        "fwdbwd_matmul": total - attn,
        "fwd_total": total / 3,
        "fwd_attention": attn / 3,
        "fwd_matmul": (total - attn) / 3,
    }


def ours_flops(model, seq: int, batch: int = 1) -> dict[str, float]:
    """Our FLOPs (`parallmelism.cost.flops`, non-causal) plus the router term named above."""
    from parallmelism.cost.flops import attention_core_forward_flops, model_flops_per_step

    router = 0.0
    if model.moe is not None:
        router = 6.0 * batch * seq * model.hidden * model.moe.num_experts * model.num_moe_layers
    total = float(model_flops_per_step(model, batch, seq, causal=False)) + router
    attn = 3.0 * float(attention_core_forward_flops(model, batch, seq))
    return {
        "fwdbwd_total": total,
        "fwdbwd_attention": attn,
        "fwdbwd_matmul": total - attn,
        "fwd_total": total / 3,
        "fwd_attention": attn / 3,
        "fwd_matmul": (total - attn) / 3,
    }


def test_our_flops_equal_the_closed_form():
    """Our module collapses to formulas.md (Megatron) for every shipped GQA model: the refinement adds nothing."""
    for name in GQA:
        model = load_option("model", name)
        for seq in SEQS:
            want, got = megatron_flops(model, seq, 4), ours_flops(model, seq, 4)
            for k in want:
                assert got[k] == pytest.approx(want[k], rel=1e-12), (name, seq, k)


def test_shipped_models_include_the_reference_set():
    assert {"llama3.1-8b", "llama3.1-70b", "llama3.1-405b", "mixtral-8x7b", "grok-1", "gpt3-175b"} <= set(SHIPPED)


@pytest.mark.parametrize("name", SHIPPED)
def test_parameter_count_equals_pytorch(name):
    model = load_option("model", name)
    with torch.device("meta"):
        m = hf.build(model)
    assert sum(p.numel() for p in m.parameters()) == total_params(model)


def test_reference_counts_equal_pytorch():
    """The published totals in model_architectures.csv equal the meta-device count too."""
    rows = list(csv.DictReader(open(shared_reference("model_architectures.csv"))))
    checked = 0
    for r in rows:
        if r["model"] in SHIPPED and r["total_params"]:
            with torch.device("meta"):
                m = hf.build(load_option("model", r["model"]))
            assert sum(p.numel() for p in m.parameters()) == int(r["total_params"]), r["model"]
            checked += 1
    assert checked >= 5


def test_flop_counter_reproduces_readme_figure():
    """../shared/README.md: Llama 3.1 70B, batch 1, sequence 8192: 3.9439e15 FLOPs fwd+bwd."""
    got = hf.count_flops(load_option("model", "llama3.1-70b"), 8192)["fwdbwd_total"]
    assert got == pytest.approx(3.9439e15, rel=1e-4)


@pytest.mark.parametrize("seq", SEQS)
@pytest.mark.parametrize("name", SHIPPED)
def test_flops_equal_pytorch(name, seq):
    """FlopCounterMode equals `parallmelism.cost.flops` (+ router), fwd and fwd+bwd, split attention/matmul.

    The long sequence runs the full-depth model; the short one the same shapes cut to 4 layers
    (every layer counts the same, so depth only scales the layer term; this halves the suite time)."""
    model = load_option("model", name)
    if seq == SEQS[0]:
        model = model.model_copy(update={"layers": 4})
    if model.position_embedding == "learned":  # GPT-3: the position table caps s at 2048
        seq = model.max_position // 2 if seq == SEQS[0] else model.max_position
    got = hf.count_flops(model, seq, layers=model.layers)
    want = ours_flops(model, seq)
    for key in ("fwd_attention", "fwd_matmul", "fwdbwd_attention", "fwdbwd_matmul", "fwdbwd_total"):
        assert got[key] == pytest.approx(want[key], rel=1e-12), (key, got[key], want[key])
