"""Workload specs: what is being run (training step or inference request)."""

from __future__ import annotations

from typing import Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, PositiveInt

ComputeDtype = Literal["bf16", "fp16", "fp8"]
WeightDtype = Literal["bf16", "fp16", "fp8", "int8", "int4"]

BYTES_PER_ELEMENT = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "int8": 1, "int4": 0.5}


class TrainWorkload(BaseModel):
    """One optimizer step of mixed-precision training with Adam."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["train"] = "train"
    seq_len: PositiveInt = Field(description="s, tokens per sequence")
    global_batch: PositiveInt = Field(description="B, sequences per optimizer step")
    precision: ComputeDtype = Field("bf16", description="matmul dtype; fp8 keeps bf16 weights + fp8 copies")
    flash_attention: bool = Field(True, description="fused attention: no s^2 score matrix is stored")
    schedule: Literal["1f1b", "gpipe", "zero_bubble"] = Field(
        "1f1b", description="pipeline schedule; vpp > 1 with 1f1b is interleaved 1F1B")
    moe_imbalance: float = Field(1.0, ge=1.0, description="busiest expert's tokens / mean (1 = balanced)")
    tokens: Optional[float] = Field(None, gt=0, description="training tokens, for plans")
    overlap_dp_comm: bool = Field(True, description="DP gradient reduce / parameter gather overlap with "
                                                    "backward / forward (Megatron overlap_grad_reduce)")
    overlap_tp_comm: bool = Field(False, description="TP collectives overlap with the adjacent GEMMs "
                                                     "(Megatron-Core tp_comm_overlap)")
    dp_bucket_params: Optional[float] = Field(None, gt=0, description="parameters per DP gradient bucket "
                                                          "(one reduce / gather call each); None: Megatron-Core's "
                                                          "max(40e6, 1e6·dp_size)")
    overlap_ep_comm: bool = Field(False, description="MoE token dispatch/combine all-to-alls hidden under the other "
                                                     "micro-batch's compute (Megatron-Core EP A2A overlap, "
                                                     "DualPipe-style); false: on the critical path")
    fsdp_reshard_after_forward: bool = Field(True, description="FULLY_SHARD (FSDP2 reshard_after_forward): free each "
                                                               "layer's gathered weights after its forward and gather "
                                                               "again for backward; false: keep the stage's layers "
                                                               "gathered from forward to backward (one gather per "
                                                               "micro-batch, the stage's bf16 weights in memory)")
    overlap_pp_comm: bool = Field(True, description="steady-state pipeline send/recv overlaps the neighbour's "
                                                    "compute (asynchronous P2P); false: blocking send/recv, "
                                                    "every transfer on the critical path")


class InferenceWorkload(BaseModel):
    """Serving: prefill of `input_len` tokens then `output_len` decode steps for `batch` sequences."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["inference"] = "inference"
    input_len: PositiveInt = 2048
    output_len: PositiveInt = 256
    batch: PositiveInt = Field(1, description="concurrent sequences per replica")
    weight_dtype: WeightDtype = "bf16"
    kv_dtype: WeightDtype = "bf16"
    precision: ComputeDtype = Field("bf16", description="matmul dtype")
    phase: Literal["prefill", "decode", "request"] = "request"
    flash_attention: bool = True
    moe_imbalance: float = Field(1.0, ge=1.0)
    batching: Literal["continuous", "static"] = Field(
        "continuous", description="continuous: a new prompt is prefilled alone, in one step with the other "
                                  "b-1 sequences' decode tokens (vLLM/TensorRT-LLM in-flight batching); "
                                  "static: the batch's b prompts are prefilled together")


Workload = Union[TrainWorkload, InferenceWorkload]
