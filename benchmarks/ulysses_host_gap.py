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

Then three cross-checks (session 18):
  1. Which reading of 'Tokens/s' is physically possible: the step under the job-total and the per-GPU
     readings against the GPU work's floor at the bf16 peak (`gpu_floor_s`: FlashAttention-2's causal
     attention, forward + recomputed forward + 2.5x backward, plus 8 N_nonembed + 6 V h FLOPs a token).
     A step is 8 sequences: DeepSpeed's UlyssesSPDataLoaderAdapter (deepspeed/runtime/sequence_parallel/
     ulysses_sp.py) gathers one sample from each SP rank and serves them one at a time to all SP ranks,
     "When SP number of iterations is completed it's an equivalent of performing a single iteration with
     normal DP", and the Trainer counts each served sample as a micro-step of grad accumulation 8.
  2. The blog's 'Memory Reduction' table (peak GPU memory: 1 GPU 8K 76.4 GB; SP4 8K/32K/64K/96K 23.4 / 35.0 /
     50.5 / 66.0 GB) against the model's memory with the optimizer states offloaded (as the rows state) and
     on the GPU. The 1-GPU peak is what Adam's fp32 states on the GPU give (16 B a parameter, 64 GB for 4.0B);
     offloaded, the GPU would hold well under half of it. If the runs kept their optimizer on the GPU, no
     offload traffic explains their residuals.
  3. One-parameter host mechanisms, each fitted on the SP4 8k row alone and scored on the others (32k, 64k and
     the 1-GPU baseline; the blog is the only source, so this is leave-rows-out, not leave-one-source-out):
     a constant per step (any per-step or per-micro-batch host stall: grad accumulation is 8 in every row),
     a host floor the GPU work hides under (step = max(predicted, H)), and blocking copies of the offload
     bytes above at one fitted rate. The 64k row bounds all of them: its kernels alone are above its step.

Sources checked for the mechanisms the brief named (DeepSpeed v0.18.7, the release before the blog):
  - stage3.py partition_grads accumulates in `gradient_accumulation_dtype` = engine get_data_types'
    grad_accum_dtype, the model dtype (bf16) unless the config sets data_types.grad_accum_dtype, and adds on
    the GPU ("if dst is CPU, copy first to src device, do the addition there, then move back ... adding
    directly to cpu is very slow"): no fp32 accumulation at the CPU's add rate; fp32 only at the boundary.
  - offload_config.py DeepSpeedZeroOffloadOptimizerConfig.pin_memory: bool = False (pageable copies).
  - accelerate 1.13 Accelerator.prepare_deepspeed swaps a torch optimizer for DeepSpeedCPUAdam when
    offload_optimizer is set (utils/deepspeed.py map_pytorch_optim_to_deepspeed); torch.distributed.run
    (config_from_args) sets OMP_NUM_THREADS=1 for nproc_per_node > 1 when unset, and accelerate's DeepSpeed
    launcher on one node goes through it: the SP4 ranks' CPU Adam ran on one OpenMP thread each unless the
    authors set OMP_NUM_THREADS (DeepSpeed's ZeRO-Offload tutorial, "CPU Adam perf tuning": bind cores and set
    OMP_NUM_THREADS per rank; DeepSpeed PR #7474: Qwen2.5-3B on 2 A100s 3084 -> 2383 ms a step with it). One
    thread bounds it anyway: torch's fused CPU AdamW (the same vectorised loop) measured 0.65 G parameters/s on
    one thread of an AMD EPYC here (2026-11-27; foreach 0.10 G/s), 1.5 s for a rank's 1.0B parameters.
  - Observed offload steps elsewhere: DeepSpeed issue #6834 (Qwen-72B on 32 A100s, ZeRO-3 offloading optimizer
    and parameters, 2.25B parameters a rank): the maintainer reads the optimizer step as ~10 s against ~0.2 s
    without offload, i.e. ~4.4 s per 1B parameters a rank: 4.4 s for an SP4 rank here (the 8k residual is 23.6 s),
    18 s for the 1-GPU run's 4.0B (its residual is 16.2 s, but the memory check says it did not offload).
  - accelerate data_loader.py prepare_data_loader: dispatch_batches defaults to True for an IterableDataset
    (the blog streams Gutenberg), so one process reads and tokenizes for all ranks, as the 1-GPU run does.
    That fits a per-step cost that does not divide over GPUs, but no rate for it is published.
"""

from __future__ import annotations

import sys
from importlib import resources
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

PREFIX = "hfulysses2603-"
BASELINE_TOKENS_PER_S = 2436.0  # the blog's 'Baseline (1 GPU) | 8K' row, not a case row (ZeRO-3 on one GPU)
BASELINE_LABEL = "blog baseline 1 GPU 8k (no case row)"
# The blog's 'Memory Reduction' table, 'Peak Memory' (GB as published), by (GPUs, sequence length)
BLOG_PEAK_MEMORY_GB = {(1, 8192): 76.4, (4, 8192): 23.4, (4, 32768): 35.0, (4, 65536): 50.5, (4, 98304): 66.0}
FA2_BACKWARD_OVER_FORWARD = 2.5  # FlashAttention-2's backward: 5 s x s matmuls against the forward's 2
ATTENTION_PASSES = 1.0 + 1.0 + FA2_BACKWARD_OVER_FORWARD  # forward, recomputed forward (full AC), backward
LINEAR_FLOPS_PER_PARAM_TOKEN = 8.0  # 2 forward + 2 recomputed forward + 4 backward
LM_HEAD_FLOPS_PER_PARAM_TOKEN = 6.0  # outside the checkpointed layers: forward and backward only
GRAD_ACCUM_BYTES = 2.0  # bf16: DeepSpeed's grad_accum_dtype defaults to the model dtype
BOUNDARY_FP32_BYTES = 4.0  # the optimizer's fp32 gradient, device -> host once per step
UPLOAD_BYTES = 2.0  # the updated partition into the GPU's bf16 partition (a blocking copy_ casts on the CPU)


def offload_bytes_per_param(micro_steps: int) -> float:
    """Bytes over the host link per parameter of a rank's partition per step (module docstring)."""
    return GRAD_ACCUM_BYTES + 2.0 * GRAD_ACCUM_BYTES * (micro_steps - 1) + BOUNDARY_FP32_BYTES + UPLOAD_BYTES


def case_rows() -> list[dict]:
    """The shipped hfulysses2603 rows of training_stacks.csv, as validate reads them."""
    import pandas as pd

    path = resources.files("parallmelism") / "cases" / "training_stacks.csv"
    df = pd.read_csv(str(path), dtype=str, keep_default_na=False).replace({"": None})
    return [r for r in df.to_dict("records") if r["case"].startswith(PREFIX)]


def rows(ctx):
    """(label, gpus, measured s, run) of the SP4 rows and the 1-GPU baseline built from the 8k row."""
    from parallmelism.validate.steptime import step_time_run_of

    picked = case_rows()
    for r in picked:
        yield r["case"], int(r["gpus"]), float(r["step_time_s"]), step_time_run_of(r, ctx)
    base = next(r for r in picked if r["case"].endswith("-8k"))
    measured = float(base["global_batch"]) * float(base["seq_len"]) / BASELINE_TOKENS_PER_S
    yield BASELINE_LABEL, 1, measured, step_time_run_of(one_gpu(base), ctx)


def one_gpu(row: dict) -> dict:
    """The blog's 1-GPU baseline as a case row: ZeRO-3 over one rank, nothing to shard."""
    return {**row, "gpus": "1", "cp": "1", "dp_sharding": None}


def gpu_floor_s(model, seq: int, sequences: int, ranks: int, peak_tflops: float) -> float:
    """Seconds of one step's GPU work per rank at the bf16 peak: causal attention 2 s^2 heads head_dim a layer
    and sequence forward (QK^T and PV, half of each under the causal mask) x ATTENTION_PASSES, plus
    LINEAR_FLOPS_PER_PARAM_TOKEN x the non-embedding parameters and LM_HEAD_FLOPS_PER_PARAM_TOKEN x V h a
    token; Ulysses splits the heads and the tokens over the ranks."""
    from parallmelism.cost.params import embedding_params, total_params

    attention = ATTENTION_PASSES * model.layers * 2.0 * seq**2 * model.heads * model.head_dim
    head = model.vocab * model.hidden
    body = total_params(model) - embedding_params(model)
    linear = (LINEAR_FLOPS_PER_PARAM_TOKEN * body + LM_HEAD_FLOPS_PER_PARAM_TOKEN * head) * seq
    return sequences * (attention + linear) / ranks / (peak_tflops * 1e12)


def main(argv=None) -> int:
    from parallmelism.validate.runner import _context

    ctx = _context([], None)
    evaluated = residual_table(ctx)
    reading_check(evaluated)
    memory_check(ctx)
    mechanisms(evaluated)
    return 0


def residual_table(ctx) -> list[dict]:
    """The first table (module docstring); returns each row's measured, predicted and offload bytes."""
    from parallmelism.cost.flops import optimizer_bytes_per_param
    from parallmelism.validate.cases import evaluate_one

    print(
        "row,gpus,measured_s,predicted_s,kernels_s,residual_s,"
        "copies_GB_per_rank,copies_s_at_link,cpu_adam_s_at_host_memory,needed_node_copy_GBps"
    )
    hw, evaluated = None, []
    for label, gpus, measured, run in rows(ctx):
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
        evaluated.append(
            {"label": label, "gpus": gpus, "measured": measured, "pred": pred, "kernels": kernels, "copies": copies}
        )
        evaluated[-1].update(run=run, sequences=int(out["num_micro_batches"]))
    if hw is not None:
        print(
            f"# host link {hw.host_link_gbps} GB/s per GPU per direction ({hw.host_link_source}); host memory "
            f"{hw.host_memory_gbps} GB/s per GPU ({hw.host_memory_source}). needed_node_copy_GBps: the node-wide "
            "rate at which the offload copies alone would fill the residual."
        )
    return evaluated


def reading_check(evaluated: list[dict]) -> None:
    """Check 1: the step under each reading of 'Tokens/s' against the GPU work's floor at the bf16 peak."""
    print("\nrow,step_s_if_job_total,step_s_if_per_gpu,gpu_floor_s_at_bf16_peak,model_kernels_s")
    for e in evaluated:
        run = e["run"]
        seq = int(run.workload.seq_len)
        floor = gpu_floor_s(run.model, seq, e["sequences"], e["gpus"], run.hardware.peak_tflops["bf16"])
        per_gpu = e["measured"] / e["gpus"]
        flag = " (below the floor: impossible)" if per_gpu < floor else ""
        print(f"{e['label']},{e['measured']:.2f},{per_gpu:.2f}{flag},{floor:.2f},{e['kernels']:.2f}")


def memory_check(ctx) -> None:
    """Check 2: the blog's peak memory against the model's, optimizer offloaded (as stated) and not."""
    from parallmelism.validate.cases import evaluate_one
    from parallmelism.validate.steptime import step_time_run_of

    base = next(r for r in case_rows() if r["case"].endswith("-8k"))
    print("\ngpus,seq,blog_peak_GB,model_GiB_offloaded,model_GiB_on_gpu")
    for (gpus, seq), blog in BLOG_PEAK_MEMORY_GB.items():
        row = {**(one_gpu(base) if gpus == 1 else base), "seq_len": str(seq)}
        gib = [
            float(evaluate_one(step_time_run_of({**row, "optimizer_offload": off}, ctx))["mem_total_gib"])
            for off in ("true", "false")
        ]
        print(f"{gpus},{seq},{blog},{gib[0]:.1f},{gib[1]:.1f}")


def mechanisms(evaluated: list[dict]) -> None:
    """Check 3: one-parameter host mechanisms fitted on the SP4 8k row, error (%) on every row."""
    fit = next(e for e in evaluated if e["label"].endswith("-sp4-8k"))
    constant_s = fit["measured"] - fit["pred"]
    floor_s = fit["measured"]
    copy_gbps = fit["copies"] / constant_s / 1e9
    print(
        f"\nrow,measured_s,kernels_over_measured_pct,constant_{constant_s:.1f}s_pct,"
        f"host_floor_{floor_s:.1f}s_pct,blocking_copies_{copy_gbps:.2f}GBps_pct"
    )
    for e in evaluated:
        m, p = e["measured"], e["pred"]
        preds = (p + constant_s, max(p, floor_s), p + e["copies"] / (copy_gbps * 1e9))
        errs = ",".join(f"{100 * (x / m - 1):+.1f}" for x in preds)
        print(f"{e['label']},{m:.2f},{100 * (e['kernels'] / m - 1):+.1f},{errs}")
    print(
        "# fitted on the SP4 8k row (0 there by construction). Copies at one node-wide rate give the constant "
        "column (the node moves the same bytes in every row). The 64k row's kernels alone are above its step, so "
        "no host term (>= 0) brings it under +9.9 %; the 1-GPU row has no case row."
    )


if __name__ == "__main__":
    sys.exit(main())
