"""Cross-check: activation bytes saved for backward by a real Hugging Face layer.

`saved_tensors_hooks` records every tensor autograd keeps (deduplicated by storage; parameters and
the rotary cos/sin tables, which one forward shares across all layers, excluded). The HF
implementation (transformers 5.x, bf16) keeps, per token of one layer (T = s·b tokens):

  tensor                                         bytes/token      note
  RMSNorm ×2: fp32 upcast of the input           4h each          HF computes the norm in fp32
              rstd (fp32)                        4 each
              normalized input (bf16, for ·w)    2h each          unfused weight multiply
              norm output = next linear's input  2h each
  SDPA (flash):  Q, O (bf16)                     2ad + 2ad        O is also o_proj's input
                 K, V (bf16, g heads)            2gd + 2gd
                 log-sum-exp (fp32)              4a
  eager:         Q, K, V repeated to a heads, O  8ad              repeat_kv materializes K, V
                 softmax output fp32 + bf16 copy 6·a·s            per token (6as²b per layer)
  SwiGLU MLP:    gate, SiLU(gate), up, product   8f               unfused SiLU and product
  MoE (grouped_mm, T tokens, k·T routed rows):
                 router softmax (fp32)           4E
                 top-k ids (int64), weights, sum 8k + 4k + 4
                 sort/permutation indices int64  8k + 8k + 8k
                 permuted input, expert output   2kh + 2kh
                 gate_up, SiLU, product          4kf + 2kf + 2kf
                 routing weights per row (fp32)  4k
                 group offsets (int32)           4E per layer (not per token)
  => dense SDPA: sb(16h + 4ad + 4gd + 8f) + 8sb + 4abs   (../shared/README.md)
     dense eager: sb(16h + 8ad + 8f) + 8sb + 6as²b

Our default profile (`parallmelism/cost/activations.py`, Megatron-style fused kernels, Korthikanti
et al. 2022) differs ONLY by these named tensors (HF minus ours, bytes per token):

  | tensor                                  | HF − ours      | why Megatron does not keep it                |
  |-----------------------------------------|----------------|----------------------------------------------|
  | RMSNorm fp32 upcast (vs bf16 input)     | +2h per norm   | fused norm kernel saves the bf16 input       |
  | RMSNorm rstd                            | +4 per norm    | per-token statistic, ignored by Korthikanti  |
  | RMSNorm normalized input before ·w      | +2h per norm   | fused kernel applies w in the same kernel    |
  | SiLU(gate) output (dense: f; MoE: k·f)  | +2f / +2kf     | fused SwiGLU recomputes SiLU in backward     |
  | eager only: K, V repeated to a heads    | +4ad − 4gd     | Megatron's core attention reads g KV heads   |
  | eager only: fp32 softmax output         | +4as           | fused softmax keeps only the bf16 output     |
  | MoE routing metadata (ids, weights,     | +40k + 4       | int/fp32 bookkeeping, < 0.1% of the layer,   |
  |   permutations, top-k sum)              | (+4E/layer)    | not in the Megatron inventory                |
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="cross-checks need the [crosscheck] extra (torch==2.13.0)")
pytest.importorskip("transformers", reason="cross-checks need the [crosscheck] extra (transformers)")

from parallmelism.config import load_option  # noqa: E402
from parallmelism.cost.activations import NONE, layer_activation_bytes  # noqa: E402
from parallmelism.specs import ModelSpec, MoESpec  # noqa: E402

from . import hf  # noqa: E402


def hf_layer_inventory(model: ModelSpec, s: int, b: int, flash: bool) -> int:
    """Per-tensor inventory of one HF decoder layer (module docstring), bytes."""
    h, a, g, d = model.hidden, model.heads, model.g, model.d
    T = s * b
    norms = 2 * (4 * h + 4 + 2 * h + 2 * h) * T
    if flash:
        attn = (2 * a * d + 2 * a * d + 2 * g * d + 2 * g * d + 4 * a) * T
    else:
        attn = 8 * a * d * T + 6 * a * s * s * b
    if model.moe is None:
        mlp = 8 * model.ffn_hidden * T
    else:
        E, k, f = model.moe.num_experts, model.moe.top_k, model.moe.ffn_hidden
        mlp = (4 * E + 4 + 40 * k + 4 * k * h + 8 * k * f) * T + 4 * E
    return norms + attn + mlp


def named_differences(model: ModelSpec, s: int, b: int, flash: bool) -> int:
    """HF minus our Megatron-style profile: the table in the module docstring, bytes."""
    h, a, g, d = model.hidden, model.heads, model.g, model.d
    T = s * b
    diff = 2 * (2 * h + 4 + 2 * h) * T  # two RMSNorms
    if model.moe is None:
        diff += 2 * model.ffn_hidden * T  # SiLU output
    else:
        E, k, f = model.moe.num_experts, model.moe.top_k, model.moe.ffn_hidden
        diff += 2 * k * f * T + (40 * k + 4) * T + 4 * E  # SiLU output per routed row, metadata
    if not flash:
        diff += (4 * a * d - 4 * g * d) * T + 4 * a * s * s * b
    return diff


def ours(model: ModelSpec, s: int, b: int, flash: bool) -> float:
    return float(
        layer_activation_bytes(
            model, s, b, t=1, cp=1, sp=False, recompute=NONE, flash=flash, moe_layer=model.moe is not None
        )
    )


SMALL_LLAMA = ModelSpec(
    name="small-llama", hidden=256, layers=1, heads=8, kv_heads=2, head_dim=32, ffn_hidden=704, vocab=512
)
SMALL_MOE = ModelSpec(
    name="small-moe",
    hidden=256,
    layers=1,
    heads=8,
    kv_heads=2,
    head_dim=32,
    ffn_hidden=512,
    vocab=512,
    moe=MoESpec(num_experts=4, top_k=2, ffn_hidden=512),
)


def test_readme_coefficients():
    """The inventory gives ../shared/README.md's 49.03·sbh (8B) and 48.53·sbh (70B) with SDPA, s=8192."""
    for name, coef in (("llama3.1-8b", 49.03), ("llama3.1-70b", 48.53)):
        m = load_option("model", name)
        s = 8192
        assert hf_layer_inventory(m, s, 1, True) / (s * m.hidden) == pytest.approx(coef, abs=0.005)


@pytest.mark.parametrize("flash", [True, False], ids=["sdpa", "eager"])
@pytest.mark.parametrize("model", [SMALL_LLAMA, SMALL_MOE], ids=["llama", "moe"])
def test_small_real_layer(model, flash):
    """Real bf16 tensors (forward only: the hooks fire in forward)."""
    s, b = 128, 2
    got = hf.saved_bytes_of_layer(model, s, b, "sdpa" if flash else "eager", fake=False)
    assert got == hf_layer_inventory(model, s, b, flash)
    assert got - ours(model, s, b, flash) == named_differences(model, s, b, flash)


@pytest.mark.parametrize("flash", [True, False], ids=["sdpa", "eager"])
@pytest.mark.parametrize("name,s", [("llama3.1-70b", 8192), ("llama3.1-8b", 4096), ("mixtral-8x7b", 4096)])
def test_full_size_fake_layer(name, s, flash):
    """One full-size layer on fake tensors (no memory is allocated)."""
    model = load_option("model", name)
    got = hf.saved_bytes_of_layer(model, s, 1, "sdpa" if flash else "eager", fake=True)
    assert got == hf_layer_inventory(model, s, 1, flash)
    assert got - ours(model, s, 1, flash) == named_differences(model, s, 1, flash)
