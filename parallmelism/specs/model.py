"""ModelSpec: the architecture of a decoder-only transformer (dense or MoE)."""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, PositiveInt, model_validator


class MoESpec(BaseModel):
    """Mixture-of-experts block that replaces the MLP in MoE layers.

    Layer l (0-based) is an MoE layer when l >= first_dense_layers and
    (l - first_dense_layers) % layer_freq == 0 (Megatron `--moe-layer-freq`).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, defer_build=True)

    num_experts: PositiveInt
    top_k: PositiveInt
    ffn_hidden: PositiveInt = Field(description="FFN size of one routed expert")
    layer_freq: PositiveInt = 1
    first_dense_layers: int = Field(0, ge=0)
    num_shared_experts: int = Field(0, ge=0)
    shared_ffn_hidden: Optional[PositiveInt] = None
    capacity_factor: Optional[float] = Field(None, gt=0, description="None means dropless")
    max_nodes_per_token: Optional[PositiveInt] = Field(
        None,
        description="node-limited routing: a token's experts lie on at most this many nodes "
        "(DeepSeek-V3: 4; Megatron --moe-router-group-topk with one group per node); None: unlimited",
    )
    router_bias: bool = False
    shared_expert_gate: bool = Field(
        False, description="sigmoid gate h->1 on the shared-expert output (Qwen2-MoE): h weights per MoE layer"
    )

    @model_validator(mode="after")
    def _top_k_within_experts(self):
        if self.top_k > self.num_experts:
            raise ValueError(f"top_k={self.top_k} exceeds num_experts={self.num_experts}")
        return self

    @property
    def gate_outside_fused_moe(self) -> bool:
        """Whether the layer runs kernels an engine's fused-MoE op does not: a shared expert (its side
        stream's fork/join and the add of its output) or DeepSeek-V3's gate (fp32 router logits, sigmoid,
        the score-correction bias, group-limited top-k: router_bias or max_nodes_per_token). A plain
        softmax top-k router (Mixtral, Qwen3-MoE) runs inside the op (aiconfigurator's fused-MoE
        collectors route so: benchmarks/moe_layer_decomposition.py). Serving's moe_layer_overhead_us is
        paid on these layers only (cost/inference_iteration.py)."""
        return self.num_shared_experts > 0 or self.router_bias or self.max_nodes_per_token is not None

    @property
    def shared_expert_ffn(self) -> int:
        """FFN size of one shared expert: shared_ffn_hidden, else the routed experts' size."""
        return self.shared_ffn_hidden or self.ffn_hidden


class MLASpec(BaseModel):
    """Multi-head latent attention (DeepSeek-V2/V3; HF `DeepseekV3Attention`), per layer:

      q_a_proj h->q_lora, q_a_layernorm (q_lora), q_b_proj q_lora->a·(nope+rope)
        (q_lora_rank None: one q_proj h->a·(nope+rope), no Q compression, as in DeepSeek-V2-Lite)
      kv_a_proj_with_mqa h->kv_lora+rope (the compressed latent plus ONE shared RoPE key),
      kv_a_layernorm (kv_lora), kv_b_proj kv_lora->a·(nope+v), o_proj a·v->h
    Scores use nope+rope dims per head, values v_head_dim; every query head has its own K/V
    (heads = kv heads after decompression).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, defer_build=True)

    q_lora_rank: Optional[PositiveInt] = Field(None, description="None: no query compression")
    kv_lora_rank: PositiveInt
    qk_nope_head_dim: PositiveInt
    qk_rope_head_dim: PositiveInt
    v_head_dim: PositiveInt

    @property
    def qk_head_dim(self) -> int:
        return self.qk_nope_head_dim + self.qk_rope_head_dim

    @property
    def latent_width(self) -> int:
        """kv_lora_rank + qk_rope_head_dim: kv_a_proj's output, the compressed KV latent plus the one
        shared RoPE key, and what absorbed MLA serving caches per token and layer (576 for DeepSeek-V3)."""
        return self.kv_lora_rank + self.qk_rope_head_dim


class ModelSpec(BaseModel):
    """Shapes of the model. Notation follows `formulas.md`: h, L, a, g, d, I, V."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, defer_build=True)

    name: str
    display_name: Optional[str] = None
    source: str = ""
    hidden: PositiveInt = Field(description="h")
    layers: PositiveInt = Field(description="L")
    heads: PositiveInt = Field(description="a, query heads")
    kv_heads: Optional[PositiveInt] = Field(None, description="g; defaults to heads (MHA)")
    head_dim: Optional[PositiveInt] = Field(None, description="d; defaults to hidden // heads")
    ffn_hidden: PositiveInt = Field(description="I, dense FFN size")
    mlp: Literal["swiglu", "gelu"] = "swiglu"
    norm: Literal["rmsnorm", "layernorm"] = "rmsnorm"
    vocab: PositiveInt
    tie_embeddings: bool = False
    bias: bool = Field(False, description="linear layers carry biases (GPT-2/3 style)")
    qkv_bias: bool = Field(False, description="biases on the Q, K, V projections only (Qwen2)")
    qk_norm: bool = Field(False, description="RMSNorm over head_dim on Q and K (Qwen3): 2·d weights per layer")
    position_embedding: Literal["rope", "learned"] = "rope"
    max_position: Optional[PositiveInt] = Field(
        None,
        description="positions the model runs: the rows of a learned position table; with RoPE the checkpoint's "
        "context (Hugging Face max_position_embeddings, its rope scaling included), None = not checked",
    )
    dropout: bool = Field(False, description="dropout after attention/MLP/embedding (GPT-3 era)")
    mtp_layers: NonNegativeInt = Field(
        0,
        description="multi-token-prediction modules the checkpoint carries (DeepSeek-V3: "
        "num_nextn_predict_layers = 1), the proposer of spec_method=mtp; not counted in the parameters",
    )
    moe: Optional[MoESpec] = None
    mla: Optional[MLASpec] = Field(None, description="multi-head latent attention; None = GQA/MHA")
    fp8_block_size: Optional[PositiveInt] = Field(
        None,
        description="edge of the square blocks the fp8 checkpoint's weight scales cover (DeepSeek-V3: "
        "config.json quantization_config weight_block_size [128, 128]); None = per-tensor scales",
    )

    @model_validator(mode="after")
    def _shapes(self):
        kv = self.kv_heads or self.heads
        if self.mla is not None:
            if kv != self.heads:
                raise ValueError(f"mla: kv_heads={kv} must equal heads={self.heads} (MLA decompresses K/V per head)")
            if self.head_dim is not None and self.head_dim != self.mla.qk_head_dim:
                raise ValueError(
                    f"mla: head_dim={self.head_dim} must be unset or qk_nope_head_dim + "
                    f"qk_rope_head_dim = {self.mla.qk_head_dim}"
                )
            if self.bias or self.qkv_bias or self.qk_norm or self.position_embedding != "rope":
                raise ValueError("mla: bias, qkv_bias, qk_norm and learned positions are not supported with MLA")
        elif kv > self.heads or self.heads % kv:
            raise ValueError(f"heads={self.heads} is not a multiple of kv_heads={kv}")
        if self.head_dim is None and self.mla is None and self.hidden % self.heads:
            raise ValueError(f"hidden={self.hidden} is not divisible by heads={self.heads}; set head_dim")
        if self.position_embedding == "learned" and self.max_position is None:
            raise ValueError("position_embedding=learned needs max_position")
        if self.moe is not None and self.moe.first_dense_layers >= self.layers:
            raise ValueError(f"moe.first_dense_layers={self.moe.first_dense_layers} leaves no MoE layer")
        return self

    # Derived shapes, named as in formulas.md.
    @property
    def g(self) -> int:
        return self.kv_heads or self.heads

    @property
    def d(self) -> int:
        """Query/key width per head; with MLA qk_nope_head_dim + qk_rope_head_dim."""
        if self.mla is not None:
            return self.mla.qk_head_dim
        return self.head_dim or self.hidden // self.heads

    @property
    def q_dim(self) -> int:
        """q = a·d, width of the query projection."""
        return self.heads * self.d

    @property
    def kv_dim(self) -> int:
        """g·d, width of the key (and of the value) projection (MLA: of the decompressed keys)."""
        return self.g * self.d

    @property
    def gated(self) -> bool:
        return self.mlp == "swiglu"

    @property
    def mlp_up_matrices(self) -> int:
        """h -> I projections of one MLP: gate and up (SwiGLU) or fc1 (GELU)."""
        return 2 if self.gated else 1

    @property
    def mlp_matrices(self) -> int:
        """Weight matrices of one MLP: the up projections plus the I -> h down projection."""
        return self.mlp_up_matrices + 1

    @property
    def num_moe_layers(self) -> int:
        return 0 if self.moe is None else moe_layers_in_range(self, 0, self.layers)

    @property
    def num_moe_layers_gate_outside(self) -> int:
        """MoE layers whose gate or shared expert runs outside the fused-MoE op (MoESpec.gate_outside_fused_moe)."""
        return self.num_moe_layers if self.moe is not None and self.moe.gate_outside_fused_moe else 0

    @property
    def is_moe(self) -> bool:
        return self.moe is not None

    def require_moe(self) -> "MoESpec":
        """The MoE block, for code on a path that only MoE models reach."""
        if self.moe is None:
            raise ValueError(f"model {self.name} has no experts (a MoE-only cost term was asked for)")
        return self.moe

    def require_max_position(self) -> int:
        """Rows of the learned position table (validated present when position_embedding=learned)."""
        if self.max_position is None:
            raise ValueError(f"model {self.name} has no max_position")
        return self.max_position

    def require_mla(self) -> "MLASpec":
        """The MLA block, for code on a path that only MLA models reach."""
        if self.mla is None:
            raise ValueError(f"model {self.name} has no multi-head latent attention")
        return self.mla


def moe_layers_in_range(model: ModelSpec, lo, hi):
    """Number of MoE layers among layers [lo, hi); lo/hi may be numpy arrays."""
    import numpy as np

    if model.moe is None:
        return np.zeros_like(np.asarray(hi)) if np.ndim(hi) else 0
    fd, f = model.moe.first_dense_layers, model.moe.layer_freq
    lo = np.maximum(np.asarray(lo), fd)
    hi = np.maximum(np.asarray(hi), fd)
    # count of l in [lo, hi) with (l - fd) % f == 0  ==  ceil((hi-fd)/f) - ceil((lo-fd)/f)
    out = -((fd - hi) // f) + ((fd - lo) // f)
    return out if np.ndim(out) else int(out)
