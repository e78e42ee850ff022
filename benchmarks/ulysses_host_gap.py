"""Where the DeepSpeed Ulysses rows' gap sits (issue 32): the HF blog's SP4 rows (training_stacks.csv,
`hfulysses2603-*`) and its 1-GPU baseline against the model's kernels, and what ZeRO-3's optimizer offload
moves between GPU and host as DeepSpeed runs it. A diagnosis, not a fit: nothing here feeds the cost model.

    python benchmarks/ulysses_host_gap.py

The source (Hugging Face blog 'Ulysses Sequence Parallelism: Training with Million-Token Contexts',
2026-03-09, 'Benchmarks'): Qwen3-4B, TRL SFTTrainer on Gutenberg English (streaming), DeepSpeed ZeRO-3 with
CPU optimizer offload, gradient checkpointing, FlashAttention-2; grad accumulation 8, global batch 8; Tokens/s
2,436 (1 GPU, 8k), 2,315 / 7,872 / 13,396 (SP4 on 4 GPUs at 8k / 32k / 64k). The step is 8 sequences x seq
over Tokens/s read as the job's total. The blog does not say how it counted; TRL's SFTTrainer counts
`num_tokens` gathered over every rank (trl 0.28 sft_trainer.py compute_loss: gather_for_metrics of each rank's
position_ids length, under SP its 1/4 of the sequence), and a per-GPU reading (1/4 of the step) would put
the 64k step at 9.8 s, under the 11.5 s its FlashAttention-2 kernels alone take at the bf16 peak (36 layers
x 8 sequences x (forward + recomputed forward + 2.5x backward) of 8.8 TFLOP a layer on 8 of 32 heads, over
989 TFLOP/s).

What ZeRO-3 with `offload_optimizer: {device: cpu}` moves per optimizer step (DeepSpeed v0.18.x,
deepspeed/runtime/zero/stage3.py):
  - the gradient-accumulation buffer `grad_partitions_flat_buffer` lives on the offload device (`self.device`
    is cpu), in `gradient_accumulation_dtype` = the engine's grad_accum_dtype, which defaults to the model
    dtype (engine.py get_data_types: bf16 here, 2 B), pinned only with `offload_optimizer.pin_memory`
    (offload_config.py: default False; accelerate's DeepSpeedPlugin writes none);
  - `partition_grads`, micro-step 0: the rank's gradient partition copied device -> host (2 B per parameter);
    later micro-steps: "if dst is CPU, copy first to src device, do the addition there, then move back"
    (host -> device 2 B, add, device -> host 2 B);
  - at the accumulation boundary the partition goes to the optimizer's fp32 gradient (device -> host 4 B);
    after DeepSpeedCPUAdam the fp32 partition is copied into the GPU's bf16 partition (host -> device, 2 B: a
    blocking copy_ converts on the CPU, aten/src/ATen/native/cuda/Copy.cu copy_kernel_cuda).
  - all of it before DeepSpeed v0.19.5 as a blocking copy to pageable memory: "a synchronous, low-bandwidth
    (staged pageable) path with no overlap against backward compute" (PR #8207, 2026-08, which made the
    copy non_blocking and pin_memory true by default; the blog ran deepspeed>=0.18.1 in 2026-03).
Per rank that is P/W x (2 + 4 (m - 1) + 4 + 2) bytes for m micro-steps: the node moves P x (...) whatever W,
which is what would make 1 GPU take as long as 4 if the node's host side were the bound. The CPU step reads
and writes cost.flops.optimizer_bytes_per_param per parameter, also P x that per node.

Printed per row: measured, predicted, the model's kernels, the residual (measured - predicted); then the
node's bytes and the rate (GB/s) the residual would need if it were those copies and the CPU step, against
the accelerator file's host link (PCIe Gen5 x16 per GPU) and host memory rates.
"""

from __future__ import annotations

import sys
from importlib import resources
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

PREFIX = "hfulysses2603-"
BASELINE_TOKENS_PER_S = 2436.0  # the blog's 'Baseline (1 GPU) | 8K' row, not a case row (ZeRO-3 on one GPU)
GRAD_ACCUM_BYTES = 2.0  # bf16: DeepSpeed's grad_accum_dtype defaults to the model dtype
BOUNDARY_FP32_BYTES = 4.0  # the optimizer's fp32 gradient, device -> host once per step
UPLOAD_BYTES = 2.0  # the updated partition into the GPU's bf16 partition (a blocking copy_ casts on the CPU)


def offload_bytes_per_param(micro_steps: int) -> float:
    """Bytes over the host link per parameter of a rank's partition per step (module docstring)."""
    return GRAD_ACCUM_BYTES + 2.0 * GRAD_ACCUM_BYTES * (micro_steps - 1) + BOUNDARY_FP32_BYTES + UPLOAD_BYTES


def rows():
    """(label, gpus, measured s, run) of the SP4 rows and the 1-GPU baseline built from the 8k row."""
    import pandas as pd

    from parallmelism.validate.runner import _context
    from parallmelism.validate.steptime import step_time_run_of

    ctx = _context([], None)
    path = resources.files("parallmelism") / "cases" / "training_stacks.csv"
    df = pd.read_csv(str(path), dtype=str, keep_default_na=False).replace({"": None})
    picked = [r for r in df.to_dict("records") if r["case"].startswith(PREFIX)]
    for r in picked:
        yield r["case"], int(r["gpus"]), float(r["step_time_s"]), step_time_run_of(r, ctx)
    base = next(r for r in picked if r["case"].endswith("-8k"))
    one = {**base, "gpus": "1", "cp": "1", "dp_sharding": None}  # ZeRO-3 over one rank: nothing to shard
    measured = float(base["global_batch"]) * float(base["seq_len"]) / BASELINE_TOKENS_PER_S
    yield "blog baseline 1 GPU 8k (no case row)", 1, measured, step_time_run_of(one, ctx)


def main(argv=None) -> int:
    from parallmelism.cost.flops import optimizer_bytes_per_param
    from parallmelism.validate.cases import evaluate_one

    print(
        "row,gpus,measured_s,predicted_s,kernels_s,residual_s,"
        "copies_GB_per_rank,copies_s_at_link,cpu_adam_s_at_host_memory,needed_node_copy_GBps"
    )
    hw = None
    for label, gpus, measured, run in rows():
        out = evaluate_one(run)
        hw = run.hardware
        pred, kernels = float(out["time_step_s"]), float(out["time_compute_s"])
        rank_params = float(out["params_total"]) / gpus  # ZeRO-3 partitions over every rank (SP x DP)
        copies = rank_params * offload_bytes_per_param(int(out["num_micro_batches"]))
        adam = rank_params * optimizer_bytes_per_param() / (hw.host_memory_gbps * 1e9)
        residual = measured - pred
        needed = gpus * copies / residual / 1e9 if residual > 0 else float("nan")
        print(
            f"{label},{gpus},{measured:.2f},{pred:.2f},{kernels:.2f},{residual:+.2f},"
            f"{copies / 1e9:.1f},{copies / (hw.host_link_gbps * 1e9):.2f},{adam:.2f},{needed:.1f}"
        )
    if hw is not None:
        print(
            f"# host link {hw.host_link_gbps} GB/s per GPU per direction ({hw.host_link_source}); host memory "
            f"{hw.host_memory_gbps} GB/s per GPU ({hw.host_memory_source}). needed_node_copy_GBps: the node-wide "
            "rate at which the offload copies alone would fill the residual."
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
