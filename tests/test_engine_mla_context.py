"""An engine's measured MLA attention module times a prompt pass's attention (issue 33): SGLang's
DeepseekV2AttentionMLA in prefill on H200 (hardware/kernels/h200-sxm-141gb.sglang-mla-context.csv,
aiconfigurator 0.12.0's measurements of SGLang 0.5.10, flashinfer backend). The reference values below are
aiconfigurator's latencies (wideep_context_mla_perf.parquet, 16 heads), not the code's own output."""

from __future__ import annotations

import numpy as np
import pytest

from parallmelism.config.compose import load_option
from parallmelism.config.kernel_tables import kernel_model, mla_context_table, serving_kernel_model
from parallmelism.cost import inference
from parallmelism.cost.layout import ServingLayout
from parallmelism.cost.mla_context import MlaContextTable
from parallmelism.errors import UserError
from parallmelism.specs import InferenceWorkload

H200 = load_option("hardware", "h200-sxm-141gb")
DSV3 = load_option("model", "deepseek-v3")
SGLANG = load_option("engine", "sglang")
TRTLLM = load_option("engine", "trtllm")
# aiconfigurator wideep_context_mla_perf.parquet (SGLang 0.5.10, H200, flashinfer, DeepSeek-V3, 16 heads), ms:
# (prompts, tokens each) -> latency of one layer's self_attn
MEASURED_MS = {(1, 1024): 0.5952, (4, 1024): 0.6548, (1, 8192): 1.1733, (4, 8192): 3.6032, (1, 16384): 2.6966}


def module_s(engine, prompts, isl, tp=8, sp=1, km=None, **wl_kw):
    """Seconds per layer of the MLA module's ops in one prompt-only pass of `prompts` prompts of `isl` tokens."""
    cols = {k: np.array([v]) for k, v in dict(tp=tp, pp=1, sp=sp, ep=1, dp=1, batch=1).items()}
    cols["layers_per_stage"] = np.array([DSV3.layers])
    wl = InferenceWorkload(
        batch=1, input_len=isl, output_len=16, weight_dtype="fp8", precision="fp8", kv_dtype="fp8", **wl_kw
    )
    km = km if km is not None else serving_kernel_model(H200, engine)
    # chunks 1/prompts: `prompts` whole prompts in the pass (cost.inference.prefill_terms)
    terms = inference.prefill_terms(
        DSV3, H200, wl, ServingLayout.of(cols), np.array([1.0 / prompts]), km=km, engine=engine
    )
    return sum(float(t[0]) for op, (t, _) in zip(terms["ops"], terms["times"]) if op.mla_module)


def test_the_module_is_the_ops_between_the_fused_down_projection_and_the_all_reduce():
    """What the collector timed (one layer's self_attn less the fused q_a/kv_a projection): the latent
    norms, q_b and kv_b, the prefill attention's two halves and o_proj; not the absorbed decode ops."""
    cols = {k: np.array([v]) for k, v in dict(tp=8, pp=1, sp=1, ep=1, dp=1, batch=1).items()}
    cols["layers_per_stage"] = np.array([DSV3.layers])
    wl = InferenceWorkload(batch=1, input_len=1024, output_len=16, weight_dtype="fp8", precision="fp8", kv_dtype="fp8")
    terms = inference.prefill_terms(
        DSV3, H200, wl, ServingLayout.of(cols), np.array([1.0]), km=serving_kernel_model(H200, SGLANG), engine=SGLANG
    )
    assert sorted(op.name for op in terms["ops"] if op.mla_module) == sorted(
        ["q_a_norm", "q_b_proj", "kv_a_norm", "kv_b_proj", "attention_qk", "attention_pv", "output_proj"]
    )


@pytest.mark.parametrize(("prompts", "isl"), sorted(MEASURED_MS))
def test_sglang_on_h200_times_the_module_by_its_measurement(prompts, isl):
    """TP8 (16 heads a GPU): the pass's module ops sum to the measured module's time per layer."""
    assert module_s(SGLANG, prompts, isl) == pytest.approx(MEASURED_MS[(prompts, isl)] * 1e-3, rel=1e-5)


def test_the_launch_floor_is_six_times_the_kernel_model_at_1k():
    """Why it matters: below ~2k tokens the eager module takes ~0.6 ms a layer whatever the prompt
    (aiconfigurator's rows: 0.59-0.62 ms from 1 to 2048 tokens); the kernel model's ops take 0.10 at 1024."""
    model = module_s(SGLANG, 1, 1024, km=kernel_model(H200))
    assert 5.0 < module_s(SGLANG, 1, 1024) / model < 7.0


@pytest.mark.parametrize(
    ("prompts", "isl", "kw"),
    [
        (1, 32768, {}),  # longer than the longest measured prompt
        (16, 8192, {}),  # a cell the collector did not measure (its batch x isl limit)
        (1, 1024, {"sp": 2}),  # sequence parallelism: not the measured module
    ],
)
def test_shapes_outside_the_table_keep_the_kernel_model(prompts, isl, kw):
    tp, sp = kw.get("tp", 8), kw.get("sp", 1)
    got = module_s(SGLANG, prompts, isl, tp=tp, sp=sp)
    assert got == pytest.approx(module_s(SGLANG, prompts, isl, tp=tp, sp=sp, km=kernel_model(H200)), rel=1e-12)


def test_a_prefix_cache_hit_and_bf16_weights_keep_the_kernel_model():
    hit = {"prefix_cache_hit": 0.5}  # the prompt attends to a cached prefix: not the measured fresh prompt
    assert module_s(SGLANG, 1, 1024, **hit) == pytest.approx(module_s(SGLANG, 1, 1024, km=kernel_model(H200), **hit))
    cols = {k: np.array([v]) for k, v in dict(tp=8, pp=1, sp=1, ep=1, dp=1, batch=1).items()}
    cols["layers_per_stage"] = np.array([DSV3.layers])
    wl = InferenceWorkload(batch=1, input_len=1024, output_len=16)  # bf16
    lay = ServingLayout.of(cols)
    with_table = inference.prefill_terms(DSV3, H200, wl, lay, np.array([1]), km=serving_kernel_model(H200, SGLANG))
    without = inference.prefill_terms(DSV3, H200, wl, lay, np.array([1]), km=kernel_model(H200))
    assert float(with_table["stage_s"][0]) == float(without["stage_s"][0])


def test_a_head_count_it_did_not_measure_is_outside():
    table = mla_context_table(SGLANG, H200)
    shape = (7168, 1536, 512, 128, 64, 128)
    assert table.layer_s(1, 1024, 16, "fp8", shape) == pytest.approx(MEASURED_MS[(1, 1024)] * 1e-3)
    assert np.isnan(table.layer_s(1, 1024, 8, "fp8", shape))  # tp 16: 8 heads a GPU


def test_engines_without_a_table_and_decode_passes_keep_the_kernel_model():
    assert mla_context_table(TRTLLM, H200) is None
    assert mla_context_table(SGLANG, load_option("hardware", "h100-sxm-80gb")) is None
    cols = {k: np.array([v]) for k, v in dict(tp=8, pp=1, sp=1, ep=1, dp=1, batch=4).items()}
    cols["layers_per_stage"] = np.array([DSV3.layers])
    wl = InferenceWorkload(batch=4, input_len=1024, output_len=16, weight_dtype="fp8", precision="fp8")
    lay = ServingLayout.of(cols)
    with_table = inference.decode_terms(DSV3, H200, wl, lay, km=serving_kernel_model(H200, SGLANG), engine=SGLANG)
    without = inference.decode_terms(DSV3, H200, wl, lay, km=kernel_model(H200), engine=SGLANG)
    assert float(with_table["stage_s"][0]) == float(without["stage_s"][0])


def _rows(cells):
    shape = dict(hidden=8, q_lora_rank=4, kv_lora_rank=2, qk_nope_head_dim=2, qk_rope_head_dim=1, v_head_dim=2)
    return [dict(dtype="fp8", **shape, heads=2, batch=b, isl=s, time_s=t) for (b, s), t in cells.items()]


def test_interpolation_is_bilinear_in_log_log_and_nan_outside():
    shape = (8, 4, 2, 2, 1, 2)
    table = MlaContextTable(_rows({(1, 1): 1e-4, (1, 4): 4e-4, (4, 1): 2e-4, (4, 4): 1.6e-3}))
    got = table.layer_s(np.array([1, 2, 1, 2, 4, 8, 1]), np.array([1, 1, 2, 2, 4, 1, 0.5]), 2, "fp8", shape)
    # (2, 1): halfway in log2 between batch 1 and 4: sqrt(1e-4 * 2e-4); (1, 2): sqrt(1e-4 * 4e-4);
    # (2, 2): the geometric mean of the four corners; batch 8 and isl 0.5 lie outside the grid
    corners = (1e-4 * 4e-4 * 2e-4 * 1.6e-3) ** 0.25
    assert got[:5] == pytest.approx([1e-4, np.sqrt(2e-8), np.sqrt(4e-8), corners, 1.6e-3])
    assert np.isnan(got[5:]).all()
    assert np.isnan(table.layer_s(1, 1, 4, "fp8", shape))  # a head count it does not hold
    assert table.covers("fp8", shape) and not table.covers("bf16", shape)
    holed = MlaContextTable(_rows({(1, 1): 1e-4, (1, 4): 4e-4, (4, 1): 2e-4}))
    assert np.isnan(holed.layer_s(2, 2, 2, "fp8", shape))  # an unmeasured corner with weight
    assert holed.layer_s(4, 1, 2, "fp8", shape) == pytest.approx(2e-4)  # a measured cell on the edge


def test_an_unreadable_table_is_one_sentence():
    bad = SGLANG.model_copy(update={"mla_context_tables": {"h200-sxm-141gb": "kernels/no-such-mla-table.csv"}})
    with pytest.raises(UserError, match="no-such-mla-table"):
        mla_context_table(bad, H200)


def _half_pass_s(budget):
    """Module seconds per layer of a pass of 512 prompt tokens when prompts average 1024 (prefill_terms chunks 2)."""
    cols = {k: np.array([v]) for k, v in dict(tp=8, pp=1, sp=1, ep=1, dp=1, batch=1).items()}
    cols["layers_per_stage"] = np.array([DSV3.layers])
    wl = InferenceWorkload(
        batch=1, input_len=1024, output_len=16, weight_dtype="fp8", precision="fp8", prefill_chunk_tokens=budget
    )
    terms = inference.prefill_terms(
        DSV3, H200, wl, ServingLayout.of(cols), np.array([2.0]), km=serving_kernel_model(H200, SGLANG), engine=SGLANG
    )
    return sum(float(t[0]) for op, (t, _) in zip(terms["ops"], terms["times"]) if op.mla_module)


def test_a_short_pass_is_a_shorter_prompt_where_the_budget_cuts_none_and_a_chunk_otherwise():
    """Budget 8192 >= every prompt: 512 prompt tokens are one fresh 512-token prompt (aiconfigurator: 0.6031 ms);
    budget 512 < 1024: they are the second half of a prompt attending to the first, not measured."""
    assert _half_pass_s(8192) == pytest.approx(0.6031e-3, rel=1e-5)
    assert _half_pass_s(512) < 0.3e-3  # the kernel model's ops
