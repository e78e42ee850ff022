"""EngineSpec: the serving engine and version that runs a deployment (conf/engine/NAME.yaml).

The kernels of a forward pass are the accelerator's (`hardware.kernels`, cost/kernels.py); what an
engine adds around them is host-side time: per request (HTTP, tokenizer, scheduler admission, the
first token streamed back), per iteration (scheduler, sampling, launches, host-device sync) and per
MoE layer of an iteration (routing, token permutation, grouped-GEMM launches). Each is a named
constant fitted once per engine on that engine's published runs (benchmarks/fit_serving_overhead.py,
leave-one-source-out error reported there); `engine=NAME` picks the file, `engine.FIELD=...` sets one.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from .workload import QuantScheme


class EngineSpec(BaseModel):
    """One serving engine and version. Every overhead is required: an engine file states each value
    it was fitted to (or the rule it took it by), never a number nobody chose for it. Each is bounded
    by what it physically is (host milliseconds per request, microseconds per launch), as the stack
    overheads are (specs/stack.py Overheads): engine.request_overhead_ms=1e30 was a TTFT of 1e30 ms."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, defer_build=True)

    name: str = Field(..., description="the engine file's name (engine=NAME picks it)")
    display_name: str = Field(..., description="engine and version as its runs name it")
    version: str = Field(..., description="release the overheads were fitted on")
    # Host-side time of one request in an online serving stack, added once to TTFT (0 for offline
    # engine timings); cost/inference.py.
    request_overhead_ms: float = Field(
        ..., ge=0, le=10000, description="per-request host latency added to TTFT, ms (at most 10 s)"
    )
    # Fixed time of one engine iteration under in-flight batching, paid once per forward pass
    # whatever its tokens (cost/inference_iteration.py).
    iteration_overhead_ms: float = Field(
        ..., ge=0, le=1000, description="fixed time per serving iteration, ms (at most 1 s)"
    )
    # Work per MoE layer per iteration that the measured fused-MoE op leaves out: a gate or shared expert
    # outside the op (DeepSeek-V3's sigmoid gate with bias and group-limited top-k, the shared expert's
    # stream fork/join; specs/model.py MoESpec.gate_outside_fused_moe). Layers with a softmax top-k router
    # (Mixtral, Qwen3-MoE) route inside the op and do not pay it.
    moe_layer_overhead_us: float = Field(
        ...,
        ge=0,
        le=5000,
        description="fixed time per serving iteration per MoE layer whose gate or shared expert runs outside "
        "the fused-MoE op, us (at most 5 ms)",
    )
    # The TP all-reduce of a serving pass (cost/collective_ops.engine_tp_all_reduce_ops): "nccl", or
    # "custom", the engine's own one-shot / two-shot kernel over NVLink P2P for messages up to
    # custom_all_reduce_max_bytes inside one scale-up domain, timed by
    # collectives.custom_all_reduce_time_s. Training keeps NCCL.
    tp_all_reduce: Literal["nccl", "custom"] = Field(..., description="TP all-reduce of serving passes")
    # Whether the engine's NCCL may run NVLS (NVLink SHARP, hardware scale_up.nvls) for the TP all-reduces
    # the custom kernel does not take: NCCL's default (NCCL_NVLS_ENABLE=2, on where the switch supports it)
    # unless the engine sets NCCL_NVLS_ENABLE=0 at startup (cost/collective_ops.engine_tp_all_reduce_ops).
    # Defaults to NCCL's own default (an engine file that does not say keeps it); the shipped files state it.
    nccl_nvls: bool = Field(True, description="its NCCL TP all-reduces may run NVLS where the switch supports it")
    custom_all_reduce_one_shot_latency_us: float = Field(
        ..., ge=0, le=1000, description="custom all-reduce: fixed time of a one-shot call, us (at most 1 ms)"
    )
    custom_all_reduce_two_shot_latency_us: float = Field(
        ..., ge=0, le=1000, description="custom all-reduce: fixed time of a two-shot call, us (at most 1 ms)"
    )
    custom_all_reduce_link_efficiency: float = Field(
        ..., gt=0, le=1, description="custom all-reduce: share of the nominal scale-up bandwidth its P2P loads reach"
    )
    custom_all_reduce_max_bytes: float = Field(
        ...,
        ge=0,
        le=2**40,
        description="custom all-reduce: largest message it takes (NCCL above), bytes (at most 1 TiB)",
    )
    # What one TP all-reduce call of a serving pass costs beyond its kernel's measured time (either
    # kernel, custom or NCCL; cost/collective_ops.engine_tp_all_reduce_ops): the ranks meeting at the
    # call's barrier (rank skew), the copy into the peer buffer, the residual add the engine does not
    # fuse. Not measured one by one: fitted on end-to-end ITL where no kernel table explains a TP
    # engine's rows (benchmarks/fit_serving_overhead.py, ALL_REDUCE_FITTED), else 0. Training untouched.
    tp_all_reduce_call_overhead_us: float = Field(
        ...,
        ge=0,
        le=1000,
        description="serving TP all-reduce: time per call beyond the kernel (rank skew, peer-buffer copy, "
        "unfused residual add), us (at most 1 ms)",
    )
    # Overlap scheduling (SGLang's overlap schedule, default since 0.4, sgl-project/sglang PR 2067;
    # TensorRT-LLM's PyTorch executor, disable_overlap_scheduler default False): the host launches
    # iteration i+1 before it processes iteration i's output, so the first token of a prompt that
    # finished in iteration i is sent after i+1 has been launched (sglang PRs 2067, 11856; TensorRT-LLM
    # PR 14061). The request-level simulation (cost/serving_load.py) sends it when i+1 ends.
    overlap_scheduler: bool = Field(
        False,
        description="the engine launches the next iteration before it sends the last one's output: a "
        "prompt's first token goes out when the next iteration ends (latency under load)",
    )
    # Batch waiting (TensorRT-LLM's PyTorch executor, LLM API batch_wait_timeout_iters /
    # batch_wait_max_tokens_ratio, NVIDIA/TensorRT-LLM PR 7287; cost/batch_wait.py): while sequences
    # are decoding, the prompts the scheduler picked are held back, iteration after iteration, until
    # the tokens it would run reach ratio x the token budget (workload.prefill_chunk_tokens, its
    # max_num_tokens) or it has held them timeout_iters iterations. Either at 0 holds nothing (the
    # release test passes at once): its default, 0 and 0.
    batch_wait_timeout_iters: int = Field(
        0,
        ge=0,
        le=100000,
        description="batch waiting: iterations the scheduler holds new prompts back while sequences decode "
        "(TensorRT-LLM batch_wait_timeout_iters; 0: no holding), at most 100000",
    )
    batch_wait_max_tokens_ratio: float = Field(
        0.0,
        ge=0,
        le=1,
        description="batch waiting: share of the iteration token budget whose reaching releases the held "
        "prompts (TensorRT-LLM batch_wait_max_tokens_ratio; 0: no holding), in [0, 1]",
    )
    # The engine's fused-MoE op measured on an accelerator (cost/fused_moe.py): accelerator name ->
    # table path (relative to hardware/, as kernel tables). Accelerators and model shapes it does
    # not list take the kernel model's grouped GEMM.
    fused_moe_tables: dict[str, str] = Field(
        default_factory=dict, description="accelerator -> measured fused-MoE table of this engine"
    )
    # The engine's MLA attention module in prefill measured on an accelerator (cost/mla_context.py):
    # accelerator name -> table path (relative to hardware/, as kernel tables). Model shapes, head counts
    # and prompt shapes it does not hold take the kernel model's ops.
    mla_context_tables: dict[str, str] = Field(
        default_factory=dict, description="accelerator -> measured MLA prefill attention module table of this engine"
    )
    # The engine's linear layers measured on an accelerator (cost/engine_gemm.py): accelerator name ->
    # table path (relative to hardware/, as kernel tables). Schemes and accelerators it does not list
    # take the kernel model's GEMM.
    gemm_tables: dict[str, str] = Field(
        default_factory=dict, description="accelerator -> measured GEMM table of this engine"
    )
    # The weight quantization schemes (workload.quantization, specs/quantization.py) this engine version
    # loads and runs; RunConfig refuses the others in one sentence. Not an overhead: a file without the
    # list (a user's engine) runs none of them until it names them.
    quantization: list[QuantScheme] = Field(
        default_factory=list,
        description="workload.quantization schemes the engine runs (each shipped file cites where); "
        "none listed: no scheme is taken (workload.quantization=none only)",
    )
