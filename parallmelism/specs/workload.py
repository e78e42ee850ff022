"""Workload specs: what is being run (training step or inference request)."""

from __future__ import annotations

from typing import Annotated, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, model_validator

from .dtypes import BYTES_PER_ELEMENT, QuantScheme  # noqa: F401  (re-exported: specs.workload's names)

ComputeDtype = Literal["bf16", "fp16", "fp8", "fp4"]
WeightDtype = Literal["bf16", "fp16", "fp8", "fp4", "int8", "int4"]


class TrainWorkload(BaseModel):
    """One optimizer step of mixed-precision training with Adam."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, defer_build=True)

    kind: Literal["train"] = "train"
    seq_len: PositiveInt = Field(description="s, tokens per sequence")
    global_batch: PositiveInt = Field(description="B, sequences per optimizer step")
    precision: ComputeDtype = Field("bf16", description="matmul dtype; fp8 keeps bf16 weights + fp8 copies")
    flash_attention: bool = Field(True, description="fused attention: no s^2 score matrix is stored")
    attention_backend: Optional[Literal["cudnn", "flash2", "flash3", "sdpa"]] = Field(
        None,
        description="fused attention kernel (cudnn | flash2 | flash3 | sdpa); None: the accelerator's where its "
        "file names one, else the stack's (stack.kernels.attention)",
    )
    compile: Optional[bool] = Field(
        None, description="torch.compile of the blocks (fuses the stack's eager element-wise ops); None: the stack's"
    )
    unfused_elementwise: Optional[dict[str, Annotated[float, Field(ge=1, le=20)]]] = Field(
        None,
        description="element-wise op -> HBM bytes of its eager kernels over the fused op's (cost/steptime.py); "
        "None: the stack's stack.kernels.unfused_elementwise when compile is off, else none ({})",
    )
    fp8_bf16_edge_layers: int = Field(
        0,
        ge=0,
        description="with fp8/fp4: first and last N layers kept in bf16 (Megatron-Core --first-last-layers-bf16)",
    )
    low_precision_gemms: Literal["all", "where_faster"] = Field(
        "where_faster",
        description="with fp8/fp4: which eligible GEMMs run in low precision. all: every one (Transformer "
        "Engine's fp8_autocast over the model, as NVIDIA's recipes run it); where_faster: a GEMM stays in bf16 "
        "where its fp8/fp4 kernels with their input, gradient and weight casts are not faster than "
        "bf16's (torchtitan's auto_filter_small_kn: torchao skips layers too small to benefit from float8)",
    )
    fp8_param_gather: bool = Field(
        False,
        description="with fp8: the parameters are fp8 (Transformer Engine Float8Tensor), so the distributed "
        "optimizer's / FSDP's parameter all-gather moves 1 byte per parameter and no bf16 weight copy is "
        "kept (Megatron --fp8-param-gather, NeMo fp8_params, torchtitan enable_fsdp_float8_all_gather)",
    )
    fp8_scaling: Literal["tensorwise", "rowwise"] = Field(
        "tensorwise",
        description="with fp8: the scaling recipe of the fp8 GEMMs. tensorwise: one scale per tensor, each "
        "operand cast once into its row-wise and transposed copies (Transformer Engine, torchao tensorwise); "
        "rowwise: torchao's rowwise recipe (Float8LinearConfig.from_recipe_name('rowwise')), a scale per row "
        "along each GEMM's reduction dim, so every operand is cast again for each GEMM that reads it, per "
        "nn.Linear (cost/roofline.py rowwise_cast_bytes)",
    )
    grad_reduce_dtype: Literal["fp32", "bf16", "fp16"] = Field(
        "fp32",
        description="main-gradient buffer and DP reduction dtype (Megatron grad_reduce_in_fp32; "
        "fp16: Megatron fp16 runs without --accumulate-allreduce-grads-in-fp32)",
    )
    optimizer_moments_dtype: Literal["fp32", "bf16"] = Field(
        "fp32",
        description="Adam first and second moments (Megatron-Core --use-precision-aware-optimizer "
        "--exp-avg-dtype/--exp-avg-sq-dtype bf16, as DeepSeek-V3 trained); the master weights stay fp32",
    )
    schedule: Literal["1f1b", "gpipe", "zero_bubble"] = Field(
        "1f1b", description="pipeline schedule; vpp > 1 with 1f1b is interleaved 1F1B"
    )
    moe_imbalance: float = Field(1.0, ge=1.0, description="busiest expert's tokens / mean (1 = balanced)")
    expert_tp: Optional[PositiveInt] = Field(
        None,
        description="MoE parallel folding (Megatron-Core --expert-tensor-parallel-size): ways each routed "
        "expert is split; the expert layers then use their own grid expert_tp x ep x expert-DP over the "
        "same tp x cp x dp ranks as attention, so ep need not divide dp x cp (cost/shapes.py "
        "`expert_tp_size`); None: expert TP = tp and EP inside the DP x CP group",
    )
    activation_offload_layers: int = Field(
        0,
        ge=0,
        description="transformer layers per pipeline stage whose saved activations are offloaded to host "
        "memory in forward and reloaded in backward (Megatron-Core --cpu-offloading "
        "--cpu-offloading-num-layers N, Transformer Engine's layer-level CPU offload; cost/offload.py); "
        "needs the accelerator's host_link_gbps",
    )
    optimizer_offload: bool = Field(
        False,
        description="optimizer states (fp32 master weights, Adam moments) in host memory and the Adam step on "
        "the CPU: DeepSpeed ZeRO-Offload (zero_optimization.offload_optimizer.device=cpu, DeepSpeedCPUAdam), "
        "Megatron-Core --optimizer-cpu-offload --optimizer-offload-fraction 1.0; gradients go to the host, "
        "updated 16-bit parameters come back (cost/offload.py); needs a sharded optimizer and the accelerator's "
        "host_link_gbps and host_memory_gbps",
    )
    param_offload: bool = Field(
        False,
        description="with optimizer_offload and FULLY_SHARD: the 16-bit parameter shards live in host memory too "
        "and every FSDP gather first fetches its shard over the host link (DeepSpeed ZeRO-Infinity "
        "zero_optimization.offload_param.device=cpu; cost/offload.py)",
    )
    # a physical range: 1e18 is ~70,000 times Llama 3's 15e12 training tokens
    tokens: Optional[float] = Field(None, gt=0, le=1e18, description="training tokens, for plans (at most 1e18)")
    overlap_dp_comm: bool = Field(
        True,
        description="DP gradient reduce / parameter gather overlap with "
        "backward / forward (Megatron overlap_grad_reduce)",
    )
    overlap_tp_comm: bool = Field(
        False, description="TP collectives overlap with the adjacent GEMMs (Megatron-Core tp_comm_overlap)"
    )
    dp_bucket_params: Optional[float] = Field(
        None,
        ge=1,  # a bucket holds at least one parameter (1e-300 gave NaN step times)
        description="parameters per DP gradient bucket "
        "(one reduce / gather call each); None: Megatron-Core's "
        "max(40e6, 1e6·dp_size)",
    )
    dp_grad_reduce: Literal["auto", "per_micro_batch", "per_step"] = Field(
        "auto",
        description="when the DP gradient reduction runs: per_micro_batch (each micro-batch's gradients "
        "reduce-scattered as its backward produces them: ZeRO-2/3, DeepSpeed, FSDP2's default, Megatron "
        "FSDP), per_step (accumulated locally, reduced in the last micro-batch's backward: DDP no_sync, "
        "Megatron DDP; with sharded gradients a full accumulation buffer is kept, FSDP2 "
        "set_requires_gradient_sync(False)); auto: per_micro_batch where gradients are sharded "
        "(OPTIMIZER_STATES_AND_GRADS, FULLY_SHARD), per_step otherwise",
    )
    cp_comm_type: Literal["p2p", "all_gather", "a2a"] = Field(
        "p2p",
        description="context-parallel attention (Megatron --cp-comm-type): p2p, Transformer Engine's ring of "
        "K,V chunks hidden under attention; all_gather, the whole sequence's K,V gathered before attention "
        "(Llama 3: exposed, simpler masks); a2a, DeepSpeed-Ulysses: all-to-alls trade the sequence split for "
        "a head split, so each rank runs one causal kernel over the whole sequence with its heads/cp heads "
        "(exposed; heads per TP rank must divide by cp)",
    )
    cp_implementation: Optional[Literal["transformer_engine", "torch"]] = Field(
        None,
        description="context-parallel attention around the kernels (transformer_engine | torch, cost/flops.py); "
        "None: the stack's (stack.kernels.context_parallel)",
    )
    dp_shard_size: Optional[PositiveInt] = Field(
        None,
        description="hybrid sharding (HSDP: torchtitan data_parallel_shard_degree, FSDP HYBRID_SHARD, "
        "Megatron num_distributed_optimizer_instances): a sharded strategy shards over groups of this "
        "many DP ranks (times cp) and replicates across the dp/dp_shard_size groups, whose gradient "
        "shards are all-reduced; None: one group of all DP ranks",
    )
    moe_dispatcher: Literal["alltoall", "flex"] = Field(
        "alltoall",
        description="MoE token dispatcher (Megatron-Core --moe-token-dispatcher-type): alltoall sends every "
        "routed copy; flex (DeepEP) sends a token once per remote node and forwards it over NVLink",
    )
    moe_permute_fusion: bool = Field(
        True,
        description="MoE token permute/unpermute in fused kernels (Megatron-Core --moe-permute-fusion, "
        "Transformer Engine's moe_permute; on in Megatron-Bridge recipes): timed at the HBM copy rate; "
        "false: PyTorch's index_select into expert order and index_add_ back (Megatron-Core's unfused "
        "path), at the gather rate measured for them on the H100 (h100_moe_experts.csv, 20-30 % of HBM)",
    )
    overlap_ep_comm: bool = Field(
        False,
        description="MoE token dispatch/combine all-to-alls hidden under the other "
        "micro-batch's compute (Megatron-Core EP A2A overlap, "
        "DualPipe-style); false: on the critical path",
    )
    fsdp_recompute_regather: Optional[bool] = Field(
        None,
        description="FULLY_SHARD under full recompute: the recompute forward gathers each layer's parameters "
        "again (3 gathers per micro-batch) or reuses the backward's (2); None: the stack's "
        "stack.collectives.fsdp_recompute_regather",
    )
    fsdp_reshard_after_forward: bool = Field(
        True,
        description="FULLY_SHARD (FSDP2 reshard_after_forward): free each "
        "layer's gathered weights after its forward and gather "
        "again for backward; false: keep the stage's layers "
        "gathered from forward to backward (one gather per "
        "micro-batch, the stage's bf16 weights in memory)",
    )
    overlap_pp_comm: bool = Field(
        True,
        description="steady-state pipeline send/recv overlaps the neighbour's "
        "compute (asynchronous P2P); false: blocking send/recv, "
        "every transfer on the critical path",
    )
    launch_blocking: bool = Field(
        False,
        description="CUDA_LAUNCH_BLOCKING=1 (BLOOM's tr11-176B script): every kernel and NCCL call "
        "completes before the next is launched, so no communication hides under compute, whatever "
        "the overlap_* options say",
    )

    @model_validator(mode="after")
    def _fp8_param_gather_needs_fp8(self):
        if self.fp8_param_gather and self.precision != "fp8":
            raise ValueError(
                f"fp8_param_gather=true needs workload.precision=fp8 (it is {self.precision}): only fp8 "
                "parameters are gathered in fp8"
            )
        return self

    @model_validator(mode="after")
    def _rowwise_needs_fp8(self):
        if self.fp8_scaling == "rowwise" and self.precision != "fp8":
            raise ValueError(
                f"fp8_scaling=rowwise needs workload.precision=fp8 (it is {self.precision}): the rowwise "
                "recipe scales fp8 GEMMs"
            )
        return self

    def hides(self, axis: str) -> bool:
        """Whether axis ('dp', 'tp', 'pp', 'ep')'s communication may hide under compute: its
        overlap_<axis>_comm option, unless launch_blocking serialises every launch."""
        return bool(getattr(self, f"overlap_{axis}_comm")) and not self.launch_blocking


class InferenceWorkload(BaseModel):
    """Serving: prefill of `input_len` tokens then `output_len` decode steps for `batch` sequences."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, defer_build=True)

    kind: Literal["inference"] = "inference"
    input_len: PositiveInt = 2048
    output_len: PositiveInt = 256
    batch: PositiveInt = Field(1, description="concurrent sequences per replica")
    quantization: QuantScheme = Field(
        "none",
        description="the checkpoint's weight quantization (specs/quantization.py): fp8_tensor, fp8_block "
        "(128x128 fp32 scales), nvfp4 (fp8 scale per 16, Blackwell), int4_awq / int4_gptq (W4A16, group 128). "
        "It sets weight_dtype and precision (left at bf16) and adds its scales' bytes to every linear weight; "
        "none: weight_dtype and precision as given",
    )
    weight_dtype: WeightDtype = "bf16"
    kv_dtype: WeightDtype = "bf16"
    precision: ComputeDtype = Field("bf16", description="matmul dtype")
    phase: Literal["prefill", "decode", "request"] = "request"
    flash_attention: bool = True
    moe_imbalance: float = Field(1.0, ge=1.0)
    moe_routing: Literal["balanced", "power_law_1.01"] = Field(
        "balanced",
        description="how tokens spread over the experts: balanced (moe_imbalance applies), or power_law_1.01 "
        "(aiconfigurator's routing: an engine's fused-MoE table measured under it where one exists, else the "
        "busiest EP rank's ratio from cost/moe_routing.py; moe_imbalance stays 1)",
    )
    moe_dispatcher: Literal["alltoall", "flex", "deepep"] = Field(
        "alltoall",
        description="MoE token dispatcher across replicas (as the training workload's): alltoall sends every "
        "routed copy; flex (DeepEP normal kernels, SGLang/vLLM wide EP) sends a token once per remote node, at "
        "most the model's max_nodes_per_token, and forwards it over NVLink; deepep (SGLang --moe-a2a-backend "
        "deepep --deepep-mode auto): flex for passes with prompt tokens, DeepEP's low-latency kernels (every copy "
        "straight to its expert's rank, FP8 dispatch) for decode passes",
    )
    eplb_redundant_experts: int = Field(
        0,
        ge=0,
        description="expert-parallel load balancing (SGLang --ep-num-redundant-experts, DeepSeek EPLB): R "
        "redundant expert slots; ep divides E + R, each rank holds (E + R)/ep experts, and the busiest rank's "
        "load is capped at 1 + ep/(E + R) of the mean (cost/eplb.py); 0: no EPLB",
    )
    batching: Literal["continuous", "static"] = Field(
        "continuous",
        description="continuous: a new prompt is prefilled alone, in one step with the other "
        "b-1 sequences' decode tokens (vLLM/TensorRT-LLM in-flight batching); "
        "static: the batch's b prompts are prefilled together",
    )
    chunked_prefill: bool = Field(
        True,
        description="continuous: prefill chunks ride in the decode iterations (vLLM V1 / SGLang chunked "
        "prefill, TensorRT-LLM enable_chunked_context); false: each prompt chunk is priced as a forward "
        "pass of its own that the decoding sequences wait for (vLLM V0). TensorRT-LLM's in-flight batching "
        "without chunked context runs the whole prompt inside the decode iteration instead; that is not "
        "modelled, so its rows are priced as separate passes",
    )
    spec_method: Literal["none", "draft", "mtp"] = Field(
        "none",
        description="speculative decoding: a draft model (draft_model) or the model's multi-token "
        "prediction heads (mtp) propose spec_tokens tokens that the model verifies in one step",
    )
    draft_model: Optional[str] = Field(None, description="draft model name (shipped or user models/NAME.yaml)")
    spec_tokens: PositiveInt = Field(3, description="k, tokens proposed per step (draft length)")
    spec_acceptance: float = Field(0.7, ge=0, le=1, description="a, probability each proposed token is accepted")
    prefix_cache_hit: float = Field(
        0.0, ge=0, lt=1, description="share of each prompt's tokens found in the prefix cache (not prefilled again)"
    )
    prefill_chunk_tokens: PositiveInt = Field(
        8192,
        description="continuous batching: token budget of one iteration (decode tokens + prefill chunk), "
        "vLLM max_num_batched_tokens / TensorRT-LLM max_num_tokens",
    )
    scheduler_steps: PositiveInt = Field(
        1,
        description="continuous batching: decode iterations per scheduler call (vLLM 0.6 V0 "
        "--num-scheduler-steps, multi-step scheduling); a new prompt is admitted only between runs",
    )
    # latency under load (cost/serving_load.py): a request-level simulation of the layout `show` explains
    request_rate: Optional[float] = Field(
        None,
        gt=0,
        le=1e9,
        description="open-loop load, requests/s sent to the layout (Poisson, split evenly over its dp "
        "replicas; batch = the most sequences in flight per replica): `show` then simulates load_requests "
        "requests and prints p50/p90/p99 TTFT and ITL and the goodput under plan.ttft_ms/plan.tpot_ms; "
        "None: the fixed concurrency `batch` alone",
    )
    length_dist: Literal["fixed", "uniform"] = Field(
        "fixed",
        description="simulated requests' lengths: fixed input_len/output_len, or uniform integers within "
        "±length_spread of them",
    )
    length_spread: float = Field(0.5, ge=0, lt=1, description="uniform lengths: half-width as a share of the mean")
    length_trace: Optional[str] = Field(
        None,
        description="CSV of the simulated requests (columns input_len, output_len; arrival_s optional: the "
        "send times to the whole deployment, dealt round-robin over its replicas, replacing the Poisson "
        "arrivals): replaces length_dist",
    )
    load_requests: PositiveInt = Field(1000, le=1_000_000, description="requests simulated under load")
    load_seed: int = Field(0, ge=0, description="seed of the simulated arrivals and lengths (same seed, same output)")

    @model_validator(mode="before")
    @classmethod
    def _scheme_sets_the_dtypes(cls, data):
        """workload.quantization sets weight_dtype and precision where they are left at bf16 (every
        field is on a composed config, so bf16 stands for "not set"); another value must agree."""
        from .quantization import SCHEMES

        if not isinstance(data, dict) or data.get("quantization", "none") not in SCHEMES:
            return data
        name = data["quantization"]
        scheme, data = SCHEMES[name], dict(data)
        for key, want in (("weight_dtype", scheme.weight_dtype), ("precision", scheme.precision)):
            have = data.get(key, "bf16")
            if have not in ("bf16", want):
                raise ValueError(
                    f"workload.quantization={name} stores {scheme.weight_dtype} weights and runs {scheme.precision} "
                    f"GEMMs, and workload.{key}={have} contradicts it (leave {key} out)"
                )
            data[key] = want
        return data

    @model_validator(mode="after")
    def _int4_needs_its_scheme(self):
        if self.weight_dtype == "int4" and self.quantization == "none":
            raise ValueError(
                "weight_dtype=int4 needs its scales: set workload.quantization=int4_awq or int4_gptq instead"
            )
        if self.weight_dtype == "fp4" and self.quantization == "none":
            raise ValueError("weight_dtype=fp4 needs its scales: set workload.quantization=nvfp4 instead")
        return self

    @model_validator(mode="after")
    def _one_imbalance(self):
        if self.moe_routing != "balanced" and self.moe_imbalance != 1.0:
            raise ValueError(
                f"workload.moe_routing={self.moe_routing} sets the experts' imbalance itself: leave "
                f"workload.moe_imbalance at 1 (it is {self.moe_imbalance:g})"
            )
        return self

    @model_validator(mode="after")
    def _draft_named(self):
        if self.spec_method == "draft" and not self.draft_model:
            raise ValueError("spec_method=draft needs draft_model=NAME (a smaller model)")
        if self.draft_model and self.spec_method != "draft":
            raise ValueError("draft_model is set but spec_method is not draft")
        return self


Workload = Union[TrainWorkload, InferenceWorkload]
