"""An engine's measured fused-MoE op times a serving pass's routed experts (issue 33 item 1: an engine
names its fused-MoE kernel): TensorRT-LLM's CUTLASS fp8 block-scale MoE on H200
(hardware/kernels/h200-sxm-141gb.trtllm-moe.csv, aiconfigurator 0.12.0's measurements of TensorRT-LLM
1.3.0rc20). The reference values below are the table's aiconfigurator latencies (moe_perf.parquet,
DeepSeek-V3 shape, balanced routing), not the code's own output."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import run_cli
from parallmelism.config.compose import load_option
from parallmelism.config.kernel_tables import fused_moe_table, kernel_model, serving_kernel_model
from parallmelism.cost import inference
from parallmelism.cost.fused_moe import FusedMoeTable
from parallmelism.cost.moe_routing import routing_imbalance
from parallmelism.cost.layout import ServingLayout
from parallmelism.errors import UserError
from parallmelism.specs import InferenceWorkload

H200 = load_option("hardware", "h200-sxm-141gb")
DSV3 = load_option("model", "deepseek-v3")
TRTLLM = load_option("engine", "trtllm")
VLLM = load_option("engine", "vllm")
SGLANG = load_option("engine", "sglang")
# aiconfigurator moe_perf.parquet (TensorRT-LLM 1.3.0rc20, H200, fp8_block, 7168/2048, top-8 of 256, balanced), ms
MEASURED_MS = {(8, 1, 8192): 4.980043, (2, 4, 8192): 1.808635, (1, 8, 8192): 1.284432, (8, 1, 1): 0.114709}


def prefill_experts_s(engine, tp, ep, tokens=8192, km=None):
    """Seconds per MoE layer of the routed experts (gate+up and down) in one prefill pass of `tokens`."""
    cols = {k: np.array([v]) for k, v in dict(tp=tp, pp=1, sp=1, ep=ep, dp=1, batch=1).items()}
    cols["layers_per_stage"] = np.array([DSV3.layers])
    wl = InferenceWorkload(batch=1, input_len=tokens, output_len=16, weight_dtype="fp8", precision="fp8")
    km = km if km is not None else serving_kernel_model(H200, engine)
    terms = inference.prefill_terms(DSV3, H200, wl, ServingLayout.of(cols), np.array([1]), km=km, engine=engine)
    return sum(float(t[0]) for op, (t, _) in zip(terms["ops"], terms["times"]) if op.experts is not None)


@pytest.mark.parametrize(("ep", "tokens", "moe_tp"), [(1, 8192, 8), (4, 8192, 2), (8, 8192, 1), (1, 1, 8)])
def test_trtllm_on_h200_times_the_experts_by_its_measured_fused_moe(ep, tokens, moe_tp):
    """TP8 with EP 1 / 4 / 8 (moe_tp x moe_ep = 8x1, 2x4, 1x8): the measured op's time per layer."""
    expected_s = MEASURED_MS[(moe_tp, ep, tokens)] * 1e-3
    assert prefill_experts_s(TRTLLM, 8, ep, tokens) == pytest.approx(expected_s, rel=1e-5)


# aiconfigurator moe_perf.parquet (SGLang 0.5.10, sglang_fused_moe_triton, H200, fp8_block, same shape, balanced), ms
SGLANG_MEASURED_MS = {(8, 1, 8192): 2.218142, (8, 1, 1024): 0.588280, (8, 1, 1): 0.051686}


@pytest.mark.parametrize(("tokens"), [8192, 1024, 1])
def test_sglang_on_h200_times_the_experts_by_its_measured_triton_fused_moe(tokens):
    """SGLang's DeepSeek-R1 rows run TP8 EP1 (moe_tp 8 x moe_ep 1): its Triton fused-MoE op's time per layer."""
    expected_s = SGLANG_MEASURED_MS[(8, 1, tokens)] * 1e-3
    assert prefill_experts_s(SGLANG, 8, 1, tokens) == pytest.approx(expected_s, rel=1e-5)


def test_the_fused_moe_at_moe_tp_8_is_five_times_the_grouped_gemm_model():
    """Why it matters: each expert's FFN split 8 ways (256 columns) runs its 7.2e11 FLOPs at ~145
    TFLOP/s in the measured op; the grouped-GEMM model (torch._grouped_mm residuals) gives ~1 ms."""
    model_s = prefill_experts_s(VLLM, 8, 1, km=kernel_model(H200))
    table_s = prefill_experts_s(TRTLLM, 8, 1)
    assert 4.0 < table_s / model_s < 6.5


def test_engines_and_accelerators_without_a_table_keep_the_kernel_model():
    assert fused_moe_table(VLLM, H200) is None
    assert fused_moe_table(TRTLLM, load_option("hardware", "a100-sxm-80gb")) is None
    assert prefill_experts_s(VLLM, 8, 8) == pytest.approx(prefill_experts_s(VLLM, 8, 8, km=kernel_model(H200)))


def test_interpolation_is_log_log_between_points_and_proportional_beyond():
    rows = [
        dict(
            routing="balanced", dtype="fp8", hidden=8, ffn=4, top_k=2, experts=4, moe_tp=1, moe_ep=1, tokens=t, time_s=s
        )
        for t, s in ((1, 1e-5), (4, 4e-5), (16, 1e-4))
    ]
    table = FusedMoeTable(rows)
    t = table.layer_s(np.array([0.5, 1, 2, 8, 16, 64]), "balanced", "fp8", 8, 4, 2, 4, 1, 1)
    # below the first point: its time; 2 = halfway in log2 from 1 to 4: sqrt(1e-5 * 4e-5); 8: sqrt(4e-5 * 1e-4)
    assert t == pytest.approx([1e-5, 1e-5, 2e-5, np.sqrt(4e-5 * 1e-4), 1e-4, 4e-4])
    assert np.isnan(table.layer_s(16, "balanced", "fp8", 8, 4, 2, 4, 2, 1))  # a layout it does not hold
    assert not table.covers("balanced", "bf16", 8, 4, 2, 4)
    assert not table.covers("power_law_1.01", "fp8", 8, 4, 2, 4)


def test_an_unreadable_table_is_one_sentence():
    bad = TRTLLM.model_copy(update={"fused_moe_tables": {"h200-sxm-141gb": "kernels/no-such-moe-table.csv"}})
    with pytest.raises(UserError, match="no-such-moe-table"):
        fused_moe_table(bad, H200)


def test_show_breaks_the_prefill_down_with_the_measured_experts(tmp_path):
    args = (
        "show workload=inference model=deepseek-v3 hardware=h200-sxm-141gb grid.ngpus=[8] grid.tp=[8] grid.ep=[1] "
        "workload.weight_dtype=fp8 workload.precision=fp8 workload.batch=1 workload.input_len=8192 "
        "workload.output_len=16"
    )
    out = run_cli(*args.split(), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    line = next(x for x in out.stdout.splitlines() if "prefill" in x and "experts_gate_up" in x)
    down = next(x for x in out.stdout.splitlines() if "prefill" in x and "experts_down" in x)
    total_ms = sum(float(x.split("│")[-3].replace(",", "")) for x in (line, down))
    assert total_ms == pytest.approx(58 * MEASURED_MS[(8, 1, 8192)], rel=1e-3)  # 58 MoE layers


def test_decode_passes_keep_the_kernel_model():
    """Decode passes keep the kernel model's decode regime (cost.inference.fused_moe_times says why)."""
    cols = {k: np.array([v]) for k, v in dict(tp=8, pp=1, sp=1, ep=1, dp=1, batch=4).items()}
    cols["layers_per_stage"] = np.array([DSV3.layers])
    wl = InferenceWorkload(batch=4, input_len=1024, output_len=16, weight_dtype="fp8", precision="fp8")
    lay = ServingLayout.of(cols)
    with_table = inference.decode_terms(DSV3, H200, wl, lay, km=serving_kernel_model(H200, TRTLLM), engine=TRTLLM)
    without = inference.decode_terms(DSV3, H200, wl, lay, km=kernel_model(H200), engine=TRTLLM)
    assert float(with_table["stage_s"][0]) == float(without["stage_s"][0])


# aiconfigurator moe_perf.parquet, the same op and shape under distribution power_law_1.01 (its DeepSeek default), ms
POWER_LAW_MS = {(8, 1, 8192): 5.15082, (2, 4, 8192): 2.5802, (1, 8, 8192): 2.17455, (8, 1, 1): 0.0997312}


@pytest.mark.parametrize(("ep", "tokens", "moe_tp"), [(1, 8192, 8), (4, 8192, 2), (8, 8192, 1), (1, 1, 8)])
def test_power_law_routing_takes_the_tables_power_law_rows(ep, tokens, moe_tp):
    """workload.moe_routing=power_law_1.01 selects the table's measurements under that routing."""
    cols = {k: np.array([v]) for k, v in dict(tp=8, pp=1, sp=1, ep=ep, dp=1, batch=1).items()}
    cols["layers_per_stage"] = np.array([DSV3.layers])
    wl = InferenceWorkload(
        batch=1, input_len=tokens, output_len=16, weight_dtype="fp8", precision="fp8", moe_routing="power_law_1.01"
    )
    terms = inference.prefill_terms(
        DSV3, H200, wl, ServingLayout.of(cols), np.array([1]), km=serving_kernel_model(H200, TRTLLM), engine=TRTLLM
    )
    got_s = sum(float(t[0]) for op, (t, _) in zip(terms["ops"], terms["times"]) if op.experts is not None)
    assert got_s == pytest.approx(POWER_LAW_MS[(moe_tp, ep, tokens)] * 1e-3, rel=1e-5)


def test_balanced_routing_is_the_default():
    assert InferenceWorkload(batch=1, input_len=8, output_len=8).moe_routing == "balanced"


def test_power_law_routing_with_an_imbalance_is_refused():
    with pytest.raises(ValueError, match="leave workload.moe_imbalance at 1"):
        InferenceWorkload(batch=1, input_len=8, output_len=8, moe_routing="power_law_1.01", moe_imbalance=1.2)


def test_without_a_table_power_law_routing_is_the_busiest_ranks_ratio():
    """vLLM has no fused-MoE table: the power law is the ratio of cost/moe_routing.py on the kernel model's
    experts, the same as moe_imbalance set to that ratio by hand (EP 8 inside TP 8, 8192 tokens: 1.21778)."""
    cols = {k: np.array([v]) for k, v in dict(tp=8, pp=1, sp=1, ep=8, dp=1, batch=1).items()}
    cols["layers_per_stage"] = np.array([DSV3.layers])
    lay, km = ServingLayout.of(cols), kernel_model(H200)

    def experts_s(**kw):
        wl = InferenceWorkload(batch=1, input_len=8192, output_len=16, weight_dtype="fp8", precision="fp8", **kw)
        terms = inference.prefill_terms(DSV3, H200, wl, lay, np.array([1]), km=km, engine=VLLM)
        return sum(float(t[0]) for op, (t, _) in zip(terms["ops"], terms["times"]) if op.experts is not None)

    ratio = float(routing_imbalance("power_law_1.01", 256, 8, 8, 8192))
    assert experts_s(moe_routing="power_law_1.01") == pytest.approx(experts_s(moe_imbalance=ratio), rel=1e-12)
    assert experts_s(moe_routing="power_law_1.01") > experts_s()


def test_the_power_law_ratio_against_a_hand_value():
    """E 256, top 8, N 8192 (N k > E: x on [1, 0.8 N = 6553.6]), alpha 1.01, by hand (4 digits):
    x_max^-0.01 = exp(-0.01 ln 6553.6) = 0.915874, span = -0.084126; x_max^0.99 = 6553.6 x 0.915874 = 6002.27;
    mean m = (-0.01/0.99)(6002.27 - 1)/(-0.084126) = 720.6; x_top = (1 - 0.084126 (1 - 1/512))^-100 = 6437;
    E m = 184474; EP 8 (32 experts a rank): 8 (6437 + 31 (184474 - 6437)/255) / 184474 = 1.2178; EP 1: 1."""
    got = routing_imbalance("power_law_1.01", 256, 8, np.array([1, 8]), 8192)
    assert got == pytest.approx([1.0, 1.2178], rel=2e-4)
    assert routing_imbalance("balanced", 256, 8, 8, 8192) == pytest.approx(1.0)


def _moe_builder():
    import importlib.util

    from conftest import REPO

    path = REPO / "benchmarks" / "build_engine_moe_table.py"
    spec = importlib.util.spec_from_file_location("build_engine_moe_table", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return REPO, path, mod


@pytest.mark.parametrize("accelerator", ["h200-sxm-141gb", "h100-sxm-80gb"])
@pytest.mark.parametrize("engine", ["trtllm", "sglang"])
def test_the_moe_table_builder_rebuilds_the_shipped_table(engine, accelerator, tmp_path, monkeypatch, capsys):
    """The shipped table back as aiconfigurator's parquet (its columns, ms) rebuilds byte-identical:
    the header's engine name comes from ENGINES with the rest of the engine's entry, the accelerator's
    words and folder from SYSTEMS, each model's aiconfigurator dtype from SHAPES."""
    import pandas as pd

    repo, _, mod = _moe_builder()
    shipped = repo / "hardware" / "kernels" / f"{accelerator}.{engine}-moe.csv"
    rows = pd.read_csv(shipped, comment="#")
    op = mod.ENGINES[engine]
    parquet = tmp_path / "core" / op.parquet.format(system=mod.SYSTEMS[accelerator][0])
    parquet.parent.mkdir(parents=True)
    pd.DataFrame(
        {
            "kernel_source": op.kernel,
            "hidden_size": rows.hidden,
            "inter_size": rows.ffn,
            "topk": rows.top_k,
            "num_experts": rows.experts,
            "distribution": rows.routing,
            "moe_dtype": rows.model.map(dict(mod.SHAPES.values())),
            "moe_tp_size": rows.moe_tp,
            "moe_ep_size": rows.moe_ep,
            "num_tokens": rows.tokens,
            "latency": rows.time_s * 1e3,
        }
    ).to_parquet(parquet)
    (tmp_path / "hardware" / "kernels").mkdir(parents=True)
    monkeypatch.setattr(mod, "ROOT", tmp_path)
    assert mod.main(tmp_path / "core", engine, accelerator) == 0
    capsys.readouterr()
    assert mod.out_path(engine, accelerator).read_bytes() == shipped.read_bytes()


def test_the_moe_table_builder_refuses_an_unknown_engine_in_one_line():
    """An engine ENGINES does not name was a KeyError traceback; argparse's choices now, exit 2."""
    import subprocess
    import sys

    repo, path, _ = _moe_builder()
    done = subprocess.run([sys.executable, str(path), str(repo), "vllm"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "invalid choice: 'vllm' (choose from 'sglang', 'trtllm')" in done.stderr


H100 = load_option("hardware", "h100-sxm-80gb")
QWEN3_235B = load_option("model", "qwen3-235b-a22b")
MIXTRAL = load_option("model", "mixtral-8x7b")
# aiconfigurator moe_perf.parquet, balanced routing, ms: Qwen3-235B-A22B (4096/1536, top-8 of 128, fp8_block: the
# Qwen3-235B-A22B-FP8 checkpoint's 128x128 block scales) and Mixtral-8x7B (4096/14336, top-2 of 8, per-tensor fp8)
OTHER_SHAPES_MS = [
    # (engine, accelerator, model, tp, ep, tokens, ms): SGLang 0.5.10's Triton op, TensorRT-LLM 1.3.0rc20's CUTLASS op
    (SGLANG, H200, QWEN3_235B, 2, 1, 8192, 2.7838592529296875),  # moe_tp 2 x moe_ep 1
    (SGLANG, H200, QWEN3_235B, 4, 1, 4096, 0.9126656341552735),
    (TRTLLM, H100, QWEN3_235B, 4, 4, 8192, 1.4089600245157878),  # systems/data/h100_sxm: moe_tp 1 x moe_ep 4
    (TRTLLM, H100, QWEN3_235B, 8, 8, 1024, 0.1814346710840861),
    (TRTLLM, H200, MIXTRAL, 8, 1, 8192, 0.6990346908569336),
]


@pytest.mark.parametrize(("engine", "hw", "model", "tp", "ep", "tokens", "ms"), OTHER_SHAPES_MS)
def test_qwen3_and_mixtral_take_their_measured_fused_moe(engine, hw, model, tp, ep, tokens, ms):
    """The shipped Qwen3 and Mixtral shapes, on H200 and H100 (benchmarks/build_engine_moe_table.py SHAPES, SYSTEMS)."""
    cols = {k: np.array([v]) for k, v in dict(tp=tp, pp=1, sp=1, ep=ep, dp=1, batch=1).items()}
    cols["layers_per_stage"] = np.array([model.layers])
    wl = InferenceWorkload(batch=1, input_len=tokens, output_len=16, weight_dtype="fp8", precision="fp8")
    km = serving_kernel_model(hw, engine)
    terms = inference.prefill_terms(model, hw, wl, ServingLayout.of(cols), np.array([1]), km=km, engine=engine)
    got_s = sum(float(t[0]) for op, (t, _) in zip(terms["ops"], terms["times"]) if op.experts is not None)
    assert got_s == pytest.approx(ms * 1e-3, rel=1e-5)


def test_sglang_has_no_mixtral_rows():
    """aiconfigurator measured SGLang's Triton op on Mixtral in bf16 and fp8_block only; Mixtral's fp8
    checkpoints scale per tensor, so SGLang's tables leave it out and the kernel model times it."""
    for hw in (H200, H100):
        assert not fused_moe_table(SGLANG, hw).covers("balanced", "fp8", 4096, 14336, 2, 8)
        assert fused_moe_table(TRTLLM, hw).covers("balanced", "fp8", 4096, 14336, 2, 8)
