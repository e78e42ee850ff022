"""A serving engine's own TP all-reduce (issue 33 item 1, engine field `tp_all_reduce`): vLLM's and
SGLang's CustomAllreduce and TensorRT-LLM's ONESHOT / TWOSHOT kernels, timed by
`collectives.custom_all_reduce_time_s` and held to the published tables the engine files were
fitted on; a serving pass carries them as a "tp custom" CollectiveOp record, and the messages the
kernel does not take (over its buffer, or a group across domains) stay NCCL's."""

from __future__ import annotations

import numpy as np
import pytest

from parallmelism.config.compose import load_option
from parallmelism.config.kernel_tables import kernel_model
from parallmelism.cost import inference
from parallmelism.cost.collective_ops import CUSTOM_ALL_REDUCE, collective, engine_tp_all_reduce_ops
from parallmelism.cost.collectives import (
    custom_all_reduce_one_shot,
    custom_all_reduce_time_s,
    custom_all_reduce_wire_factor,
    group_collective_time_s,
)
from parallmelism.cost.layout import ServingLayout
from parallmelism.specs import InferenceWorkload

H100 = load_option("hardware", "h100-sxm-80gb")
VLLM, SGLANG, TRTLLM = (load_option("engine", n) for n in ("vllm", "sglang", "trtllm"))
MiB = 1024.0 * 1024.0

# vLLM benchmarks/kernels/benchmark_device_communicators.py on H100, bf16 tensors (tokens, 8192), ms per
# all-reduce: TP4 from vllm-project/vllm PR 24532, TP6 from PR 24111 (ca_1stage, ca_2stage columns)
TOKENS = np.array([32, 64, 96, 128, 192, 256])
VLLM_H100_US = {
    ("one", 4): [10, 14, 19, 23, 30, 38],
    ("one", 6): [13, 21, 30, 38, 53, 70],
    ("two", 4): [17, 18, 25, 26, 35, 42],
    ("two", 6): [15, 17, 20, 26, 29, 37],
}
# sgl-project/sglang PR 2904, H100, TensorRT-LLM's kernel as ported to sgl-kernel ("custom allreduce"), fp32
# tensors of 512 / 4096 / 32768 elements (the test's torch.randint(..., dtype=torch.float32)), ms per call
TRT_SMALL_US = {2: [3.7, 3.9, 4.5], 4: [4.8, 3.7, 4.8], 8: [5.9, 5.7, 7.8]}
TRT_SMALL_BYTES = np.array([512, 4096, 32768]) * 4.0


def _time_us(engine, S, n, stage):
    """Model seconds of one call at a forced stage, in us."""
    wire = (n - 1.0) if stage == "one" else 2.0 * (n - 1.0) / n
    lat = (
        engine.custom_all_reduce_one_shot_latency_us if stage == "one" else engine.custom_all_reduce_two_shot_latency_us
    )
    bw = H100.scale_up.bandwidth_gbps * engine.custom_all_reduce_link_efficiency * 1e9
    return lat + wire * S / bw * 1e6


def test_vllm_custom_all_reduce_reproduces_its_h100_tables():
    """vllm.yaml's fit: 24 points within 25 %, mean |error| under 10 % (8.3 % when fitted)."""
    S = TOKENS * 8192 * 2.0
    errs = []
    for (stage, n), measured in VLLM_H100_US.items():
        errs += list(_time_us(VLLM, S, float(n), stage) / np.array(measured, dtype=float) - 1.0)
    errs = np.abs(errs)
    assert errs.max() < 0.25 and errs.mean() < 0.10, errs


def test_transfer_function_matches_its_formula_by_stage():
    """custom_all_reduce_time_s = stage latency + wire factor · S / (nominal NVLink · efficiency): one-shot
    reads (n−1)·S, two-shot 2(n−1)/n·S; vLLM's stage rule at its boundaries (csrc/custom_all_reduce.cuh)."""
    e = VLLM
    for n, S, one in ((2, 4 * MiB, True), (4, 511 * 1024.0, True), (4, 512 * 1024.0, False), (8, 255 * 1024.0, True)):
        assert bool(custom_all_reduce_one_shot(S, n)) is one
        stage = "one" if one else "two"
        t = custom_all_reduce_time_s(
            H100,
            S,
            n,
            e.custom_all_reduce_one_shot_latency_us,
            e.custom_all_reduce_two_shot_latency_us,
            e.custom_all_reduce_link_efficiency,
        )
        assert float(t) * 1e6 == pytest.approx(_time_us(e, S, float(n), stage), rel=1e-12)
        assert float(custom_all_reduce_wire_factor(S, n)) == ((n - 1.0) if one else 2.0 * (n - 1.0) / n)
    assert float(custom_all_reduce_one_shot(256 * 1024.0, 8)) == 0.0
    assert float(custom_all_reduce_time_s(H100, 1e6, 1, 3.6, 15.1, 0.7)) == 0.0


def test_trtllm_one_shot_latency_is_the_median_of_its_small_message_table():
    """trtllm.yaml's 4.1 us: the median over TP 2/4/8 of the measured time less the bytes term."""
    res = [
        t - (n - 1.0) * S / (H100.scale_up.bandwidth_gbps * TRTLLM.custom_all_reduce_link_efficiency * 1e9) * 1e6
        for n, ts in TRT_SMALL_US.items()
        for S, t in zip(TRT_SMALL_BYTES, ts)
    ]
    assert TRTLLM.custom_all_reduce_one_shot_latency_us == pytest.approx(float(np.median(res)), abs=0.05)


def test_decode_sized_all_reduce_is_cheaper_than_nccl_at_tp8():
    """Llama-70B decode at batch 8 (128 KiB per call) over 8 NVLink ranks: the one-shot kernel is about half
    NCCL's ring (14.3 us in LL, at half the link; its latency floor is fitted in hardware/h100-sxm-80gb.yaml)."""
    S = 8 * 8192 * 2.0
    nccl = float(group_collective_time_s(H100, "all_reduce", S, 8, 1))
    for e in (VLLM, SGLANG, TRTLLM):
        custom = float(
            custom_all_reduce_time_s(
                H100,
                S,
                8,
                e.custom_all_reduce_one_shot_latency_us,
                e.custom_all_reduce_two_shot_latency_us,
                e.custom_all_reduce_link_efficiency,
            )
        )
        assert 1.8 < nccl / custom < 2.5, (e.name, nccl, custom)


def test_engine_records_split_calls_by_what_the_kernel_takes():
    """Rows whose message fits the buffer inside one domain get a "tp custom" record; the others keep
    NCCL's; no engine (training, tools that pass none) or tp_all_reduce nccl: the NCCL record alone."""
    S = np.array([1 * MiB, 16 * MiB, 1 * MiB])
    ar = collective(H100, "tp", "tp", "all_reduce", S, np.array([8, 8, 16]), 1, np.full(3, 160.0))
    custom, nccl = engine_tp_all_reduce_ops(H100, ar, VLLM)
    assert custom.role == "tp custom" and custom.kind == CUSTOM_ALL_REDUCE and nccl.kind == "all_reduce"
    assert list(custom.calls) == [160, 0, 0] and list(nccl.calls) == [0, 160, 160]
    assert custom.wire_bytes[0] == pytest.approx(2 * 7 / 8 * MiB)  # two-shot above 256 KiB at 8 ranks
    # 16 ranks inside one 16-GPU domain (an NVLink Switch System): past the kernel's 8 ranks, NCCL's
    hw16 = H100.model_copy(update={"scale_up": H100.scale_up.model_copy(update={"domain_size": 16})})
    custom16, nccl16 = engine_tp_all_reduce_ops(hw16, ar, VLLM)
    assert list(custom16.calls) == [160, 0, 0] and list(nccl16.calls) == [0, 160, 160]
    assert engine_tp_all_reduce_ops(H100, ar, None) == [ar]
    nccl_engine = VLLM.model_copy(update={"tp_all_reduce": "nccl"})
    assert engine_tp_all_reduce_ops(H100, ar, nccl_engine) == [ar]


def _decode(engine, tp=8, batch=8):
    model = load_option("model", "llama3.1-70b")
    cols = {k: np.array([v]) for k, v in dict(tp=tp, pp=1, sp=1, ep=1, dp=1, batch=batch).items()}
    cols["layers_per_stage"] = np.array([model.layers])
    wl = InferenceWorkload(batch=batch, precision="fp8")
    return inference.decode_terms(model, H100, wl, ServingLayout.of(cols), km=kernel_model(H100), engine=engine)


def test_a_decode_pass_carries_the_engine_all_reduce():
    """Llama-70B fp8 TP8 decode at batch 8: 2 all-reduces per layer, 160 calls, all one-shot on TensorRT-LLM;
    its exposed time is 160 · the kernel's call (4.1 us + 7 · 128 KiB read at 0.71 · 450 GB/s = 7.0 us), under
    NCCL's 14.3 us by 160 · 7.3 us ≈ 1.17 ms a step."""
    base, trt = _decode(None), _decode(TRTLLM)
    assert "tp_custom_all_reduce" not in base["comm"]
    custom = next(op for op in trt["collectives"] if op.role == "tp custom")
    assert float(custom.calls[0]) == 160.0
    S = 8 * 8192 * 2.0
    one = 4.1e-6 + 7 * S / (450e9 * 0.71)
    assert float(trt["comm"]["tp_custom_all_reduce"][0]) == pytest.approx(160 * one, rel=1e-9)
    assert float(trt["comm"]["tp_all_reduce"][0]) == 0.0
    saved = float(base["stage_s"][0] - trt["stage_s"][0])
    assert saved == pytest.approx(160 * (float(group_collective_time_s(H100, "all_reduce", S, 8, 1)) - one), rel=1e-9)
    assert np.all(_decode(TRTLLM, tp=1)["stage_s"] == _decode(None, tp=1)["stage_s"])  # no TP, no all-reduce


def test_call_overhead_adds_to_each_serving_tp_all_reduce_call():
    """engine.tp_all_reduce_call_overhead_us is added once to each call's time of both records (the custom
    kernel's and NCCL's remainder), not to a group of one rank, and never without an engine (training)."""
    S = np.array([1 * MiB, 16 * MiB, 1 * MiB])
    ar = collective(H100, "tp", "tp", "all_reduce", S, np.array([8, 8, 1]), 1, np.full(3, 160.0))
    base_custom, base_nccl = engine_tp_all_reduce_ops(H100, ar, VLLM)
    assert VLLM.tp_all_reduce_call_overhead_us == 0
    e = VLLM.model_copy(update={"tp_all_reduce_call_overhead_us": 5.0})
    custom, nccl = engine_tp_all_reduce_ops(H100, ar, e)
    assert list(np.asarray(custom.time_s) - np.asarray(base_custom.time_s)) == pytest.approx([5e-6, 5e-6, 0.0])
    assert list(np.asarray(nccl.time_s) - np.asarray(base_nccl.time_s)) == pytest.approx([5e-6, 5e-6, 0.0])
    assert list(custom.calls) == list(base_custom.calls) and list(nccl.calls) == list(base_nccl.calls)
    (only,) = engine_tp_all_reduce_ops(H100, ar, e.model_copy(update={"tp_all_reduce": "nccl"}))
    assert list(np.asarray(only.time_s) - np.asarray(ar.time_s)) == pytest.approx([5e-6, 5e-6, 0.0])
    assert engine_tp_all_reduce_ops(H100, ar, None) == [ar]
