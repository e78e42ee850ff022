"""RunConfig: the whole composed configuration of one run, validated once."""

from __future__ import annotations

from typing import Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, model_validator

from .accelerator import AcceleratorSpec
from .engine import EngineSpec
from .grid import GridSpec
from .model import ModelSpec
from .plan import PlanSpec
from .stack import Overheads, StackSpec
from .workload import InferenceWorkload, TrainWorkload

DEFAULT_STACK = "megatron-te"  # conf/config.yaml's default too (tests/test_stack.py holds them equal)


def stack_overheads(hw: AcceleratorSpec, stack: StackSpec) -> tuple[Overheads, str]:
    """The training overheads on `hw` and where they come from: the accelerator's own `overheads:`
    block where its file states one (honoured over the stack's fit), else the stack's fit for this
    accelerator (StackSpec.overheads_for: its own entry, a named one, the fallback)."""
    if hw.overheads is not None:
        return hw.overheads, f"hardware {hw.name}'s own overheads: block (honoured over stack {stack.name}'s)"
    return stack.overheads_for(hw.name)


def stack_attention(hw: AcceleratorSpec, stack: StackSpec | None, workload=None) -> str | None:
    """The fused attention kernel: workload.attention_backend, else the accelerator's (a part that runs
    only one), else the training stack's (serving: None, the kernel model's default, cuDNN)."""
    training = workload is None or isinstance(workload, TrainWorkload)
    default = stack.kernels.attention if stack is not None and training else None
    return getattr(workload, "attention_backend", None) or hw.kernels.attention_backend or default


def under_stack(hw: AcceleratorSpec, stack: StackSpec | None, workload=None) -> AcceleratorSpec:
    """`hw` as the cost model takes it under `stack`: its overheads and attention kernel resolved, and
    NVLS left out where the stack's recipes disable it (stack.collectives.nccl_nvls false: NeMo /
    Megatron-Bridge set NCCL_NVLS_ENABLE=0). A serving run has no training stack: only its attention
    kernel is resolved (an engine's own NVLS setting is cost/collective_ops.engine_tp_all_reduce_ops')."""
    training = workload is None or isinstance(workload, TrainWorkload)
    if stack is not None and training and not stack.collectives.nccl_nvls:
        hw = hw.without_nvls()
    update: dict = {}
    if hw.overheads is None and stack is not None:
        update["overheads"] = stack_overheads(hw, stack)[0]
    backend = stack_attention(hw, stack, workload)
    if backend != hw.kernels.attention_backend:
        update["kernels"] = hw.kernels.model_copy(update={"attention_backend": backend})
    return hw.model_copy(update=update) if update else hw


def workload_under_stack(wl, stack: StackSpec | None):
    """A training workload as the cost model takes it under `stack`: compile (the workload's, else the
    stack's default), the element-wise ops it leaves unfused (the workload's, else the stack's list
    when compile is off, else none), its context-parallel implementation (the workload's, else the
    stack's) and whether a full-recompute forward gathers FSDP parameters again (the workload's, else the
    stack's). Serving workloads (no stack) are returned as they are."""
    if not isinstance(wl, TrainWorkload) or stack is None:
        return wl
    compiled = stack.compile if wl.compile is None else wl.compile
    unfused = wl.unfused_elementwise
    if unfused is None:
        unfused = {} if compiled else dict(stack.kernels.unfused_elementwise)
    cp_impl = stack.kernels.context_parallel if wl.cp_implementation is None else wl.cp_implementation
    regather = (
        stack.collectives.fsdp_recompute_regather if wl.fsdp_recompute_regather is None else wl.fsdp_recompute_regather
    )
    if (
        wl.compile == compiled
        and wl.unfused_elementwise == unfused
        and wl.cp_implementation == cp_impl
        and wl.fsdp_recompute_regather == regather
    ):
        return wl
    update = {
        "compile": compiled,
        "unfused_elementwise": unfused,
        "cp_implementation": cp_impl,
        "fsdp_recompute_regather": regather,
    }
    return wl.model_copy(update=update)


def sequence_length(wl) -> tuple[int, str]:
    """(positions one sequence takes, how the command line names it): training seq_len, serving
    input_len + output_len."""
    if isinstance(wl, TrainWorkload):
        return wl.seq_len, f"workload.seq_len={wl.seq_len}"
    length = wl.input_len + wl.output_len
    return length, f"workload.input_len + workload.output_len = {length}"


class OutputSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, defer_build=True)

    path: Optional[str] = Field(
        None, min_length=1, description="file to write; default results/<model>_<hardware>_<workload>.<fmt>"
    )
    # None: the path's extension sets it (csv for the default name); given, it must agree with the
    # path either way (report.writer.check_output_path)
    format: Optional[Literal["csv", "parquet"]] = None
    dir: str = Field("results", min_length=1)
    top: PositiveInt = Field(10, description="rows in the terminal table")
    write: bool = True

    @property
    def default_format(self) -> str:
        """The format of a file named by default (no `path`): `format`, else csv."""
        return self.format or "csv"


class RunConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, defer_build=True)

    model: ModelSpec
    hardware: AcceleratorSpec
    workload: Union[TrainWorkload, InferenceWorkload] = Field(discriminator="kind")
    grid: GridSpec
    # the serving engine (conf/engine/, `engine: trtllm` in conf/config.yaml); composition always sets
    # it, a RunConfig built in code for serving must name one (training ignores it)
    engine: Optional[EngineSpec] = None
    # the training stack (conf/stack/, `stack: megatron-te` in conf/config.yaml); composition always sets
    # it, a RunConfig built in code for training must name one (serving ignores it)
    stack: Optional[StackSpec] = None
    output: OutputSpec = Field(default_factory=OutputSpec)
    plan: PlanSpec = Field(default_factory=PlanSpec)

    def serving_engine(self) -> EngineSpec:
        """The serving engine (set for every serving run: `_serving_needs_an_engine`)."""
        if self.engine is None:
            raise ValueError("a serving workload needs its engine (engine=trtllm | vllm | sglang, conf/engine/)")
        return self.engine

    def training_stack(self) -> StackSpec:
        """The training stack (set for every training run: `_each_run_names_what_runs_it`)."""
        if self.stack is None:
            raise ValueError(
                "a training workload needs its stack (stack=megatron-te | torchtitan | deepspeed | ..., conf/stack/)"
            )
        return self.stack

    @model_validator(mode="after")
    def _each_run_names_what_runs_it(self):
        if isinstance(self.workload, InferenceWorkload):
            self.serving_engine()
        else:
            self.training_stack()
        return self

    def overheads(self) -> tuple[Overheads, str]:
        """The training overheads this run takes and where they come from (`stack_overheads`)."""
        return stack_overheads(self.hardware, self.training_stack())

    def attention_backend(self) -> str | None:
        """The fused attention kernel the run is timed with (`stack_attention`)."""
        return stack_attention(self.hardware, self.stack, self.workload)

    def training_workload(self):
        """The workload as the cost model takes it under this run's stack (`workload_under_stack`)."""
        return workload_under_stack(self.workload, self.stack)

    def accelerator(self) -> AcceleratorSpec:
        """The accelerator as the cost model takes it under this run's stack (`under_stack`). Every
        cost-model edge passes this, not `hardware`."""
        return under_stack(self.hardware, self.stack, self.workload)

    @model_validator(mode="after")
    def _overlap_needs_its_axis(self):
        if getattr(self.workload, "overlap_ep_comm", False) and not self.model.is_moe:
            raise ValueError(
                f"overlap_ep_comm=true overlaps expert-parallel all-to-alls, but model {self.model.name} has no experts"
            )
        return self

    @model_validator(mode="after")
    def _expert_tp_needs_experts(self):
        etp = getattr(self.workload, "expert_tp", None)
        if etp is not None and not self.model.is_moe:
            raise ValueError(
                f"workload.expert_tp={etp} splits routed experts (MoE parallel folding), but model "
                f"{self.model.name} has no experts"
            )
        moe = self.model.moe if self.model.is_moe else None
        if etp is not None and moe is not None and moe.ffn_hidden % etp != 0:
            raise ValueError(
                f"workload.expert_tp={etp} does not divide model {self.model.name}'s expert FFN size "
                f"{moe.ffn_hidden} (each expert's FFN columns are split expert_tp ways)"
            )
        return self

    @model_validator(mode="after")
    def _offload_needs_a_host_link(self):
        """Activation offload (cost/offload.py): over the accelerator's host link, of dense layers,
        never the last layer (Megatron-Core: cpu_offloading_num_layers < num_layers)."""
        k = getattr(self.workload, "activation_offload_layers", 0)
        if k == 0:
            return self
        if self.hardware.host_link_gbps is None:
            raise ValueError(
                f"workload.activation_offload_layers={k} moves activations over the host link, but hardware "
                f"{self.hardware.name} has no host_link_gbps (set hardware.host_link_gbps=GB/s per direction)"
            )
        if self.model.is_moe:
            raise ValueError(
                f"workload.activation_offload_layers={k}: activation offload is modelled for dense layers only, "
                f"and model {self.model.name} has experts"
            )
        if k >= self.model.layers:
            raise ValueError(
                f"workload.activation_offload_layers={k} must be below model {self.model.name}'s "
                f"{self.model.layers} layers (Megatron-Core never offloads the last layer)"
            )
        return self

    @model_validator(mode="after")
    def _optimizer_offload_needs_the_host(self):
        """Optimizer offload (cost/offload.py) moves gradients and parameters over the host link
        and runs Adam at the host memory's bandwidth: both must be described."""
        if getattr(self.workload, "param_offload", False) and not getattr(self.workload, "optimizer_offload", False):
            raise ValueError(
                "workload.param_offload=true needs workload.optimizer_offload=true: the parameters' fp32 "
                "master copy is an optimizer state here, so it goes to the host with them (ZeRO-Infinity)"
            )
        if not getattr(self.workload, "optimizer_offload", False):
            return self
        for key in ("host_link_gbps", "host_memory_gbps"):
            if getattr(self.hardware, key) is None:
                raise ValueError(
                    f"workload.optimizer_offload=true runs the optimizer on the host, but hardware "
                    f"{self.hardware.name} has no {key} (set hardware.{key}=GB/s)"
                )
        oh = self.accelerator().overheads
        if oh is not None and oh.cpu_optimizer_s_per_gparam and self.hardware.host_gpus is None:
            raise ValueError(
                f"workload.optimizer_offload=true under stack {getattr(self.stack, 'name', '?')} runs its CPU "
                f"optimizer at a rate per host, but hardware {self.hardware.name} does not say how many GPUs "
                "share a host (set hardware.host_gpus=N)"
            )
        return self

    @model_validator(mode="after")
    def _imbalance_within_the_experts(self):
        """moe_imbalance = busiest expert's tokens / mean: the busiest expert receives each token
        at most once, so it is at most num_experts / top_k (every token on one expert)."""
        moe = self.model.moe if self.model.is_moe else None
        imbalance = getattr(self.workload, "moe_imbalance", 1.0)
        if moe is not None and imbalance > moe.num_experts / moe.top_k:
            raise ValueError(
                f"moe_imbalance={imbalance:g} exceeds num_experts / top_k = {moe.num_experts}/{moe.top_k} "
                f"of model {self.model.name} (the busiest expert at most takes every token once)"
            )
        return self

    @model_validator(mode="after")
    def _quantization_runs_here(self):
        """workload.quantization: the engine must list the scheme, the accelerator a tensor-core peak
        for its GEMM dtype (fp8: Hopper/Ada and later; fp4: Blackwell), and NVFP4 is NVIDIA's format."""
        from .quantization import SCHEMES

        q = getattr(self.workload, "quantization", "none")
        if q == "none":
            return self
        engine, hw, scheme = self.serving_engine(), self.hardware, SCHEMES[q]
        if q not in engine.quantization:
            raise ValueError(
                f"engine {engine.name} ({engine.display_name} {engine.version}) does not run "
                f"workload.quantization={q}; it runs {', '.join(engine.quantization) or 'none'}"
            )
        what = hw.display_name or hw.name
        if scheme.precision != "bf16" and scheme.precision not in hw.peak_tflops:
            raise ValueError(
                f"workload.quantization={q} runs {scheme.precision} GEMMs, and hardware {hw.name} ({what}) lists no "
                f"{scheme.precision} tensor-core peak; use a weight-only scheme (int4_awq, int4_gptq) or none"
            )
        if q == "nvfp4" and not what.startswith("NVIDIA"):
            raise ValueError(
                f"workload.quantization=nvfp4 is NVIDIA Blackwell's fp4 format, and {what} does not run it"
            )
        return self

    @model_validator(mode="after")
    def _mtp_needs_its_heads(self):
        if getattr(self.workload, "spec_method", "none") == "mtp" and self.model.mtp_layers == 0:
            raise ValueError(
                f"spec_method=mtp drafts with the model's multi-token-prediction heads, but model "
                f"{self.model.name} has none (model.mtp_layers=0); use spec_method=draft with a draft_model"
            )
        return self

    @model_validator(mode="after")
    def _sequence_fits_the_position_table(self):
        """A learned position table has max_position rows: no token can sit past them. A RoPE model's
        max_position is its checkpoint's context: a server refuses a longer request (vLLM's
        ModelConfig max_model_len check, _get_and_verify_max_len), while training past it is a context
        extension (a warning at the CLI: cli/common.warn_past_context)."""
        wl = self.workload
        if self.model.max_position is None or (
            self.model.position_embedding != "learned" and isinstance(wl, TrainWorkload)
        ):
            return self
        length, what = sequence_length(wl)
        if length > self.model.max_position:
            if self.model.position_embedding == "learned":
                raise ValueError(
                    f"{what} is longer than model {self.model.name}'s learned position table "
                    f"(max_position={self.model.max_position})"
                )
            raise ValueError(
                f"{what} is longer than model {self.model.name}'s context (max_position="
                f"{self.model.max_position}), which a server refuses; where its rope scaling allows more, "
                f"set model.max_position"
            )
        return self
