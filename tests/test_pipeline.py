"""Pipeline schedules (cost/pipeline.py) against the papers' closed forms and hand-computed steps.

References: Narayanan et al. 2021 (Megatron-LM, SC'21) §2.2: 1F1B bubble rate (p−1)/m, interleaved
(p−1)/(v·m), Table 1's 1T layout (t 8, p 64, d 6, batch 3072); GPipe (Huang et al. 2019) and
../shared/reference/formulas.md: bubble fraction of the step (p−1)/(m+p−1); Qi et al. 2023: ZB-H1
leaves a third of 1F1B's bubble; Korthikanti et al. 2022: the first stage of interleaved 1F1B holds
L·(1 + (p−1)/(p·v)) layers of activations. Serving: hand-computed prefill and decode pipelines.
"""

from __future__ import annotations

import numpy as np
import pytest

from parallmelism.config import load_option
from parallmelism.config.kernel_tables import kernel_model
from parallmelism.cost import pipeline as pl
from parallmelism.cost.inference import decode_terms, prefill_terms
from parallmelism.cost.inference_iteration import iteration_overhead_s
from parallmelism.cost.layout import ServingLayout
from parallmelism.engine import evaluate
from parallmelism.specs import GridSpec, InferenceWorkload, RunConfig


def test_narayanan_table1_1t_layout_bubble():
    """GPT 1T in Narayanan et al. 2021 Table 1: p = 64, d = 6, global batch 3072; at micro-batch 1
    (assumed: the table does not give it), m = 3072/6 = 512 micro-batches per pipeline:
    1F1B bubble rate 63/512, bubble fraction 63/575 of the step (GPipe's (p−1)/(m+p−1))."""
    p, m = 64, 3072 // 6
    rate = float(pl.bubble_rate(p, 1, m, "1f1b"))
    assert rate == pytest.approx(63 / 512, rel=1e-15)
    assert rate / (1 + rate) == pytest.approx(63 / 575, rel=1e-15)
    assert float(pl.bubble_rate(p, 1, m, "gpipe")) == rate  # same bubble, GPipe holds more activations
    # interleaving v chunks per rank divides the bubble by v (§2.2.2)
    assert float(pl.bubble_rate(p, 2, m, "1f1b")) == pytest.approx(63 / 1024, rel=1e-15)
    assert float(pl.bubble_rate(p, 1, m, "zero_bubble")) == pytest.approx(63 / 1536, rel=1e-15)


def test_bubble_rate_is_vectorized_over_rows():
    rate = pl.bubble_rate(np.array([1, 4, 8]), np.array([1, 1, 3]), np.array([8, 8, 16]), "1f1b")
    np.testing.assert_allclose(rate, [0.0, 3 / 8, 7 / 48], rtol=1e-15)


def test_training_bubble_seconds_and_fill_drain_pace():
    """p = 4, m = 8, middle stage T_mb = 10 ms: rate 3/8, idle 3/8·8·10 ms = 30 ms; hop 1 ms: the
    fill/drain chain 2·3·1 = 6 ms; p = 2 runs at the mean of first and last."""
    t_typ = pl.fill_drain_stage_s(
        np.array([4, 2]), np.array([8e-3, 8e-3]), np.array([10e-3, 10e-3]), np.array([14e-3, 14e-3])
    )
    np.testing.assert_allclose(t_typ, [10e-3, 11e-3], rtol=1e-15)
    link, exposed, fill_drain = pl.pp_times_s(1e-3, 4.0, 1.0, 8.0, overlap=True)
    assert (link, exposed, fill_drain) == pytest.approx((16e-3, 0.0, 6e-3), rel=1e-15)
    _, blocking, _ = pl.pp_times_s(1e-3, 4.0, 2.0, 8.0, overlap=False)
    assert blocking == pytest.approx(32e-3, rel=1e-15)  # 2·m·v transfers all wait on the wire
    bubble = pl.training_bubble_s(pl.bubble_rate(4, 1, 8, "1f1b"), 8.0, t_typ[0], fill_drain)
    assert float(bubble) == pytest.approx(30e-3 + 6e-3, rel=1e-15)


def test_inflight_1f1b_interleaved_gpipe():
    # 1F1B: the first stage holds p micro-batches (when m >= p), the last stage 1.
    assert float(pl.inflight_micro_batches(8, 1, 64, "1f1b", "first")) == 8
    assert float(pl.inflight_micro_batches(8, 1, 64, "1f1b", "last")) == 1
    assert float(pl.inflight_micro_batches(8, 1, 4, "1f1b", "first")) == 4  # capped by m
    # Interleaved with v chunks: first stage holds L·(1 + (p-1)/(p·v)) layers = p·(1 + (p-1)/(p·v)) stage-units
    p, v = 8, 3
    assert float(pl.inflight_micro_batches(p, v, 64, "1f1b", "first")) == pytest.approx(p * (1 + (p - 1) / (p * v)))
    assert float(pl.inflight_micro_batches(8, 1, 64, "gpipe", "first")) == 64


def test_serving_pipelines_by_hand():
    """Decode on p = 4 stages, stage 2 ms, hop 0.1 ms: 4·2.1 = 8.4 ms a token; b = 2 sequences fill
    2 of 4 stages (half idle). Prefill in 4 chunks of 1 ms + 0.1 ms hop: (4 + 3)·1.1 = 7.7 ms, and
    one chunk per 12 ms iteration: (4 + 3)·12/4 = 21 ms. A chunk adding 1 ms to its micro-batch on
    each of 4 stages adds 4·1 ms to a 10 ms iteration: the micro-batch passes every stage before its
    next token."""
    assert float(pl.decode_step_s(4.0, 2e-3, 1e-4)) == pytest.approx(8.4e-3, rel=1e-15)
    assert float(pl.decode_micro_batches(2, 4)) == 2 and float(pl.decode_micro_batches(64, 4)) == 4
    assert float(pl.decode_pp_idle(2.0, 4.0)) == 0.5 and float(pl.decode_pp_idle(8.0, 4.0)) == 0.0
    assert float(pl.prefill_pipeline_s(4, 4.0, 1e-3, 1e-4)) == pytest.approx(7.7e-3, rel=1e-15)
    assert float(pl.chunked_prefill_s(4.0, 4.0, 12e-3)) == pytest.approx(21e-3, rel=1e-15)
    assert float(pl.chunked_prefill_s(4.0, 1.0, 12e-3)) == pytest.approx(48e-3, rel=1e-15)  # no pipeline
    assert float(pl.mixed_iteration_s(10e-3, 4.0, 3e-3, 2e-3)) == pytest.approx(14e-3, rel=1e-15)
    assert float(pl.mixed_iteration_s(10e-3, 4.0, 1e-3, 2e-3)) == 10e-3  # a chunk never shortens it


def test_static_serving_step_is_the_decode_pipeline():
    """Llama-3.1-70B on tp 8 x pp 4, batch 2, static batching: the row's decode step is the decode
    pipeline over the stage model's decode micro-batch plus the iteration overhead, its prefill the
    best chunked sequence pipeline, and half the stages idle."""
    model, hw = load_option("model", "llama3.1-70b"), load_option("hardware", "h100-sxm-80gb")
    wl = InferenceWorkload(batch=2, batching="static", input_len=8192, output_len=128)
    engine = load_option("engine", "trtllm")
    run = RunConfig(
        model=model, hardware=hw, workload=wl, grid=GridSpec(ngpus=[32], tp=[8], pp=[4], sp=[1]), engine=engine
    )
    df, _ = evaluate(run)
    assert len(df) == 1
    row = df.iloc[0]
    lay = ServingLayout.of({k: np.array([row[k]]) for k in ("tp", "pp", "sp", "ep", "dp", "batch", "layers_per_stage")})
    km = kernel_model(hw)
    dec = decode_terms(model, hw, wl, lay, km=km, engine=engine)
    t_iter = iteration_overhead_s(model, engine)
    assert row["decode_micro_batches"] == 2 and row["decode_pp_idle"] == 0.5
    assert row["decode_step_ms"] == pytest.approx(1e3 * (4 * (dec["stage_s"][0] + dec["hop_s"][0]) + t_iter), rel=1e-12)
    c = int(row["prefill_chunks"])
    assert c > 1  # 8192 tokens on 4 stages: chunking shortens the fill
    pre = prefill_terms(model, hw, wl, lay, np.array([c]), km=km, engine=engine)
    expected = (c + 4 - 1) * (pre["stage_s"][0] + pre["hop_s"][0]) + t_iter
    assert row["prefill_ms"] == pytest.approx(1e3 * expected, rel=1e-12)
