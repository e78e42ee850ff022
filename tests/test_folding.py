"""MoE parallel folding (workload.expert_tp; issue 32 item 4): the expert layers' own grid
expert_tp x ep x expert-DP over the same tp x cp x dp ranks as attention (Megatron-Core
parallel_state.initialize_model_parallel @ d98e8a64: expert_data_parallel_size =
world / (etp·ep·pp); arXiv 2504.14960).

References, written out by hand, not the model against itself:
  - Qwen3-235B-A22B (HF config: h 4096, 64 heads of 128, 4 KV heads, 94 layers, 128 experts of
    I_e 1536, top-8, SwiGLU, QK norm): one expert is 3·4096·1536 = 18,874,368 parameters; pp 8
    puts 12 layers on a middle stage (94 = 11 + 6·12 + 11);
  - the published recipe: Megatron-Bridge 26.04.01, 256 H100, FP8, TP2 PP8 VP4 EP32 ETP1,
    micro-batch 1, global batch 8192, seq 4096, 1,712 tokens/s/GPU (benchmarks/surveys/stacks/
    stack_cases.csv row mb2604p1-qwen3-235b-h100-256gpu-tp2-pp8-vp4-ep32-fp8): step 76.56 s.
"""

from __future__ import annotations

import numpy as np
import pytest

from conftest import run_cli
from parallmelism.config.compose import load_run_configs
from parallmelism.config.kernel_tables import kernel_model
from parallmelism.cost.breakdown import training_breakdown
from parallmelism.cost.shapes import expert_dp_size
from parallmelism.engine import evaluate
from parallmelism.units import GIB

RECIPE = [
    "model=qwen3-235b-a22b",
    "hardware=h100-sxm-80gb",
    "grid.ngpus=[256]",
    "grid.tp=[2]",
    "grid.pp=[8]",
    "grid.cp=[1]",
    "grid.vpp=[4]",
    "grid.micro_batch=[1]",
    "grid.dp_sharding=[OPTIMIZER_STATES]",
    "grid.recompute=[none]",
    "grid.sequence_parallel=[true]",
    "workload.seq_len=4096",
    "workload.global_batch=8192",
    "workload.precision=fp8",
    "workload.low_precision_gemms=all",
    "workload.grad_reduce_dtype=bf16",
    "workload.overlap_ep_comm=true",
]
FOLDED = RECIPE + ["grid.ep=[32]", "workload.expert_tp=1"]
MEASURED_STEP_S = 8192 * 4096 / (1712 * 256)  # 76.56 s

EXPERT_PARAMS = 3 * 4096 * 1536  # one SwiGLU expert
MIDDLE_LAYERS = 12
# a middle stage's dense parameters at tp 2: attention 2·h·q/t + 2·h·d·g_l (g_l = 4/2 KV heads) +
# QK-norm 2d, two RMSNorms 2h and the router h·E per layer
DENSE_PER_GPU = MIDDLE_LAYERS * (2 * 4096 * 8192 // 2 + 2 * 4096 * 128 * 2 + 2 * 128 + 2 * 4096 + 4096 * 128)


def _evaluate(overrides):
    run = load_run_configs(overrides)[0][1]
    df, grid = evaluate(run)
    assert len(df) == 1
    return run, df.iloc[0], grid


def _collectives(overrides):
    run, row, grid = _evaluate(overrides)
    hw = run.accelerator()
    bd = training_breakdown(grid.columns, run.model, hw, run.workload, kernel_model(hw))
    return {(c["axis"], c["role"], c["collective"]): c for c in bd["collectives"]}


def test_expert_dp_size_is_megatrons():
    # edp = world / (etp·ep·pp) per stage: tp·dp·cp / (etp·ep)
    assert int(expert_dp_size(16, 1, 32, 2, 1)) == 1  # the recipe: TP2 x DP16, EP32 ETP1
    assert int(expert_dp_size(16, 1, 16, 2, 1)) == 2
    assert int(expert_dp_size(16, 2, 8, 4, 2)) == 8
    assert int(expert_dp_size(16, 1, 8, 2, 2)) == int(expert_dp_size(16, 1, 8)) == 2  # etp = tp: dp·cp/ep


def test_recipe_states_by_hand():
    """Experts: 12 layers x 128/32 experts x 18,874,368 / etp 1 on a GPU, their states over an
    expert-DP group of 1: bf16 weight 2 + fp8 copies 2 + bf16 grad 2 + fp32 master and Adam 12 =
    18 B; dense parameters 6.75 B (ZeRO-1 over dp 16: 4 + 2 + 12/16)."""
    _, row, _ = _evaluate(FOLDED)
    experts = MIDDLE_LAYERS * (128 // 32) * EXPERT_PARAMS
    assert experts == 905_969_664
    assert row["mem_stage"] == "second"
    assert row["params_experts_per_gpu"] == experts
    assert row["params_per_gpu"] == experts + DENSE_PER_GPU
    assert row["mem_states_gib"] == pytest.approx((experts * 18 + DENSE_PER_GPU * 6.75) / GIB, rel=1e-12)


def test_unfolded_is_the_default():
    """expert_tp = tp gives the rows of no expert_tp at all (same grid, same numbers): at EP8 the
    experts split over etp = tp = 2, 12 x 16 x 18,874,368 / 2 per GPU."""
    _, a, _ = _evaluate(RECIPE + ["grid.ep=[8]"])
    _, b, _ = _evaluate(RECIPE + ["grid.ep=[8]", "workload.expert_tp=2"])
    assert a["params_experts_per_gpu"] == MIDDLE_LAYERS * 16 * EXPERT_PARAMS / 2
    pd_a, pd_b = a.to_dict(), b.to_dict()
    assert pd_a == pd_b


def test_collectives_of_the_expert_grid():
    """The EP all-to-all carries a rank's sequence-parallel shard's routed copies, (T/t)·k·h·2 =
    2048·8·4096·2 bytes, over ep ranks etp apart; expert TP 1 gathers nothing; the expert
    gradient reduce runs over the expert-DP group, etp·ep ranks apart."""
    S = 2048 * 8 * 4096 * 2
    recipe = _collectives(FOLDED)
    a2a = recipe[("ep", "ep", "all_to_all")]
    assert (a2a["group"], a2a["stride"], a2a["bytes"]) == (32, 1, S)
    assert not any(role == "tp moe" for _, role, _ in recipe)
    assert not any(role.endswith("(experts)") for _, role, _ in recipe)  # expert-DP of 1: nothing to reduce

    edp2 = _collectives(RECIPE + ["grid.ep=[16]", "workload.expert_tp=1"])
    red = edp2[("dp", "dp grad reduce (experts)", "reduce_scatter")]
    assert (red["group"], red["stride"]) == (2, 16)

    etp4 = _collectives(RECIPE + ["grid.ep=[8]", "workload.expert_tp=4"])
    ag = etp4[("tp", "tp moe", "all_gather")]
    assert (ag["group"], ag["stride"], ag["bytes"]) == (4, 1, 4 * S)  # the 4 ranks' dispatched shards
    assert etp4[("ep", "ep", "all_to_all")]["stride"] == 4


def test_recipe_builds_fits_and_times():
    _, row, _ = _evaluate(FOLDED)
    assert row["fits"]
    assert np.isfinite(row["time_step_s"]) and row["time_step_s"] > 0
    print(
        f"\nQwen3-235B-A22B TP2 PP8 VP4 EP32 ETP1 on 256 H100: predicted {row['time_step_s']:.2f} s "
        f"({row['tokens_per_s_per_gpu']:.0f} tokens/s/GPU), measured {MEASURED_STEP_S:.2f} s (1712); "
        f"{row['time_step_s'] / MEASURED_STEP_S - 1:+.1%}; HBM {row['mem_total_gib']:.1f} GiB"
    )


def test_show_builds_fits_and_times():
    r = run_cli("show", *FOLDED)
    assert r.returncode == 0, r.stderr
    assert "fits:" in r.stdout and "tokens_per_s_per_gpu" in r.stdout
    assert "│ ep   │ ep              │ all_to_all" in r.stdout


@pytest.mark.parametrize(
    "args, words",
    [
        (["model=llama3.1-8b", "workload.expert_tp=1"], "has no experts"),
        (["model=qwen3-235b-a22b", "workload.expert_tp=5"], "does not divide"),
        (RECIPE + ["grid.ep=[32]"], "ep does not divide dp·cp"),
        (FOLDED[:-1] + ["workload.expert_tp=4"], "ep·expert_tp does not divide tp·cp·dp"),
        (
            [a for a in FOLDED if not a.startswith("grid.sequence_parallel")] + ["grid.sequence_parallel=[false]"],
            "need sequence parallelism",
        ),
    ],
)
def test_refusals(args, words):
    r = run_cli("show", "grid.ngpus=[256]", *args)
    assert r.returncode == 2, r.stderr
    assert words in r.stderr + r.stdout
    assert "Traceback" not in r.stderr


def test_export_writes_the_expert_tp():
    """Megatron's default expert TP is tp: a folded layout exported without the flag would ask for
    etp·ep·pp = 2·32·8 = 512 ranks of 256. Megatron-LM and Megatron-Bridge write it and read it back;
    the targets that cannot say it refuse in one sentence."""
    from parallmelism.cli.export_cmd import _planned
    from parallmelism.errors import UserError
    from parallmelism.export import target_module

    planned, _ = _planned(FOLDED, None)
    text = target_module("megatron").render(planned)
    assert "--expert-tensor-parallel-size 1" in text
    back = target_module("megatron").parse(text, None, planned.layers)
    assert back["workload.expert_tp"] == 1 and back["grid.ep"] == 32
    assert "model.expert_tensor_parallel_size=1" in target_module("nemo").render(planned)
    for target in ("torchtitan", "maxtext"):
        with pytest.raises(UserError, match="expert_tp"):
            target_module(target).render(planned)
    with pytest.raises(UserError, match="is set in model code"):
        target_module("deepspeed").render(planned)  # it refuses every model-parallel axis
