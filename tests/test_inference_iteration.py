"""Iteration-level serving (cost/inference_iteration.py) against a discrete-event simulation of an
in-flight-batching engine and against closed forms (chunk plan, single sequence, time balance)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from parallmelism.config import load_option
from parallmelism.cost.inference_iteration import closed_loop, prefill_chunk_plan
from parallmelism.engine import evaluate
from parallmelism.specs import GridSpec, InferenceWorkload, RunConfig


def simulate(t_dec, t_mix, n_p, b, out, think, iters=20000, seed=1):
    """Engine with b closed-loop clients (exponential think time between requests): each iteration
    gives the head-of-queue prompt one chunk (t_mix) or is decode-only (t_dec); every decoding
    sequence gets one token per iteration; a request arriving mid-iteration waits for its end.
    Returns (mean TTFT from arrival, mean inter-token latency) after a warm-up fifth."""
    rng = random.Random(seed)
    t = 0.0
    arrive = [rng.expovariate(1 / think) for _ in range(b)]
    state, chunks, left = ["think"] * b, [0] * b, [0] * b
    arr_t, last, queue, ttfts, itls = [0.0] * b, [0.0] * b, [], [], []
    for _ in range(iters):
        for i in range(b):
            if state[i] == "think" and arrive[i] <= t:
                state[i], chunks[i], arr_t[i] = "queued", n_p, arrive[i]
                queue.append(i)
        dec = [i for i in range(b) if state[i] == "dec"]
        if not queue and not dec:
            t = min(arrive[i] for i in range(b) if state[i] == "think")
            continue
        head = queue[0] if queue else None
        t += t_mix if head is not None else t_dec
        for i in dec:
            itls.append(t - last[i])
            last[i], left[i] = t, left[i] - 1
            if left[i] == 0:
                state[i], arrive[i] = "think", t + rng.expovariate(1 / think)
        if head is not None:
            chunks[head] -= 1
            if chunks[head] == 0:
                queue.pop(0)
                ttfts.append(t - arr_t[head])
                state[head], left[head], last[head] = "dec", out - 1, t
    return float(np.mean(ttfts[len(ttfts) // 5 :])), float(np.mean(itls[len(itls) // 5 :]))


@pytest.mark.parametrize(
    "t_dec,t_mix,n_p,b,out,think",
    [(0.01, 0.03, 2, 8, 50, 0.02), (0.005, 0.02, 1, 32, 100, 0.01), (0.01, 0.012, 1, 64, 200, 0.007)],
)
def test_closed_loop_matches_an_engine_simulation(t_dec, t_mix, n_p, b, out, think):
    """The think time plays the request overhead (it lengthens the loop like a host round trip)."""
    sim_ttft, sim_itl = simulate(t_dec, t_mix, n_p, b, out, think)
    m = closed_loop(np.array([t_dec]), np.array([t_mix]), np.array([float(n_p)]), np.array([float(b)]), out, think)
    assert m["itl_s"][0] == pytest.approx(sim_itl, rel=0.03)
    assert m["ttft_s"][0] == pytest.approx(sim_ttft + think, rel=0.12)


def test_closed_loop_is_littles_law_and_time_balance():
    t_dec, t_mix, n_p = np.array([0.012, 0.02]), np.array([0.05, 0.03]), np.array([3.0, 1.0])
    b, out = np.array([16.0, 100.0]), 300
    for fused in (True, False):
        m = closed_loop(t_dec, t_mix, n_p, b, out, 0.005, fused=fused)
        assert m["request_rate"] * m["e2e_s"] == pytest.approx(b, rel=1e-6)  # Little: λ·e2e = b
        r = m["request_rate"] * (b - 1) / b * n_p  # chunk iterations per second
        dec_rate = 1 / m["itl_s"] - (r if fused else 0)
        assert r * t_mix + dec_rate * t_dec == pytest.approx(1.0, rel=1e-9)  # the engine is always busy


def test_single_sequence_has_no_interference():
    m = closed_loop(np.array([0.01]), np.array([0.04]), np.array([3.0]), np.array([1.0]), 100, 0.007)
    assert m["itl_s"][0] == 0.01 and m["wait_s"][0] == 0
    assert m["ttft_s"][0] == pytest.approx(3 * 0.04 + 0.007)


def test_overlap_sends_the_first_token_one_iteration_later():
    """Overlap scheduling (cost/first_token.py): one sequence's first token goes out when the next
    iteration, its first decode step (t_dec), ends; a one-token request has no next iteration. Only
    TTFT moves: ITL, e2e and λ are those without overlap."""
    args = (np.array([0.01]), np.array([0.04]), np.array([3.0]), np.array([1.0]))
    off = closed_loop(*args, 100, 0.007)
    on = closed_loop(*args, 100, 0.007, overlap=True)
    assert on["ttft_s"][0] == pytest.approx(3 * 0.04 + 0.007 + 0.01) and on["send_s"][0] == pytest.approx(0.01)
    assert off["send_s"][0] == 0 and on["computed_s"][0] == off["ttft_s"][0]
    for k in ("itl_s", "e2e_s", "request_rate", "wait_s"):
        assert on[k][0] == off[k][0], k
    assert closed_loop(*args, 1, 0.007, overlap=True)["send_s"][0] == 0  # nothing left to run


def test_overlap_delay_under_load_is_the_mean_iteration():
    """b > 1: the next iteration is a mixed one with the share of chunk iterations q, else a decode
    one, so the delay is their mean, (1 − q)·t_dec + q·t_mix (chunked prefill: the ITL itself)."""
    t_dec, t_mix, n_p, b = np.array([0.012, 0.02]), np.array([0.05, 0.03]), np.array([3.0, 1.0]), np.array([16.0, 4.0])
    for fused in (True, False):
        off = closed_loop(t_dec, t_mix, n_p, b, 300, 0.005, fused=fused)
        on = closed_loop(t_dec, t_mix, n_p, b, 300, 0.005, fused=fused, overlap=True)
        q = on["mixed_fraction"]
        assert on["send_s"] == pytest.approx((1 - q) * t_dec + q * t_mix, rel=1e-9)
        assert on["ttft_s"] == pytest.approx(off["ttft_s"] + on["send_s"], rel=1e-12)
        assert list(on["itl_s"]) == list(off["itl_s"]) and list(on["e2e_s"]) == list(off["e2e_s"])
        if fused:
            assert on["send_s"] == pytest.approx(on["itl_s"], rel=1e-9)


def test_chunk_plan_follows_the_token_budget():
    wl = InferenceWorkload(input_len=20000, prefill_chunk_tokens=8192)
    n_p, chunk = prefill_chunk_plan(wl, np.array([1, 100, 5000]))
    assert list(n_p) == [3, 3, 7]  # budgets 8192, 8093, 3193 tokens left by the decodes
    assert chunk[0] == pytest.approx(20000 / 3)
    n_sep, _ = prefill_chunk_plan(InferenceWorkload(input_len=20000, chunked_prefill=False), np.array([5000]))
    assert list(n_sep) == [3]  # separate passes get the whole budget


def _row(hw="h100-sxm-80gb", engine=None, **wl):
    run = RunConfig(
        model=load_option("model", "llama3.1-8b"),
        hardware=load_option("hardware", hw),
        workload=InferenceWorkload(**wl),
        grid=GridSpec(ngpus=[1], tp=[1], pp=[1], sp=[1]),
        engine=engine or load_option("engine", "trtllm"),
    )
    return evaluate(run)[0].iloc[0]


def test_chunked_prefill_reads_the_weights_once_per_iteration():
    """A 512-token chunk with 31 decode tokens: one weight read for both, so the mixed iteration
    costs less than a decode iteration plus a separate prefill pass (which reads them again)."""
    fused = _row(batch=32, input_len=512, output_len=256)
    sep = _row(batch=32, input_len=512, output_len=256, chunked_prefill=False)
    weights_s = 8.03e9 * 2 / 3350e9  # bf16 weights over the HBM peak: the least any pass takes
    assert fused["iteration_mixed_ms"] < fused["decode_step_ms"] + sep["iteration_mixed_ms"] - weights_s * 1e3
    assert fused["tpot_ms"] < sep["tpot_ms"]


def test_iteration_overhead_is_paid_once_per_iteration():
    engine = load_option("engine", "trtllm").model_copy(update={"iteration_overhead_ms": 0.35})
    with_ovh = _row(batch=8, engine=engine)
    no_ovh = _row(batch=8, engine=engine.model_copy(update={"iteration_overhead_ms": 0.0}))
    assert with_ovh["decode_step_ms"] - no_ovh["decode_step_ms"] == pytest.approx(0.35)


def test_h200_gains_less_than_its_bandwidth_at_batch_one():
    """The fixed iteration overhead does not shrink with HBM bandwidth: ITL ratio > 3350/4800."""
    h100, h200 = (
        _row(batch=1, weight_dtype="fp8", precision="fp8"),
        _row("h200-sxm-141gb", batch=1, weight_dtype="fp8", precision="fp8"),
    )
    assert 3350 / 4800 < h200["tpot_ms"] / h100["tpot_ms"] < 1


def test_moe_layer_overhead_is_charged_where_the_gate_runs_outside_the_fused_op():
    """engine.moe_layer_overhead_us (TensorRT-LLM: 45 us, fitted on DeepSeek-R1) stands for DeepSeek's gate
    (sigmoid, bias, group top-k) and shared-expert fork/join, which run outside the measured fused-MoE op
    (benchmarks/moe_layer_decomposition.py): DeepSeek-V3 pays it on its 58 MoE layers, a softmax top-k router
    (Mixtral, Qwen3-MoE) on none (was: on every MoE layer, so Qwen3-235B's held-out TensorRT-LLM ITL read
    +20..+47 %)."""
    from parallmelism.cost.inference_iteration import iteration_overhead_s

    engine = load_option("engine", "trtllm").model_copy(update={"iteration_overhead_ms": 0.0})
    us = engine.moe_layer_overhead_us
    assert us == 45.0
    deepseek = load_option("model", "deepseek-v3")
    assert deepseek.num_moe_layers == deepseek.num_moe_layers_gate_outside == 58
    assert iteration_overhead_s(deepseek, engine) == pytest.approx(58 * 45e-6)
    for name in ("mixtral-8x7b", "qwen3-235b-a22b", "qwen3-30b-a3b"):
        model = load_option("model", name)
        assert model.num_moe_layers > 0 and model.num_moe_layers_gate_outside == 0
        assert iteration_overhead_s(model, engine) == 0.0
