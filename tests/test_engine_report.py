"""Per serving engine: the serving model against each engine's published runs (issue 33), read from
the committed validation table (tests/golden/validation.csv, which test_golden keeps equal to what
validate predicts now) and the shipped case files' engine, sample and concurrency columns.

The bars are what the model reaches today (issue 33's targets: ITL within 10 %, TTFT within 15 %
at light load): a change that moves an engine's error past its bar fails here."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from parallmelism.search.engine_choice import engine_verdict
from parallmelism.validate.engine_report import OTHER_QUANTITIES, engine_errors, engine_lines
from parallmelism.validate.runner import shipped_case_files
from tests.conftest import REPO, golden_engine_errors, invoke

# (engine, sample): (ITL mean |error| % bar at concurrency <= 8, TTFT bar or None without rows)
# With each engine's own TP all-reduce (engine.tp_all_reduce) four bars tightened (trtllm aiconfigurator 17.9 ->
# 13.7 %, sglang 9.7 -> 3.4 % and 16.6 -> 8.2 %) and two moved out: trtllm independent 4.0 -> 4.7 % (NIM 1.8's
# older TensorRT-LLM was under already: its all-reduce is not 1.x's) and vllm 5.0 -> 5.8 % (TP1/TP2 rows over, TP8 under)
# NIM 1.8's rows moved to their own engine (conf/engine/nim.yaml): trtllm's independent rows are TensorRT-LLM's own
# (v0.14 perf overview, issue 5929), whose TTFT the NIM rows had diluted (20.3 % -> 37.3 % on 8 rows). Prefill's
# experts on TensorRT-LLM/H200 as its measured fused-MoE op (conf/engine/trtllm.yaml fused_moe_tables): 37.3 -> 23.1 %;
# its fp8 block-scaled linear layers as its measured GEMMs (gemm_tables): 23.1 -> 18.4 %; issue 5929's rows under
# aiconfigurator's power_law_1.01 routing (their moe_routing column, the reason in their notes): 18.4 -> 12.4 %;
# the MoE-layer overhead refit after it (35 -> 32.5 us, conf/engine/trtllm.yaml) moves trtllm independent ITL
# 7.71 -> 8.34 % (bar 8.0 -> 8.5) and its aiconfigurator ITL 13.17 -> 13.07 %. aiconfigurator's six TensorRT-LLM
# 1.1 DeepSeek-R1 TP8 EP8 rows ran with MTP-3 (InferenceX's dsr1-fp8-h200-trt-mtp runs; their spec_* columns) and
# the MoE-layer overhead refit after it (32.5 -> 42.5 us): trtllm aiconfigurator 13.07 -> 8.88 % (bar 14 -> 9.5),
# trtllm independent ITL 8.34 -> 6.79 % (bar 8.5 -> 7.5), TTFT 12.46 -> 12.25 %. The Llama 70B rows (InferenceMAX's
# 70B sweep) and InferenceX's DeepSeek-R1 TensorRT-LLM rows read their fp8 KV cache (kv_cache_precision), vLLM's
# iteration overhead refit 0.45 -> 0.75 ms: trtllm aiconfigurator 8.88 -> 7.56 % (bar 9.5 -> 8.0), vllm 5.80 ->
# 4.21 % (bar 6.0 -> 4.7). The aiconfigurator sample's InferenceX rows (concurrency 4 and 8) validate their mean
# TTFT, simulated as the closed loop ran (10 requests per client, lengths in [0.8 L, L]; validate/inference_cases.py),
# and vLLM's request overhead is fitted on them (7 by rule -> 24.25 ms): vllm TTFT 8.11 % (42 rows), trtllm 16.92 %
# (24 rows: the DeepSeek-R1 rows short at 1k prompts, over at 8k), sglang 57.67 % (6 DeepSeek-R1 rows, ~150-190 ms
# short): bars at what the model reaches, the last two above the 15 %. InferenceX's DeepSeek-R1 H200 rows
# run as their scripts started the servers (TensorRT-LLM EP 8, max_num_tokens, fp8 KV; SGLang chunked prefill 32768)
# and the MoE-layer overhead refit (42.5 -> 45 us): trtllm aiconfigurator TTFT 16.92 -> 19.04 % (bar 17.5 -> 19.5:
# EP 8 takes the 8k rows from +25..+31 % to -25..-28 %, the 1k rows to -62..-70 %, both engines' rows now short by
# the same ~125-217 ms a request), its ITL 7.56 -> 7.47 %, sglang TTFT 57.67 -> 55.89 % (bar 58.5 -> 56.5).
# InferenceX's six Llama-70B 1k/1k TP<8 rows join with TensorRT-LLM's batch waiting (cost/batch_wait.py): trtllm
# aiconfigurator TTFT 24 rows 19.04 % -> 30 rows 15.52 % (the six at -1.8..+2.6 %; bar 19.5 -> 16.0)
# SGLang's prefill experts as its measured Triton fused-MoE op (conf/engine/sglang.yaml fused_moe_tables): sglang
# aiconfigurator TTFT 55.89 -> 45.39 % (bar 56.5 -> 46.0; the 8k rows -38/-28 -> -18/-4 %), its ITL 8.10 -> 9.07 %
# (bar 8.5 -> 9.5: the longer prompt passes stall the 8k rows' decodes, +4.1/+11.2 -> +5.9/+14.5 %), sglang
# independent ITL 3.39 -> 2.95 %
# SGLang's prefill MLA module as measured (conf/engine/sglang.yaml mla_context_tables: its eager launch floor, 0.6 ms
# a layer up to 2k tokens): sglang aiconfigurator TTFT 45.39 -> 35.75 % (bar 46.0 -> 36.5; 1k rows -58..-68 ->
# -45..-56 %), its ITL 9.07 -> 9.72 % (bar 9.5 -> 10.0: the longer prompt passes stall the decodes riding with them),
# sglang independent ITL 2.95 -> 3.33 %
# Held out (engine_report.HELD_OUT_SAMPLES, never fitted): aiconfigurator 0.12.0's Qwen3 campaigns
# (benchmarks/build_heldout_cases.py), read before any change: Qwen3-235B-A22B-FP8 on TensorRT-LLM 1.0.0rc3 H100
# (TP4/EP4, TP8/EP8) 30.06 % (+19..+48 %; 9.6 % with moe_layer_overhead_us 0: the per-MoE-layer term fitted on
# DeepSeek-R1's 58 layers does not carry to Qwen3's 94) and on SGLang 0.5.6.post2 H200 (TP2/TP4) 18.12 % (-43..+1 %,
# short where 2k-4k prompts join the decodes); dense Qwen3-32B (architecture columns, head_dim) on H100 TP1-8:
# TensorRT-LLM 1.0.0rc3 fp8 5.49 % (36 rows, -12..+13 %), vLLM 0.12.0 bf16 4.26 % (18 rows, -3..+9 %). trtllm's
# sample: 66 rows, 16.66 %. Bars at what the model reaches: a change that moves them is out-of-sample evidence.
# Qwen3-235B's prefill experts as the engines' measured fused-MoE op (the tables took the Qwen3 and Mixtral shapes
# and H100; benchmarks/build_engine_moe_table.py): trtllm heldout 16.70 -> 16.79 % (its Qwen3-235B rows 30.06 ->
# 30.26 %, +20..+47 %), sglang heldout 18.12 -> 16.84 % (-36..+4 %; bar 18.5 -> 17.5); no in-sample row moved
# TensorRT-LLM's moe_layer_overhead_us charged only on MoE layers whose gate or shared expert runs outside the fused
# op (94eda12): trtllm heldout 16.79 -> 7.34 % (bar 17.0 -> 7.5; the Qwen3-235B rows 9.5 %), no in-sample row moved.
# The six aiconfigurator SGLang 0.5.9 rows as their server ran (InferenceX dsr1_fp8_h200.sh: no --enable-mixed-chunk,
# so separate prefill passes): sglang aiconfigurator ITL 9.85 -> 10.14 % (bar 10.0 -> 10.2: above the 10 %,
# the input corrected, the decode step still long on these rows), TTFT 34.82 -> 34.51 % (bar 36.5 -> 35.0)
BARS = {
    ("nim", "independent"): (3.5, 7.0),
    ("trtllm", "aiconfigurator-heldout"): (7.5, None),
    ("vllm", "aiconfigurator-heldout"): (4.5, None),
    ("sglang", "aiconfigurator-heldout"): (17.5, None),
    ("trtllm", "independent-heldout"): (None, None),
    ("vllm", "independent-heldout"): (None, None),
    ("trtllm", "independent"): (7.5, 13.0),
    ("trtllm", "aiconfigurator"): (8.0, 16.0),
    ("vllm", "aiconfigurator"): (4.7, 8.5),
    ("sglang", "independent"): (3.5, None),
    ("sglang", "aiconfigurator"): (10.2, 35.0),
}


# (engine, sample): (output tok/s per GPU mean |error| % bar, context-pass bar), where the rows have them.
# TensorRT-LLM's own 2023 tables (inference_heldout_trtllm061.csv: v0.6.1 gptSessionBenchmark static batches, v0.5
# batch-1 first-token latency; H100 fp8, A100 fp16), held out, read before any change: throughput 28.23 % on 21
# rows (MHA models -2.4..+27 %, 12 of 13 within 12 %; every GQA row, Llama 2 70B and Falcon 180B, over +16..+124 %,
# -20..+1 % when their kv_heads is set to heads: K/V read per query head), context 22.30 % on 16 rows
# (all short, -5..-41 %: v0.5's context kernels were slower than today's tables); after NVLS all-reduce (C1's
# scale_up change): 28.53 % and 22.54 %
# vLLM's performance dashboard (inference_heldout_vllm_dashboard.csv: benchmark_latency, batch 8 of 32 -> 128 tokens,
# Llama 3 8B TP1, 70B TP4, Mixtral 8x7B TP2 on H200, A100, H100), held out: 7.13 % on 9 rows (-15..+11 %); with
# vLLM's ROCm builds on 8x MI300X (inference_heldout_mi300x.csv: Oracle's Llama 3.1 405B fp8 batch 1-256 at 128/128,
# -5..-27 %, short from batch 32 up; AMD's 0.9.1 Llama 3.1 70B fp8 batch 1-2 at 128/2048, +1.7/-0.9 %) 10.29 % on 20
OTHER_BARS = {
    ("trtllm", "independent-heldout"): {"tput": 29.0, "context": 23.0},
    ("vllm", "independent-heldout"): {"batch": 10.5},
}


@pytest.fixture(scope="module")
def errors():
    return golden_engine_errors()


def test_every_engine_has_shipped_rows(errors):
    by, _ = errors
    assert set(by) == set(BARS)
    for engine in ("trtllm", "vllm", "sglang"):
        assert sum(by[k]["itl_rows"] for k in by if k[0] == engine) >= 6, engine


@pytest.mark.parametrize("key", sorted(BARS))
def test_engine_error_within_its_bar(errors, key):
    by, _ = errors
    r = by[key]
    itl_bar, ttft_bar = BARS[key]
    if itl_bar is None:
        assert r["itl_rows"] == 0, (key, r)
    else:
        assert r["itl_rows"] > 0 and r["itl_mean_abs_pct"] <= itl_bar, (key, r)
    if ttft_bar is None:
        assert r["ttft_rows"] == 0, (key, r)
    else:
        assert r["ttft_rows"] > 0 and r["ttft_mean_abs_pct"] <= ttft_bar, (key, r)


def test_throughput_and_context_within_their_bars(errors):
    by, _ = errors
    for key, bars in OTHER_BARS.items():
        r = by[key]
        for q, bar in bars.items():
            assert r[f"{q}_rows"] > 0 and r[f"{q}_mean_abs_pct"] <= bar, (key, q, r)
    # no other (sample, quantity) has rows
    assert not any(r[f"{q}_rows"] for k, r in by.items() for q in OTHER_QUANTITIES if q not in OTHER_BARS.get(k, {}))


def test_report_lines_name_each_engine_and_sample(errors):
    _, table = errors
    lines = engine_lines(table)
    assert len(lines) == len(BARS)
    assert any(line.startswith("engine vllm (aiconfigurator): ITL at concurrency <= 8: 42 rows") for line in lines)


def test_report_is_the_mean_of_the_rows():
    """Two hand-made rows per engine: the report's means are theirs, light and loaded apart."""
    table = pd.DataFrame(
        {
            "case": ["a", "a", "b", "c"],
            "quantity": ["itl_ms", "ttft_ms", "itl_ms", "itl_ms"],
            "error_pct": [-4.0, 10.0, 8.0, 30.0],
        }
    )
    table.attrs["serving"] = [
        {"case": "a", "engine": "vllm", "sample": "independent", "concurrency": 1.0},
        {"case": "b", "engine": "vllm", "sample": "independent", "concurrency": 8.0},
        {"case": "c", "engine": "vllm", "sample": "independent", "concurrency": 64.0},
    ]
    (r,) = engine_errors(table)
    assert (r["itl_rows"], r["itl_mean_abs_pct"]) == (2, 6.0)
    assert (r["ttft_rows"], r["ttft_mean_abs_pct"]) == (1, 10.0)
    assert (r["itl_loaded_rows"], r["itl_loaded_mean_abs_pct"]) == (1, 30.0)


def _plan(gpus, usd, tpot, ttft=50.0):
    return pd.DataFrame(
        [
            {
                "total_gpus": gpus,
                "replicas": gpus,
                "tp": 1,
                "pp": 1,
                "batch": 8,
                "ttft_ms": ttft,
                "tpot_ms": tpot,
                "usd_per_million_output_tokens": usd,
            }
        ]
    )


def test_engine_verdict_cheapest_and_fastest():
    pick, lines = engine_verdict(
        [("sglang", _plan(4, 0.5, 9.0)), ("trtllm", _plan(3, 0.4, 12.0)), ("vllm", pd.DataFrame())]
    )
    assert pick == "trtllm"
    assert lines[0].startswith("engine auto: cheapest trtllm, fastest sglang")
    assert "vllm: no serving layout meets the limits" in lines[-1]
    # a tie names both and shows the preferred engine's plan
    pick, lines = engine_verdict([("sglang", _plan(3, 0.4, 9.0)), ("trtllm", _plan(3, 0.4, 9.0))], prefer="trtllm")
    assert pick == "trtllm" and "cheapest sglang = trtllm (tie)" in lines[0]
    assert engine_verdict([("vllm", pd.DataFrame())])[0] is None


def test_plan_serve_engine_auto_names_every_engine():
    code, out = invoke("plan", "serve", "--engine", "auto", "model=llama3.1-8b", "qps=20", "tpot_ms=30")
    assert code == 0, out
    head = next(line for line in out.splitlines() if line.startswith("engine auto:"))
    assert "cheapest" in head and "fastest" in head
    assert all(f"  {name}: " in out for name in ("trtllm", "vllm", "sglang"))


@pytest.mark.parametrize(
    "args, message",
    [
        (["--engine", "vllm"], "--engine takes auto (every engine); for one engine give engine=vllm instead"),
        # not an engine: was "give engine=best instead", itself an unknown engine
        (["--engine", "best"], "--engine takes auto (every engine); for one engine give engine=NAME (nim, sglang, "),
        (["--engine", "auto", "engine=vllm"], "--engine auto compares every engine"),
    ],
)
def test_engine_option_refusals_are_one_sentence(args, message):
    code, out = invoke("plan", "serve", *args, "model=llama3.1-8b", "qps=20")
    assert code == 2 and message in out and "Traceback" not in out, out


def test_no_nan_in_report(errors):
    """A mean is NaN only where its quantity has no rows (the held-out TensorRT-LLM tables publish no ITL),
    and the printed lines never show one."""
    by, table = errors
    for r in by.values():
        for q in ("itl", "ttft", *OTHER_QUANTITIES):
            assert math.isnan(r[f"{q}_mean_abs_pct"]) == (r[f"{q}_rows"] == 0), (q, r)
    assert not any("nan" in line for line in engine_lines(table))


def _validated(name: str, overrides: list[str]):
    from parallmelism.validate.runner import run_validation

    (f,) = [f for f in shipped_case_files() if f.name == name]
    t = run_validation([f], overrides, None)
    return t.set_index(["case", "quantity"])["predicted"]


def test_validate_engine_overrides_reach_the_case_rows():
    """engine.FIELD=... sets every engine's field; engine=NAME is the engine of rows without an
    engine column; a row's own engine column wins over engine=NAME."""
    from parallmelism.config import load_option

    base = _validated("inference_nim_h100.csv", [])
    more = _validated("inference_nim_h100.csv", ["engine.request_overhead_ms=9.5"])
    c1 = [k for k in base.index if k[1] == "ttft_ms"]  # TTFT at concurrency 1 (no queue); the rows are nim's
    assert c1 and all(
        more[k] - base[k] == pytest.approx(9.5 - load_option("engine", "nim").request_overhead_ms) for k in c1
    )
    ds = _validated("inference_deepseek.csv", [])  # every row's engine column says sglang
    assert _validated("inference_deepseek.csv", ["engine=trtllm"]).equals(ds)
    slower = _validated("inference_deepseek.csv", ["engine.moe_layer_overhead_us=50"])
    assert all(slower[k] > ds[k] for k in ds.index if k[1] == "itl_ms")


def test_validate_unknown_engine_is_one_sentence():
    code, out = invoke(
        "validate", "--cases", str(REPO / "parallmelism" / "cases" / "inference_measured.csv"), "engine=tgi"
    )
    assert code == 2 and "unknown engine 'tgi'" in out and "Traceback" not in out, out
