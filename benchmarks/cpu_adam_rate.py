"""The CPU optimizer step of optimizer offload (cost/offload.py `cpu_adam_s`) against the one measurement of
that step with a stated host, and the end-to-end residuals of the deepspeed stack's CPU optimizer path
(`cpu_optimizer_s`, conf/stack/deepspeed.yaml cpu_optimizer_s_per_gparam, fitted on ALST's two 32k baselines by
benchmarks/fit_stack_overheads.py) with its out-of-sample check, DeepSpeed #3901. Prints figures; fits nothing.

`cpu_adam_s` streams the step's bytes (flops.optimizer_bytes_per_param: 30 B a parameter with fp32 moments)
at hardware.host_memory_gbps, the host's datasheet DRAM peak over its GPUs: an efficiency of 1, not measured.

Measured (the kernel alone): ZeRO-Offload (Ren et al., arXiv 2101.06840, USENIX ATC 2021), sec. 6.2.4,
'Table 4: Adam latency (s) for PyTorch (PT) and CPU-Adam', column CPU-Adam, on the machine of its 'Table 2:
Hardware overview of experimental system': one DGX-2 node, 2 Intel Xeon Platinum 8168 (24 cores each),
1.5 TB of 2666 MHz DDR4 (six channels a socket: 2 x 6 x 2666 MT/s x 8 B = 255.9 GB/s peak). One process
runs the step on the node's cores. Read from the paper's table as an image (the Elvin-Ma/ai_papers
transcription, zero/images/zero-offload-table4.jpg and -table2.jpg).

Session 19 searched for the same measurement on a host a hardware file describes (DGX H100: 2 Xeon Platinum
8480C; DGX A100: 2 AMD EPYC 7742; GB200/GB300: Grace) and found none: DeepSpeed's tests/perf/adam_test*.py
print no published results, its blogs (ZeRO-Offload++, ZenFlow, ZenFlow core binding, SuperOffload) and PR
#7474 give end-to-end steps or figures only, the SuperOffload paper's GraceAdam numbers are not retrievable
here. So no hardware file states a measured rate and `cpu_adam_s` keeps the bandwidth formula. The
efficiency below (measured rate x bytes / peak) is the DGX-2's; carrying it to another host would be an
efficiency from another machine's kernel, which the brief rules out.

End-to-end: ALST's two 32k baselines (validate/stacks.py FITTED_OF_HELD_OUT: 8 and 2 G parameters a node) pin
the deepspeed stack's seconds per 1e9 parameters a host; printed here with the model's step before that term
(the bandwidth formula) and at it. Out of sample: DeepSpeed issue #3901 ('[BUG] Training speed is slower and
consumes more memory than FSDP', https://github.com/deepspeedai/DeepSpeed/issues/3901: Falcon-7B 4k fine-tuning on
8x A100 40GB, ZeRO-3 with optimizer and parameter offload 13.70 s a step against 6.05 s with parameter offload
alone: 7.65 s for ~7 G parameters a node; its batch size is in an attachment not read, so it is no case row) and
ALST's 1-GPU baseline (Table 2: ZeRO-3 over one H100, 8.03 G parameters on one rank, 26 s a step in all).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from parallmelism.specs.stack import ZERO_OFFLOAD_CPU_ADAM_S as ZERO_OFFLOAD_TABLE4  # noqa: E402  (params, s)

DGX2_SOCKETS, DGX2_CHANNELS_PER_SOCKET, DGX2_MTS = 2, 6, 2666e6  # Table 2; Intel ARK Xeon Platinum 8168
DDR_BYTES_PER_TRANSFER = 8.0  # a 64-bit DDR4 channel
DGX2_PEAK_GBPS = DGX2_SOCKETS * DGX2_CHANNELS_PER_SOCKET * DGX2_MTS * DDR_BYTES_PER_TRANSFER / 1e9

ALST_BASELINES = ("alst2506-llama31-8b-8gpu-dp8-32k-base", "alst2506-llama31-8b-32gpu-dp32-32k-base")
GPUS_PER_NODE = 8  # DGX H100 / p5 nodes (ALST sec. 5.2), DGX A100 (#3901)
ISSUE_3901_NODE_PARAMS, ISSUE_3901_OFFLOADED_OPTIMIZER_S = 7e9, 13.70 - 6.05
ALST_1GPU_PARAMS, ALST_1GPU_STEP_S = 8.03e9, 26.0


def table4() -> float:
    """Print Table 4 against the bandwidth formula at the DGX-2's peak; return the 10 B row's rate (params/s)."""
    from parallmelism.cost.flops import optimizer_bytes_per_param

    per_param = optimizer_bytes_per_param()
    print(
        f"# ZeRO-Offload Table 4 (CPU-Adam, one DGX-2 node, {DGX2_PEAK_GBPS:.1f} GB/s DRAM peak), {per_param:g} B a param"
    )
    print(
        "params_G,measured_s,G_params_per_s,GBps_at_model_bytes,fraction_of_peak,bandwidth_formula_s,formula_error_pct"
    )
    for params, seconds in ZERO_OFFLOAD_TABLE4:
        formula = params * per_param / (DGX2_PEAK_GBPS * 1e9)
        gbps = params * per_param / seconds / 1e9
        print(
            f"{params / 1e9:g},{seconds},{params / seconds / 1e9:.2f},{gbps:.1f},{gbps / DGX2_PEAK_GBPS:.3f},"
            f"{formula:.2f},{100 * (formula - seconds) / seconds:+.1f}"
        )
    params, seconds = ZERO_OFFLOAD_TABLE4[-1]
    return params / seconds


def held_out(kernel_rate: float) -> None:
    """The end-to-end residuals per node: the ALST baselines with the deepspeed stack's per-host CPU optimizer
    path at 0 (the bandwidth formula) and at its fitted value, and the out-of-sample #3901 and 1-GPU baseline."""
    import pandas as pd
    from importlib import resources

    from parallmelism.cost.flops import optimizer_bytes_per_param
    from parallmelism.validate.calibrate import _predict
    from parallmelism.validate.runner import _context
    from parallmelism.validate.steptime import step_time_run_of

    ctx = _context([], None)
    path = resources.files("parallmelism") / "cases" / "training_stacks.csv"
    df = pd.read_csv(str(path), dtype=str, keep_default_na=False).replace({"": None})
    rate = None
    print("\n# the deepspeed stack's CPU optimizer path per host (cpu_optimizer_s_per_gparam) on the rows that pin it")
    print(
        "case,node_params_G,measured_s,predicted_without_s,residual_without_s,bandwidth_cpu_step_s,"
        "kernel_at_dgx2_rate_s,predicted_s,error_pct,residual_G_params_per_s_node"
    )
    for r in df.to_dict("records"):
        if r["case"] not in ALST_BASELINES:
            continue
        run = step_time_run_of(r, ctx)
        oh = run.accelerator().overheads
        rate = oh.cpu_optimizer_s_per_gparam
        terms = oh.model_dump()
        pred, without = _predict([run], terms)[0], _predict([run], {**terms, "cpu_optimizer_s_per_gparam": 0.0})[0]
        gpus = int(r["gpus"])
        params = _params(run)
        node = params * min(gpus, GPUS_PER_NODE) / gpus  # ZeRO-3 shards over every rank
        rank = node / min(gpus, GPUS_PER_NODE)
        bandwidth = rank * optimizer_bytes_per_param() / (run.hardware.host_memory_gbps * 1e9)
        measured = float(r["step_time_s"])
        res = measured - without
        print(
            f"{r['case']},{node / 1e9:.2f},{measured:.2f},{without:.2f},{res:+.2f},{bandwidth:.2f},"
            f"{node / kernel_rate:.2f},{pred:.2f},{100 * (pred / measured - 1):+.2f},{node / res / 1e9:.2f}"
        )
    print(f"# out of sample, at the stack's {rate:g} s per 1e9 parameters a host")
    print("source,node_params_G,measured_s,stack_path_s,error_pct,kernel_at_dgx2_rate_s")
    n, s = ISSUE_3901_NODE_PARAMS, ISSUE_3901_OFFLOADED_OPTIMIZER_S
    model = n * rate * 1e-9
    print(
        f"deepspeed-issue-3901 (optimizer offload's added step),{n / 1e9:.2f},{s:.2f},{model:.2f},"
        f"{100 * (model / s - 1):+.1f},{n / kernel_rate:.2f}"
    )
    n, s = ALST_1GPU_PARAMS, ALST_1GPU_STEP_S
    print(
        f"alst-1gpu-baseline (whole step; no case row),{n / 1e9:.2f},{s:.2f},{n * rate * 1e-9:.2f},,{n / kernel_rate:.2f}"
    )
    print(
        f"# Table 4's kernel ran at {kernel_rate / 1e9:.2f} G params/s on a 2018 node (2 x 24 Skylake cores, DDR4); "
        "kernel_at_dgx2_rate_s over residual_without_s is the share of each residual the measured kernel could carry."
    )


def _params(run) -> float:
    """The model's parameters (the cost model's count, as the step time's optimizer uses it)."""
    from parallmelism.validate.cases import evaluate_one

    return float(evaluate_one(run)["params_total"])


def main() -> int:
    held_out(table4())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
