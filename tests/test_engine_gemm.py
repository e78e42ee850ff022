"""An engine's measured linear layers time a serving pass's fp8 block-scaled GEMMs (issue 33: TensorRT-LLM's
fp8 block-scale GEMM on H200, hardware/kernels/h200-sxm-141gb.trtllm-gemm.csv, aiconfigurator 0.12.0's
measurements of TensorRT-LLM 1.3.0rc20). The reference values below are aiconfigurator's latencies
(gemm_perf.parquet, gemm_dtype fp8_block, ms), not the code's own output."""

from __future__ import annotations

import numpy as np
import pytest

from parallmelism.config.compose import load_option
from parallmelism.config.kernel_tables import engine_gemm_table, kernel_model, serving_kernel_model
from parallmelism.cost import inference
from parallmelism.cost.engine_gemm import EngineGemmTable
from parallmelism.cost.layout import ServingLayout
from parallmelism.errors import UserError
from parallmelism.specs import InferenceWorkload

H200 = load_option("hardware", "h200-sxm-141gb")
DSV3 = load_option("model", "deepseek-v3")
LLAMA70 = load_option("model", "llama3.1-70b")
TRTLLM = load_option("engine", "trtllm")
NO_GEMMS = TRTLLM.model_copy(update={"gemm_tables": {}})
# aiconfigurator gemm_perf.parquet (TensorRT-LLM 1.3.0rc20, H200, fp8_block): (m, n, k) -> ms
MEASURED_MS = {
    (8192, 1536, 7168): 0.24059626,  # DeepSeek q_a at 8192 tokens
    (8192, 3072, 1536): 0.10566933,  # q_b at TP 8
    (8192, 4096, 512): 0.070464,  # kv_b at TP 8
    (8192, 7168, 2048): 0.25686827,  # o_proj at TP 8
    (8192, 512, 7168): 0.15274347,
    (8192, 768, 7168): 0.17488427,
    (1537, 1536, 7168): 0.067145,  # one token past 12 tiles of 128
    (1792, 1536, 7168): 0.063099,
}


def table():
    return engine_gemm_table(TRTLLM, H200)


@pytest.mark.parametrize("mnk", [(8192, 1536, 7168), (8192, 3072, 1536), (8192, 4096, 512), (8192, 7168, 2048)])
def test_the_lookup_at_a_measured_shape_is_the_measurement(mnk):
    m, n, k = mnk
    assert float(table().gemm_s(m, k, n, "fp8", 128)) == pytest.approx(MEASURED_MS[mnk] * 1e-3, rel=1e-4)


def test_between_measured_shapes_it_is_log_log_interpolated():
    # kv_a's n = 576 between the measured 512 and 768; 1600 tokens between the measured 1537 and 1792
    w = np.log(576 / 512) / np.log(768 / 512)
    kv_a = MEASURED_MS[(8192, 512, 7168)] ** (1 - w) * MEASURED_MS[(8192, 768, 7168)] ** w
    assert float(table().gemm_s(8192, 7168, 576, "fp8", 128)) == pytest.approx(kv_a * 1e-3, rel=1e-4)
    w = np.log(1600 / 1537) / np.log(1792 / 1537)
    q_a = MEASURED_MS[(1537, 1536, 7168)] ** (1 - w) * MEASURED_MS[(1792, 1536, 7168)] ** w
    assert float(table().gemm_s(1600, 7168, 1536, "fp8", 128)) == pytest.approx(q_a * 1e-3, rel=1e-4)
    # beyond the largest m (32768): in proportion to m; outside the n, k range or another scheme: NaN
    assert float(table().gemm_s(65536, 7168, 1536, "fp8", 128)) == pytest.approx(
        2 * float(table().gemm_s(32768, 7168, 1536, "fp8", 128))
    )
    assert np.isnan(table().gemm_s(8192, 7168, 32768, "fp8", 128))
    assert np.isnan(table().gemm_s(8192, 7168, 1536, "fp8", 64))


def prefill(engine, model=DSV3, tokens=8192):
    cols = {k: np.array([v]) for k, v in dict(tp=8, pp=1, sp=1, ep=1, dp=1, batch=1).items()}
    cols["layers_per_stage"] = np.array([model.layers])
    wl = InferenceWorkload(batch=1, input_len=tokens, output_len=16, weight_dtype="fp8", precision="fp8")
    km = serving_kernel_model(H200, engine)
    return inference.prefill_terms(model, H200, wl, ServingLayout.of(cols), np.array([1]), km=km, engine=engine)


def test_the_prefill_takes_the_measured_gemms_and_its_time_moves_by_their_difference():
    """DeepSeek-V3 at TP 8, 8192 prompt tokens: q_a, q_b, kv_b and o_proj in each of the 61 layers take
    the measured times above; the stage's time moves by the sum over the replaced GEMMs of
    layers x (measured - kernel model), computed here from the two breakdowns op by op."""
    with_table, without = prefill(TRTLLM), prefill(NO_GEMMS)
    got = {op.name: float(t[0]) for op, (t, _) in zip(with_table["ops"], with_table["times"])}
    for name, mnk in (("q_a_proj", (8192, 1536, 7168)), ("q_b_proj", (8192, 3072, 1536))):
        assert got[name] == pytest.approx(MEASURED_MS[mnk] * 1e-3, rel=1e-4)
    assert got["output_proj"] == pytest.approx(MEASURED_MS[(8192, 7168, 2048)] * 1e-3, rel=1e-4)
    assert got["kv_b_proj"] == pytest.approx(MEASURED_MS[(8192, 4096, 512)] * 1e-3, rel=1e-4)
    old = {op.name: float(t[0]) for op, (t, _) in zip(without["ops"], without["times"])}
    counts = {op.name: float(np.ravel(op.count)[0]) for op in with_table["ops"]}
    moved = {n for n in got if got[n] != old[n]}
    # the decoder's fp8 linear layers move; router (16-bit), head, routed experts (fused_moe) do not
    assert moved == {
        "q_a_proj", "q_b_proj", "kv_a_proj", "kv_b_proj", "output_proj",
        "gate_up_proj", "down_proj", "shared_gate_up", "shared_down",
    }  # fmt: skip
    by_hand_s = sum(counts[n] * (got[n] - old[n]) for n in moved)
    # q_a 61 x (240.6 - 146.1 us) alone is +5.8 ms
    assert by_hand_s > 0.02
    got_s = float(with_table["stage_s"][0]) - float(without["stage_s"][0])
    assert got_s == pytest.approx(by_hand_s, rel=1e-9)


def test_per_tensor_fp8_models_and_other_engines_keep_the_kernel_model():
    """Llama's fp8 checkpoints are per-tensor scaled (no fp8_block_size): the block-scale table does not
    apply; nor does it without the engine's table."""
    a, b = prefill(TRTLLM, LLAMA70, 2048), prefill(NO_GEMMS, LLAMA70, 2048)
    assert float(a["stage_s"][0]) == float(b["stage_s"][0])
    assert engine_gemm_table(load_option("engine", "vllm"), H200) is None
    assert engine_gemm_table(TRTLLM, load_option("hardware", "h100-sxm-80gb")) is None
    assert kernel_model(H200).engine_gemm is None


def test_decode_passes_keep_the_kernel_model():
    cols = {k: np.array([v]) for k, v in dict(tp=8, pp=1, sp=1, ep=1, dp=1, batch=4).items()}
    cols["layers_per_stage"] = np.array([DSV3.layers])
    wl = InferenceWorkload(batch=4, input_len=1024, output_len=16, weight_dtype="fp8", precision="fp8")
    lay = ServingLayout.of(cols)
    a = inference.decode_terms(DSV3, H200, wl, lay, km=serving_kernel_model(H200, TRTLLM), engine=TRTLLM)
    b = inference.decode_terms(DSV3, H200, wl, lay, km=serving_kernel_model(H200, NO_GEMMS), engine=TRTLLM)
    assert float(a["stage_s"][0]) == float(b["stage_s"][0])


def test_a_table_missing_an_n_k_pair_or_unreadable_is_refused():
    rows = [
        dict(dtype="fp8", fp8_block=128, m=1, n=n, k=k, time_s=1e-5) for n, k in ((128, 128), (256, 128), (128, 256))
    ]
    with pytest.raises(ValueError, match="every"):
        EngineGemmTable(rows)
    bad = TRTLLM.model_copy(update={"gemm_tables": {"h200-sxm-141gb": "kernels/no-such-gemm-table.csv"}})
    with pytest.raises(UserError, match="no-such-gemm-table"):
        engine_gemm_table(bad, H200)


def test_a_table_that_does_not_parse_is_one_sentence_at_its_first_use(tmp_path):
    """The table is read when a model with an fp8 block-scaled checkpoint first asks for it."""
    path = tmp_path / "bad-gemm.csv"
    path.write_text("dtype,fp8_block,m,n,k,time_s\nfp8,128,1,128,128,-1\n")
    table = engine_gemm_table(TRTLLM.model_copy(update={"gemm_tables": {"h200-sxm-141gb": str(path)}}), H200)
    with pytest.raises(UserError, match="bad-gemm.csv: unreadable"):
        table.covers("fp8", 128)
