"""The `stack=` config group (conf/stack/, specs/stack.py): composition per stack, megatron-te as
today, the overheads keyed by accelerator with a stated fallback, one sentence for a bad name."""

from __future__ import annotations

import pytest

from conftest import invoke, run_cli
from parallmelism.config import load_option, load_run_configs, option_files
from parallmelism.errors import UserError
from parallmelism.specs import Overheads, StackSpec
from parallmelism.specs.run import DEFAULT_STACK

STACKS = sorted(option_files("stack", []))


def test_the_default_stack_is_megatron_te_in_the_config_and_in_code():
    ((_, run),) = load_run_configs([])
    assert run.stack.name == DEFAULT_STACK == "megatron-te"
    assert run.stack == load_option("stack", DEFAULT_STACK)  # a RunConfig built in code takes the same file


@pytest.mark.parametrize("name", STACKS)
def test_every_stack_composes_and_names_its_choices(name):
    ((_, run),) = load_run_configs([f"stack={name}"])
    assert run.stack.name == name
    assert run.stack.kernels.source and run.stack.collectives.source and run.stack.layouts.source
    # every accelerator gets overheads, and the phrase says whose
    for hw in ("h100-sxm-80gb", "a100-sxm-80gb", "gb200-nvl72"):
        oh, where = run.stack.overheads_for(hw)
        assert isinstance(oh, Overheads) and f"stack {name}" in where


def test_megatron_te_states_its_moe_launch_time_and_names_its_fits():
    """The fitted terms are held to calibrate's fit by tests/test_stack_overhead_fit.py; here what is stated, not
    fitted: the host time per launch of TE GroupedLinear's per-expert kernels (10 us on both fits), the A100
    40GB taking the 80GB fit, and a part without rows taking the fallback (the H100's)."""
    stack = load_option("stack", "megatron-te")
    h100, a100 = (stack.overheads_for(hw)[0] for hw in ("h100-sxm-80gb", "a100-sxm-80gb"))
    assert h100.moe_expert_launch_us == a100.moe_expert_launch_us == 10
    assert stack.overheads_for("a100-sxm-40gb")[0] == a100
    assert stack.overheads_for("b200-180gb")[0] == h100
    assert "fallback" in stack.overheads_for("b200-180gb")[1]


def test_stack_fields_are_ordinary_overrides_and_show_in_cfg_job():
    ((_, run),) = load_run_configs(["stack.kernels.attention=flash2", "stack.overheads.h100-sxm-80gb.step_fixed_ms=5"])
    assert run.attention_backend() == "flash2" and run.overheads()[0].step_fixed_ms == 5
    ((_, run),) = load_run_configs(["workload.attention_backend=flash3"])  # the workload's beats the stack's
    assert run.attention_backend() == "flash3" and run.accelerator().kernels.attention_backend == "flash3"
    code, out = invoke("sweep", "--cfg", "job")
    assert code == 0 and "stack:" in out and "overheads_fallback: h100-sxm-80gb" in out


def test_a_hardware_files_own_overheads_are_honoured_and_named(tmp_path):
    """Set by name (hardware.overheads={...}, the absent sub-spec test_config_schema skips): the
    machine's own block wins over the stack's fit, and `show` says whose overheads the step took."""
    ((_, run),) = load_run_configs(["hardware.overheads={step_fixed_ms:7}"])
    oh, where = run.overheads()
    assert oh.step_fixed_ms == 7 and oh.layer_launch_us == 0 and "own overheads" in where
    assert run.accelerator().overheads == oh
    pinned = [
        "model=llama3.1-8b",
        "grid.ngpus=[8]",
        "grid.tp=[1]",
        "grid.pp=[1]",
        "grid.cp=[1]",
        "grid.micro_batch=[1]",
    ]
    pinned += ["grid.dp_sharding=[OPTIMIZER_STATES]", "grid.recompute=[none]", "grid.vpp=[1]", "grid.ep=[1]"]
    code, out = invoke("show", *pinned)
    assert code == 0 and "stack: megatron-te" in out and "fit on h100-sxm-80gb" in out
    code, out = invoke("show", *pinned, "hardware=gb200-nvl72")
    assert code == 0 and "fallback: no fit on gb200-nvl72" in out


def test_a_bad_stack_name_is_one_sentence():
    r = run_cli("sweep", "stack=nosuch", "model=llama3.1-8b", "grid.ngpus=[8]")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "unknown stack 'nosuch'; available: " in r.stderr and "megatron-te" in r.stderr


def test_a_stack_naming_an_accelerator_without_a_fit_is_refused():
    with pytest.raises(ValueError, match="has no fit of its own"):
        StackSpec(name="x", overheads={"a": "b"})
    with pytest.raises(ValueError, match="has no fit of its own"):
        StackSpec(name="x", overheads_fallback="h100-sxm-80gb")


def test_an_overhead_is_bounded_by_what_it_physically_is():
    """A layer's host time per micro-batch is at most milliseconds, a step's fixed time seconds."""
    with pytest.raises(UserError, match="layer_launch_us"):
        load_run_configs(["stack.overheads.h100-sxm-80gb.layer_launch_us=6000"])
    with pytest.raises(UserError, match="step_fixed_ms"):
        load_run_configs(["stack.overheads.h100-sxm-80gb.step_fixed_ms=20000"])


def test_the_stack_names_its_context_parallel_implementation():
    """torchtitan runs torch's context_parallel ring, megatron-te Transformer Engine's; a workload
    override wins (specs/run.py workload_under_stack)."""
    for name, impl in (("torchtitan", "torch"), ("megatron-te", "transformer_engine")):
        ((_, run),) = load_run_configs([f"stack={name}"])
        assert run.stack.kernels.context_parallel == impl
        assert run.training_workload().cp_implementation == impl
    ((_, run),) = load_run_configs(["stack=torchtitan", "workload.cp_implementation=transformer_engine"])
    assert run.training_workload().cp_implementation == "transformer_engine"


def test_a_stack_that_disables_nvls_prices_its_all_reduces_on_the_ring():
    """megatron-te states collectives.nccl_nvls false (NeMo / Megatron-Bridge PERF_ENV_VARS set
    NCCL_NVLS_ENABLE=0): a 256 MiB TP8 all-reduce on H100 under it costs the ring's time, under torchtitan
    (NCCL's default) the faster NVLS one; a serving run (no training stack) keeps the switch's NVLS."""
    from parallmelism.cost.collectives import group_collective_time_s
    from parallmelism.specs.run import under_stack
    from parallmelism.specs.workload import InferenceWorkload

    hw = load_option("hardware", "h100-sxm-80gb")
    assert hw.scale_up.nvls is not None
    megatron, titan = load_option("stack", "megatron-te"), load_option("stack", "torchtitan")
    assert not megatron.collectives.nccl_nvls and titan.collectives.nccl_nvls

    def t(h):
        return float(group_collective_time_s(h, "all_reduce", 256.0 * 2**20, 8, 1))

    ring, nvls = t(hw.without_nvls()), t(hw)
    assert nvls < 0.85 * ring  # NVLS wins at this size (tests/test_collectives.py checks its level)
    assert t(under_stack(hw, megatron)) == ring
    assert t(under_stack(hw, titan)) == nvls
    serving = InferenceWorkload()
    assert under_stack(hw, megatron, serving).scale_up.nvls == hw.scale_up.nvls
