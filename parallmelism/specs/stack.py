"""StackSpec: the training software stack that runs the kernels (`stack=` group, conf/stack/NAME.yaml).

The same layout on the same accelerator takes a different time under Megatron-Core + Transformer
Engine than under torchtitan (FSDP2, torch SDPA, torchao float8) or DeepSpeed ZeRO-3: the stack
chooses the attention kernel, the fp8 recipe, which element-wise ops stay unfused, whether the
blocks are compiled, how collectives overlap compute, and what it spends around its kernels
(launches, hooks, host syncs). A stack file names each of those with its source
(benchmarks/surveys/stacks/mechanics.md) and carries the named overheads (cost/overheads.py)
fitted on that stack's published runs, keyed by accelerator: `overheads: {ACCELERATOR: {...}}`,
an entry may name another accelerator whose fit it takes (`a100-sxm-40gb: a100-sxm-80gb`), and
`overheads_fallback` names the fit an accelerator without an entry takes (`show` says which).
"""

from __future__ import annotations

from typing import Annotated, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .grid import DpSharding

AttentionBackend = Literal["cudnn", "flash2", "flash3", "sdpa"]
CpImplementation = Literal["transformer_engine", "torch"]

# The CPU Adam kernel alone, measured: ZeRO-Offload (Ren et al., arXiv 2101.06840, USENIX ATC 2021) sec. 6.2.4
# 'Table 4: Adam latency (s) for PyTorch (PT) and CPU-Adam', column CPU-Adam: (parameters, seconds a step), one
# process on one DGX-2 node's 2 x 24 Xeon Platinum 8168 cores (its Table 2). Its fastest row, 1 G parameters in
# 0.22 s (4.55 G parameters a second a node), is the floor of `cpu_optimizer_s_per_gparam`: a stack's offloaded
# optimizer path runs the kernel and more, so a node never updates its parameters faster than the kernel did
# (benchmarks/cpu_adam_rate.py prints the table).
ZERO_OFFLOAD_CPU_ADAM_S = ((1e9, 0.22), (2e9, 0.51), (4e9, 1.03), (8e9, 2.41), (10e9, 2.57))
CPU_ADAM_KERNEL_S_PER_GPARAM = min(s / (p / 1e9) for p, s in ZERO_OFFLOAD_CPU_ADAM_S)


class Overheads(BaseModel):
    """Named end-to-end overheads beyond kernels and exposed links (cost/overheads.py), fitted once
    per (stack, accelerator) on that stack's published step times. Each is bounded by what it
    physically is: per-layer host time of one micro-batch pass is at most milliseconds (20-60
    launches and module hooks of a few to tens of microseconds each), a step's fixed host time at
    most seconds, a contention fraction at most 1, stragglers at most half the step per doubling."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, defer_build=True)

    layer_launch_us: float = Field(
        0.0, ge=0, le=5000, description="per layer per micro-batch (fwd + bwd) host/launch time, µs (at most 5 ms)"
    )
    comm_contention: float = Field(0.0, ge=0, le=1, description="fraction of hidden comm time added to compute")
    step_fixed_ms: float = Field(
        0.0, ge=0, le=10000, description="host/framework time per optimizer step, ms (at most 10 s)"
    )
    straggler_per_doubling: float = Field(
        0.0, ge=0, le=0.5, description="step fraction lost per doubling of GPUs beyond one domain"
    )
    kernel_launch_us: float = Field(
        0.0,
        ge=0,
        le=30,
        description="host time per kernel launch of a layer's kernels (Python, the ATen dispatcher and "
        "cudaLaunchKernel of one eager op), µs (at most 30), times layer_kernels_eager or "
        "layer_kernels_compiled per layer per micro-batch as compile is off or on",
    )
    layer_kernels_eager: float = Field(
        0.0, ge=0, le=500, description="kernels per layer per micro-batch pass (fwd + bwd), compile off (counted)"
    )
    layer_kernels_compiled: float = Field(
        0.0, ge=0, le=500, description="kernels per layer per micro-batch pass (fwd + bwd), compile on (counted)"
    )
    unit_sync_us: float = Field(
        0.0,
        ge=0,
        le=1000,
        description="per wrapped FSDP unit (one layer) per micro-batch pass: the CPU waits of its parameter "
        "all-gathers (limit_all_gathers) and reduce-scatter and the unit's hook work, µs (at most 1 ms)",
    )
    moe_expert_launch_us: float = Field(
        0.0,
        ge=0,
        le=50,
        description="host time per kernel launch of a MoE layer's per-expert kernels (grouped GEMM and "
        "fp8 quantize launches per local expert, cost/overheads.py), exposed behind the dispatcher's "
        "device-to-host sync, µs (at most 50)",
    )
    cpu_optimizer_s_per_gparam: float = Field(
        0.0,
        ge=0,
        le=10,
        description="under optimizer offload, seconds of a host's optimizer step per 1e9 parameters of the "
        "optimizer shards of its ranks together (cost/offload.py `cpu_optimizer_s`): the stack's CPU optimizer "
        "path as it runs, its ranks sharing the host's cores (at least the CPU Adam kernel's measured "
        f"{CPU_ADAM_KERNEL_S_PER_GPARAM:g} s, at most 10); 0: not stated, the step streams at the host memory's "
        "bandwidth",
    )

    @model_validator(mode="after")
    def _cpu_optimizer_not_faster_than_its_kernel(self):
        s = self.cpu_optimizer_s_per_gparam
        if 0 < s < CPU_ADAM_KERNEL_S_PER_GPARAM:
            raise ValueError(
                f"cpu_optimizer_s_per_gparam={s:g} is faster than the CPU Adam kernel alone was measured "
                f"({CPU_ADAM_KERNEL_S_PER_GPARAM:g} s per 1e9 parameters a node, ZeRO-Offload Table 4): "
                "state 0 (the host memory's bandwidth) or at least that"
            )
        return self


class StackKernels(BaseModel):
    """Which kernel the stack runs per op kind, with sources (descriptive except `attention`)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, defer_build=True)

    attention: AttentionBackend = Field(
        "cudnn",
        description="default fused attention kernel (cudnn | flash2 | flash3 | sdpa); "
        "workload.attention_backend overrides it",
    )
    gemm: str = Field("", description="GEMM library per precision (cuBLAS, CUTLASS, TE)")
    fp8_recipe: str = Field("", description="fp8 scaling recipe and its casts")
    grouped_gemm: str = Field("", description="MoE expert GEMMs")
    unfused_elementwise: dict[str, Annotated[float, Field(ge=1, le=20)]] = Field(
        default_factory=dict,
        description="element-wise ops (cost/flops.py op names) the stack runs eagerly without torch.compile, "
        "each with the HBM bytes of its eager kernels over the fused op's (counted from the stack's code, "
        "1-20); applied when compile is off (workload.unfused_elementwise overrides)",
    )
    context_parallel: CpImplementation = Field(
        "transformer_engine",
        description="how its context-parallel attention runs around the kernels (cost/flops.py): "
        "transformer_engine (AttnFuncWithCPAndKVP2P: one kernel per ring step, bf16 merges; Megatron's "
        "all_gather variant two kernels) | torch (torch.distributed.tensor.experimental context_parallel: "
        "one kernel per ring step whatever the rotate method, fp32 merges and dQ,dK,dV accumulators); "
        "workload.cp_implementation overrides it",
    )
    source: str = ""


class StackCollectives(BaseModel):
    """The collective implementation and what overlaps with what (descriptive, with sources)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, defer_build=True)

    implementation: str = ""
    overlap: dict[str, str] = Field(default_factory=dict, description="axis or mechanism -> what it overlaps with")
    fsdp_recompute_regather: bool = Field(
        True,
        description="FULLY_SHARD under full recompute: the recompute forward gathers each unit's parameters "
        "again (forward, recompute, backward: 3 gathers per micro-batch); false: it reuses the backward's "
        "gather (2; Megatron-FSDP's shard-aware recompute). workload.fsdp_recompute_regather overrides",
    )
    nccl_nvls: bool = Field(
        True,
        description="its NCCL all-reduces may run NVLS (NVLink SHARP, hardware scale_up.nvls) where the switch "
        "supports it: NCCL's default (NCCL_NVLS_ENABLE unset); false: the stack's recipes set NCCL_NVLS_ENABLE=0 "
        "and every collective stays on NCCL's rings (specs.run.under_stack)",
    )
    source: str = ""


class StackLayouts(BaseModel):
    """Layouts the stack can run (`best`/`sweep` enumerate only these); each rule has its source."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, defer_build=True)

    tensor_parallel: bool = Field(True, description="tp > 1 possible")
    pipeline_parallel: bool = Field(True, description="pp > 1 possible")
    interleaved_pipeline: bool = Field(True, description="vpp > 1 possible (interleaved 1F1B)")
    context_parallel: bool = Field(True, description="cp > 1 possible")
    expert_parallel: bool = Field(True, description="ep > 1 possible")
    dp_sharding: Optional[list[DpSharding]] = Field(None, description="DP sharding strategies it runs; None: every one")
    sharding_with_pipeline: bool = Field(True, description="parameter sharding (FULLY_SHARD) together with pp > 1")
    source: str = ""


class StackSpec(BaseModel):
    """One training software stack (conf/stack/NAME.yaml); `stack=NAME` picks it, `stack.x=...` overrides."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, defer_build=True)

    name: str
    display_name: Optional[str] = None
    version: str = Field("", description="the versions its fits and sources refer to")
    source: str = ""
    kernels: StackKernels = Field(default_factory=StackKernels)
    compile: bool = Field(False, description="torch.compile of the blocks by default (workload.compile overrides)")
    collectives: StackCollectives = Field(default_factory=StackCollectives)
    layouts: StackLayouts = Field(default_factory=StackLayouts)
    overheads: dict[str, Union[Overheads, str]] = Field(
        default_factory=dict,
        description="ACCELERATOR -> its fitted overheads, or the name of another accelerator whose fit it takes",
    )
    overheads_fallback: Optional[str] = Field(
        None, description="accelerator whose fit applies where `overheads` has no entry; None: no overheads (zeros)"
    )
    overheads_note: str = Field("", description="how and on which rows the fits were made")

    @model_validator(mode="after")
    def _names_resolve(self):
        for acc in [*(v for v in self.overheads.values() if isinstance(v, str)), self.overheads_fallback]:
            if acc is not None and not isinstance(self.overheads.get(acc), Overheads):
                raise ValueError(
                    f"stack {self.name}: overheads name {acc!r}, which has no fit of its own in this stack's "
                    f"overheads (known: {', '.join(k for k, v in self.overheads.items() if isinstance(v, Overheads))})"
                )
        return self

    def overheads_for(self, accelerator: str) -> tuple[Overheads, str]:
        """The overheads this stack applies on `accelerator` and where they come from (one phrase)."""
        entry = self.overheads.get(accelerator)
        if isinstance(entry, Overheads):
            return entry, f"stack {self.name}'s fit on {accelerator}"
        if isinstance(entry, str):
            fit = self.overheads[entry]
            assert isinstance(fit, Overheads)  # _names_resolve
            return fit, f"stack {self.name}'s fit on {entry} (stated for {accelerator})"
        if self.overheads_fallback is not None:
            fit = self.overheads[self.overheads_fallback]
            assert isinstance(fit, Overheads)
            return fit, (
                f"stack {self.name}'s fit on {self.overheads_fallback} (fallback: no fit on {accelerator} in this stack)"
            )
        return Overheads(), f"none (stack {self.name} has no fit on {accelerator} and no fallback)"
