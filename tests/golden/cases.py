"""Canonical sweeps whose full output is kept under tests/golden/*.csv.

Every change to the cost model that moves a number in one of these shows up as a diff of the
golden CSV in review. Regenerate ONLY with `python -m tests.golden.refresh` (see README,
"Regression checks"), after checking that the change is intended.

Each case is a list of `parallmelism sweep` overrides pinned to a few hundred layouts.
"""

from __future__ import annotations

from pathlib import Path

GOLDEN_DIR = Path(__file__).resolve().parent

CASES: dict[str, list[str]] = {
    # Default model of the README on one DGX-pod and on 512 GPUs; ZeRO-1 and FSDP; no CP, no interleaving.
    "llama3.1-70b_h100_64-512": [
        "model=llama3.1-70b",
        "hardware=h100-sxm-80gb",
        "workload=train",
        "grid.ngpus=[64,512]",
        "grid.micro_batch=[1]",
        "grid.vpp=[1]",
        "grid.cp=[1]",
        "grid.recompute=[selective,full]",
        "grid.dp_sharding=[OPTIMIZER_STATES,FULLY_SHARD]",
    ],
    # MoE: every valid EP/TP/PP on 64 H100s.
    "mixtral-8x7b_h100_64": [
        "model=mixtral-8x7b",
        "hardware=h100-sxm-80gb",
        "workload=train",
        "grid.ngpus=[64]",
        "grid.micro_batch=[1]",
        "grid.vpp=[1]",
        "grid.cp=[1]",
        "grid.recompute=[selective,full]",
        "grid.dp_sharding=[NO_OP,OPTIMIZER_STATES]",
    ],
    # Korthikanti et al. 2022 setting for GPT-3 175B: sequence 2048, no flash attention, TP 8 x PP 8
    # (and neighbours), every recompute / SP / sharding choice, interleaving 1-3.
    "gpt3-175b_a100_korthikanti": [
        "model=gpt3-175b",
        "hardware=a100-sxm-80gb",
        "workload=train",
        "workload.seq_len=2048",
        "workload.global_batch=64",
        "workload.flash_attention=false",
        "grid.ngpus=[64]",
        "grid.tp=[4,8]",
        "grid.pp=[8,16]",
        "grid.cp=[1]",
        "grid.vpp=[1,2,3]",
        "grid.micro_batch=[1,2]",
    ],
    # Serving (issue 4): every TP/PP/SP layout of Llama-3.1-70B on 8 and 16 H100s at three batch sizes.
    "llama3.1-70b_h100_inference": [
        "workload=inference",
        "model=llama3.1-70b",
        "hardware=h100-sxm-80gb",
        "grid.ngpus=[8,16]",
        "workload.batch=1,16,64",
    ],
    # Serving an MoE: Mixtral 8x7B on 8 H100s (EP and TP), two batch sizes.
    "mixtral-8x7b_h100_inference": [
        "workload=inference",
        "model=mixtral-8x7b",
        "hardware=h100-sxm-80gb",
        "grid.ngpus=[8]",
        "workload.batch=1,32",
    ],
}


def golden_path(name: str) -> Path:
    return GOLDEN_DIR / f"{name}.csv"


def generate(name: str, path: str | Path) -> Path:
    """Run the case through the real CLI code path (`parallmelism sweep -q ... output.path=PATH`)."""
    from parallmelism.cli.sweep_cmd import run_sweep

    run_sweep([*CASES[name], f"output.path={path}", "output.format=csv"], None, quiet=True)
    return Path(path)


VALIDATION = GOLDEN_DIR / "validation.csv"  # `parallmelism validate` on the shipped cases


def generate_validation(path: str | Path = VALIDATION) -> Path:
    """The validation table (`parallmelism validate --out PATH` on the shipped cases): every case's
    measured value, prediction and error. The calibration statistics live here, not in docstrings."""
    from parallmelism.report.writer import write_table
    from parallmelism.validate.runner import run_validation

    table = run_validation(None, [], None)
    write_table(table, path, "csv")
    print(f"wrote {len(table)} rows to {path}")
    return Path(path)
