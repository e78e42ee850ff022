"""AcceleratorSpec: one accelerator and the interconnect of the cluster it sits in.

Conventions: HBM capacity in GiB, bandwidths in GB/s (1e9 B/s) per direction, peak FLOP/s
in dense TFLOP/s (no sparsity), latencies in microseconds.
"""

from __future__ import annotations

from typing import Annotated, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt, model_validator

from .stack import AttentionBackend, Overheads


# Physical ranges of an accelerator's numbers: each bound is orders of magnitude past any part
# made or announced (a GB300 runs ~15 PFLOP/s fp4, HBM ~8 TB/s, NVLink 900 GB/s), and past it a
# value (1e308, 1e-300) only overflows a time or a cost to inf or an absurd 1e290 s.
PEAK_TFLOPS = (1e-3, 1e6)  # 1 GFLOP/s (less than any CPU core) .. 1 EFLOP/s per chip
LINK_GBPS = (1e-2, 1e6)  # 10 MB/s .. 1 PB/s, per GPU and direction (HBM and links)
LATENCY_US_MAX = 1e6  # a second per message
HBM_GIB_MAX = 1e6  # a PiB per device


# fields of specs/engine.py EngineSpec that hardware efficiency blocks held until the engine group
SERVING_OVERHEADS = ("request_overhead_ms", "iteration_overhead_ms", "moe_layer_overhead_us")


class Efficiency(BaseModel):
    """Achievable fractions of peak, set once per accelerator (never per case). Every field but
    matmul_fp8 is required: a hardware file spells each value or takes another file's block
    (`efficiency: {from: NAME}`), so no accelerator runs on a number nobody chose for it."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, defer_build=True)

    # Kernel times (training and serving) come from `kernels` (cost/kernels.py); matmul, hbm and
    # matmul_fp8 draw the roofline plot's achievable roof (report/plots.py) only.
    matmul: float = Field(..., gt=0, le=1, description="large GEMMs, fraction of peak FLOP/s (roofline plot)")
    hbm: float = Field(..., gt=0, le=1, description="streaming kernels, fraction of HBM bandwidth (roofline plot)")
    scale_up: float = Field(..., gt=0, le=1, description="large collectives in the scale-up domain")
    scale_out: float = Field(..., gt=0, le=1, description="large collectives across nodes")
    # fp8 GEMMs reach a lower fraction of their (2x) peak than bf16 GEMMs of theirs (scaling, casts,
    # smaller tiles); None means `matmul`. The roofline plot's fp8 roof (report/plots.py).
    matmul_fp8: Optional[float] = Field(None, gt=0, le=1, description="fp8 GEMMs, fraction of fp8 peak")

    @model_validator(mode="before")
    @classmethod
    def _serving_overheads_are_the_engines(cls, data):
        """Serving's per-request, per-iteration and per-MoE-layer overheads moved to the serving
        engine (specs/engine.py, conf/engine/): a hardware file that still sets them is told where."""
        moved = [k for k in SERVING_OVERHEADS if isinstance(data, dict) and k in data]
        if moved:
            raise ValueError(
                f"{', '.join(moved)} belong to the serving engine now (conf/engine/NAME.yaml; set "
                f"engine.{moved[0]}=VALUE on the command line): drop them from the efficiency block"
            )
        return data


class Kernels(BaseModel):
    """Kernel-level efficiency source (cost/kernels.py): a measured kernel table, or the rule for
    accelerators without one (the reference H100 table's residuals on this accelerator's physics)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, defer_build=True)

    table: Optional[str] = Field(
        None,
        description="kernel table CSV (validate/kernel_table.py format), "
        "relative to hardware/ or absolute; None: the H100 rule",
    )
    sm_count: Optional[PositiveInt] = Field(
        None, description="streaming multiprocessors (or CUs) for wave quantization; None: 132"
    )
    attention_backend: Optional[AttentionBackend] = Field(
        None,
        description="fused attention kernel: cudnn | flash2 | flash3 | sdpa (a profiled PyTorch SDPA kernel, "
        "e.g. on CPU), where this part runs only that one (FlashAttention-2 on Ampere); None: the stack's "
        "(stack.kernels.attention); workload.attention_backend overrides either",
    )
    measured_peak_tflops: Optional[dict[str, Annotated[float, Field(ge=PEAK_TFLOPS[0], le=PEAK_TFLOPS[1])]]] = Field(
        None,
        description="dense TFLOP/s per dtype of the part the table was measured on: the table's residuals "
        "are taken against that physics and applied to this accelerator's, so an override of peak_tflops "
        "scales kernel times (a what-if); None: this file's peak_tflops (set so when the file is composed)",
    )
    measured_hbm_bandwidth_gbps: Optional[float] = Field(
        None,
        ge=LINK_GBPS[0],
        le=LINK_GBPS[1],
        description="HBM GB/s of the part the table was measured on (as measured_peak_tflops); None: this "
        "file's hbm_bandwidth_gbps",
    )


def _fraction(what: str):
    return Field(gt=0, le=1, description=f"fraction of the group's achievable bandwidth {what} reaches")


def _latency(what: str):
    return Field(ge=0, le=LATENCY_US_MAX, description=what)


class RingProtocols(BaseModel):
    """NCCL's protocols for a ring collective inside the scale-up domain (cost/collectives.py
    `protocol_ring_time_s` takes the fastest, as NCCL's tuner does): LL is the base protocol
    (collective_launch_us + latency_us per step) at ll_bandwidth_fraction; LL128 and Simple have their
    own call and per-step latencies and bandwidth fractions. Every key is stated (no silent default)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, defer_build=True)

    ll_bandwidth_fraction: float = _fraction("LL (the base protocol)")
    ll128_launch_us: float = _latency("LL128: fixed latency of one call, µs")
    ll128_step_us: float = _latency("LL128: latency per ring step, µs")
    ll128_bandwidth_fraction: float = _fraction("LL128")
    simple_launch_us: float = _latency("Simple: fixed latency of one call, µs")
    simple_step_us: float = _latency("Simple: latency per ring step, µs")
    simple_bandwidth_fraction: float = _fraction("Simple")
    ll128_net_step_us: float = _latency("LL128: latency per ring step that crosses the scale-out NIC, µs")
    simple_net_step_us: float = _latency("Simple: latency per ring step that crosses the scale-out NIC, µs")


class AllToAll(BaseModel):
    """NCCL's all-to-all inside the scale-up domain: one grouped send/recv to every peer at once (one call's
    latency, not n-1 ring steps), in the Simple protocol above `ll_threshold_bytes` per peer (NCCL's
    NCCL_P2P_LL_THRESHOLD) and the base protocol below it (cost/collectives.py `all_to_all_time_s`). The
    launch and bandwidth fraction are fitted per accelerator on nccl-tests alltoall_perf times; every key is
    stated."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, defer_build=True)

    launch_us: float = _latency("fixed latency of one all-to-all call above the threshold, µs")
    bandwidth_fraction: float = _fraction("an all-to-all above the threshold")
    ll_threshold_bytes: float = Field(ge=0, description="bytes per peer at and below which the base protocol runs")


class Nvls(BaseModel):
    """NVLink SHARP all-reduce inside the scale-up domain (NCCL's NVLS algorithm; cost/collectives.py
    `nvls_all_reduce_time_s`): the switch reduces (multimem.ld_reduce) and multicasts (multimem.st), so one
    call costs launch_us + (1 + 1/n) · S / (bandwidth_fraction · β), not 2(n−1) ring steps. Only for a
    switch that supports it (NVSwitch3 and later); every key is stated."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, defer_build=True)

    launch_us: float = _latency("fixed latency of one NVLS all-reduce call, µs")
    bandwidth_fraction: float = _fraction("an NVLS all-reduce (of each direction's S + S/n bytes)")


class ScaleUp(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, defer_build=True)

    name: str = ""
    domain_size: PositiveInt = Field(description="GPUs that share the scale-up fabric (NVLink domain)")
    bandwidth_gbps: float = Field(ge=LINK_GBPS[0], le=LINK_GBPS[1], description="per GPU, per direction, GB/s")
    latency_us: float = Field(2.0, ge=0, le=LATENCY_US_MAX, description="alpha: per ring step, µs")
    collective_launch_us: float = Field(
        ge=0,
        le=LATENCY_US_MAX,
        description="fixed cost of one collective call (kernel launch + flag synchronisation), µs, paid "
        "once per call on top of the per-step latency (cost/collectives.py); required: every hardware file "
        "states its value and source",
    )
    protocols: Optional[RingProtocols] = Field(
        None,
        description="NCCL's LL / LL128 / Simple protocols of a ring all-reduce, all-gather, reduce-scatter, "
        "broadcast or reduce inside the domain, the fastest taken (cost/collectives.py `protocol_ring_time_s`); "
        "None: one protocol, collective_launch_us + latency_us per step at the whole bandwidth",
    )
    all_to_all: Optional[AllToAll] = Field(
        None,
        description="NCCL's all-to-all inside the domain (cost/collectives.py `all_to_all_time_s`): its own launch "
        "and bandwidth fraction above a per-peer threshold; None: the base protocol, (n-1) steps at the whole bandwidth",
    )
    nvls: Optional[Nvls] = Field(
        None,
        description="NVLink SHARP (in-switch reduction) all-reduce inside the domain, taken where faster than "
        "the ring (cost/collectives.py `nvls_all_reduce_time_s`); None: the switch does not reduce (ring only)",
    )
    topology: Literal["switch", "mesh"] = Field(
        "switch",
        description="switch: a GPU's whole port reaches any peer (NVSwitch); mesh: fully connected "
        "point-to-point links, bandwidth_gbps summed over the domain_size - 1 links, so a group of m "
        "GPUs in one domain reaches its peers over m - 1 of them (AMD Infinity Fabric xGMI)",
    )


class ScaleOut(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, defer_build=True)

    name: str = ""
    bandwidth_gbps: float = Field(ge=LINK_GBPS[0], le=LINK_GBPS[1], description="per GPU, per direction, GB/s")
    latency_us: float = Field(5.0, ge=0, le=LATENCY_US_MAX)


class AcceleratorSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, defer_build=True)

    name: str
    display_name: Optional[str] = None
    source: str = ""
    confidence: str = ""
    hbm_capacity_gib: PositiveFloat = Field(le=HBM_GIB_MAX, description="nominal HBM capacity")
    hbm_usable_gib: PositiveFloat = Field(le=HBM_GIB_MAX, description="what the framework can allocate")
    hbm_bandwidth_gbps: float = Field(ge=LINK_GBPS[0], le=LINK_GBPS[1], description="GB/s")
    peak_tflops: dict[str, Annotated[float, Field(ge=PEAK_TFLOPS[0], le=PEAK_TFLOPS[1])]] = Field(
        description="dense TFLOP/s per dtype: bf16, fp16, fp8, fp4, fp32"
    )
    scale_up: ScaleUp
    scale_out: Optional[ScaleOut] = None
    efficiency: Efficiency
    kernels: Kernels = Field(default_factory=Kernels)
    # Training overheads belong to the software stack (conf/stack/NAME.yaml `overheads:`, keyed by
    # accelerator). A hardware file of one's own that still states `overheads:` is honoured over the
    # stack's fit (it names what was measured on that machine) and `show` says so; None: the stack's.
    overheads: Optional[Overheads] = Field(
        None, description="this machine's own training overheads, honoured over the stack's fit; None: the stack's"
    )
    cost_per_gpu_hour_usd: float = Field(0.0, ge=0, le=1e6)
    tdp_w: float = Field(0.0, ge=0, le=1e6)
    # The GPU <-> host CPU memory link activation offload moves bytes over (cost/offload.py):
    # PCIe Gen5 x16 on x86 hosts, NVLink-C2C on Grace. None: no host link described, offload refused.
    host_link_gbps: Optional[float] = Field(
        None, ge=LINK_GBPS[0], le=LINK_GBPS[1], description="GPU <-> host memory link, GB/s per direction"
    )
    host_link_source: str = Field("", description="where host_link_gbps comes from")
    host_memory_gib: Optional[float] = Field(
        None, gt=0, le=HBM_GIB_MAX, description="host (CPU) memory per GPU, GiB; None: not limited"
    )
    # The host memory bandwidth a GPU's share of the CPUs streams its optimizer step at under
    # optimizer offload (cost/offload.py `cpu_adam_s`). None: not described, optimizer offload refused.
    host_memory_gbps: Optional[float] = Field(
        None, ge=LINK_GBPS[0], le=LINK_GBPS[1], description="host (CPU) memory bandwidth per GPU, GB/s"
    )
    host_memory_source: str = Field("", description="where host_memory_gbps comes from")
    # The GPUs one host (one operating system: its CPU cores and DRAM) serves: a stack's CPU optimizer
    # path under optimizer offload runs on those cores for all of them at once (cost/offload.py
    # `cpu_optimizer_s`). None: not described (a stated cpu_optimizer_s_per_gparam is then refused).
    host_gpus: Optional[PositiveInt] = Field(
        None, le=72, description="GPUs per host (node) sharing its CPU cores and host memory"
    )
    # A part run under a power cap below the one its datasheet peak is quoted at sustains a lower
    # tensor-core clock (Meta's Grand Teton H100 at 500 W against the 700 W H100 SXM): its kernels
    # run at peak_tflops x this fraction (sustained_flops). MFU stays against the datasheet peak.
    sustained_clock_fraction: float = Field(
        1.0,
        gt=0,
        le=1,
        description="sustained tensor-core clock under tdp_w over the clock peak_tflops is quoted at "
        "(dimensionless); kernel physics and serving rates use peak_tflops x this, MFU the datasheet peak",
    )

    @model_validator(mode="after")
    def _checks(self):
        if self.hbm_usable_gib > self.hbm_capacity_gib:
            raise ValueError(
                f"hbm_usable_gib={self.hbm_usable_gib} exceeds hbm_capacity_gib={self.hbm_capacity_gib}; "
                "set hardware.hbm_usable_gib with it (what a framework can allocate: it decides what fits)"
            )
        if "bf16" not in self.peak_tflops:
            raise ValueError("peak_tflops needs at least a bf16 entry")
        return self

    def without_nvls(self) -> "AcceleratorSpec":
        """This accelerator with its NCCL rings only: what a job that sets NCCL_NVLS_ENABLE=0 runs on
        (scale_up.nvls None; a training stack's collectives.nccl_nvls, an engine's nccl_nvls)."""
        if self.scale_up.nvls is None:
            return self
        return self.model_copy(update={"scale_up": self.scale_up.model_copy(update={"nvls": None})})

    def peak_flops(self, dtype: str) -> float:
        """Peak dense FLOP/s for a compute dtype; fp16 falls back to bf16, fp8/fp4 to the next wider."""
        fallback = {
            "fp16": ["fp16", "bf16"],
            "fp8": ["fp8", "bf16"],
            "fp4": ["fp4", "fp8", "bf16"],
            "int8": ["int8", "fp8", "bf16"],
            "int4": ["int4", "fp4", "int8", "fp8", "bf16"],
        }
        for key in fallback.get(dtype, [dtype, "bf16"]):
            if key in self.peak_tflops:
                return self.peak_tflops[key] * 1e12
        return self.peak_tflops["bf16"] * 1e12

    def sustained_flops(self, dtype: str) -> float:
        """FLOP/s the tensor cores sustain under this part's power cap: peak_flops x sustained_clock_fraction."""
        return self.peak_flops(dtype) * self.sustained_clock_fraction

    def sustained_peak_tflops(self) -> dict[str, float]:
        """peak_tflops with every dtype at the sustained clock (the physics kernel times are taken on)."""
        f = self.sustained_clock_fraction
        return dict(self.peak_tflops) if f == 1.0 else {k: v * f for k, v in self.peak_tflops.items()}
