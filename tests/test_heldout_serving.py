"""Held-out serving rows (validate/engine_report.py HELD_OUT_SAMPLES, parallmelism/cases/inference_heldout.csv):
validated and reported per engine, never fitted, and built from the silicon sample by one rule per column
(benchmarks/build_heldout_cases.py)."""

import importlib.util

import pandas as pd

from conftest import REPO
from parallmelism.validate.engine_report import HELD_OUT_SAMPLES

HELDOUT = REPO / "parallmelism" / "cases" / "inference_heldout.csv"


def _module(name):
    spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_serving_fit_never_sees_a_held_out_row():
    """fit_serving_overhead reads every shipped serving file (the held-out one too) and keeps no row of a
    held-out sample: the shipped overheads are fitted without them."""
    fit = _module("fit_serving_overhead")
    held = set(pd.read_csv(HELDOUT, dtype=str)["case"])
    assert held
    fitted = {r["case"] for rows in fit.rows_by_engine().values() for r in rows}
    assert fitted and not fitted & held
    assert fit.load_rows([HELDOUT]) == []  # the held-out file alone: nothing to fit


def test_held_out_file_is_one_held_out_sample_and_reported_apart():
    df = pd.read_csv(HELDOUT, dtype=str, keep_default_na=False)
    assert set(df["sample"]) <= set(HELD_OUT_SAMPLES)
    assert df["source"].str.contains("silicon_sample.csv id=").all()
    # above concurrency 1 these campaigns' harness is not stated: TTFT is reported, not validated
    above = df[df["concurrency"].astype(int) > 1]
    assert (above["measured_ttft_ms"] == "").all() and (above["reported_ttft_ms"] != "").all()


def test_builder_reads_the_layout_and_lengths_as_recorded():
    """One silicon-sample record of each campaign: tp = tp_size, ep = moe_ep_size, concurrency = batch_size,
    TTFT validated at concurrency 1 only."""
    build = _module("build_heldout_cases")
    rec = {
        "id": "x",
        "backend": "trtllm",
        "backend_version": "1.0.0rc3",
        "model_path": "Qwen/Qwen3-235B-A22B-FP8",
        "precision": "fp8",
        "isl": 512,
        "osl": 128,
        "batch_size": 4.0,
        "tp_size": 4.0,
        "pp_size": 1.0,
        "moe_tp_size": 1.0,
        "moe_ep_size": 4.0,
        "gemm_quant_mode": "fp8_block",
        "moe_quant_mode": "fp8_block",
        "silicon_data_source": "source_file=a.csv",
        "silicon_ttft_ms": 173.5,
        "silicon_tpot_ms": 13.34,
    }
    row = build.case_row(rec, "h100-sxm-80gb", "qwen3-235b-a22b", "q235b-h100")
    assert (row["tp"], row["ep"], row["gpus"], row["concurrency"]) == (4, 4, 4, 4)
    assert row["measured_ttft_ms"] is None and row["reported_ttft_ms"] == 173.5 and row["measured_itl_ms"] == 13.34
    assert row["sample"] in HELD_OUT_SAMPLES and row["source"].endswith("id=x")
    one = build.case_row({**rec, "batch_size": 1.0}, "h100-sxm-80gb", "qwen3-235b-a22b", "q235b-h100")
    assert one["measured_ttft_ms"] == 173.5 and one["case"].endswith("-c1")
    assert row["precision"] == "fp8" and row["model"] == "qwen3-235b-a22b"
    # an empty precision is the BF16 checkpoint; an unshipped model is its architecture columns
    dense = build.case_row({**rec, "precision": float("nan")}, "h100-sxm-80gb", build.QWEN3_32B, "q32b-h100")
    assert dense["precision"] == "bf16" and dense["model"] is None and dense["head_dim"] == 128


def test_throughput_row_is_the_batch_output_over_its_latency_per_gpu(tmp_path):
    """measured_output_tok_s_per_gpu is compared with b·output_len / e2e over the row's GPUs (a static batch of
    `concurrency` sequences here), in tok/s; measured_context_ms with the batch's context pass (prefill_ms)."""
    from parallmelism.validate.runner import _context, _evaluate_one, run_validation
    from parallmelism.validate.serving_run import inference_run_of

    src = pd.read_csv(
        REPO / "parallmelism" / "cases" / "inference_heldout_trtllm061.csv", dtype=str, keep_default_na=False
    )
    row = src[src["case"] == "trt061-llama2-70b-h100-tp2-2048-2048-b64-tput"]
    ctx_row = src[src["case"] == "trt05-llama2-70b-h100-tp4-2048-b1-context"]
    f = tmp_path / "cases.csv"
    pd.concat([row, ctx_row]).to_csv(f, index=False)
    table = run_validation([f], [], None).set_index(["case", "quantity"])
    tput = table.loc[("trt061-llama2-70b-h100-tp2-2048-2048-b64-tput", "output_tok_s_per_gpu")]
    assert tput["unit"] == "tok/s" and tput["measured"] == 547.0
    ctx = _context([], [])
    r = row.replace({"": None}).to_dict("records")[0]
    pred = _evaluate_one(inference_run_of(r, *ctx))
    assert r["batching"] == "static"
    assert abs(tput["predicted"] - 64 * 2048 / (float(pred["e2e_latency_ms"]) / 1e3) / 2) < 1e-6 * tput["predicted"]
    c = ctx_row.replace({"": None}).to_dict("records")[0]
    assert table.loc[("trt05-llama2-70b-h100-tp4-2048-b1-context", "context_ms"), "predicted"] == float(
        _evaluate_one(inference_run_of(c, *ctx))["prefill_ms"]
    )


def test_architecture_columns_take_rotary_gelu_and_a_wide_head():
    """position_embedding and head_dim (validate/cases.py): GPT-J's rotary GELU block has no learned table (so no
    2048-position limit), Qwen3-32B's 64 heads of 128 over hidden 5120; a bad value is one sentence."""
    import pytest

    from parallmelism.errors import UserError
    from parallmelism.validate.cases import model_of

    arch = {
        "case": "x",
        "hidden": "4096",
        "layers": "28",
        "heads": "16",
        "ffn": "16384",
        "mlp": "gelu",
        "vocab": "50400",
    }
    rope = model_of({**arch, "position_embedding": "rope"}, {})
    assert rope.position_embedding == "rope" and rope.max_position is None
    learned = model_of({**arch, "seq_len": "2048"}, {})
    assert learned.position_embedding == "learned" and learned.max_position == 2048
    wide = model_of(
        {
            "case": "q",
            "hidden": "5120",
            "layers": "64",
            "heads": "64",
            "kv_heads": "8",
            "ffn": "25600",
            "vocab": "151936",
            "head_dim": "128",
        },
        {},
    )
    assert wide.head_dim == 128 and wide.heads * wide.head_dim == 8192
    with pytest.raises(UserError, match="bad architecture"):
        model_of({**arch, "position_embedding": "alibi"}, {})


def test_batch_row_is_the_static_batch_without_the_request_overhead(tmp_path):
    """measured_batch_ms (vLLM's benchmark_latency: LLM.generate, no server) is compared with the static batch's
    prefill + (output_len - 1) decode steps, which is the model's static e2e less the engine's request overhead; a
    row that is not batching=static is one sentence, not a number."""
    from parallmelism.validate.runner import _context, _evaluate_one, run_validation
    from parallmelism.validate.serving_run import inference_run_of

    src = pd.read_csv(
        REPO / "parallmelism" / "cases" / "inference_heldout_vllm_dashboard.csv", dtype=str, keep_default_na=False
    )
    row = src[src["case"].str.contains("llama70B-h200")]
    f = tmp_path / "cases.csv"
    row.to_csv(f, index=False)
    table = run_validation([f], [], None)
    ctx = _context([], [])
    r = row.replace({"": None}).to_dict("records")[0]
    pred = _evaluate_one(inference_run_of(r, *ctx))
    want = float(pred["prefill_ms"]) + 127 * float(pred["tpot_ms"])
    assert abs(table["predicted"].iloc[0] - want) < 1e-9 * want and table["quantity"].iloc[0] == "batch_ms"
    overhead = ctx[3]("vllm").request_overhead_ms
    assert abs(float(pred["e2e_latency_ms"]) - overhead - want) < 1e-6 * want
    row.assign(batching="continuous").to_csv(f, index=False)
    import pytest

    from parallmelism.errors import UserError

    with pytest.raises(UserError, match="set batching=static"):
        run_validation([f], [], None)
