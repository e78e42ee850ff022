"""cost/shapes.py: each derived size once (reference values), and every path applies the MoE cap."""

from __future__ import annotations

import numpy as np
import pytest

from parallmelism.config.kernel_tables import kernel_model
from parallmelism.config import load_run_configs
from parallmelism.config import load_option
from parallmelism.cost.shapes import (
    dense_dp_size,
    expert_dp_size,
    experts_per_rank,
    heads_per_rank,
    kv_cache_width_per_rank,
    kv_heads_per_rank,
    kv_replication,
    layers_on_busiest_stage,
    moe_token_load,
    sp_divisor,
    tokens_per_rank,
)
from parallmelism.specs import MoESpec


def test_reference_values():
    # Llama-3.1-70B: 8 KV heads. TP 4 -> 2 heads per rank; TP 16 -> 1 head, each held by 2 ranks.
    assert kv_heads_per_rank(8, np.array([1, 4, 8, 16])).tolist() == [8.0, 2.0, 1.0, 1.0]
    assert kv_replication(np.array([1, 4, 8, 16]), 8).tolist() == [1, 1, 1, 2]
    # s = 8192, b = 2, cp = 4 -> 4096 tokens per rank; SP divides the norm/residual tokens by t
    assert float(tokens_per_rank(8192, 2, 4)) == 4096.0
    assert sp_divisor(np.array([8, 8]), np.array([True, False])).tolist() == [8.0, 1.0]
    # Llama-3.1-70B: 64 query heads -> 8 per rank at TP 8
    assert heads_per_rank(64, np.array([1, 8])).tolist() == [64.0, 8.0]


def test_expert_sizes():
    # DeepSeek-V3: 256 routed experts; EP 64 -> 4 local experts (Megatron-Core num_local_experts)
    assert experts_per_rank(256, np.array([1, 8, 64])).tolist() == [256.0, 32.0, 4.0]
    # Megatron-Core: world = tp·cp·dp·pp and expert_data_parallel_size = world / (etp·ep·pp) with
    # etp = tp, i.e. dp·cp / ep. tp 2, cp 2, dp 8, pp 4 (world 128), ep 4 -> 4; dense grads over dp·cp = 16.
    assert int(dense_dp_size(8, 2)) == 16
    assert int(expert_dp_size(8, 2, 4)) == 128 // (2 * 4 * 4) == 4
    assert expert_dp_size(np.array([8.0, 1.0]), np.array([1.0, 1.0]), np.array([8.0, 1.0])).tolist() == [1.0, 1.0]


def test_kv_cache_width_and_busiest_stage():
    # Llama-3.1-70B (8 KV heads of 128): K+V = 2·8·128 = 2048 values per token and layer at TP 1,
    # 256 at TP 8, still 256 at TP 16 (one whole head per rank). DeepSeek-V3 caches the MLA latent,
    # 512 + 64 = 576 values (DeepSeek-V2 paper, Table 1: (d_c + d_h^R)·l), on every TP rank.
    llama, dsv3 = load_option("model", "llama3.1-70b"), load_option("model", "deepseek-v3")
    assert kv_cache_width_per_rank(llama, np.array([1, 8, 16])).tolist() == [2048.0, 256.0, 256.0]
    assert dsv3.require_mla().latent_width == 576 and kv_cache_width_per_rank(dsv3, 8) == 576
    # Llama 3 405B: 126 layers on pp 16 -> the middle stages hold 8 (grid.stage_layer_split: 7, 8 x 14, 7)
    assert layers_on_busiest_stage(126, np.array([1, 16])).tolist() == [126, 8]
    assert float(layers_on_busiest_stage(61, np.array([4.0]))[0]) == 16.0


def test_mlp_shapes_of_the_spec():
    """Per MLP: Llama-3.1-8B (SwiGLU) gate_proj, up_proj, down_proj of 4096 x 14336 each (HF
    LlamaMLP); GPT-3 (GELU) fc1 and fc2; DeepSeek-V3's shared expert is 2048 wide (HF
    moe_intermediate_size x n_shared_experts 1), Mixtral has none and falls back to the routed size."""
    from parallmelism.cost.params import mlp_params

    llama, gpt3 = load_option("model", "llama3.1-8b"), load_option("model", "gpt3-175b")
    assert (llama.mlp_up_matrices, llama.mlp_matrices) == (2, 3)
    assert (gpt3.mlp_up_matrices, gpt3.mlp_matrices) == (1, 2)
    assert mlp_params(llama, llama.ffn_hidden) == 3 * 4096 * 14336
    # GPT-3 175B: fc1 12288->49152 and fc2 with biases (49152 + 12288)
    assert mlp_params(gpt3, gpt3.ffn_hidden) == 2 * 12288 * 49152 + 49152 + 12288
    assert load_option("model", "deepseek-v3").require_moe().shared_expert_ffn == 2048
    assert load_option("model", "mixtral-8x7b").require_moe().shared_expert_ffn == 14336


def test_moe_token_load_is_capped_by_the_capacity_factor():
    dropless = MoESpec(num_experts=8, top_k=2, ffn_hidden=14336)
    capped = dropless.model_copy(update={"capacity_factor": 1.25})
    assert moe_token_load(dropless, 2.0) == 2.0
    assert moe_token_load(capped, 2.0) == 1.25
    assert moe_token_load(capped, 1.1) == 1.1
    assert moe_token_load(None, 1.5) == 1.5


@pytest.mark.parametrize("workload", ["train", "inference"])
def test_every_path_applies_the_cap(workload):
    """Imbalance 2 under capacity factor 1.25 costs what imbalance 1.25 costs: training (step time,
    memory, the show breakdown's EP bytes) and serving (the path that used to forget the cap)."""
    from parallmelism.engine import evaluate

    base = ["model=mixtral-8x7b", f"workload={workload}", "grid.ngpus=[16]", "+model.moe.capacity_factor=1.25"]
    if workload == "train":
        base += ["grid.tp=2", "grid.ep=[4]", "grid.micro_batch=[1]", "workload.global_batch=32"]
    else:
        base += ["grid.ep=[4]", "grid.batch=[8]"]
    a, _ = evaluate(load_run_configs([*base, "workload.moe_imbalance=2.0"])[0][1])
    b, _ = evaluate(load_run_configs([*base, "workload.moe_imbalance=1.25"])[0][1])
    c, _ = evaluate(load_run_configs([*base, "workload.moe_imbalance=1.0"])[0][1])
    assert len(a) == len(b) > 0
    key = "time_step_s" if workload == "train" else "tpot_ms"
    assert np.array_equal(a[key].to_numpy(), b[key].to_numpy())
    assert (a[key].to_numpy() >= c[key].to_numpy()).all() and (a[key].to_numpy() > c[key].to_numpy()).any()


def test_breakdown_ep_bytes_apply_the_cap():
    from parallmelism.cost.breakdown import training_breakdown
    from parallmelism.engine import evaluate

    def ep_bytes(imbalance):
        ov = [
            "model=mixtral-8x7b",
            "grid.ngpus=[16]",
            "grid.tp=2",
            "grid.ep=[4]",
            "grid.micro_batch=[1]",
            "workload.global_batch=32",
            "+model.moe.capacity_factor=1.25",
            f"workload.moe_imbalance={imbalance}",
        ]
        run = load_run_configs(ov)[0][1]
        _, grid = evaluate(run)
        layout = {k: v[[0]] for k, v in grid.columns.items()}
        hw = run.accelerator()
        colls = training_breakdown(layout, run.model, hw, run.workload, kernel_model(hw))["collectives"]
        return next(c["bytes"] for c in colls if c["axis"] == "ep")

    assert float(ep_bytes(2.0)) == pytest.approx(float(ep_bytes(1.25)))
