"""parallmelism/cases/inference_engines.csv is what benchmarks/build_engine_cases.py writes from the engine
survey (benchmarks/surveys/engines/engine_cases.csv): a case fix goes into the survey, where the reading of
each source is recorded, and the shipped file is regenerated. The moe_routing column and its notes had been
edited into the shipped file only, so rerunning the script would have dropped them."""

import importlib.util

from conftest import REPO


def test_shipped_engine_cases_are_the_builders_output(tmp_path, monkeypatch, capsys):
    spec = importlib.util.spec_from_file_location("build_engine_cases", REPO / "benchmarks" / "build_engine_cases.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = tmp_path / "inference_engines.csv"
    monkeypatch.setattr(mod, "OUT", out)
    monkeypatch.setattr(mod, "ROOT", tmp_path)  # only where it prints the path written
    monkeypatch.setattr(
        mod, "shipped_cases", lambda: _shipped_except(REPO / "parallmelism" / "cases", "inference_engines.csv")
    )
    assert mod.main() == 0
    capsys.readouterr()
    assert out.read_bytes() == (REPO / "parallmelism" / "cases" / "inference_engines.csv").read_bytes()


def test_batch_wait_is_set_on_inferencex_rows_only():
    """TensorRT-LLM Llama-70B 1k/1k below TP8 from another source (no InferenceX provenance: its
    runs set no batch wait) does not get InferenceX's script's 20 iterations / 0.9."""
    spec = importlib.util.spec_from_file_location("build_engine_cases", REPO / "benchmarks" / "build_engine_cases.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    row = {"engine": "trtllm", "model": "llama3.1-70b", "input_len": 1024, "output_len": 1024, "tp": 4}
    inferencex = {**row, "source": "silicon_sample x", "notes": "provenance: db-dump/2026"}
    assert mod.trtllm_batch_wait(inferencex)
    assert not mod.trtllm_batch_wait({**row, "source": "silicon_sample x", "notes": "a vendor's run"})
    assert not mod.trtllm_batch_wait({**row, "source": "NVIDIA blog", "notes": "provenance: db-dump/2026"})


def _shipped_except(cases_dir, name):
    import pandas as pd

    names: set[str] = set()
    for f in cases_dir.glob("inference_*.csv"):
        if f.name != name:
            names |= set(pd.read_csv(f, dtype=str)["case"])
    return names


def test_the_mtp_rows_carry_their_speculative_decoding():
    """aiconfigurator's TensorRT-LLM 1.1.0rc2.post2 DeepSeek-R1 rows are InferenceX's MTP runs (sources.md,
    section H): MTP-3 at TP8 EP8, MTP-1 with attention DP, except the 1k/8k c64 row of the 2026-01-28 sweep, which
    is the non-MTP config's; no other survey row has speculative decoding."""
    import pandas as pd

    survey = pd.read_csv(REPO / "benchmarks" / "surveys" / "engines" / "engine_cases.csv", dtype=str)
    mtp = survey[survey["spec_method"].notna()]
    assert set(mtp["spec_method"]) == {"mtp"}
    assert mtp["case"].str.startswith("aic-trtllm1.1.0rc2.post2-dsr1-h200-").all()
    assert len(mtp) == 19
    k = dict(zip(mtp["case"], mtp["spec_tokens"]))
    assert {k[c] for c in k if "adp" in c} == {"1"} and {k[c] for c in k if "adp" not in c} == {"3"}


def test_ttft_above_concurrency_one_only_where_the_benchmark_is_stated():
    """measured_ttft_ms above concurrency 1 is validated only on InferenceX runs (bench_serving: 10 requests per
    client, --random-range-ratio 0.8, InferenceX's mean) without speculative decoding; the six whose script
    (InferenceX's Llama-70B 1k/1k tp < 8) sets TensorRT-LLM's batch wait carry it (20 iterations, ratio 0.9 of
    --max_num_tokens 16384) and no other row does; every other row above concurrency 1 keeps it
    reported only (the Llama-8B TensorRT-LLM 1.0.0rc3 rows' harness is not stated; issue 5929's LLMPerf rows
    are loaded points)."""
    import pandas as pd

    df = pd.read_csv(REPO / "parallmelism" / "cases" / "inference_engines.csv")
    above = df[df["concurrency"] > 1]
    stated = above[above["requests"].notna()]
    assert (stated["requests"] == 10 * stated["concurrency"]).all()
    assert (stated["random_range_ratio"] == 0.8).all() and (stated["metric_stat"] == "mean").all()
    assert stated["notes"].str.contains("provenance: db-dump/|provenance: source_file=2026-").all()
    validated = above[above["measured_ttft_ms"].notna()]
    assert set(validated["case"]) <= set(stated["case"])
    assert validated["spec_method"].isna().all()
    batch_wait = above[
        (above["engine"] == "trtllm")
        & (above["model"] == "llama3.1-70b")
        & (above["input_len"] == 1024)
        & (above["output_len"] == 1024)
        & (above["tp"] < 8)
    ]
    assert len(batch_wait) == 6 and (batch_wait["measured_ttft_ms"] == batch_wait["reported_ttft_ms"]).all()
    assert set(batch_wait["concurrency"]) == {4, 8} and set(batch_wait["tp"]) == {1, 2, 4}
    assert (batch_wait["batch_wait_timeout_iters"] == 20).all()
    assert (batch_wait["batch_wait_max_tokens_ratio"] == 0.9).all()
    assert (batch_wait["prefill_chunk_tokens"] == 16384).all()
    assert set(df.loc[df["batch_wait_timeout_iters"].notna(), "case"]) == set(batch_wait["case"])
    assert set(df.loc[df["batch_wait_max_tokens_ratio"].notna(), "case"]) == set(batch_wait["case"])
    l8b = above[above["case"].str.startswith("aic-trtllm1.0.0rc3-l31-8b")]
    assert len(l8b) == 36 and l8b["requests"].isna().all() and l8b["measured_ttft_ms"].isna().all()
    # per engine: every vLLM and SGLang sample row, the TensorRT-LLM Llama-70B rows, its DeepSeek-R1 plain rows
    assert validated.groupby("engine").size().to_dict() == {"sglang": 6, "trtllm": 30, "vllm": 42}


def test_inferencex_deepseek_h200_rows_carry_their_servers_settings():
    """aiconfigurator's DeepSeek-R1 H200 rows of InferenceX's runs are run as InferenceX's scripts started the
    servers (sources.md, section H): the TensorRT-LLM cfg83 rows (measured 2025-11-02) by
    benchmarks/dsr1_fp8_h200_trt_slurm.sh at e06929c70, EP_SIZE=$TP, --max_num_tokens
    $(( (CONC+ISL+64+63)/64*64 )), kv_cache_config dtype fp8, image 1.1.0rc2.post2, attention DP above 32 at 8k/1k;
    the SGLang 0.5.9 rows by benchmarks/single_node/dsr1_fp8_h200.sh, --chunked-prefill-size 32768 without
    --enable-mixed-chunk (chunked_prefill false: they were priced as mixed chunks)."""
    import pandas as pd

    survey = pd.read_csv(REPO / "benchmarks" / "surveys" / "engines" / "engine_cases.csv", dtype=str)
    trt = survey[survey["case"].str.startswith("aic-trtllm-dsr1-h200-tp8-")].set_index("case")
    assert len(trt) == 15
    assert (trt["ep"] == "8").all() and (trt["kv_cache_precision"] == "fp8").all()
    assert (trt["engine_version"] == "1.1.0rc2.post2").all()
    # max_num_tokens by the script's formula, worked by hand: 1024 + 4 + 127 -> 1152, 8192 + 8 + 127 -> 8320
    budget = {"aic-trtllm-dsr1-h200-tp8-1024-1024-c4": "1152", "aic-trtllm-dsr1-h200-tp8-1024-8192-c8": "1152"}
    budget |= {"aic-trtllm-dsr1-h200-tp8-8192-1024-c8": "8320", "aic-trtllm-dsr1-h200-tp8-1024-1024-c64": "1152"}
    budget |= {"aic-trtllm-dsr1-h200-tp8-8192-1024-c64": "8320"}
    for case, tokens in budget.items():
        assert trt.loc[case, "prefill_chunk_tokens"] == tokens, case
    adp = trt[trt["dp_attention"] == "true"]
    assert list(adp.index) == ["aic-trtllm-dsr1-h200-tp8-8192-1024-c64"] and adp["tp"].tolist() == ["1"]
    sgl = survey[survey["case"].str.startswith("aic-sglang0.5.9-dsr1-h200-tp8-")]
    assert len(sgl) == 15 and (sgl["prefill_chunk_tokens"] == "32768").all()
    # no --enable-mixed-chunk in the script: SGLang 0.5.9 runs each prefill batch apart (enable_mixed_chunk False)
    assert (sgl["chunked_prefill"] == "false").all()
    others = survey[~survey["case"].isin(set(trt.index) | set(sgl["case"]))]
    assert others["prefill_chunk_tokens"].isna().all()
    shipped = pd.read_csv(REPO / "parallmelism" / "cases" / "inference_engines.csv")
    light = shipped[shipped["case"].str.startswith(("aic-trtllm-dsr1-h200-tp8-", "aic-sglang0.5.9-dsr1-h200-tp8-"))]
    assert len(light) == 12 and light["prefill_chunk_tokens"].notna().all()
    light_sgl = light[light["engine"] == "sglang"]
    assert len(light_sgl) == 6 and (~light_sgl["chunked_prefill"].astype(bool)).all()


def test_shipped_loaded_cases_are_the_builders_output(tmp_path, monkeypatch, capsys):
    """parallmelism/cases/loaded/inference_loaded.csv is what benchmarks/build_loaded_cases.py writes from the
    engine survey. It was not: the builder appended issue 5929's routing note to survey notes that state it already,
    so a rebuild doubled it on those nine rows."""
    spec = importlib.util.spec_from_file_location("build_loaded_cases", REPO / "benchmarks" / "build_loaded_cases.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = tmp_path / "inference_loaded.csv"
    monkeypatch.setattr(mod, "OUT", out)
    monkeypatch.setattr(mod, "ROOT", tmp_path)  # only where it prints the path written
    mod.main()
    capsys.readouterr()
    assert out.read_bytes() == (REPO / "parallmelism" / "cases" / "loaded" / "inference_loaded.csv").read_bytes()
