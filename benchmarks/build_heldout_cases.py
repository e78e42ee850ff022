"""Write parallmelism/cases/inference_heldout.csv: serving rows no shipped case file held and no fit has
seen, validated out of sample (sample `aiconfigurator-heldout`, validate/engine_report.py HELD_OUT_SAMPLES:
reported per engine on their own line, never fitted by benchmarks/fit_serving_overhead.py).

    python benchmarks/build_heldout_cases.py PATH/TO/silicon_sample.csv

PATH: aiconfigurator_core/systems/silicon_sample.csv from the aiconfigurator-core 0.12.0 wheel (NVIDIA,
Apache-2.0; upstream ai-dynamo/aiconfigurator src/aiconfigurator/systems/silicon_sample.csv), the file the
shipped `aiconfigurator` rows were read from (benchmarks/surveys/engines/sources.md section H, which kept
H100/H200 Llama-3.1 and DeepSeek-R1/V3 only). Kept here, one rule each:
  - NVIDIA's own aic-auto-gap-analysis campaigns (provenance `source_file=.../aic-auto-gap-analysis/data/
    SYSTEM/BACKEND/VERSION/MODEL.csv`) of models no shipped row holds: Qwen3-235B-A22B (shipped model; FP8
    checkpoint, 128x128 block scales) on H100 TensorRT-LLM 1.0.0rc3 and on H200 SGLang 0.5.6.post2, and
    Qwen3-32B (architecture columns, QWEN3_32B) on H100 TensorRT-LLM 1.0.0rc3 (fp8) and vLLM 0.12.0 (precision
    column empty: the BF16 checkpoint, the rule sources.md section H states for the Llama-8B rows);
  - aggregated serving (`mode` agg), closed-loop concurrency (`batch_size`) of at most 8 (light load);
  - the layout as recorded: tp = tp_size, ep = moe_ep_size (TensorRT-LLM's rows: moe_tp 1, moe_ep = tp, whole
    experts per GPU; SGLang's: moe_tp = tp, ep 1).
Left out, with the reason: the same campaigns' vLLM 0.12.0 rows (tp_size 1 with moe_tp 2 or 4 and pairs of rows
of one (lengths, concurrency, tp) whose TPOT differ by 30 %: the layout is not readable), the B200 DeepSeek-R1/V3
InferenceX rows (MTP and non-MTP runs of one layout mixed in the dumps, tp_size 64 copies: their provenance
needs the reading sources.md section H gave the H200 rows).
What each row states and assumes (its notes): the statistic is not stated (TPOT column = silicon_tpot_ms);
these campaigns' harness is not stated, so above concurrency 1 TTFT is reported only (reported_ttft_ms), as
for the shipped TensorRT-LLM 1.0.0rc3 Llama-8B rows of the same analysis; KV cache bf16 (no record states a KV
scheme, Qwen3-235B-A22B-FP8's quantization_config sets none, and no engine here quantizes the KV cache by
default); routing balanced (random prompts). Prints what it kept and left out.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "parallmelism" / "cases" / "inference_heldout.csv"
SAMPLE = "aiconfigurator-heldout"
LIGHT_LOAD = 8
# Qwen3-32B (Hugging Face config.json of Qwen/Qwen3-32B): not shipped, stated by the architecture columns
# (validate/cases.py; head_dim 128 x 64 heads is wider than hidden 5120; qk-norm's few FLOPs are left out)
QWEN3_32B = {
    "model_desc": "Qwen3-32B",
    "hidden": 5120,
    "layers": 64,
    "heads": 64,
    "kv_heads": 8,
    "head_dim": 128,
    "ffn": 25600,
    "mlp": "swiglu",
    "vocab": 151936,
}
CAMPAIGNS = {  # (system, backend, backend_version, model_path): (accelerator, shipped model or architecture, short name)
    ("h100_sxm", "trtllm", "1.0.0rc3", "Qwen/Qwen3-235B-A22B-FP8"): ("h100-sxm-80gb", "qwen3-235b-a22b", "q235b-h100"),
    ("h100_sxm", "trtllm", "1.0.0rc3", "Qwen/Qwen3-32B"): ("h100-sxm-80gb", QWEN3_32B, "q32b-h100"),
    ("h100_sxm", "vllm", "0.12.0", "Qwen/Qwen3-32B"): ("h100-sxm-80gb", QWEN3_32B, "q32b-h100"),
    ("h200_sxm", "sglang", "0.5.6.post2", "Qwen/Qwen3-235B-A22B-FP8"): (
        "h200-sxm-141gb",
        "qwen3-235b-a22b",
        "q235b-h200",
    ),
}
COLUMNS = [
    "case",
    "model",
    *(k for k in QWEN3_32B),
    "accelerator",
    "precision",
    "kv_cache_precision",
    "gpus",
    "tp",
    "pp",
    "ep",
    "input_len",
    "output_len",
    "concurrency",
    "measured_ttft_ms",
    "measured_itl_ms",
    "reported_ttft_ms",
    "engine",
    "engine_version",
    "metric_stat",
    "sample",
    "source",
    "notes",
]
SOURCE = "aiconfigurator 0.12.0 (pip wheel aiconfigurator-core, Apache-2.0) aiconfigurator_core/systems/silicon_sample.csv id="


def precision_of(r) -> str:
    """The record's weights: its `precision` (fp8 here), or bf16 where the column is empty and the checkpoint
    is the BF16 release (the rule sources.md section H states for the TensorRT-LLM 1.0.0rc3 Llama-8B rows)."""
    p = r["precision"]
    return "bf16" if not isinstance(p, str) or not p else p


def case_row(r, accelerator: str, model, short: str) -> dict:
    tp, ep = int(r["tp_size"]), int(r["moe_ep_size"])
    conc = int(r["batch_size"])
    precision = precision_of(r)
    arch = model if isinstance(model, dict) else {}
    return {
        "case": f"aicho-{r['backend']}{r['backend_version']}-{short}-tp{tp}ep{ep}-{int(r['isl'])}-{int(r['osl'])}-c{conc}",
        "model": None if arch else model,
        **arch,
        "accelerator": accelerator,
        "precision": precision,
        "kv_cache_precision": "bf16",
        "gpus": tp * int(r["pp_size"]),
        "tp": tp,
        "pp": int(r["pp_size"]),
        "ep": ep,
        "input_len": int(r["isl"]),
        "output_len": int(r["osl"]),
        "concurrency": conc,
        "measured_ttft_ms": round(float(r["silicon_ttft_ms"]), 3) if conc == 1 else None,
        "measured_itl_ms": round(float(r["silicon_tpot_ms"]), 3),
        "reported_ttft_ms": round(float(r["silicon_ttft_ms"]), 3),
        "engine": r["backend"],
        "engine_version": r["backend_version"],
        "metric_stat": None,
        "sample": SAMPLE,
        "source": SOURCE + r["id"],
        "notes": (
            "NVIDIA silicon e2e measurement shipped with aiconfigurator (statistic not stated; TPOT column = "
            f"silicon_tpot_ms); checkpoint {r['model_path']}"
            + ("" if isinstance(r["precision"], str) and r["precision"] else " (precision column empty: BF16)")
            + f"; gemm_quant {r['gemm_quant_mode']} moe_quant "
            f"{r['moe_quant_mode']}; layout tp_size {tp}, moe_tp {int(r['moe_tp_size'])}, moe_ep {ep}; provenance: "
            f"{r['silicon_data_source']}; harness not stated: TTFT above concurrency 1 reported only; KV bf16 and "
            "balanced routing assumed (benchmarks/build_heldout_cases.py); held out: never fitted"
        ),
    }


def main(argv) -> int:
    if len(argv) != 1:
        print(__doc__.split("\n\n")[1].strip(), file=sys.stderr)
        return 2
    s = pd.read_csv(argv[0])
    rows, left = [], []
    for r in s.to_dict("records"):
        key = (r["system"], r["backend"], str(r["backend_version"]), r["model_path"])
        if key not in CAMPAIGNS:
            continue
        if r["mode"] != "agg":
            left.append((key, "not aggregated"))
            continue
        if float(r["batch_size"]) > LIGHT_LOAD:
            left.append((key, "concurrency above 8 (loaded)"))
            continue
        rows.append(case_row(r, *CAMPAIGNS[key]))
    df = pd.DataFrame(rows, columns=COLUMNS)
    dup = df["case"].duplicated(keep=False)
    if dup.any():
        print(f"repeated case names: {sorted(set(df.loc[dup, 'case']))}", file=sys.stderr)
        return 1
    df.to_csv(OUT, index=False, lineterminator="\n")
    print(f"wrote {len(df)} rows to {OUT.relative_to(ROOT)}")
    named = df.assign(model=df["model"].fillna(df["model_desc"]))
    print(named.groupby(["engine", "engine_version", "accelerator", "model"]).size().to_string())
    if left:
        print("left out:")
        print(
            pd.DataFrame([(k[1], k[0], why) for k, why in left], columns=["engine", "system", "reason"])
            .value_counts()
            .to_string()
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
