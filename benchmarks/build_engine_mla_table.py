"""Write hardware/kernels/h200-sxm-141gb.sglang-mla-context.csv: SGLang's MLA attention module in prefill on an
H200, as aiconfigurator measured it (issue 33: an engine names its measured prefill attention module;
conf/engine/sglang.yaml).

    python benchmarks/build_engine_mla_table.py AICONFIGURATOR_CORE_DIR

AICONFIGURATOR_CORE_DIR: the installed `aiconfigurator_core` package of the aiconfigurator 0.12.0 wheel
(pip install aiconfigurator==0.12.0; NVIDIA, Apache-2.0, github.com/ai-dynamo/aiconfigurator). Its
systems/data/h200_sxm/mla/sglang/0.5.10/wideep_context_mla_perf.parquet (SGLang 0.5.10, the release its
SGLang fused-MoE table is from too: the nearest measured one to the 0.5.7-0.5.9 the shipped rows ran; 0.5.6.post2
is on file too and reads the same within noise) times one DeepSeek-V3 layer's `self_attn` module
(collector/sglang/collect_wideep_attn.py: DeepseekV2AttentionMLA of a 2-layer dummy-weight model, tp 1,
num_attention_heads overridden to 128/tp to stand for a TP rank) in an extend pass of batch_size fresh
prompts of isl tokens each (no prefix), eager (no CUDA graph), between two CUDA events, the mean of its timed runs. The
module is what sits between the fused q_a/kv_a projection (the collector hands it a random latent: that GEMM is
outside) and the TP all-reduce: q_a/kv_a RMSNorms, q_b_proj and kv_b_proj (fp8 128x128 block-scaled, the
checkpoint's quantization_config), RoPE, the KV cache write, the prefill attention kernel and o_proj. Kept: the
`flashinfer` backend (InferenceX's dsr1_fp8_h200.sh starts SGLang with --attention-backend flashinfer; its rows'
notes), every head count (128/tp: tp 1, 2, 4, 8) and every (batch_size, isl) measured. The table's kv_cache_dtype
`fp8` is a constant label in the collector (whose ServerArgs set no kv_cache_dtype); a fresh prompt's
attention reads the new keys and values, not the cache. Latency is in ms there, seconds here.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "hardware" / "kernels" / "h200-sxm-141gb.sglang-mla-context.csv"
SOURCE = "systems/data/h200_sxm/mla/sglang/0.5.10/wideep_context_mla_perf.parquet"
KERNEL = "flashinfer"
# aiconfigurator's model -> (the shipped model, its hidden, q_lora_rank, kv_lora_rank, qk_nope, qk_rope, v_head_dim)
SHAPES = {"deepseek-ai/DeepSeek-V3": ("deepseek-v3", 7168, 1536, 512, 128, 64, 128)}
HEADER = """# SGLang MLA attention module in prefill on NVIDIA H200 SXM (aiconfigurator measurements; benchmarks/build_engine_mla_table.py).
# Source: aiconfigurator 0.12.0 wheel (NVIDIA, Apache-2.0, github.com/ai-dynamo/aiconfigurator), aiconfigurator_core/{src},
#   SGLang 0.5.10, kernel_source {kernel} (--attention-backend), eager, tp 1 with num_attention_heads = heads.
# One layer's self_attn on one GPU, fresh prompts: q_a/kv_a norms, q_b_proj, kv_b_proj, RoPE, KV cache write, attention, o_proj
#   (the fused q_a/kv_a projection before it and the TP all-reduce after it are not in it).
# heads = attention heads on the GPU (128/tp); batch = prompts in the pass; isl = tokens of each; time_s = measured latency.
# dtype is the workload precision the row stands for (fp8: fp8_block, DeepSeek-V3's 128x128 block-scaled checkpoint).
"""


def main(core: Path) -> int:
    df = pd.read_parquet(core / SOURCE)
    df = df[(df.kernel_source == KERNEL) & (df.mla_dtype == "fp8_block") & (df.step == 0) & (df.tp_size == 1)]
    parts = []
    for name, (model, h, rq, rkv, nope, rope, v) in SHAPES.items():
        s = df[df.model == name]
        s = s.groupby(["num_heads", "batch_size", "isl"], as_index=False).latency.median()
        parts.append(
            pd.DataFrame(
                {
                    "model": model,
                    "dtype": "fp8",
                    "hidden": h,
                    "q_lora_rank": rq,
                    "kv_lora_rank": rkv,
                    "qk_nope_head_dim": nope,
                    "qk_rope_head_dim": rope,
                    "v_head_dim": v,
                    "heads": s.num_heads,
                    "batch": s.batch_size,
                    "isl": s.isl,
                    "time_s": s.latency * 1e-3,
                }
            )
        )
    out = pd.concat(parts).sort_values(["model", "heads", "batch", "isl"])
    OUT.write_text(HEADER.format(src=SOURCE, kernel=KERNEL) + out.to_csv(index=False, float_format="%.6g"))
    print(f"{OUT.relative_to(ROOT)}: {len(out)} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
