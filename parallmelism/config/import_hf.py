"""Turn a local Hugging Face `config.json` into a `models/NAME.yaml` (no hub access).

Supported `model_type`s and how their keys map onto ModelSpec (notation of formulas.md):
  llama, mistral, qwen2, qwen3   hidden_size -> hidden, num_hidden_layers -> layers,
                                 num_attention_heads -> heads, num_key_value_heads -> kv_heads,
                                 head_dim (default hidden/heads), intermediate_size -> ffn_hidden,
                                 vocab_size -> vocab, tie_word_embeddings; gated MLP (SwiGLU shapes)
  qwen2                          + qkv_bias (biases on Q, K, V only)
  qwen3                          + qk_norm (RMSNorm over head_dim on Q and K)
  mixtral                        + moe: num_local_experts, num_experts_per_tok, expert FFN =
                                 intermediate_size, every layer MoE
  qwen2_moe, qwen3_moe           + moe: num_experts, num_experts_per_tok, moe_intermediate_size;
                                 dense layers from decoder_sparse_step / mlp_only_layers (only the
                                 patterns MoESpec expresses: a dense prefix, then every k-th layer);
                                 qwen2_moe's shared expert (shared_expert_intermediate_size) and its
                                 h->1 sigmoid gate
  deepseek_v3                    + mla: q_lora_rank (null = no Q compression), kv_lora_rank,
                                 qk_nope_head_dim, qk_rope_head_dim, v_head_dim (num_key_value_heads
                                 must equal the heads); moe: n_routed_experts, num_experts_per_tok,
                                 moe_intermediate_size, first_k_dense_replace -> first_dense_layers,
                                 n_shared_experts shared experts of moe_intermediate_size each (as
                                 transformers' DeepseekV3MoE); group-limited routing to topk_group
                                 of n_group expert groups -> max_nodes_per_token (DeepSeek-V3 places
                                 one group per node: at most 4 nodes per token); no head_dim (q·k
                                 width = nope + rope)
Not modelled (shapes and parameter counts are exact; these only change attention cost at long
context or routing, not sizes): Mistral's sliding_window, rope scaling (beyond the context it sets:
max_position, as vLLM derives it), DeepSeek's routing
score-correction bias (a buffer, not a parameter);
DeepSeek-V3's multi-token-prediction layer (num_nextn_predict_layers) is not part of the
transformers model class and is not counted; it becomes `mtp_layers` (spec_method=mtp drafts with it).
Refused with one sentence: DeepSeek-V2 and Kimi-K2 model_types (MLA too, but their configs and
module layouts are not checked against transformers here) and any other model_type.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from ..errors import UserError, format_validation_error, require_file

DENSE = {"llama", "mistral", "qwen2", "qwen3"}
MOE = {"mixtral", "qwen2_moe", "qwen3_moe"}
MLA = {"deepseek_v3"}
MLA_UNCHECKED = {"deepseek_v2", "kimi_k2"}
GATED_ACTS = {"silu", "swish", "gelu", "gelu_pytorch_tanh", "gelu_new"}


def _get(cfg: dict, key: str, path: str, default=None, required=True):
    v = cfg.get(key, default)
    if v is None and required:
        raise UserError(f"{path}: key {key!r} is missing")
    return v


def _int(cfg: dict, key: str, path: str, default=None):
    v = _get(cfg, key, path, default)
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
        raise UserError(f"{path}: {key}={v!r} is not a positive integer")
    return v


def served_context(cfg: dict, path: str) -> int | None:
    """The positions a server runs the checkpoint at, as vLLM derives its max_model_len
    (vllm/config.py _get_and_verify_max_len): max_position_embeddings, times rope_scaling.factor
    unless the scaling is llama3/longrope/su (their max_position_embeddings already counts it); YaRN
    scales original_max_position_embeddings. None when the config names no max_position_embeddings."""
    if cfg.get("max_position_embeddings") is None:
        return None
    n = _int(cfg, "max_position_embeddings", path)
    scaling = cfg.get("rope_scaling")
    if not isinstance(scaling, dict) or "factor" not in scaling:
        return n
    kind = scaling.get("rope_type", scaling.get("type"))
    if kind in (None, "default", "su", "longrope", "llama3"):
        return n
    base = scaling.get("original_max_position_embeddings", n) if kind == "yarn" else n
    return int(base * float(scaling["factor"]))


def model_from_hf_config(cfg: dict, name: str, path: str = "config.json") -> dict:
    """ModelSpec fields (a plain dict, validated) for a Hugging Face config dict."""
    from pydantic import ValidationError

    from ..specs import ModelSpec

    if not isinstance(cfg, dict):
        raise UserError(f"{path}: expected a JSON object")
    mtype = cfg.get("model_type")
    if mtype in MLA_UNCHECKED or ("kv_lora_rank" in cfg and mtype not in MLA):
        raise UserError(
            f"{path}: model_type={mtype!r} uses multi-head latent attention (MLA) with a layout "
            f"import-hf does not check (it knows deepseek_v3); write models/{name}.yaml by hand"
        )
    if mtype not in DENSE | MOE | MLA:
        raise UserError(
            f"{path}: model_type={mtype!r} is not supported; import-hf knows {', '.join(sorted(DENSE | MOE | MLA))}"
        )
    act = cfg.get("hidden_act", "silu")
    if act not in GATED_ACTS:
        raise UserError(f"{path}: hidden_act={act!r} is not a gated MLP activation import-hf knows")
    hidden = _int(cfg, "hidden_size", path)
    heads = _int(cfg, "num_attention_heads", path)
    if mtype not in MLA and cfg.get("head_dim") is None and hidden % heads:  # was "key 'head_dim' is missing"
        raise UserError(
            f"{path}: hidden_size={hidden} is not a multiple of num_attention_heads={heads} and the config "
            "gives no head_dim"
        )
    out: dict = {
        "name": name,
        "display_name": cfg.get("_name_or_path") or name,
        "source": f"imported from {Path(path).name} (model_type {mtype}) by parallmelism import-hf",
        "hidden": hidden,
        "layers": _int(cfg, "num_hidden_layers", path),
        "heads": heads,
        "kv_heads": _int(cfg, "num_key_value_heads", path, heads),
        "head_dim": (
            None if mtype in MLA else _int(cfg, "head_dim", path, hidden // heads if hidden % heads == 0 else None)
        ),
        "ffn_hidden": _int(cfg, "intermediate_size", path),
        "mlp": "swiglu",
        "norm": "rmsnorm",
        "vocab": _int(cfg, "vocab_size", path),
        "tie_embeddings": bool(cfg.get("tie_word_embeddings", False)),
    }
    context = served_context(cfg, path)
    if context is not None:
        out["max_position"] = context
    if cfg.get("attention_bias") or cfg.get("mlp_bias"):
        raise UserError(f"{path}: attention_bias/mlp_bias=true is not supported by import-hf")
    if mtype in ("qwen2", "qwen2_moe"):
        out["qkv_bias"] = True
    if mtype in ("qwen3", "qwen3_moe"):
        out["qk_norm"] = True
    if mtype in MLA:
        _deepseek_v3(cfg, out, path)
    elif mtype == "mixtral":
        ffn = out["ffn_hidden"]
        out["moe"] = {
            "num_experts": _int(cfg, "num_local_experts", path),
            "top_k": _int(cfg, "num_experts_per_tok", path),
            "ffn_hidden": ffn,
        }
    elif mtype in ("qwen2_moe", "qwen3_moe"):
        moe = {
            "num_experts": _int(cfg, "num_experts", path),
            "top_k": _int(cfg, "num_experts_per_tok", path),
            "ffn_hidden": _int(cfg, "moe_intermediate_size", path),
        }
        moe.update(_moe_layer_pattern(cfg, out["layers"], path))
        if mtype == "qwen2_moe" and cfg.get("shared_expert_intermediate_size"):
            moe.update(
                num_shared_experts=1,
                shared_ffn_hidden=_int(cfg, "shared_expert_intermediate_size", path),
                shared_expert_gate=True,
            )
        out["moe"] = moe
    try:
        ModelSpec.model_validate(out)
    except ValidationError as exc:
        raise UserError(f"{path}: " + format_validation_error(exc, prefix="model")) from None
    return out


def _deepseek_v3(cfg: dict, out: dict, path: str) -> None:
    """MLA and DeepSeekMoE keys of a deepseek_v3 config (module docstring) into `out`."""
    del out["head_dim"]
    if out["kv_heads"] != out["heads"]:
        raise UserError(
            f"{path}: num_key_value_heads={out['kv_heads']} must equal num_attention_heads="
            f"{out['heads']} for multi-head latent attention"
        )
    del out["kv_heads"]
    q_lora = cfg.get("q_lora_rank")
    if cfg.get("num_nextn_predict_layers"):  # the MTP module(s) spec_method=mtp drafts with
        out["mtp_layers"] = _int(cfg, "num_nextn_predict_layers", path)
    out["mla"] = {
        "q_lora_rank": None if q_lora is None else _int(cfg, "q_lora_rank", path),
        "kv_lora_rank": _int(cfg, "kv_lora_rank", path),
        "qk_nope_head_dim": _int(cfg, "qk_nope_head_dim", path),
        "qk_rope_head_dim": _int(cfg, "qk_rope_head_dim", path),
        "v_head_dim": _int(cfg, "v_head_dim", path),
    }
    if cfg.get("n_routed_experts") is None:
        return
    if (cfg.get("moe_layer_freq") or 1) != 1:
        raise UserError(
            f"{path}: moe_layer_freq={cfg['moe_layer_freq']!r} is not 1; transformers' DeepseekV3 "
            f"makes every layer after first_k_dense_replace an MoE layer"
        )
    fd = cfg.get("first_k_dense_replace", 0)
    if isinstance(fd, bool) or not isinstance(fd, int) or not 0 <= fd < out["layers"]:
        raise UserError(f"{path}: first_k_dense_replace={fd!r} must be an integer in [0, num_hidden_layers)")
    moe = {
        "num_experts": _int(cfg, "n_routed_experts", path),
        "top_k": _int(cfg, "num_experts_per_tok", path),
        "ffn_hidden": _int(cfg, "moe_intermediate_size", path),
        "first_dense_layers": fd,
    }
    shared = cfg.get("n_shared_experts") or 0
    if shared:
        moe.update(num_shared_experts=_int(cfg, "n_shared_experts", path), shared_ffn_hidden=moe["ffn_hidden"])
    groups, group_top = cfg.get("n_group") or 1, cfg.get("topk_group") or 1
    if groups > 1 and group_top < groups:  # group-limited routing: a token's experts in topk_group groups
        moe["max_nodes_per_token"] = _int(cfg, "topk_group", path)
    out["moe"] = moe


def _moe_layer_pattern(cfg: dict, layers: int, path: str) -> dict:
    """Qwen-MoE: layer l is MoE when l not in mlp_only_layers and (l+1) % decoder_sparse_step == 0."""
    step = cfg.get("decoder_sparse_step", 1) or 1
    dense_only = set(cfg.get("mlp_only_layers") or [])
    is_moe = [(l not in dense_only) and (l + 1) % step == 0 for l in range(layers)]
    fd = next((i for i, m in enumerate(is_moe) if m), None)
    if fd is None:
        raise UserError(f"{path}: no layer is an MoE layer (decoder_sparse_step, mlp_only_layers)")
    for freq in range(1, layers + 1):
        if is_moe == [l >= fd and (l - fd) % freq == 0 for l in range(layers)]:
            return {"first_dense_layers": fd, "layer_freq": freq}
    raise UserError(
        f"{path}: mlp_only_layers={sorted(dense_only)} with decoder_sparse_step={step} is not a "
        f"dense prefix followed by every k-th layer, which models/*.yaml cannot express"
    )


def to_yaml(fields: dict, origin: str) -> str:
    """YAML text for models/NAME.yaml, with a header saying where it came from."""
    import yaml

    header = f"# {fields['display_name']}: imported by `parallmelism import-hf {origin}`.\n"
    return header + yaml.safe_dump(fields, sort_keys=False)


def read_hf_config(path: str | Path) -> dict:
    path = require_file(path, "config file")
    try:
        data = json.loads(path.read_text())
        if not isinstance(data, dict):
            raise UserError(f"{str(path)!r}: expected a JSON object")
        return data
    except UnicodeDecodeError:  # (was the codec's words: "'utf-8' codec can't decode byte 0xfe in position 1")
        raise UserError(f"{str(path)!r} is not UTF-8 text; give a Hugging Face config.json") from None
    except OSError as exc:
        raise UserError(f"cannot read {str(path)!r}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise UserError(f"{str(path)!r} is not valid JSON ({exc.msg} at line {exc.lineno})") from None


def default_name(cfg: dict, path: Path) -> str:
    raw = cfg.get("_name_or_path") or (path.parent.name if path.parent.name else cfg.get("model_type", "model"))
    name = re.sub(r"[^a-z0-9.]+", "-", str(raw).split("/")[-1].lower()).strip("-")
    return name or "model"
