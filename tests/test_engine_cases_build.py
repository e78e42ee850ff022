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
    client, --random-range-ratio 0.8, InferenceX's mean) without speculative decoding and without TensorRT-LLM's
    batch wait (InferenceX's Llama-70B 1k/1k tp < 8 script); every other row above concurrency 1 keeps it
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
    assert len(batch_wait) == 6 and batch_wait["measured_ttft_ms"].isna().all()
    assert batch_wait["reported_ttft_ms"].notna().all()
    l8b = above[above["case"].str.startswith("aic-trtllm1.0.0rc3-l31-8b")]
    assert len(l8b) == 36 and l8b["requests"].isna().all() and l8b["measured_ttft_ms"].isna().all()
    # per engine: every vLLM and SGLang sample row, the TensorRT-LLM Llama-70B rows but the six, its DeepSeek-R1 plain rows
    assert validated.groupby("engine").size().to_dict() == {"sglang": 6, "trtllm": 24, "vllm": 42}
