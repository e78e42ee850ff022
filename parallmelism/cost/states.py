"""Model states per GPU: weights, gradients, optimizer (mixed precision + Adam), per DP sharding.

Bytes per parameter (`formulas.md`; Rajbhandari et al. 2020, ZeRO), n = sharding group size:
  NO_OP                       weights 2, grads 4,   optimizer 12        (18 total; DDP)
  OPTIMIZER_STATES            weights 2, grads 4,   optimizer 12/n      (ZeRO-1, dist. optimizer)
  OPTIMIZER_STATES_AND_GRADS  weights 2, grads 4/n, optimizer 12/n      (ZeRO-2)
  FULLY_SHARD                 weights 4/n, grads 4/n, optimizer 8/n     (ZeRO-3/FSDP: the fp32
                              shard is the parameter; bf16 units are gathered when used)
Optimizer = fp32 master copy (4) + Adam m and v (8; 4 with workload.optimizer_moments_dtype=bf16:
Megatron-Core's precision-aware optimizer, `--exp-avg-dtype bf16 --exp-avg-sq-dtype bf16`, which
DeepSeek-V3 trained with, report §3.3.3, and Megatron-Bridge's DeepSeek-V3 recipe sets; under
FULLY_SHARD the moments alone, 8/n or 4/n); grads are fp32 main grads (Megatron), or bf16
(2 bytes) with workload.grad_reduce_dtype=bf16 (Megatron-Core `grad_reduce_in_fp32=False`, as
NVIDIA's performance recipes set it: the gradient buffer and its reduction are bf16), or fp16
(2 bytes: Megatron's fp16 runs without `--accumulate-allreduce-grads-in-fp32`, its default before
bf16, and ZeRO's 16 B/param mixed-precision Adam).
FP8 (FP4) training keeps the bf16 weight and adds Transformer Engine's low-precision copies: a
row-wise and a column-wise (transposed, for dgrad/wgrad) copy, 2 bytes per parameter (fp4: 1).
With fp8 parameters (workload.fp8_param_gather) those copies are the weights (no bf16 copy) and
the parameter all-gathers move 1 byte per parameter.
Dense parameters shard over the DP×CP group (Megatron's distributed optimizer); expert
parameters over the expert-data-parallel group dp·cp/ep, or tp·dp·cp/(etp·ep) under MoE parallel
folding (workload.expert_tp; Megatron-Core `expert_data_parallel_size` = world/(etp·ep·pp)).

Gradient accumulation over m micro-batches (`reduces_every_micro_batch`): a rank that keeps only
its 1/n gradient shard (ZeRO-2/3; Rajbhandari et al. 2020 §5.2) must reduce-scatter each
micro-batch's gradients as they are produced, m reductions per step; a rank with the full
gradient buffer accumulates locally and reduces once (DDP no_sync, Megatron DDP). Keeping sharded
gradients but reducing once per step (workload.dp_grad_reduce=per_step: FSDP2
set_requires_gradient_sync(False)) needs the full buffer for the accumulation: grads unsharded.
"""

from __future__ import annotations

import numpy as np

from ..specs import BYTES_PER_ELEMENT, DPSharding
from .shapes import dense_dp_size, expert_dp_size

NO_OP, OS, OSG, FS = (
    int(c)
    for c in (
        DPSharding.NO_OP,
        DPSharding.OPTIMIZER_STATES,
        DPSharding.OPTIMIZER_STATES_AND_GRADS,
        DPSharding.FULLY_SHARD,
    )
)


LOW_PRECISION_COPY_BYTES = {"fp8": 2.0, "fp4": 1.0}  # row-wise + column-wise copies per parameter
GRAD_BYTES = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0}
MOMENT_BYTES = {"fp32": 8.0, "bf16": 4.0}  # Adam m and v per parameter, by workload.optimizer_moments_dtype
# Mixed-precision Adam (Micikevicius et al. 2018; Rajbhandari et al. 2020, ZeRO §3.1: 2 + 2 + 12
# bytes per parameter): 16-bit working weights, an fp32 master copy the optimizer updates.
WORKING_WEIGHT_BYTES = float(BYTES_PER_ELEMENT["bf16"])  # bf16 weights the GEMMs read
MASTER_WEIGHT_BYTES = float(BYTES_PER_ELEMENT["fp32"])  # fp32 master copy (FULLY_SHARD: the parameter)
FP8_PARAM_BYTES = float(BYTES_PER_ELEMENT["fp8"])  # an fp8 parameter all-gather (workload.fp8_param_gather)
# FULLY_SHARD keeps the unit in use and the next one gathered, its all-gather in flight (PyTorch
# FSDP2's implicit prefetch of one module, FSDP1's default BackwardPrefetch.BACKWARD_PRE).
FSDP_PREFETCH_UNITS = 2


def low_precision_copy_bytes(precision: str) -> float:
    """Bytes per parameter of the low-precision weight copies a workload precision keeps."""
    return LOW_PRECISION_COPY_BYTES.get(precision, 0.0)


def working_weight_bytes(wl) -> float:
    """Bytes per parameter of the weights a rank computes with where it keeps them whole (all but
    FULLY_SHARD): bf16 (2) plus the low-precision copies; with fp8 parameters
    (workload.fp8_param_gather) the fp8 row-wise and transposed copies are the weights, 2 B."""
    lowp = low_precision_copy_bytes(wl.precision)
    return lowp if wl.fp8_param_gather else WORKING_WEIGHT_BYTES + lowp


def optimizer_weight_bytes(wl) -> float:
    """Bytes per parameter of the working weights the optimizer step writes: bf16 (2), or with fp8
    parameters (workload.fp8_param_gather) their row-wise and transposed fp8 copies (2). The fp8
    copies of bf16 weights are cast by the GEMMs that run in fp8 (Transformer Engine;
    `roofline.weight_cast_bytes`, placed by `steptime.weight_casts_per_micro_batch`), not by the
    optimizer."""
    return low_precision_copy_bytes(wl.precision) if wl.fp8_param_gather else WORKING_WEIGHT_BYTES


def param_gather_bytes(wl) -> float:
    """Bytes per parameter of a parameter all-gather (distributed optimizer, FSDP): bf16, or fp8
    with workload.fp8_param_gather."""
    return FP8_PARAM_BYTES if wl.fp8_param_gather else WORKING_WEIGHT_BYTES


def reduces_every_micro_batch(sharding, policy: str = "auto"):
    """True where the DP gradient reduction runs once per micro-batch (module docstring):
    policy per_micro_batch / per_step as stated, auto where the gradients are sharded."""
    sharding = np.asarray(sharding)
    if policy == "auto":
        return (sharding == OSG) | (sharding == FS)
    return np.full(sharding.shape, policy == "per_micro_batch")


def bytes_per_param(
    sharding,
    n,
    weight_bytes: float = WORKING_WEIGHT_BYTES,
    grad_bytes: float = GRAD_BYTES["fp32"],
    grad_policy: str = "auto",
    moment_bytes: float = MOMENT_BYTES["fp32"],
) -> dict[str, np.ndarray]:
    """Bytes of weights, grads and optimizer per parameter for sharding codes over n ranks
    (weight_bytes: `working_weight_bytes`, bf16 = 2; grad_bytes: GRAD_BYTES[grad_reduce_dtype];
    grad_policy: workload.dp_grad_reduce, per_step keeps the full gradient buffer; moment_bytes:
    MOMENT_BYTES[optimizer_moments_dtype], Adam m + v)."""
    sharding = np.asarray(sharding)
    n = np.asarray(n, dtype=np.float64)
    fully = sharding == FS
    weights = np.where(fully, MASTER_WEIGHT_BYTES / n, float(weight_bytes))
    # only the 1/n shard is kept where each micro-batch's gradients are reduced as they come
    sharded_grads = ((sharding == OSG) | fully) & reduces_every_micro_batch(sharding, grad_policy)
    grads = np.where(sharded_grads, grad_bytes / n, grad_bytes)
    master = MASTER_WEIGHT_BYTES + moment_bytes  # the fp32 master copy and the moments (FULLY_SHARD: the moments only)
    optimizer = np.where(sharding == NO_OP, master, np.where(fully, moment_bytes / n, master / n))
    return {"weights": weights, "grads": grads, "optimizer": optimizer}


HOST_GRAD_BYTES = float(BYTES_PER_ELEMENT["fp32"])  # the fp32 gradient the host optimizer reads


def offloaded_device_bytes(per_param: dict, sharding, params_too: bool = False) -> dict[str, np.ndarray]:
    """`bytes_per_param` on the GPU under optimizer offload (workload.optimizer_offload; ZeRO-Offload,
    Ren et al. 2021 §4: the fp32 master weights and Adam's moments live on the host, the 16-bit
    weights on the GPU): no optimizer bytes; FULLY_SHARD keeps its bf16 shard 2/n instead of the
    fp32 one 4/n (DeepSpeed ZeRO-3 with offload_optimizer: the fp16 partition stays on the device
    for the gathers), none with params_too (workload.param_offload, ZeRO-Infinity: that shard is on
    the host as well). Gradients stay as the sharding keeps them (reduce buckets, accumulation)."""
    fully = np.asarray(sharding) == FS
    kept = 0.0 if params_too else WORKING_WEIGHT_BYTES / MASTER_WEIGHT_BYTES
    weights = np.where(fully, per_param["weights"] * kept, per_param["weights"])
    return {"weights": weights, "grads": per_param["grads"], "optimizer": 0.0 * per_param["optimizer"]}


def host_optimizer_bytes_per_param(
    sharding, n, moment_bytes: float = MOMENT_BYTES["fp32"], params_too: bool = False
) -> np.ndarray:
    """Host bytes per parameter under optimizer offload: the rank's 1/n share (n: its sharding
    group; NO_OP: all of it) of the fp32 master weight (4), the moments and the fp32 gradient the
    CPU optimizer reads (4): DeepSpeed's CPU partition (fp32 params, exp_avg, exp_avg_sq, fp32
    gradient partition), Megatron's HybridDeviceOptimizer (CPU params with fp32 .grad); with
    params_too the FULLY_SHARD 16-bit parameter shard as well (ZeRO-Infinity offload_param)."""
    sharding = np.asarray(sharding)
    n = np.where(sharding == NO_OP, 1.0, np.asarray(n, dtype=np.float64))
    params = np.where(sharding == FS, WORKING_WEIGHT_BYTES, 0.0) if params_too else 0.0
    return (MASTER_WEIGHT_BYTES + moment_bytes + HOST_GRAD_BYTES + params) / n


def group_bytes_per_param(
    sharding,
    dp,
    cp,
    ep,
    weight_bytes: float = WORKING_WEIGHT_BYTES,
    grad_bytes: float = GRAD_BYTES["fp32"],
    grad_policy: str = "auto",
    moment_bytes: float = MOMENT_BYTES["fp32"],
    tp=1,
    etp=1,
):
    """(dense, expert) bytes_per_param: dense parameters shard over dp·cp, experts over the
    expert-DP group tp·dp·cp/(etp·ep) (`shapes.expert_dp_size`; dp·cp/ep with expert TP = tp)."""
    dense_group = dense_dp_size(dp, cp)
    expert_group = expert_dp_size(dp, cp, ep, tp, etp)
    return (
        bytes_per_param(sharding, dense_group, weight_bytes, grad_bytes, grad_policy, moment_bytes),
        bytes_per_param(sharding, expert_group, weight_bytes, grad_bytes, grad_policy, moment_bytes),
    )


def model_states_bytes(
    dense_params,
    expert_params,
    sharding,
    dp,
    cp,
    ep,
    weight_bytes: float = WORKING_WEIGHT_BYTES,
    per_param=None,
    grad_bytes: float = GRAD_BYTES["fp32"],
):
    """Weights, grads, optimizer bytes on one GPU for its dense and expert parameter shards.

    per_param: `group_bytes_per_param(...)` for the same rows, when the caller already has it.
    """
    bd, be = (
        per_param if per_param is not None else group_bytes_per_param(sharding, dp, cp, ep, weight_bytes, grad_bytes)
    )
    if np.ndim(expert_params) == 0 and expert_params == 0:
        return {k: dense_params * bd[k] for k in bd}  # no expert shard (x + 0·y == x)
    return {k: dense_params * bd[k] + expert_params * be[k] for k in bd}


def fsdp_gather_bytes(
    layer_params_per_gpu,
    sharding,
    prefetch_units: int = FSDP_PREFETCH_UNITS,
    layers=1,
    reshard_after_forward=True,
    gather_bytes=WORKING_WEIGHT_BYTES,
):
    """FULLY_SHARD gathers each layer's weights before use (bf16, or fp8: `param_gather_bytes`): the
    current unit and one prefetched, of the stage's `layers` (a stage of one layer has no next unit:
    what is gathered never exceeds the stage's own weights, which ZeRO-1/2 hold whole).
    Without reshard_after_forward every layer of the stage stays gathered from its forward to its
    backward: all `layers` units (the prefetch then adds nothing: the next unit is one of them)."""
    layers = np.asarray(layers, dtype=np.float64)
    units = np.minimum(prefetch_units, layers) if reshard_after_forward else layers
    return np.where(np.asarray(sharding) == FS, units * gather_bytes * layer_params_per_gpu, 0.0)
