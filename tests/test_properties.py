"""Property-based invariants of the cost model (hypothesis, bounded examples so they run fast).

- total model FLOPs per step are the same for every layout of a model and batch;
- per-GPU weights never rise when tp or pp grows by a whole factor (a sub-shard of the same shard);
- states and total memory: NO_OP >= OPTIMIZER_STATES >= OPTIMIZER_STATES_AND_GRADS >= FULLY_SHARD;
- the bubble's share of the step is in [0, 1);
- every time is finite and non-negative, step and compute times strictly positive;
- `fits` is exactly mem_total_gib <= hbm_usable_gib;
- serving: no prefill or decode step runs its FLOPs faster than the accelerator's spec peak, and twice
  the peak FLOP/s, HBM bandwidth, scale-up or scale-out bandwidth never makes a phase slower.
"""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from parallmelism.config import load_option, load_run_configs
from parallmelism.cost.params import params_per_gpu
from parallmelism.engine import evaluate
from parallmelism.grid.layouts import divisors, stage_layer_split

MODELS = ["llama3.1-8b", "llama3.1-70b", "mixtral-8x7b", "grok-1", "gpt3-175b"]
SETTINGS = settings(max_examples=12, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def runs(draw):
    model = draw(st.sampled_from(MODELS))
    ngpus = draw(st.sampled_from([8, 16, 32, 64]))
    seq = draw(st.sampled_from([1024, 2048, 4096]))
    seq = min(seq, load_option("model", model).max_position or seq)  # a learned position table bounds it
    batch = draw(st.sampled_from([32, 64, 128]))
    hw = draw(st.sampled_from(["h100-sxm-80gb", "a100-sxm-80gb", "b200-180gb"]))
    overrides = [
        f"model={model}",
        f"hardware={hw}",
        f"grid.ngpus=[{ngpus}]",
        f"workload.seq_len={seq}",
        f"workload.global_batch={batch}",
        "grid.micro_batch=[1,2]",
        "grid.vpp=[1,2]",
    ]
    if model == "gpt3-175b":
        overrides.append("workload.flash_attention=false")
    return overrides


def _frame(overrides):
    df, _ = evaluate(load_run_configs(overrides)[0][1])
    return df


@SETTINGS
@given(runs())
def test_training_invariants(overrides):
    df = _frame(overrides)
    if len(df) == 0:
        return
    # fits <=> total <= usable HBM
    assert (df["fits"].to_numpy() == (df["mem_total_gib"] <= df["hbm_usable_gib"]).to_numpy()).all()
    # times: finite, >= 0; step and compute > 0
    times = df.filter(regex=r"^time_.*_s$")
    assert len(times.columns) >= 3
    assert np.isfinite(times.to_numpy()).all() and (times.to_numpy() >= 0).all()
    assert (df["time_step_s"] > 0).all() and (df["time_compute_s"] > 0).all()
    # bubble share of the step in [0, 1)
    share = df["time_bubble_s"] / df["time_step_s"]
    assert ((share >= 0) & (share < 1)).all()
    assert (df.loc[df["pp"] == 1, "time_bubble_s"] == 0).all()
    # model FLOPs per step: one value for every layout of this model and batch
    f = df["flops_model_per_step"].to_numpy()
    assert np.ptp(f) <= 1e-12 * f.max()
    # hardware FLOPs include recompute: never below model FLOPs
    assert (df["flops_hardware_per_step"] >= df["flops_model_per_step"] * (1 - 1e-12)).all()


# Mixtral 8x7B on 64 B200s: at pp 32 a stage holds one layer, and FULLY_SHARD counted that layer and
# a prefetched next one gathered (2 x 2.7 GiB), more than ZeRO-2's whole unsharded stage weights
MIXTRAL_ONE_LAYER_STAGES = ["model=mixtral-8x7b", "hardware=b200-180gb", "grid.ngpus=[64]", "grid.pp=32"]
MIXTRAL_ONE_LAYER_STAGES += [
    "workload.seq_len=4096",
    "workload.global_batch=64",
    "grid.micro_batch=[1]",
    "grid.vpp=[1]",
]


@SETTINGS
@given(runs())
@example(MIXTRAL_ONE_LAYER_STAGES)
def test_states_memory_ordered_by_sharding(overrides):
    """More sharding never holds more per GPU: the states, and the total with FULLY_SHARD's gathered
    units (never more than the stage's own weights)."""
    df = _frame(overrides)
    layout = ["ngpus", "tp", "pp", "cp", "ep", "dp", "vpp", "micro_batch", "recompute", "sequence_parallel"]
    order = ["NO_OP", "OPTIMIZER_STATES", "OPTIMIZER_STATES_AND_GRADS", "FULLY_SHARD"]
    for column in ("mem_states_gib", "mem_total_gib"):
        wide = df.pivot_table(index=layout, columns="dp_sharding", values=column, observed=True)
        wide = wide[[c for c in order if c in wide.columns]].dropna()
        vals = wide.to_numpy()
        assert (np.diff(vals, axis=1) <= 1e-9).all(), column


@st.composite
def nested_layouts(draw):
    model = load_option("model", draw(st.sampled_from(MODELS + ["llama3.1-405b", "mixtral-8x22b"])))
    tps = [
        t
        for t in divisors(model.heads)
        if t <= 64
        and (model.g % t == 0 or t % model.g == 0)
        and model.ffn_hidden % t == 0
        and (model.moe is None or model.moe.ffn_hidden % t == 0)
    ]
    pps = [1, 2, 3, 4, 6, 8, 16]
    tp1 = draw(st.sampled_from(tps))
    tp2 = draw(st.sampled_from([t for t in tps if t % tp1 == 0]))
    pp1 = draw(st.sampled_from(pps))
    pp2 = draw(st.sampled_from([p for p in pps if p % pp1 == 0]))
    ep = 1
    if model.moe is not None:
        ep = draw(st.sampled_from([int(e) for e in divisors(model.moe.num_experts)]))
    return model, int(tp1), int(tp2), pp1, pp2, ep


@settings(max_examples=60, deadline=None, derandomize=True)
@given(nested_layouts())
def test_weights_per_gpu_never_rise_when_tp_pp_grow(case):
    model, tp1, tp2, pp1, pp2, ep = case

    def worst(tp, pp):
        """Largest parameter count over the first, a middle and the last stage (grid's layer split)."""
        first, middle, last = (int(x) for x in stage_layer_split(model.layers, pp))
        single = pp == 1
        stages = [(first, 0, True, single), (last, model.layers - last, single, True)]
        if pp > 2:
            stages.append((middle, first, False, False))
        return max(float(params_per_gpu(model, tp, ep, n, lo, emb, head)["total"]) for n, lo, emb, head in stages)

    assert worst(tp2, pp2) <= worst(tp1, pp1) * (1 + 1e-12), (model.name, tp1, tp2, pp1, pp2)


@settings(max_examples=8, deadline=None, derandomize=True)
@given(
    model=st.sampled_from(["llama3.1-8b", "llama3.1-70b", "mixtral-8x7b"]),
    ngpus=st.sampled_from([8, 16, 64]),
    batch=st.sampled_from([1, 8, 64, 256]),
)
def test_inference_invariants(model, ngpus, batch):
    df = _frame(["workload=inference", f"model={model}", f"grid.ngpus=[{ngpus}]", f"workload.batch={batch}"])
    if len(df) == 0:
        return
    assert (df["fits"].to_numpy() == (df["mem_total_gib"] <= df["hbm_usable_gib"]).to_numpy()).all()
    for c in ("ttft_ms", "tpot_ms", "e2e_latency_ms"):
        v = df[c].to_numpy()
        assert np.isfinite(v).all() and (v > 0).all(), c
    assert (df["e2e_latency_ms"] >= df["ttft_ms"] * (1 - 1e-12)).all()
    # continuous batching: an iteration that carries a prompt chunk beside the other b-1 sequences'
    # decode tokens is never shorter than a decode iteration of all b (its sp attention merge and
    # every per-token cost included), and the mean ITL is their mix, (1-q)·t_dec + q·t_mix
    if batch > 1:
        assert (df["iteration_mixed_ms"] >= df["decode_step_ms"] * (1 - 1e-9)).all()
    q = df["serving_load"]
    mix = (1 - q) * df["decode_step_ms"] + q * df["iteration_mixed_ms"]
    np.testing.assert_allclose(df["tpot_ms"], mix, rtol=1e-9)


SERVE_MODELS = ["llama3.1-8b", "llama3.1-70b", "mixtral-8x7b", "deepseek-v3", "qwen3-30b-a3b"]  # dense, GQA, MoE, MLA
SERVE_HARDWARE = ["h100-sxm-80gb", "a100-sxm-40gb", "b200-180gb", "mi300x-192gb", "h20-96gb"]
# the phases a faster part may only shorten (TTFT and mean ITL under load are closed-loop: a faster
# decode brings the next prompts sooner, so their queueing can grow)
SERVE_PHASES = ["prefill_ms", "decode_step_ms", "iteration_mixed_ms", "e2e_latency_ms"]


@st.composite
def serve_runs(draw):
    return [
        "workload=inference",
        f"model={draw(st.sampled_from(SERVE_MODELS))}",
        f"hardware={draw(st.sampled_from(SERVE_HARDWARE))}",
        f"engine={draw(st.sampled_from(['trtllm', 'vllm', 'sglang']))}",
        f"grid.ngpus=[{draw(st.sampled_from([8, 16]))}]",
        f"workload.batch={draw(st.sampled_from([1, 4, 32]))}",
        f"workload.input_len={draw(st.sampled_from([512, 2048, 8192]))}",
        f"workload.batching={draw(st.sampled_from(['continuous', 'static']))}",
    ]


# Llama-3.1-8B's 8192-token prompt on A100s at batch 4: with pp 4 the prompt's chunked prefill took
# 100 ms for 106 ms of FLOPs at the bf16 peak (pipeline.mixed_iteration_s counted the chunk once a pass)
A100_PP = ["workload=inference", "model=llama3.1-8b", "hardware=a100-sxm-40gb", "engine=trtllm"]
A100_PP += ["grid.ngpus=[8]", "workload.batch=4", "workload.input_len=8192", "workload.batching=continuous"]


@settings(max_examples=10, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(serve_runs())
@example(A100_PP)
def test_serving_never_beats_the_peak_and_faster_parts_never_slow_it(overrides):
    from parallmelism.config.compose import run_with_fields

    run = load_run_configs(overrides)[0][1]
    df, _ = evaluate(run)
    if len(df) == 0:
        return
    hw = run.hardware
    peak = hw.peak_flops(run.workload.precision)  # the run's matmul dtype (bf16 here: no quantization drawn)
    assert (df["prefill_ms"] * 1e-3 * peak >= df["flops_prefill_per_gpu"] * (1 - 1e-9)).all()
    assert (df["decode_step_ms"] * 1e-3 * peak >= df["flops_decode_per_gpu"] * (1 - 1e-9)).all()
    faster = {
        "peak": {f"hardware.peak_tflops.{k}": 2 * v for k, v in hw.peak_tflops.items()},
        "hbm": {"hardware.hbm_bandwidth_gbps": 2 * hw.hbm_bandwidth_gbps},
        "scale_up": {"hardware.scale_up.bandwidth_gbps": 2 * hw.scale_up.bandwidth_gbps},
    }
    if hw.scale_out is not None:
        faster["scale_out"] = {"hardware.scale_out.bandwidth_gbps": 2 * hw.scale_out.bandwidth_gbps}
    key = ["tp", "pp", "sp", "ep", "dp", "batch"]
    for name, fields in faster.items():
        fast, _ = evaluate(run_with_fields(run, fields))
        m = df.merge(fast, on=key, suffixes=("", "_fast"))
        assert len(m) == len(df), name
        for col in SERVE_PHASES:
            assert (m[col + "_fast"] <= m[col] * (1 + 1e-9)).all(), (name, col)
