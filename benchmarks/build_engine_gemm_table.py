"""Write hardware/kernels/h200-sxm-141gb.trtllm-gemm.csv: TensorRT-LLM's fp8 block-scaled GEMM on an H200, as
aiconfigurator measured it (issue 33: an engine names its measured GEMMs; conf/engine/trtllm.yaml gemm_tables).

    python benchmarks/build_engine_gemm_table.py AICONFIGURATOR_CORE_DIR

AICONFIGURATOR_CORE_DIR: the installed `aiconfigurator_core` package of the aiconfigurator 0.12.0 wheel
(pip install aiconfigurator==0.12.0; NVIDIA, Apache-2.0, github.com/ai-dynamo/aiconfigurator). Its
systems/data/h200_sxm/gemm/trtllm/1.3.0rc20/gemm_perf.parquet times TensorRT-LLM 1.3.0rc20's linear layer
(`torch_flow`: the activation quantization and the GEMM) on one GPU for (m tokens, n output, k input). Kept,
one rule each: gemm_dtype `fp8_block` (128x128 block-scaled weights, 1x128 activation scales: the
DeepSeek-V3/R1 checkpoint's scheme, its config.json quantization_config weight_block_size [128, 128]; the
model's `fp8_block_size`), and n, k up to 16384 (the grid's 51200 and 65536 are no layer of a shipped model
on 8 GPUs). Every measured m is kept (1 to 32768, with the tile edges m and m+1). Latency is in ms there,
seconds here.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "hardware" / "kernels" / "h200-sxm-141gb.trtllm-gemm.csv"
SOURCE = "systems/data/h200_sxm/gemm/trtllm/1.3.0rc20/gemm_perf.parquet"
GEMM_DTYPE = "fp8_block"
BLOCK = 128  # the block edge of fp8_block's weight scales (the model's fp8_block_size it stands for)
MAX_NK = 16384
HEADER = """# TensorRT-LLM fp8 block-scaled GEMM on NVIDIA H200 SXM (aiconfigurator measurements; benchmarks/build_engine_gemm_table.py).
# Source: aiconfigurator 0.12.0 wheel (NVIDIA, Apache-2.0, github.com/ai-dynamo/aiconfigurator), aiconfigurator_core/{src},
#   TensorRT-LLM 1.3.0rc20, kernel_source torch_flow, gemm_dtype {dtype}.
# One linear layer on one GPU: activation quantization and the GEMM, m tokens x k input -> n output.
# dtype fp8, fp8_block = {block}: 128x128 block-scaled weights (DeepSeek-V3/R1's checkpoint); time_s = measured latency.
"""


def main(core: Path) -> int:
    df = pd.read_parquet(core / SOURCE)
    s = df[(df.gemm_dtype == GEMM_DTYPE) & (df.n <= MAX_NK) & (df.k <= MAX_NK)]
    s = s.groupby(["m", "n", "k"], as_index=False).latency.median()
    out = pd.DataFrame(
        {"dtype": "fp8", "fp8_block": BLOCK, "m": s.m, "n": s.n, "k": s.k, "time_s": s.latency * 1e-3}
    ).sort_values(["n", "k", "m"])
    OUT.write_text(
        HEADER.format(src=SOURCE, dtype=GEMM_DTYPE, block=BLOCK) + out.to_csv(index=False, float_format="%.5g")
    )
    print(f"{OUT.relative_to(ROOT)}: {len(out)} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
