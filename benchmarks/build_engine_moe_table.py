"""Write hardware/kernels/ACCELERATOR.ENGINE-moe.csv: an engine's fused-MoE kernel on an H200 or H100 SXM, as
aiconfigurator measured it (issue 33: an engine names its fused-MoE kernel; conf/engine/ENGINE.yaml).

    python benchmarks/build_engine_moe_table.py AICONFIGURATOR_CORE_DIR [trtllm|sglang] [h200-sxm-141gb|h100-sxm-80gb]

ACCELERATOR (default h200-sxm-141gb) picks aiconfigurator's system folder (SYSTEMS: systems/data/h200_sxm or
h100_sxm; the same releases and ops were measured on both).

ENGINE (default trtllm) picks the measured op (ENGINES): TensorRT-LLM 1.3.0rc20's, below, or SGLang 0.5.10's
(systems/data/h200_sxm/moe/sglang/0.5.10/moe_perf.parquet, `sglang_fused_moe_triton`: SGLang's Triton fused
MoE, fp8 block-scale, with its routing, token alignment and top-k reduce; the nearest measured release to the
0.5.7-0.5.9 that SGLang's shipped rows ran), everything else as for TensorRT-LLM.

AICONFIGURATOR_CORE_DIR: the installed `aiconfigurator_core` package of the aiconfigurator 0.12.0 wheel
(pip install aiconfigurator==0.12.0; NVIDIA, Apache-2.0, github.com/ai-dynamo/aiconfigurator). Its
systems/data/h200_sxm/moe/trtllm/1.3.0rc20/moe_perf.parquet times TensorRT-LLM 1.3.0rc20's MoE op
(`moe_torch_flow_cutlass`: routing, token permute, the CUTLASS grouped GEMMs gate+up and down with their
activation quantization, unpermute and top-k reduce) on one GPU, for num_tokens tokens entering the layer
on that rank, per (moe_tp, moe_ep). Kept, one rule each: the model shapes shipped in models/ (hidden,
expert FFN, top-k, experts: SHAPES; DeepSeek-V3, Qwen3-235B-A22B, Qwen3-30B-A3B, Mixtral 8x7B and 8x22B), the routings workload.moe_routing names (`balanced`, and
`power_law_1.01`: aiconfigurator's collector draws 256 expert loads from a power law of exponent 1.01 and
times the busiest EP rank; its estimates for DeepSeek use this one, sdk/config.py workload_distribution
"power_law" with sdk/models/deepseek.py's alpha 1.01), and the dtype the shipped checkpoint runs: DeepSeek-V3/R1's fp8 weights are
128x128 block-scaled (its config.json quantization_config weight_block_size [128, 128]), so its fp8 rows
are aiconfigurator's `fp8_block`. Latency is in ms there, seconds here.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import NamedTuple

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
DISTRIBUTIONS = ("balanced", "power_law_1.01")  # workload.moe_routing's values (module docstring)


class EngineOp(NamedTuple):
    parquet: str  # under the aiconfigurator_core package
    kernel: str  # its kernel_source
    release: str  # the release and op it names
    name: str  # the engine's name in the table's header


ENGINES = {
    "trtllm": EngineOp(
        "systems/data/{system}/moe/trtllm/1.3.0rc20/moe_perf.parquet",
        "moe_torch_flow_cutlass",
        "TensorRT-LLM 1.3.0rc20",
        "TensorRT-LLM",
    ),
    "sglang": EngineOp(
        "systems/data/{system}/moe/sglang/0.5.10/moe_perf.parquet",
        "sglang_fused_moe_triton",
        "SGLang 0.5.10",
        "SGLang",
    ),
}
# accelerator (hardware/NAME.yaml) -> (aiconfigurator's system folder, the header's words)
SYSTEMS = {"h200-sxm-141gb": ("h200_sxm", "NVIDIA H200 SXM"), "h100-sxm-80gb": ("h100_sxm", "NVIDIA H100 SXM")}
# (hidden, expert ffn, top-k, experts) of the shipped models: model name -> the aiconfigurator dtype of
# its fp8 checkpoint (module docstring)
SHAPES = {
    (7168, 2048, 8, 256): ("deepseek-v3", "fp8_block"),
    (4096, 1536, 8, 128): ("qwen3-235b-a22b", "fp8_block"),
    (2048, 768, 8, 128): ("qwen3-30b-a3b", "fp8_block"),
    (4096, 14336, 2, 8): ("mixtral-8x7b", "fp8"),
    (6144, 16384, 2, 8): ("mixtral-8x22b", "fp8"),
}
HEADER = """# {name} fused MoE on {accel} (aiconfigurator measurements; benchmarks/build_engine_moe_table.py).
# Source: aiconfigurator 0.12.0 wheel (NVIDIA, Apache-2.0, github.com/ai-dynamo/aiconfigurator), aiconfigurator_core/{src},
#   {release}, kernel_source {kernel}, distributions {dist} (aiconfigurator's routing names).
# One MoE layer's routed experts on one GPU: routing, permute, gate+up and down grouped GEMMs, unpermute and reduce.
# routing = workload.moe_routing; tokens = tokens entering the layer on the rank; moe_tp x moe_ep = the expert GPUs; time_s = measured latency.
# dtype is the workload precision the row stands for ({rule}).
"""


def out_path(engine: str, accelerator: str = "h200-sxm-141gb") -> Path:
    return ROOT / "hardware" / "kernels" / f"{accelerator}.{engine}-moe.csv"


def main(core: Path, engine: str = "trtllm", accelerator: str = "h200-sxm-141gb") -> int:
    source, kernel, release, name = ENGINES[engine]
    system, accel = SYSTEMS[accelerator]
    source = source.format(system=system)
    df = pd.read_parquet(core / source)
    df = df[df.kernel_source == kernel] if "kernel_source" in df.columns else df
    parts = []
    for (h, f, k, e), (model, dtype) in SHAPES.items():
        s = df[
            (df.hidden_size == h)
            & (df.inter_size == f)
            & (df.topk == k)
            & (df.num_experts == e)
            & (df.distribution.isin(DISTRIBUTIONS))
            & (df.moe_dtype == dtype)
        ]
        if s.empty:
            print(f"{model}: no {dtype} rows of {(h, f, k, e)} in {source}: left out")
            continue
        s = s.groupby(["distribution", "moe_tp_size", "moe_ep_size", "num_tokens"], as_index=False).latency.median()
        parts.append(
            pd.DataFrame(
                {
                    "model": model,
                    "routing": s.distribution,
                    "dtype": "fp8",
                    "hidden": h,
                    "ffn": f,
                    "top_k": k,
                    "experts": e,
                    "moe_tp": s.moe_tp_size,
                    "moe_ep": s.moe_ep_size,
                    "tokens": s.num_tokens,
                    "time_s": s.latency * 1e-3,
                }
            )
        )
    out = pd.concat(parts).sort_values(["model", "routing", "moe_tp", "moe_ep", "tokens"])
    kept = sorted(set(out.model))
    block = [m for m in kept if dict(SHAPES.values())[m] == "fp8_block"]
    tensor = [m for m in kept if dict(SHAPES.values())[m] == "fp8"]
    rule = f"fp8: fp8_block for {', '.join(block)} (128x128 block-scaled checkpoints)"
    rule += f", fp8 for {', '.join(tensor)} (per-tensor scales)" if tensor else ""
    dest = out_path(engine, accelerator)
    dest.write_text(
        HEADER.format(
            name=name, accel=accel, src=source, release=release, kernel=kernel, rule=rule, dist=", ".join(DISTRIBUTIONS)
        )
        + out.to_csv(index=False, float_format="%.6g")
    )
    print(f"{dest.relative_to(ROOT)}: {len(out)} rows")
    return 0


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("core", type=Path, help="the aiconfigurator_core package folder (module docstring)")
    ap.add_argument("engine", nargs="?", default="trtllm", choices=sorted(ENGINES), help="whose fused-MoE op")
    ap.add_argument("accelerator", nargs="?", default="h200-sxm-141gb", choices=sorted(SYSTEMS), help="measured on")
    return ap.parse_args(argv)


if __name__ == "__main__":
    args = parse_args()
    sys.exit(main(args.core, args.engine, args.accelerator))
