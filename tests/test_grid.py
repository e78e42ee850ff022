"""Layout grid: every drop reason, the bookkeeping, and that kept layouts satisfy every rule."""

import numpy as np
import pytest

from parallmelism.config import load_option
from parallmelism.grid import DROP_REASONS, enumerate_training_layouts
from parallmelism.specs import GridSpec, TrainWorkload

H100 = load_option("hardware", "h100-sxm-80gb")
TPU = load_option("hardware", "tpu-v5p")
L70 = load_option("model", "llama3.1-70b")
MIX = load_option("model", "mixtral-8x7b")
WL = TrainWorkload(seq_len=8192, global_batch=512)


def grid(**kw):
    return GridSpec(**kw)


# reason -> (model, hardware, workload, grid) that triggers it
CASES = {
    "product_not_dividing_ngpus": (L70, H100, WL, grid(ngpus=[64], tp=[3])),
    "ngpus_exceeds_fabric": (L70, TPU, WL, grid(ngpus=[16384])),
    "tp_exceeds_scale_up_domain": (L70, H100, WL, grid(ngpus=[64], tp=[16])),
    "tp_spans_partial_domain": (L70, H100, WL, grid(ngpus=[48], tp=[12], cross_node_tp=True)),
    "heads_not_divisible_by_tp": (
        load_option("model", "grok-1"),
        load_option("hardware", "gb200-nvl72"),
        WL,
        grid(ngpus=[64], tp=[32]),
    ),
    "kv_heads_incompatible_with_tp": (
        L70.model_copy(update={"heads": 48, "kv_heads": 12, "head_dim": 128}),
        H100,
        WL,
        grid(ngpus=[64], tp=[8]),
    ),
    "ffn_not_divisible_by_tp": (L70.model_copy(update={"ffn_hidden": 28676}), H100, WL, grid(ngpus=[64], tp=[8])),
    "layers_not_divisible_by_pp": (L70, H100, WL, grid(ngpus=[64], pp=[32], uneven_pipeline=False)),
    "pipeline_stage_empty": (L70, H100, WL, grid(ngpus=[64], pp=[64])),
    "seq_not_divisible_by_cp": (L70, H100, TrainWorkload(seq_len=8200, global_batch=512), grid(ngpus=[64], cp=[8])),
    "cp_needs_fused_attention": (
        L70,
        H100,
        TrainWorkload(seq_len=8192, global_batch=512, flash_attention=False),
        grid(ngpus=[64], cp=[2]),
    ),
    "ep_on_dense_model": (L70, H100, WL, grid(ngpus=[64], ep=[2])),
    "experts_not_divisible_by_ep": (MIX, H100, WL, grid(ngpus=[48], ep=[3])),
    "ep_not_dividing_dp_cp": (MIX, H100, WL, grid(ngpus=[64], tp=[8], pp=[4], cp=[1], ep=[8])),
    # MoE parallel folding: expert_tp·ep = 32 does not divide tp·cp·dp = 8·1·2
    "expert_grid_not_dividing": (
        MIX,
        H100,
        TrainWorkload(seq_len=8192, global_batch=512, expert_tp=4),
        grid(ngpus=[64], tp=[8], pp=[4], cp=[1], ep=[8]),
    ),
    "folding_needs_sequence_parallel": (
        MIX,
        H100,
        TrainWorkload(seq_len=8192, global_batch=512, expert_tp=1),
        grid(ngpus=[64], tp=[2], pp=[4], cp=[1], ep=[8], sequence_parallel=[False]),
    ),
    "param_offload_needs_fully_shard": (
        L70,
        H100,
        TrainWorkload(seq_len=8192, global_batch=512, optimizer_offload=True, param_offload=True),
        grid(ngpus=[64], tp=[8], pp=[1], dp_sharding=["OPTIMIZER_STATES"]),
    ),
    "batch_not_divisible_by_dp_micro_batch": (
        L70,
        H100,
        WL,
        grid(ngpus=[64], micro_batch=[16], tp=[1], pp=[1], cp=[1]),
    ),
    "vpp_needs_pp": (L70, H100, WL, grid(ngpus=[64], pp=[1], vpp=[2])),
    "vpp_needs_1f1b": (
        L70,
        H100,
        TrainWorkload(seq_len=8192, global_batch=512, schedule="gpipe"),
        grid(ngpus=[64], pp=[4], vpp=[2]),
    ),
    "layers_not_divisible_by_pp_vpp": (L70, H100, WL, grid(ngpus=[64], pp=[8], vpp=[4])),
    "micro_batches_not_divisible_by_pp": (
        L70,
        H100,
        TrainWorkload(seq_len=8192, global_batch=20),
        grid(ngpus=[64], tp=[8], pp=[4], cp=[1], micro_batch=[1], vpp=[2]),
    ),
    "sequence_parallel_needs_tp": (L70, H100, WL, grid(ngpus=[64], tp=[1], sequence_parallel=[True])),
    "cp_a2a_heads_not_divisible": (  # Ulysses: 64 heads / tp 8 = 8 a rank, not split 16 ways
        L70,
        H100,
        TrainWorkload(seq_len=8192, global_batch=512, cp_comm_type="a2a"),
        grid(ngpus=[128], tp=[8], cp=[16], pp=[1]),
    ),
    "sharding_needs_dp": (L70, H100, WL, grid(ngpus=[64], tp=[8], pp=[8], cp=[1], dp_sharding=["FULLY_SHARD"])),
    "dp_not_multiple_of_dp_shard_size": (
        L70,
        H100,
        TrainWorkload(seq_len=4096, global_batch=64, dp_shard_size=3),
        grid(ngpus=[64], tp=[8], pp=[1], dp_sharding=["FULLY_SHARD"]),
    ),
}


def _stack(name):
    return load_option("stack", name)


# a training stack's layout rules (conf/stack/NAME.yaml `layouts:`): reason -> (stack, model, workload, grid)
STACK_CASES = {
    "stack_no_tp": ("pytorch-fsdp1", L70, WL, grid(ngpus=[64], tp=[8], pp=[1], cp=[1])),
    "stack_no_pp": ("pytorch-fsdp1", L70, WL, grid(ngpus=[64], tp=[1], pp=[4], cp=[1])),
    "stack_no_vpp": ("deepspeed", L70, WL, grid(ngpus=[64], tp=[1], pp=[4], vpp=[2], dp_sharding=["NO_OP"])),
    "stack_no_cp": ("pytorch-fsdp1", L70, WL, grid(ngpus=[64], tp=[1], pp=[1], cp=[2])),
    "stack_no_ep": ("pytorch-fsdp1", MIX, WL, grid(ngpus=[64], tp=[1], pp=[1], cp=[1], ep=[8])),
    "stack_no_sharding_with_pp": (
        "deepspeed",
        L70,
        WL,
        grid(ngpus=[64], tp=[1], pp=[4], cp=[1], dp_sharding=["FULLY_SHARD"]),
    ),
    "stack_dp_sharding": ("pytorch-fsdp1", L70, WL, grid(ngpus=[64], tp=[1], pp=[1], cp=[1])),
}


@pytest.mark.parametrize("reason", list(STACK_CASES))
def test_a_stack_drops_the_layouts_it_cannot_run(reason):
    """`best`/`sweep` under a stack keep only layouts it runs; megatron-te (every axis) drops none."""
    name, model, wl, g = STACK_CASES[reason]
    out = enumerate_training_layouts(model, H100, wl, g, _stack(name))
    assert out.dropped[reason] > 0
    assert out.considered == len(out) + sum(out.dropped.values())
    every = enumerate_training_layouts(model, H100, wl, g, _stack("megatron-te"))
    assert len(every) == len(enumerate_training_layouts(model, H100, wl, g)) >= out.dropped[reason]


def test_ulysses_needs_the_sequence_divisible_by_cp_not_2cp():
    """Ring and all-gather CP split the sequence into 2·cp load-balanced chunks; Ulysses (a2a) into cp
    contiguous slices: 8200 tokens (8 x 1025) run at CP 8 with a2a, not with the ring; 8196 with neither."""
    g = grid(ngpus=[64], tp=[8], pp=[1], cp=[8])
    a2a = enumerate_training_layouts(L70, H100, TrainWorkload(seq_len=8200, global_batch=512, cp_comm_type="a2a"), g)
    ring = enumerate_training_layouts(L70, H100, TrainWorkload(seq_len=8200, global_batch=512), g)
    odd = enumerate_training_layouts(L70, H100, TrainWorkload(seq_len=8196, global_batch=512, cp_comm_type="a2a"), g)
    assert len(a2a) > 0 and a2a.dropped.get("seq_not_divisible_by_cp", 0) == 0
    assert len(ring) == 0 and ring.dropped["seq_not_divisible_by_cp"] > 0
    assert len(odd) == 0 and odd.dropped["seq_not_divisible_by_cp"] > 0


def test_every_reason_has_a_case():
    from parallmelism.grid.reasons import INFERENCE_DROP_REASONS

    training_only = set(DROP_REASONS) - (set(INFERENCE_DROP_REASONS) - set(CASES)) - set(STACK_CASES)
    assert set(CASES) == training_only
    assert set(INFERENCE_CASES) == set(INFERENCE_DROP_REASONS)


@pytest.mark.parametrize("reason", list(CASES))
def test_drop_reason_is_counted(reason):
    model, hw, wl, g = CASES[reason]
    out = enumerate_training_layouts(model, hw, wl, g)
    assert out.dropped[reason] > 0
    assert out.considered == len(out) + sum(out.dropped.values())


def test_empty_grid_explains_itself():
    out = enumerate_training_layouts(L70, H100, WL, grid(ngpus=[64], tp=[16]))
    assert len(out) == 0
    assert "scale-up" in out.explain_empty() and "all" in out.explain_empty()


def test_cross_node_tp_is_kept_only_when_asked():
    """tp = 16 on 8-GPU NVLink domains: dropped by default with a sentence naming the option that
    keeps it; kept (whole domains) under grid.cross_node_tp, for training and serving alike."""
    from parallmelism.grid.inference import enumerate_inference_layouts
    from parallmelism.specs import InferenceWorkload

    refused = enumerate_training_layouts(L70, H100, WL, grid(ngpus=[64], tp=[16]))
    assert len(refused) == 0 and "grid.cross_node_tp=true" in refused.explain_empty()
    kept = enumerate_training_layouts(L70, H100, WL, grid(ngpus=[64], tp=[16], cross_node_tp=True))
    assert len(kept) > 0 and set(kept.columns["tp"].tolist()) == {16}
    dsv3 = load_option("model", "deepseek-v3")
    serving = enumerate_inference_layouts(
        dsv3, H100, InferenceWorkload(), grid(ngpus=[16], tp=[16], ep=[1], cross_node_tp=True)
    )
    assert serving.columns["tp"].tolist() == [16]
    # without the option `best` does not see them: the default grid's tp stays inside the domain
    default = enumerate_training_layouts(L70, H100, WL, grid(ngpus=[64], pp=[1], cp=[1], micro_batch=[1]))
    assert default.columns["tp"].max() == 8


def test_kept_layouts_obey_every_rule():
    out = enumerate_training_layouts(MIX, H100, WL, grid(ngpus=[64, 128]))
    c = out.columns
    assert len(out) > 1000
    assert np.all(c["tp"] * c["pp"] * c["cp"] * c["dp"] == c["ngpus"])
    assert np.all(c["tp"] <= 8) and np.all(32 % c["tp"] == 0)
    assert np.all(c["layers_per_stage"] % c["vpp"] == 0)
    split = c["layers_first_stage"] + (c["pp"] - 2).clip(0) * c["layers_per_stage"] + c["layers_last_stage"]
    assert np.all(np.where(c["pp"] == 1, c["layers_first_stage"], split) == 32)
    assert np.all(8 % c["ep"] == 0) and np.all((c["dp"] * c["cp"]) % c["ep"] == 0)
    assert np.all(c["num_micro_batches"] * c["dp"] * c["micro_batch"] == 512)
    assert not np.any(c["sequence_parallel"] & (c["tp"] == 1))
    # every (tp, pp, cp) factorization of 64 with tp <= 8 appears
    triples = {(int(a), int(b), int(d)) for a, b, d in zip(c["tp"], c["pp"], c["cp"]) if int(a * b * d) <= 64}
    assert (8, 4, 2) in triples and (1, 1, 1) in triples


def test_unset_axis_means_every_divisor():
    out = enumerate_training_layouts(
        L70,
        H100,
        WL,
        grid(
            ngpus=[64],
            pp=[1],
            cp=[1],
            vpp=[1],
            micro_batch=[1],
            dp_sharding=["NO_OP"],
            recompute=["none"],
            sequence_parallel=[False],
        ),
    )
    assert sorted(set(out.columns["tp"].tolist())) == [1, 2, 4, 8]


def test_kv_replication_flagged():
    out = enumerate_training_layouts(
        L70, load_option("hardware", "gb200-nvl72"), WL, grid(ngpus=[64], tp=[8, 16, 32], pp=[1], cp=[1])
    )
    rep = dict(zip(out.columns["tp"].tolist(), out.columns["kv_replication"].tolist()))
    assert rep == {8: 1, 16: 2, 32: 4}


def _serving(**kw):
    from parallmelism.specs import InferenceWorkload

    return InferenceWorkload(**kw)


INFERENCE_CASES = {
    "replica_not_dividing_ngpus": (L70, H100, dict(), grid(ngpus=[8], tp=[3])),
    "pp_exceeds_layers": (load_option("model", "llama3.1-8b"), H100, dict(), grid(ngpus=[64], tp=[1], pp=[64], sp=[1])),
    "prompt_not_divisible_by_sp": (L70, H100, dict(input_len=2050), grid(ngpus=[8], tp=[2], pp=[1], sp=[4])),
    "ep_not_dividing_tp_or_dp_sp": (MIX, H100, dict(), grid(ngpus=[8], tp=[2], pp=[1], sp=[1], ep=[8])),
}


@pytest.mark.parametrize("reason", list(INFERENCE_CASES))
def test_inference_drop_reason_is_counted(reason):
    from parallmelism.grid.inference import enumerate_inference_layouts

    model, hw, wl, g = INFERENCE_CASES[reason]
    out = enumerate_inference_layouts(model, hw, _serving(**wl), g)
    assert out.dropped[reason] > 0
    assert out.considered == len(out) + sum(out.dropped.values())


def test_interleaving_on_an_uneven_split():
    """Llama 3 405B: 126 layers on pp=16 split 7, 8x14, 7 (first and last stage one layer short, for
    the embedding and the loss) with one layer per virtual chunk, v = 8 (Llama 3 paper, section
    3.3.2). Chunks must divide the 8 layers of a full stage: v = 3 is dropped."""
    l405 = load_option("model", "llama3.1-405b")
    wl = TrainWorkload(seq_len=8192, global_batch=2048)
    g = grid(
        ngpus=[16384],
        tp=[8],
        pp=[16],
        cp=[1],
        micro_batch=[1],
        vpp=[1, 2, 3, 4, 8],
        dp_sharding=["OPTIMIZER_STATES_AND_GRADS"],
        recompute=["none"],
        sequence_parallel=[True],
    )
    out = enumerate_training_layouts(l405, H100, wl, g)
    c = out.columns
    assert sorted(c["vpp"].tolist()) == [1, 2, 4, 8]
    assert set(c["layers_first_stage"]) == {7} and set(c["layers_per_stage"]) == {8}
    assert out.dropped["layers_not_divisible_by_pp_vpp"] == 1


def test_folding_keeps_ep_across_tp_ranks():
    """The layout `ep_not_dividing_dp_cp` refuses (ep 8 over dp·cp = 2) is a valid expert grid once
    expert TP is decoupled: etp·ep = 1·8 divides tp·cp·dp = 8·1·2 = 16, expert-DP = 16/8 = 2
    (Megatron-Core initialize_model_parallel: world % (etp·ep·pp) == 0)."""
    g = grid(ngpus=[64], tp=[8], pp=[4], cp=[1], ep=[8], sequence_parallel=[True])
    assert len(enumerate_training_layouts(MIX, H100, WL, g)) == 0
    folded = enumerate_training_layouts(MIX, H100, TrainWorkload(seq_len=8192, global_batch=512, expert_tp=1), g)
    assert len(folded) > 0 and set(folded.columns["dp"]) == {2} and set(folded.columns["ep"]) == {8}


def test_partitions_sharing_their_replica_layouts_enumerate_the_same_rows():
    # the driver keeps one memo per run (search/chunks.py): the tp x pp x cp x ep layouts of a GPU
    # count are made once for all its micro-batch partitions; each partition's rows, drop counts
    # and considered combinations are what it gives alone
    wl = TrainWorkload(seq_len=4096, global_batch=256)
    memo: dict = {}
    for model in (L70, load_option("model", "llama3.1-8b"), MIX):
        for n in (64, 128, 64):  # back to a GPU count whose replicas were replaced
            for mb in (1, 2, 4):
                g = grid(ngpus=[n], micro_batch=[mb])
                alone = enumerate_training_layouts(model, H100, wl, g)
                shared = enumerate_training_layouts(model, H100, wl, g, memo=memo)
                assert shared.considered == alone.considered and shared.dropped == alone.dropped
                assert list(shared.columns) == list(alone.columns)
                for k, v in alone.columns.items():
                    assert np.array_equal(shared.columns[k], v), k
    assert len(alone) > 0


def test_a_gpu_count_past_any_cluster_is_one_sentence():
    """grid.ngpus=[8086598962041600] (41,472 divisors) was a numpy MemoryError traceback (a 519 TiB
    mesh of divisor triples); grid.ngpus, plan.gpus and plan.ngpus stop at 2**20 GPUs."""
    from conftest import invoke

    from parallmelism.specs.plan import PlanSpec

    assert GridSpec(ngpus=[8, 2**20]).ngpus == [8, 2**20]
    for make in (lambda: GridSpec(ngpus=[8, 2**20 + 1]), lambda: PlanSpec(gpus=2**20 + 1)):
        with pytest.raises(ValueError, match=r"1,048,577 GPUs is more than the 1,048,576 \(2\*\*20\) a layout may"):
            make()
    code, text = invoke("best", "-q", "model=llama3.1-8b", "grid.ngpus=[8086598962041600]")
    assert code == 2 and text.startswith("error: grid.ngpus=[8086598962041600]: 8,086,598,962,041,600 GPUs is"), text
