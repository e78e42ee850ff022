"""Cross-node serving against published measurements (issue 33 item 2): prints model vs measured.

    python benchmarks/cross_node_serving.py

1. SGLang DeepSeek-R1-0528 on two 8xH100 nodes over InfiniBand, one request at a time
   (benchmarks/surveys/engines/engine_cases.csv rows tt356-sglang-dsr1-16xh100-*; the source does
   not state the layout, a 16-GPU SGLang instance is normally --tp 16 --nnodes 2): the model at
   TP16 across the two nodes (grid.cross_node_tp=true) and, for reference, at TP8 x PP2.
2. LMSYS large-scale EP decode (row lmsys-ep-sglang-dsv3-decode-72xh100-ep72-bs256-kv2000):
   9 nodes x 8 H100, DP attention + EP72, DeepEP low-latency, EPLB 32 redundant experts, 256
   sequences per GPU at ~2,000 tokens of KV; 22,282 output tok/s per node = 2,785.25 per GPU,
   a decode step of 8 x 256 / 22,282 s = 91.9 ms (derived). The model's decode_step_ms.
Both run as engine=sglang (conf/engine/sglang.yaml: its per-step overheads, whatever they are fitted to).
Only numbers are printed; no test asserts them (timings and errors move as the model does).
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from parallmelism.config import load_run_configs  # noqa: E402
from parallmelism.engine import evaluate  # noqa: E402

SURVEY = ROOT / "benchmarks" / "surveys" / "engines" / "engine_cases.csv"
DSR1 = [
    "workload=inference",
    "engine=sglang",
    "model=deepseek-v3",
    "hardware=h100-sxm-80gb",
    "workload.weight_dtype=fp8",
]
DSR1 += ["workload.precision=fp8", "grid.sp=[1]", "grid.ep=[1]", "workload.batch=1"]
LAYOUTS = {
    "TP16 (cross-node)": ["grid.ngpus=[16]", "grid.tp=[16]", "grid.pp=[1]", "grid.cross_node_tp=true"],
    "TP8xPP2": ["grid.ngpus=[16]", "grid.tp=[8]", "grid.pp=[2]"],
}
WIDE_EP = [
    "workload=inference",
    "engine=sglang",
    "model=deepseek-v3",
    "hardware=h100-sxm-80gb",
    "workload.weight_dtype=fp8",
    "workload.precision=fp8",
    "workload.kv_dtype=fp8",
    "grid.ngpus=[72]",
    "grid.tp=[1]",
    "grid.pp=[1]",
    "grid.sp=[1]",
    "grid.ep=[72]",
    "workload.batch=256",
    "workload.input_len=1900",
    "workload.output_len=200",  # mean context 1900 + 200/2 = 2,000 tokens of KV
    "workload.phase=decode",
    "workload.moe_dispatcher=deepep",
    "workload.eplb_redundant_experts=32",
]


def one_row(overrides: list[str]) -> dict:
    ((_, run),) = load_run_configs(overrides)
    df, _ = evaluate(run)
    return df.iloc[0].to_dict()


def pct(model: float, measured: float) -> str:
    return f"{(model / measured - 1) * 100:+6.1f} %"


def main() -> None:
    rows = [r for r in csv.DictReader(open(SURVEY)) if r["case"].startswith("tt356-sglang-dsr1-16xh100")]
    print("SGLang DeepSeek-R1 on 2 x 8 H100 (IB), concurrency 1: ITL and TTFT, model vs measured")
    errs: dict[str, list[float]] = {name: [] for name in LAYOUTS}
    for r in rows:
        isl, osl = int(r["input_len"]), int(r["output_len"])
        itl, ttft = float(r["measured_itl_ms"]), float(r["measured_ttft_ms"])
        line = f"  {isl:>5}/{osl:<5} measured ITL {itl:5.1f} TTFT {ttft:6.1f} |"
        for name, lay in LAYOUTS.items():
            m = one_row([*DSR1, *lay, f"workload.input_len={isl}", f"workload.output_len={osl}"])
            errs[name].append(m["tpot_ms"] / itl - 1)
            line += f" {name}: ITL {m['tpot_ms']:5.1f} ({pct(m['tpot_ms'], itl)}) TTFT {m['ttft_ms']:6.1f} |"
        print(line)
    for name, e in errs.items():
        print(f"  {name}: mean ITL error {sum(e) / len(e) * 100:+.1f} %")
    m = one_row(WIDE_EP)
    step = 8 * 256 / 22282 * 1e3
    print("LMSYS wide-EP decode, EP72 on 9 x 8 H100, 256 sequences per GPU, KV ~2,000:")
    print(
        f"  decode step model {m['decode_step_ms']:.2f} ms vs {step:.2f} ms implied ({pct(m['decode_step_ms'], step)})"
    )
    tput = 256 / m["decode_step_ms"] * 1e3
    print(f"  output tok/s per GPU model {tput:,.0f} vs 2,785 measured ({pct(tput, 2785.25)})")
    print(f"  fits: {bool(m['fits'])} ({m['mem_total_gib']:.1f} GiB per GPU)")


if __name__ == "__main__":
    main()
