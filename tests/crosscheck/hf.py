"""Hugging Face models built from configs only (no weights, no network) for cross-checks.

Traps (torch 2.13, transformers 5.x; see ../shared/README.md, cross-checks):
- On fake/CPU tensors SDPA dispatches to `aten._scaled_dot_product_flash_attention_for_cpu` and
  grouped experts to `aten._grouped_mm`; FlopCounterMode has no formula for either. We count
  FLOPs on the META device, where attention takes the plain-matmul (`bmm`) path, and register a
  `_grouped_mm` formula (2·rows·K·N summed over groups).
- MoE experts use transformers' `grouped_mm` implementation: its shapes do not depend on the
  routing (k·tokens rows), so meta/fake tensors work; the default eager loop reads routing values.
- Memory is measured with FAKE tensors (on meta, SDPA falls back to the math path and saves s²).
"""

from __future__ import annotations

import math
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402

from parallmelism.specs import ModelSpec  # noqa: E402

aten = torch.ops.aten


def hf_config(model: ModelSpec, layers: int | None = None, attn: str = "sdpa"):
    """The transformers config with our model's shapes (Llama, Mixtral-style MoE, GPT-2-style GPT-3,
    DeepSeek-V3 for MLA models)."""
    from transformers import GPT2Config, LlamaConfig, MixtralConfig

    L = layers or model.layers
    if model.mla is not None:
        return deepseek_v3_config(model, L, attn)
    if model.mlp == "gelu":
        # GPT-3 as GPT-2 code: LayerNorm with bias, biased Conv1D, learned positions, tied head.
        assert model.position_embedding == "learned" and model.tie_embeddings and model.g == model.heads
        return GPT2Config(
            n_embd=model.hidden,
            n_layer=L,
            n_head=model.heads,
            n_inner=model.ffn_hidden,
            vocab_size=model.vocab,
            n_positions=model.max_position,
            attn_implementation=attn,
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
        )
    common = dict(
        hidden_size=model.hidden,
        num_hidden_layers=L,
        num_attention_heads=model.heads,
        num_key_value_heads=model.g,
        head_dim=model.d,
        vocab_size=model.vocab,
        tie_word_embeddings=model.tie_embeddings,
        attn_implementation=attn,
    )
    if model.qk_norm:  # Qwen3: an RMSNorm over each head's query and key (head_dim weights each)
        return qwen3_config(model, common)
    if model.moe is None:
        return LlamaConfig(intermediate_size=model.ffn_hidden, **common)
    moe = model.moe
    assert moe.layer_freq == 1 and moe.first_dense_layers == 0 and moe.num_shared_experts == 0
    return MixtralConfig(
        intermediate_size=moe.ffn_hidden, num_local_experts=moe.num_experts, num_experts_per_tok=moe.top_k, **common
    )


def qwen3_config(model: ModelSpec, common: dict):
    """Qwen3Config / Qwen3MoeConfig (every layer sparse, no shared expert) with our shapes."""
    from transformers import Qwen3Config, Qwen3MoeConfig

    if model.moe is None:
        return Qwen3Config(intermediate_size=model.ffn_hidden, **common)
    moe = model.moe
    assert moe.layer_freq == 1 and moe.first_dense_layers == 0 and moe.num_shared_experts == 0
    return Qwen3MoeConfig(
        intermediate_size=model.ffn_hidden,
        moe_intermediate_size=moe.ffn_hidden,
        num_experts=moe.num_experts,
        num_experts_per_tok=moe.top_k,
        decoder_sparse_step=1,
        mlp_only_layers=[],
        **common,
    )


def deepseek_v3_config(model: ModelSpec, layers: int, attn: str = "sdpa"):
    """DeepseekV3Config with our shapes: MLA, a dense prefix, routed + shared experts (shared FFN =
    n_shared_experts x moe_intermediate_size in transformers). Group-limited routing off (1 group)."""
    from transformers import DeepseekV3Config

    mla, moe = model.mla, model.moe
    kw = {}
    if moe is not None:
        assert moe.layer_freq == 1 and (moe.shared_ffn_hidden or moe.ffn_hidden) == moe.ffn_hidden
        assert not (moe.router_bias or moe.shared_expert_gate or moe.capacity_factor)
        kw = dict(
            moe_intermediate_size=moe.ffn_hidden,
            n_routed_experts=moe.num_experts,
            num_experts_per_tok=moe.top_k,
            n_shared_experts=moe.num_shared_experts,
            first_k_dense_replace=moe.first_dense_layers,
        )
    else:
        kw = dict(first_k_dense_replace=layers)
    return DeepseekV3Config(
        hidden_size=model.hidden,
        num_hidden_layers=layers,
        num_attention_heads=model.heads,
        num_key_value_heads=model.heads,
        intermediate_size=model.ffn_hidden,
        vocab_size=model.vocab,
        tie_word_embeddings=model.tie_embeddings,
        q_lora_rank=mla.q_lora_rank,
        kv_lora_rank=mla.kv_lora_rank,
        qk_nope_head_dim=mla.qk_nope_head_dim,
        qk_rope_head_dim=mla.qk_rope_head_dim,
        v_head_dim=mla.v_head_dim,
        n_group=1,
        topk_group=1,
        attn_implementation=attn,
        **kw,
    )


def build(model: ModelSpec, layers: int | None = None, attn: str = "sdpa", dtype=torch.bfloat16):
    """AutoModelForCausalLM from our shapes, in the current device/fake-mode context."""
    from transformers import AutoModelForCausalLM

    kw = {"experts_implementation": "grouped_mm"} if model.moe is not None else {}
    return AutoModelForCausalLM.from_config(hf_config(model, layers, attn), dtype=dtype, **kw)


def grouped_mm_flops(a_shape, b_shape, *args, out_shape=None, **kwargs) -> int:
    """aten._grouped_mm: (M,K)x(E,K,N) -> 2·M·K·N; (K,M)x(M,N) grouped over M -> 2·K·M·N."""
    if len(a_shape) == 2 and len(b_shape) == 2:
        return 2 * a_shape[0] * a_shape[1] * b_shape[1]
    return 2 * math.prod(out_shape) * a_shape[-1]


# Counts by shapes: the suite asks for Llama 3.1 70B's full-depth count at 8,192 twice (the README
# figure and the FLOPs cross-check), ~3 CPU s each.
_FLOPS: dict[tuple, dict[str, int]] = {}


def count_flops(model: ModelSpec, seq: int, batch: int = 1, layers: int | None = None) -> dict[str, int]:
    """FlopCounterMode totals on the meta device: forward, and forward+backward, split by op (once per
    shapes: a count is a function of the model's shapes, the sequence, the batch and the depth)."""
    key = (model.model_dump_json(), seq, batch, layers or model.layers)
    if key not in _FLOPS:
        _FLOPS[key] = _count_flops(model, seq, batch, layers)
    return dict(_FLOPS[key])


def _count_flops(model: ModelSpec, seq: int, batch: int, layers: int | None) -> dict[str, int]:
    from torch.utils.flop_counter import FlopCounterMode

    with torch.device("meta"):
        m = build(model, layers)
    ids = torch.zeros(batch, seq, dtype=torch.long, device="meta")
    out = {}
    fc = FlopCounterMode(display=False, custom_mapping={aten._grouped_mm: grouped_mm_flops})
    with fc:
        logits = m(input_ids=ids).logits
        fwd = {str(k): v for k, v in fc.get_flop_counts()["Global"].items()}  # snapshot: forward only
        logits.float().sum().backward()
    both = {str(k): v for k, v in fc.get_flop_counts()["Global"].items()}
    out["fwd_attention"] = fwd.get("aten.bmm", 0)
    out["fwd_total"] = sum(fwd.values())
    out["fwd_matmul"] = out["fwd_total"] - out["fwd_attention"]
    out["fwdbwd_attention"] = both.get("aten.bmm", 0)
    out["fwdbwd_total"] = sum(both.values())
    out["fwdbwd_matmul"] = out["fwdbwd_total"] - out["fwdbwd_attention"]
    del logits
    return out


def saved_bytes_of_layer(model: ModelSpec, seq: int, batch: int, attn: str, fake: bool, dtype=torch.bfloat16) -> int:
    """Bytes autograd saves for backward in ONE decoder layer (saved_tensors_hooks, deduplicated by
    storage). Parameters and the rotary cos/sin tables (computed once per forward and shared by all
    layers) are excluded; everything the layer's forward creates and keeps is counted."""
    from contextlib import nullcontext

    from torch._subclasses.fake_tensor import FakeTensorMode

    torch.manual_seed(0)
    with FakeTensorMode() if fake else nullcontext():
        m = build(model, layers=1, attn=attn, dtype=dtype)
        h = model.hidden
        x = torch.randn(batch, seq, h, dtype=dtype, requires_grad=True)
        layer = m.model.layers[0]
        pos = torch.arange(seq).unsqueeze(0).expand(batch, seq)
        cos, sin = m.model.rotary_emb(x, pos)
        skip = {p.untyped_storage()._cdata for p in m.parameters()}
        skip |= {cos.untyped_storage()._cdata, sin.untyped_storage()._cdata}
        seen: dict[int, int] = {}

        def pack(t):
            key = t.untyped_storage()._cdata
            if key not in skip:
                seen[key] = t.untyped_storage().nbytes()
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            layer(x, attention_mask=None, position_embeddings=(cos, sin), position_ids=pos)
        return sum(seen.values())
