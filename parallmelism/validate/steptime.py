"""Case kind `step_time`: files in the format of `shared/reference/training_measured.csv`.

Each row predicts `step_time_s` (seconds per optimizer step) with the training cost model. Blank
values follow one rule each (stated here, applied to every row, never per case):
- micro_batch: the optional column `micro_batch_stated` (a micro-batch the authors' own scripts
  give where the reference file leaves it blank); else the fastest micro-batch that divides the
  row's per-replica batch (global_batch / dp), makes a valid layout and fits in memory, as `best`
  would choose it for that layout (ties: the smaller). Megatron has no default (it requires
  `--micro-batch-size`), and a published throughput table is the tuned run: at b = 1 the
  Megatron-Core 32B row's own DP traffic (fp32 reduce-scatter, bf16 all-gather on one NIC per GPU,
  hidden only under the first forward and last backward of four micro-batches) with its kernels
  already takes 0.97 s against the 0.892 s measured. The rule applies to the Megatron-Core rows,
  the only shipped rows without a stated micro-batch; it reads 4 for 1.7B-32B, 2 for 70B (4 fits
  but leaves its pipeline twice the bubble) and 119B (4 does not fit) and 1 for 177B-462B
  (tests/test_validate_steptime.py).
- vpp: the optional column `vpp_stated` (chunks the source states or implies where the reference
  file leaves vpp blank); else 1, unless the optional column `interleaved` is true (the source
  runs the interleaved schedule without giving chunks): the smallest number of chunks > 1 that
  divides the layers per stage and the micro-batches per pipeline round (the least interleaving
  Megatron accepts). Every value comes from a column; the free-text `notes` are never read.
- recompute: none (Megatron's default; the published rows that recompute say so).
- sequence_parallel: true when tp > 1 (Megatron-Core enables it with TP in its published
  configurations; the older rows state false explicitly), else false.
- flash_attention (optional column): blank means true on accelerators with an fp8 peak
  (Hopper and later, where fused attention is every framework's default), false before.
- overlap_dp_comm (optional): blank means true.
- overlap_tp_comm (optional): blank means false.
- overlap_pp_comm (optional): blank means true (asynchronous pipeline send/recv).
- moe_dispatcher (optional): blank means alltoall (Megatron's default); flex is DeepEP.
- moe_permute_fusion (optional): blank means true (fused permute kernels, as Megatron-Bridge recipes
  run); false: PyTorch's unfused index_select / index_add_ at their measured rate.
- dp_shard_size (optional): hybrid sharding's shard group in DP ranks; blank means none.
- cp_comm_type (optional): blank means p2p (Transformer Engine's ring); Llama 3's 128k row states
  all_gather (§3.3.2: "we use an all-gather based method where we first all-gather the key (K) and
  value (V) tensors ... the all-gather communication latency is exposed in the critical path").
- launch_blocking (optional): blank means false; BLOOM states true (its script sets
  CUDA_LAUNCH_BLOCKING=1, workload.launch_blocking).
- overlap_ep_comm (optional): blank means false; fsdp_reshard_after_forward (optional): blank
  means true (FSDP2's default).
- moe_imbalance (optional): blank means 1, balanced routing (Megatron-Bridge's MoE tables force the
  balance: "we force-balance the token distribution among experts"). A run that routed dropless
  without forcing the balance states the busiest EP rank's tokens over the mean it had: the
  Megatron-MoE-ModelZoo Qwen3 rows state 1.55, what that readme's own forced/dropless pairs give
  (benchmarks/moe_dropless_imbalance.py), not a value fitted on the rows.
- experts, top_k (optional): a MoE of the row's own architecture (validate/cases.py).
- scale_out_gbps (optional): the cluster's NIC bandwidth per GPU per direction (GB/s) where the
  source states a network other than the accelerator file's; blank keeps the file's. BLOOM's
  Jean Zay nodes have "four Omni-Path 100 Gbps links" each (BLOOM paper §3.4.1, 2211.05100):
  400 Gb/s per 8 GPUs = 6.25 GB/s per GPU, where a100-sxm-80gb describes Selene's 8 x HDR 200.
- stack (optional): the training software stack the row ran (conf/stack/NAME.yaml: its attention
  kernel and its overheads fitted for the row's accelerator); blank means megatron-te, the stack
  whose overheads were fitted on the rows that have no such column.
- attention_backend (optional): the fused attention kernel the row's framework ran (cudnn |
  flash2 | flash3), where it is not the stack's `kernels.attention` (cuDNN for megatron-te: what
  Transformer Engine runs on Hopper, the kernel of every NVIDIA recipe here) or the accelerator
  file's (FlashAttention-2 on the A100); blank keeps those (workload.attention_backend). The three Llama 3 rows state flash2. Meta's stack is PyTorch, not Transformer
  Engine (Llama 3 paper §3.3.2 sets TORCH_NCCL_AVOID_RECORD_STREAMS; §3.3.4 uses "PyTorch's
  built-in NCCL flight recorder"), and its attention takes document masks (§3.3.2: the all-gather
  CP was chosen because "it is easier and more flexible to support different types of attention
  masks ... such as the document mask"). While it pre-trained (the paper, July 2024, reports a
  54-day snapshot of the run), PyTorch's fused attention on H100 was FlashAttention-2 (SDPA's
  flash backend since PyTorch 2.2, and flash-attn's varlen kernels for document masks): SDPA's
  cuDNN backend became the H100 default only in PyTorch 2.5 (October 2024; its release blog: "up
  to 75% speed-up over FlashAttentionV2"), and FlashAttention-3 was released in July 2024. The
  paper does not name its kernel; this is the kernel its software had. Read with cuDNN's kernels
  the rows are -11.5, -9.0 and -29.7 % (the 128k row, whose attention is half its compute, the
  most; tests/test_validate_steptime.py).
- low_precision_gemms (optional): blank keeps the workload's default (where_faster: fp8 only
  where a GEMM gains from it, torchtitan's auto_filter_small_kn). The fp8 rows state all: NVIDIA's
  NeMo and Megatron-Bridge recipes run Transformer Engine's fp8_autocast over every Linear, and
  MaxText's fp8 quantizes every dense layer.
- grad_reduce_dtype (optional): blank means fp32 (Megatron's main gradients for bf16, and
  workload.grad_reduce_dtype's default). NVIDIA's DGX Cloud recipes state bf16: the NeMo 1 configs
  of tag v25.01 (llama3.1_8b/70b.yaml, gpt3_175b_hydra.yaml, nemotron4-340b-synth.yaml,
  grok1_314b.yaml) set `optim.grad_sync_dtype: bf16` for bf16 and fp8 runs alike, and v25.04's
  llama3.1/pretrain_llama31.py sets `grad_reduce_in_fp32 = False` for fp8 only (its bf16 runs keep
  bf16_mixed's fp32 default). Megatron-Bridge's performance configs of the 25.09 container
  (v0.1.0rc3/rc4, scripts/performance/configs/deepseek/deepseek_v3_llm_pretrain.yaml) set
  `mixed_precision.grad_reduce_in_fp32: false`: the mbridge2509 row states bf16. The fp16 rows of
  Narayanan et al. and Korthikanti et al. state fp16: Megatron-LM reduced fp16 gradients unless `--accumulate-allreduce-grads-in-fp32` was given
  (arguments.py of 2021-22 forces fp32 only for bf16; examples/sc21/CONFIG.sh does not give it, and
  `--DDP-impl torch` could not take it).
- optimizer_moments_dtype (optional): blank means fp32. Megatron-Bridge's DeepSeek-V3 recipe
  (src/megatron/bridge/recipes/deepseek/deepseek_v3.py, v0.1.0rc3/rc4 of the 25.09 container) sets
  `use_precision_aware_optimizer = True` with `exp_avg_dtype` and `exp_avg_sq_dtype` bf16, which
  the performance scripts keep: the mbridge2509 row states bf16.
- fp8_param_gather (optional): blank means false. NVIDIA's NeMo fp8 recipes gather fp8 parameters:
  the v25.01 configure.sh files pass `model.fp8_params=true` (Llama 3.1, Nemotron-4; GPT-3's hydra
  config sets `fp8_params: true`; Grok-1's sets false), and NeMo 2's `bf16_with_fp8_mixed()` sets
  `fp8_param_gather=True` (the v25.04 rows).
- fp8_scaling (optional): blank means tensorwise. torchtitan's June-2025 async-TP page ran torchao's
  float8 rowwise recipe (`--float8.recipe_name="rowwise"`): the tt2506-*-fp8-rowwise rows state rowwise.
- optimizer_offload, param_offload (optional): blank means false; true for runs that keep the
  optimizer (DeepSpeed offload_optimizer, Megatron --optimizer-cpu-offload) or also the parameters
  (offload_param) in host memory (cost/offload.py).
- expert_tp (optional): blank means expert TP = tp (no MoE parallel folding); Megatron-Bridge's
  Qwen3-235B-A22B recipes state 1 (`expert_tensor_parallel_size=1` with EP32 over TP2 x DP16).
- dp_grad_reduce (optional): blank means auto (workload.dp_grad_reduce: per micro-batch where the
  gradients are sharded, cost/states.py).
- dp_sharding, cp, ep, hardware, model: as for memory cases (`validate/cases.py`).
The shipped copy (`parallmelism/cases/training_measured.csv`) keeps every original column and
adds `flash_attention`, `overlap_dp_comm`, `overlap_tp_comm`, `overlap_pp_comm`, `vpp_stated` and
`micro_batch_stated` explicitly where the source states them: Megatron-Core rows "DP/TP/PP comm overlap on";
Korthikanti dp8 "not overlapped"; Korthikanti, Narayanan and BLOOM ran blocking pipeline
send/recv (Megatron-LM's 1F1B before overlap_p2p_comm, 2023; DeepSpeed's pipeline engine), so
overlap_pp_comm = false; Llama 3 (paper §3.3.2) ran interleaved 1F1B with asynchronous P2P and
"the first model chunk on the first stage has only the embedding" once one layer is taken from
the first and last stages: one layer per chunk, 128/16 = 8 chunks, so vpp_stated = 8; and
(§3.3.4) "we use FP32 gradient accumulation during backward computation over multiple
micro-batches and also reduce-scatter gradients in FP32 across data parallel workers in FSDP":
gradients accumulate locally and are reduced once per step, so dp_grad_reduce = per_step.
The Megatron-Core rows with a pipeline (mcore-h100-70b to 462b) take vpp_stated from what their
README states: "pipeline-parallel communication (enabled by default)" overlapped with compute.
Megatron-Core r0.8.0's arguments.py turns `overlap_p2p_comm` off unless the interleaved schedule is
used ("non-interleaved schedule does not support overlapping p2p communication"), so those runs
were interleaved. The chunk count is not given: vpp_stated is the least interleaving Megatron
accepts, the rule for "interleaved" above (2, 23, 2, 2 and 7 chunks for 42, 23, 16, 12 and 7
layers per stage; every row's per-replica batch is 4·pp sequences, so its micro-batch count at the
blank-micro-batch rule's b, 2·pp for 70B and 119B and 4·pp for the rest, divides by pp).
Narayanan et al.'s Table 1 rows take micro_batch_stated and overlap_dp_comm from the authors'
reproduction script (NVIDIA/Megatron-LM examples/sc21/run_table_1.sh): MBS 16, 16, 16, 8, 4, 2, 2,
1, 1, 1 from 1.7B to 1T, and `--DDP-impl torch` (PyTorch DDP: the all-reduce overlaps backward)
up to 18B, `local` (Megatron's DDP: one all-reduce after the last backward) from 39B on. Its
`--num-layers-per-virtual-pipeline-stage` (5, 5, 3, 1 for 76B-530B) gives the chunk counts the
"interleaved" rule already picks (3, 2, 2, 3). BLOOM (bloom-176b) states its cluster and its
script: scale_out_gbps 6.25 (above), launch_blocking true (bigscience-workshop/bigscience
train/tr11-176B-ml/tr11-176B-ml.slurm exports CUDA_LAUNCH_BLOCKING=1, "do not remove or the
training will hang") and overlap_dp_comm false (DeepSpeed's pipeline engine runs ReduceGrads after
the last micro-batch's backward).

Status: kernel times from the measured kernel tables (cost/kernels.py) plus the named overheads
fitted per accelerator by `python -m parallmelism.validate.calibrate` (cost/overheads.py). The
errors per case are in the committed validation table tests/golden/validation.csv (checked by
tests/test_golden.py; `python -m parallmelism validate` prints the summary); the rows over the
15 % bar are named, with reasons, in tests/test_validate_steptime.py (KNOWN_GAPS).
"""

from __future__ import annotations


from ..errors import UserError
from .cases import CaseKind, as_bool, as_int, data_parallel_size, evaluate_one, get, result_row, train_run_of

QUANTITY = "step_time_s"


def _interleave_chunks(layers: int, pp: int, m: int) -> int:
    per_stage = layers // pp if layers % pp == 0 else 0
    for v in range(2, per_stage + 1):
        if per_stage % v == 0 and m % pp == 0:
            return v
    return 1


def fill_blanks(row: dict, model) -> dict:
    """The documented rules for blank values (module docstring); returns a new row."""
    row = dict(row)
    tp, pp, dp = as_int(row, "tp", 1), as_int(row, "pp", 1), max(data_parallel_size(row), 1)
    if get(row, "vpp") is None and get(row, "vpp_stated") is not None:
        row["vpp"] = row["vpp_stated"]
    if get(row, "vpp") is None:
        v = 1
        if pp > 1 and as_bool(row, "interleaved", False):
            b = as_int(row, "micro_batch", 1)
            v = _interleave_chunks(model.layers, pp, as_int(row, "global_batch", dp * b) // (dp * b))
        row["vpp"] = str(v)
    if get(row, "recompute") is None:
        row["recompute"] = "none"
    if get(row, "sequence_parallel") is None:
        row["sequence_parallel"] = "true" if tp > 1 else "false"
    return row


# Workload fields a row may state in a column of the same name (module docstring); a blank cell
# keeps the spec's default, and a stated value is validated by the spec like any override.
STATED_WORKLOAD_COLUMNS = (
    "dp_grad_reduce",
    "moe_dispatcher",
    "moe_permute_fusion",
    "moe_imbalance",
    "overlap_ep_comm",
    "fsdp_reshard_after_forward",
    "dp_shard_size",
    "cp_comm_type",
    "launch_blocking",
    "grad_reduce_dtype",
    "fp8_param_gather",
    "fp8_scaling",
    "optimizer_moments_dtype",
    "low_precision_gemms",
    "expert_tp",
    "attention_backend",
    "activation_offload_layers",
    "optimizer_offload",
    "param_offload",
    "compile",
)


def _workload_extras(row, hw) -> dict:
    # A blank cell takes the default: as_bool returns it for missing values.
    flash = as_bool(row, "flash_attention", "fp8" in hw.peak_tflops)
    dp_overlap = as_bool(row, "overlap_dp_comm", True)
    tp_overlap = as_bool(row, "overlap_tp_comm", False)
    pp_overlap = as_bool(row, "overlap_pp_comm", True)
    return {
        "flash_attention": flash,
        "overlap_dp_comm": dp_overlap,
        "overlap_tp_comm": tp_overlap,
        "overlap_pp_comm": pp_overlap,
        **{c: get(row, c) for c in STATED_WORKLOAD_COLUMNS if get(row, c) is not None},
    }


def step_time_run_of(row: dict, ctx):
    """RunConfig of a training_measured row after the blank rules (the micro-batch's first: the
    stated one, else the fastest that fits; then fill_blanks)."""
    if get(row, "micro_batch") is None:
        stated = get(row, "micro_batch_stated")
        row = {**row, "micro_batch": stated if stated is not None else str(fastest_micro_batch(row, ctx))}
    return _run_of(row, ctx)


def _divisors(n: int) -> list[int]:
    """Divisors of n in increasing order (trial division up to sqrt(n))."""
    small = [d for d in range(1, int(n**0.5) + 1) if n % d == 0]
    return small + [n // d for d in reversed(small) if d * d != n]


def micro_batch_candidates(row: dict) -> list[int]:
    """Micro-batches Megatron accepts for the row, in increasing order: divisors of its per-replica
    batch, global_batch over the DP size its grid takes (cases.data_parallel_size); [1] where a
    size is not positive or DP does not divide the batch: the row's own checks then name it."""
    dp = data_parallel_size(row)
    batch = as_int(row, "global_batch", dp)
    if dp < 1 or batch < 1 or batch % dp:
        return [1]
    return _divisors(batch // dp)


def fastest_micro_batch(row: dict, ctx) -> int:
    """The blank-micro-batch rule (module docstring): one run whose grid holds every candidate, as
    `best` searches micro-batches; the engine drops the ones that make no valid layout, and of the
    rows that fit (`fits`) the fastest wins, the smaller b on a tie. 1 where none fits or none is
    valid (the row is then evaluated at b = 1, and its own error or its memory shows)."""
    from ..search import evaluate_table

    run = _run_of({**row, "micro_batch": "1"}, ctx)
    grid = run.grid.model_copy(update={"micro_batch": micro_batch_candidates(row)})
    df, _ = evaluate_table(run.model_copy(update={"grid": grid}))
    fitting = df[df["fits"].astype(bool)] if len(df) else df
    if len(fitting) == 0:
        return 1
    return int(fitting.sort_values(["time_step_s", "micro_batch"]).iloc[0]["micro_batch"])


def _run_of(row: dict, ctx):
    from .cases import model_of

    from pydantic import ValidationError

    from ..errors import format_validation_error
    from ..specs import TrainWorkload

    model = model_of(row, ctx[0])
    run = train_run_of(fill_blanks(row, model), ctx[0], ctx[1], ctx[2], stack_of=ctx[4])
    try:
        wl = TrainWorkload.model_validate({**run.workload.model_dump(), **_workload_extras(row, run.hardware)})
        hw = _row_hardware(row, run.hardware)
    except ValidationError as exc:
        raise UserError(f"case {row.get('case')!r}: " + format_validation_error(exc)) from None
    return run.model_copy(update={"workload": wl, "hardware": hw})


def _row_hardware(row, hw):
    """The accelerator as the row's run had it: its `scale_out_gbps` (the cluster's NIC bandwidth
    per GPU per direction, GB/s, where the source states a network other than the accelerator
    file's); a blank cell keeps the file's value. (A row's `attention_backend` is the workload's,
    STATED_WORKLOAD_COLUMNS: it overrides the stack's and the accelerator's.)"""
    gbps = get(row, "scale_out_gbps")
    if gbps is None:
        return hw
    from ..specs.accelerator import AcceleratorSpec

    data = hw.model_dump()
    data["scale_out"] = {**(data.get("scale_out") or {}), "bandwidth_gbps": gbps}
    return AcceleratorSpec.model_validate(data)


def _step_time_rows(df, ctx):
    rows = []
    for row in df.to_dict("records"):
        run = step_time_run_of(row, ctx)
        pred = float(evaluate_one(run)["time_step_s"])
        rows.append(result_row(row, QUANTITY, "s", row["step_time_s"], pred))
    return rows


KIND = CaseKind(["case", "step_time_s", "tp", "pp", "dp"], _step_time_rows, ["step_time_s"])
