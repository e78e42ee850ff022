"""`parallmelism import-hf`: local Hugging Face config.json -> models/NAME.yaml (no hub access).

The config.json files below restate the published Hugging Face configs (shape keys only).
Reference parameter counts: Llama 3.1 and Mixtral from ../shared/reference/model_architectures.csv;
the others from transformers itself, built on the meta device from the same config (crosscheck extra).
"""

from __future__ import annotations

import csv
import json

import pytest
import yaml

from conftest import invoke, run_cli, shared_reference
from parallmelism.cost.params import total_params
from parallmelism.specs import ModelSpec

LLAMA = {
    "llama3.1-8b": dict(
        hidden_size=4096,
        intermediate_size=14336,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        vocab_size=128256,
    ),
    "llama3.1-70b": dict(
        hidden_size=8192,
        intermediate_size=28672,
        num_hidden_layers=80,
        num_attention_heads=64,
        num_key_value_heads=8,
        vocab_size=128256,
    ),
}
CONFIGS = {
    **{
        k: {
            "model_type": "llama",
            "architectures": ["LlamaForCausalLM"],
            "hidden_act": "silu",
            "tie_word_embeddings": False,
            "rope_theta": 500000.0,
            "max_position_embeddings": 131072,
            **v,
        }
        for k, v in LLAMA.items()
    },
    "mixtral-8x7b": {
        "model_type": "mixtral",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "vocab_size": 32000,
        "num_local_experts": 8,
        "num_experts_per_tok": 2,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "router_aux_loss_coef": 0.02,
    },
    "mistral-7b": {
        "model_type": "mistral",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "vocab_size": 32000,
        "hidden_act": "silu",
        "sliding_window": 4096,
        "tie_word_embeddings": False,
    },
    "qwen2-7b": {
        "model_type": "qwen2",
        "hidden_size": 3584,
        "intermediate_size": 18944,
        "num_hidden_layers": 28,
        "num_attention_heads": 28,
        "num_key_value_heads": 4,
        "vocab_size": 152064,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
    },
    "qwen3-8b": {
        "model_type": "qwen3",
        "hidden_size": 4096,
        "intermediate_size": 12288,
        "num_hidden_layers": 36,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "vocab_size": 151936,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
    },
    "qwen3-30b-a3b": {
        "model_type": "qwen3_moe",
        "hidden_size": 2048,
        "intermediate_size": 6144,
        "moe_intermediate_size": 768,
        "num_hidden_layers": 48,
        "num_attention_heads": 32,
        "num_key_value_heads": 4,
        "head_dim": 128,
        "vocab_size": 151936,
        "num_experts": 128,
        "num_experts_per_tok": 8,
        "decoder_sparse_step": 1,
        "mlp_only_layers": [],
        "hidden_act": "silu",
        "tie_word_embeddings": False,
    },
    "qwen1.5-moe-a2.7b": {
        "model_type": "qwen2_moe",
        "hidden_size": 2048,
        "intermediate_size": 5632,
        "moe_intermediate_size": 1408,
        "shared_expert_intermediate_size": 5632,
        "num_hidden_layers": 24,
        "num_attention_heads": 16,
        "num_key_value_heads": 16,
        "vocab_size": 151936,
        "num_experts": 60,
        "num_experts_per_tok": 4,
        "decoder_sparse_step": 1,
        "mlp_only_layers": [],
        "hidden_act": "silu",
        "tie_word_embeddings": False,
    },
}


@pytest.fixture
def cfg_dir(tmp_path):
    for name, cfg in CONFIGS.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text(json.dumps(cfg))
    return tmp_path


def _import(cfg_dir, name, tmp_path):
    out = tmp_path / "conf" / "models" / f"{name}.yaml"
    code, text = invoke("import-hf", cfg_dir / name / "config.json", "--out", out)
    assert code == 0, text
    return ModelSpec.model_validate(yaml.safe_load(out.read_text())), out


@pytest.mark.parametrize("name", ["llama3.1-8b", "llama3.1-70b", "mixtral-8x7b"])
def test_reference_parameter_counts(name, cfg_dir, tmp_path):
    ref = {r["model"]: r["total_params"] for r in csv.DictReader(open(shared_reference("model_architectures.csv")))}
    spec, _ = _import(cfg_dir, name, tmp_path)
    assert total_params(spec) == int(ref[name])


@pytest.mark.parametrize(
    "fields, context",
    [
        ({"max_position_embeddings": 131072}, 131072),  # Llama 3.1: llama3 scaling already counted
        ({"max_position_embeddings": 131072, "rope_scaling": {"rope_type": "llama3", "factor": 8.0}}, 131072),
        ({"max_position_embeddings": 40960}, 40960),  # Qwen3 as shipped
        (  # Qwen3 with its model card's YaRN: 4 x 32768
            {
                "max_position_embeddings": 40960,
                "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768},
            },
            131072,
        ),
        ({"max_position_embeddings": 4096, "rope_scaling": {"type": "linear", "factor": 2.0}}, 8192),
        ({}, None),
    ],
)
def test_the_served_context_is_vllms_max_model_len(fields, context, tmp_path):
    """max_position from config.json as vLLM derives max_model_len (_get_and_verify_max_len), so a
    request past it is refused here as vLLM refuses it."""
    from parallmelism.config.import_hf import model_from_hf_config

    cfg = {k: v for k, v in CONFIGS["llama3.1-8b"].items() if k != "max_position_embeddings"}
    assert model_from_hf_config({**cfg, **fields}, "m").get("max_position") == context


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_round_trip_shapes(name, cfg_dir, tmp_path):
    """config.json -> YAML -> ModelSpec keeps every shape key; the shipped models are reproduced."""
    cfg = CONFIGS[name]
    spec, _ = _import(cfg_dir, name, tmp_path)
    assert (spec.hidden, spec.layers, spec.heads, spec.g, spec.vocab) == (
        cfg["hidden_size"],
        cfg["num_hidden_layers"],
        cfg["num_attention_heads"],
        cfg["num_key_value_heads"],
        cfg["vocab_size"],
    )
    assert spec.d == cfg.get("head_dim", cfg["hidden_size"] // cfg["num_attention_heads"])
    if spec.moe is not None:
        assert spec.moe.num_experts == cfg.get("num_experts", cfg.get("num_local_experts"))
        assert spec.moe.top_k == cfg["num_experts_per_tok"]
    if name in ("llama3.1-8b", "llama3.1-70b", "mixtral-8x7b"):
        from parallmelism.config import load_option

        shipped = load_option("model", name)
        keep = ("hidden", "layers", "heads", "g", "d", "ffn_hidden", "vocab", "tie_embeddings", "gated")
        assert all(getattr(spec, k) == getattr(shipped, k) for k in keep)
        assert (spec.moe is None) == (shipped.moe is None)


def test_imported_yaml_is_usable_by_sweep(cfg_dir, tmp_path):
    _, out = _import(cfg_dir, "qwen3-30b-a3b", tmp_path)
    r = run_cli(
        "sweep",
        "-cd",
        out.parent.parent,
        "model=qwen3-30b-a3b",
        "grid.ngpus=[8]",
        "grid.micro_batch=[1]",
        "grid.vpp=[1]",
        "-q",
        f"output.path={tmp_path / 'x.csv'}",
    )
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "x.csv").stat().st_size > 0


def test_prints_yaml_without_out(cfg_dir):
    code, text = invoke("import-hf", cfg_dir / "mistral-7b" / "config.json")
    assert code == 0
    data = yaml.safe_load(text)
    assert data["name"] == "mistral-7b" and data["kv_heads"] == 8


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_parameter_count_equals_transformers(name, cfg_dir, tmp_path):
    torch = pytest.importorskip("torch", reason="needs the [crosscheck] extra")
    transformers = pytest.importorskip("transformers", reason="needs the [crosscheck] extra")
    spec, _ = _import(cfg_dir, name, tmp_path)
    cfg = transformers.AutoConfig.for_model(**CONFIGS[name])
    with torch.device("meta"):
        m = transformers.AutoModelForCausalLM.from_config(cfg)
    assert total_params(spec) == sum(p.numel() for p in m.parameters())


DEEPSEEK_V3 = {
    "model_type": "deepseek_v3",
    "hidden_size": 7168,
    "intermediate_size": 18432,
    "moe_intermediate_size": 2048,
    "num_hidden_layers": 61,
    "num_attention_heads": 128,
    "num_key_value_heads": 128,
    "n_routed_experts": 256,
    "n_shared_experts": 1,
    "num_experts_per_tok": 8,
    "first_k_dense_replace": 3,
    "q_lora_rank": 1536,
    "kv_lora_rank": 512,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
    "vocab_size": 129280,
}
DEEPSEEK_V2 = {**DEEPSEEK_V3, "model_type": "deepseek_v2"}  # MLA too, layout not checked by import-hf


@pytest.mark.parametrize(
    "content,text",
    [
        (DEEPSEEK_V2, "multi-head latent attention"),
        ({"model_type": "gpt_neox", "hidden_size": 8}, "not supported"),
        ({"model_type": "llama", "hidden_size": 4096}, "is missing"),
        ({**CONFIGS["llama3.1-8b"], "num_attention_heads": 0}, "num_attention_heads=0"),
        # was "key 'head_dim' is missing": hidden/heads is what head_dim defaults to
        (
            {**CONFIGS["llama3.1-8b"], "num_attention_heads": 30, "num_key_value_heads": 10},
            "hidden_size=4096 is not a multiple of num_attention_heads=30 and the config gives no head_dim",
        ),
        ({**CONFIGS["llama3.1-8b"], "num_key_value_heads": 7}, "kv_heads"),
        ({**CONFIGS["llama3.1-8b"], "hidden_act": "relu"}, "hidden_act='relu'"),
        ({**CONFIGS["qwen3-30b-a3b"], "mlp_only_layers": [3, 17]}, "mlp_only_layers"),
        ([1, 2, 3], "JSON object"),
        ("{not json", "not valid JSON"),
    ],
)
def test_bad_configs_give_one_sentence(content, text, tmp_path):
    p = tmp_path / "config.json"
    p.write_text(content if isinstance(content, str) else json.dumps(content))
    out = tmp_path / "models" / "x.yaml"
    r = run_cli("import-hf", p, "--out", out) if content is DEEPSEEK_V2 else None
    if r is not None:
        code, err = r.returncode, r.stderr
    else:
        code, err = invoke("import-hf", p, "--out", out)
    assert code == 2, err
    assert text in err and "Traceback" not in err
    assert len([ln for ln in err.strip().splitlines() if ln.strip()]) == 1
    assert not out.exists()


def test_missing_config_file(tmp_path):
    code, err = invoke("import-hf", tmp_path / "nope.json")
    assert code == 2 and "does not exist" in err
