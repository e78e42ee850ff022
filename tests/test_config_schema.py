"""The specs are the config schema: every field of every group is overridable by its documented name.

The test walks the pydantic spec classes (not a list kept here), finds for each field a value that
differs from the composed one and that the spec accepts, overrides it on a command line and checks it
arrives in the validated RunConfig. Efficiency inheritance (`from:`) is checked against the values
the accelerator files spelled out in full before inheritance existed.
"""

from __future__ import annotations

import typing

import pytest
from pydantic import BaseModel, ValidationError

from parallmelism.config import load_option, load_run_configs, option_files
from parallmelism.errors import UserError
from parallmelism.specs import RunConfig

# (base overrides, sections whose fields are overridden): mixtral has `moe`, deepseek-v3 has `mla`.
SCENARIOS = [
    (
        ["model=mixtral-8x7b", "hardware=h100-sxm-80gb"],
        ["model", "hardware", "workload", "grid", "stack", "output", "plan"],
    ),
    (["model=deepseek-v3"], ["model.mla"]),
    (["workload=inference"], ["workload", "grid", "engine"]),
]
# One-value Literals cannot change: `kind` is the workload discriminator (chosen with workload=NAME).
UNCHANGEABLE = {("TrainWorkload", "kind"), ("InferenceWorkload", "kind")}
# Fields valid only together with another's value (a draft model needs spec_method=draft): tried in a
# batch of their own with the companion values.
COMPANIONS = {
    "workload.draft_model": {"workload.spec_method": "draft"},
    "workload.fp8_param_gather": {"workload.precision": "fp8"},
    "workload.fp8_scaling": {"workload.precision": "fp8"},
    "model.position_embedding": {"model.max_position": 1 << 20},  # a learned table long enough for the run
    "workload.spec_method": {"model.mtp_layers": 1},  # spec_method=mtp drafts with the model's MTP module
    "workload.activation_offload_layers": {"model.moe": None},  # offload is modelled for dense layers only
}


def _strip(ann):
    while typing.get_origin(ann) is typing.Annotated:
        ann = typing.get_args(ann)[0]
    return ann


def _candidates(ann, current):
    """Values of type `ann` different from `current`, most plausible first (the spec filters them)."""
    ann = _strip(ann)
    origin, args = typing.get_origin(ann), typing.get_args(ann)
    if origin is typing.Union:
        inner = [a for a in args if a is not type(None)]
        out = [c for a in inner for c in _candidates(a, current)]
        return out + ([None] if current is not None and len(inner) < len(args) else [])
    if origin is typing.Literal:
        return [a for a in args if a != current]
    if ann is bool:
        return [not current]
    if ann is int:
        base = [1, 2, 8, 64] if current is None else [current * 2, current + 1, 1, 2]
        return [v for v in base if v != current]
    if ann is float:
        base = [0.5, 2.0] if current is None else [current * 0.9, current * 1.1, current + 1, 0.5, 2.0, 10.0]
        return [v for v in base if v != current]
    if ann is str:  # accelerator names last: a stack's overheads entries and fallback name one
        return [v for v in ("edited-value", "a100-sxm-80gb", "h100-sxm-80gb") if v != current]
    if origin is list:
        first = current[0] if current else None
        return [[c] for c in _candidates(args[0], first)]
    if origin is dict:  # an op name -> factor map (workload.unfused_elementwise)
        return [v for v in ({"norm_attn": 2.0}, {}) if v != current]
    return []


def _text(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return "[" + ",".join(_text(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{_text(v)}" for k, v in value.items()) + "}"
    return repr(value) if isinstance(value, float) else str(value)


def _walk(spec: BaseModel, prefix: str, covered: set):
    """(dotted key, annotation, current value, owner class name) of every leaf field under `spec`."""
    for name, field in type(spec).model_fields.items():
        value = getattr(spec, name)
        key = f"{prefix}.{name}"
        if isinstance(value, BaseModel):
            covered.add((type(spec).__name__, name))
            yield from _walk(value, key, covered)
        elif isinstance(value, dict):
            covered.add((type(spec).__name__, name))
            for k, v in value.items():  # a stack's overheads: {accelerator: fit | another accelerator's name}
                if isinstance(v, BaseModel):
                    yield from _walk(v, f"{key}.{k}", covered)
                else:
                    yield f"{key}.{k}", type(v) if isinstance(v, str) else float, v, None
        elif value is None and any(
            isinstance(a, type) and issubclass(a, BaseModel) for a in typing.get_args(field.annotation)
        ):
            continue  # an absent sub-spec (a dense model's moe): its fields are walked where it is set
        elif (type(spec).__name__, name) not in UNCHANGEABLE:
            yield key, field.annotation, value, (type(spec).__name__, name)


def _get(run: RunConfig, key: str):
    obj = run
    for part in key.split("."):
        obj = obj[part] if isinstance(obj, dict) else getattr(obj, part)
    return obj


def _all_fields() -> set:
    """(class name, field) of every spec class reachable from RunConfig, Optional sub-specs included."""
    seen, todo, out = set(), [RunConfig], set()
    while todo:
        cls = todo.pop()
        if cls in seen:
            continue
        seen.add(cls)
        for name, field in cls.model_fields.items():
            if cls is not RunConfig:
                out.add((cls.__name__, name))
            for a in typing.get_args(field.annotation) or (field.annotation,):
                if isinstance(a, type) and issubclass(a, BaseModel):
                    todo.append(a)
    return out - UNCHANGEABLE


def test_every_spec_field_is_overridable_by_its_name():
    covered: set = set()
    for base, sections in SCENARIOS:
        ((_, run),) = load_run_configs(base)
        data = run.model_dump()
        batches: list[dict] = []
        for section in sections:  # a sub-spec walked directly (model.mla) is a field of its parent
            parent, _, last = section.rpartition(".")
            if parent:
                covered.add((type(_get(run, parent)).__name__, last))
        pending = [leaf for section in sections for leaf in _walk(_get(run, section), section, covered)]
        while pending:  # a field may need another's new value first (learned positions need max_position)
            left = [leaf for leaf in pending if not _place(leaf, data, batches, covered)]
            if len(left) == len(pending):
                pytest.fail(f"no valid new value found for {[key for key, *_ in left]}")
            pending = left
        for batch in batches:
            overrides = base + [f"{k}={_text(v)}" for k, v in batch.items()]
            ((_, got),) = load_run_configs(overrides)
            for key, value in batch.items():
                assert _get(got, key) == value, f"{key}={_text(value)} did not arrive ({_get(got, key)!r})"
    assert _all_fields() - covered - COVERED_ELSEWHERE == set()


# An absent sub-spec of every shipped file (the walk skips it): set by name in its own test.
COVERED_ELSEWHERE = {("AcceleratorSpec", "overheads")}  # tests/test_stack.py, the hardware's own block honoured


def _place(leaf, data: dict, batches: list[dict], covered: set) -> bool:
    """Put a new value for one field into the first batch it validates in (cross-field rules)."""
    key, ann, current, owner = leaf
    for value in _candidates(ann, current):
        for batch in batches + [{}]:
            trial = {**batch, key: value} if batch or key not in COMPANIONS else {**COMPANIONS[key], key: value}
            try:
                RunConfig.model_validate(_nested(data, trial))
            except ValidationError:
                continue
            batch.update(trial)
            if len(batch) == 1:
                batches.append(batch)
            if owner:
                covered.add(owner)
            return True
    return False


def _nested(data: dict, flat: dict) -> dict:
    import copy

    out = copy.deepcopy(data)
    for key, value in flat.items():
        node = out
        *parents, last = key.split(".")
        for p in parents:
            node = node[p]
        node[last] = value
    return out


def test_documented_overrides_compose():
    ((_, run),) = load_run_configs(
        [
            "workload.overlap_pp_comm=false",
            "engine.request_overhead_ms=5",
            "hardware.efficiency.matmul_fp8=0.6",
            "engine.moe_layer_overhead_us=12.5",
        ]
    )
    assert run.workload.overlap_pp_comm is False
    assert run.hardware.efficiency.matmul_fp8 == 0.6
    assert (run.engine.request_overhead_ms, run.engine.moe_layer_overhead_us) == (5, 12.5)
    # an accelerator that inherits its efficiency block has the same keys on the command line
    ((_, run),) = load_run_configs(["hardware=b200-180gb", "hardware.efficiency.scale_out=0.5"])
    assert run.hardware.efficiency.scale_out == 0.5


# The efficiency blocks as the accelerator files spelled them out before `from:` existed (commit a2e1a0d),
# the keys a file left out at the spec defaults of then: decode_hbm 0.6, request_overhead_ms 10,
# gemm_tile_rows 64, matmul_fp8 None (= matmul). Inheritance must reproduce every value. Training kernel
# fractions (attention_backward, matmul_half_dim) have since moved to measured kernels (cost/kernels.py). The serving
# overheads since refitted (benchmarks/fit_serving_overhead.py, serving ops timed by the kernel model: request
# 6.0 ms, iteration 0 ms since collectives pay scale_up.collective_launch_us, MoE layer 0 us) are the H100 values every H100-derived part takes; H200 also takes
# the H100 fp8 serving fraction. The serving kernel fractions (attention, decode_hbm, gemm_tile_rows) left
# the block when serving ops took their times from the kernel model, the serving overheads when they became
# the engine's (conf/engine/: every engine file then held the H100 values, 6.0 ms, 0 ms, 0 us).
H100 = dict(
    matmul=0.67,
    hbm=0.7,
    scale_up=0.8,
    scale_out=0.94,
)
A100 = dict(H100, matmul=0.74, hbm=0.9, scale_out=0.96)
BEFORE_INHERITANCE = {
    "h100-sxm-80gb": dict(H100, matmul_fp8=0.65),
    "h100-sxm-80gb-profiled": dict(H100, matmul_fp8=0.65),  # `profile` copies its --base efficiencies
    "a100-sxm-80gb": dict(A100, matmul_fp8=None),
    "a100-sxm-40gb": dict(A100, matmul_fp8=None),
    "h200-sxm-141gb": dict(H100, matmul_fp8=0.65),
    **{n: dict(H100, matmul_fp8=0.65) for n in ("h100-grand-teton-96gb", "h100-nvl-94gb", "h800-sxm-80gb", "h20-96gb")},
    **{
        n: dict(H100, matmul_fp8=None)
        for n in ("b200-180gb", "gb200-nvl72", "gb300-nvl72", "tpu-v5p")
        + ("b300-288gb", "mi355x-288gb", "tpu-v5e", "tpu-v6e")
    },
    # issue 32: the MI300X's own published RCCL busbw and fp8 GEMM fractions (its file), the MI325X takes them
    **{n: dict(H100, scale_up=0.707, matmul_fp8=0.771) for n in ("mi300x-192gb", "mi325x-256gb")},
}


@pytest.mark.parametrize("name", sorted(BEFORE_INHERITANCE))
def test_inherited_efficiency_equals_the_spelled_out_blocks(name):
    assert load_option("hardware", name).efficiency.model_dump() == BEFORE_INHERITANCE[name]


def test_every_shipped_accelerator_is_checked_above():
    assert set(option_files("hardware", [])) == set(BEFORE_INHERITANCE)


def _hw(tmp_path, name, efficiency: str):
    d = tmp_path / "hardware"
    d.mkdir(exist_ok=True)
    (d / f"{name}.yaml").write_text(
        "hbm_capacity_gib: 80\nhbm_usable_gib: 79\nhbm_bandwidth_gbps: 3000\npeak_tflops: {bf16: 900}\n"
        "scale_up: {domain_size: 8, bandwidth_gbps: 400, collective_launch_us: 4.83}\n" + efficiency
    )


def test_user_accelerator_inherits_and_overrides(tmp_path):
    _hw(tmp_path, "mygpu", "efficiency:\n  from: h100-sxm-80gb\n  matmul: 0.5\n")
    eff = load_option("hardware", "mygpu", [str(tmp_path)]).efficiency
    assert eff.matmul == 0.5 and eff.hbm == 0.7 and eff.matmul_fp8 == 0.65 and eff.scale_up == 0.8
    ((_, run),) = load_run_configs(["hardware=mygpu", "hardware.efficiency.hbm=0.66"], [str(tmp_path)])
    assert run.hardware.efficiency.matmul == 0.5 and run.hardware.efficiency.hbm == 0.66


@pytest.mark.parametrize(
    "efficiency,message",
    [
        ("", "efficiency is missing matmul"),  # no block: no silent calibration
        ("efficiency: {matmul: 0.5}\n", "efficiency is missing hbm"),  # partial block without from:
        ("efficiency: {from: nosuch}\n", "from='nosuch' is not a known accelerator"),
        ("efficiency: {from: mygpu}\n", "chain loops"),
    ],
)
def test_missing_calibration_is_one_sentence(tmp_path, efficiency, message):
    _hw(tmp_path, "mygpu", efficiency)
    with pytest.raises(UserError, match=message) as err:
        load_option("hardware", "mygpu", [str(tmp_path)])
    assert (
        "\n" not in str(err.value)
        and "from: h100-sxm-80gb" in str(err.value)
        or "from=" in message
        or "loops" in message
    )


def test_serving_overhead_in_a_hardware_file_says_it_moved_to_the_engine(tmp_path):
    _hw(tmp_path, "mygpu", "efficiency:\n  from: h100-sxm-80gb\n  request_overhead_ms: 4\n")
    with pytest.raises(UserError, match="request_overhead_ms belong to the serving engine now") as err:
        load_option("hardware", "mygpu", [str(tmp_path)])
    assert "\n" not in str(err.value) and "engine.request_overhead_ms=" in str(err.value)


@pytest.mark.parametrize("name", ["trtllm", "vllm", "sglang"])
def test_each_engine_composes_and_takes_overrides(name):
    """engine=NAME picks conf/engine/NAME.yaml; engine.FIELD=... sets one of its fields; the run's
    engine is what that file says (its name matches the file)."""
    ((_, run),) = load_run_configs(["workload=inference", f"engine={name}", "engine.iteration_overhead_ms=0.25"])
    shipped = load_option("engine", name)
    assert run.engine == shipped.model_copy(update={"iteration_overhead_ms": 0.25})
    assert run.engine.name == name


def test_default_engine_is_trtllm():
    ((_, run),) = load_run_configs(["workload=inference"])
    assert run.engine == load_option("engine", "trtllm")


def test_user_engine_file_is_an_option(tmp_path):
    (tmp_path / "engine").mkdir()
    (tmp_path / "engine" / "myengine.yaml").write_text(
        "display_name: mine\nversion: '1'\nrequest_overhead_ms: 2\niteration_overhead_ms: 0.1\n"
        "moe_layer_overhead_us: 3\ntp_all_reduce: nccl\ncustom_all_reduce_one_shot_latency_us: 0\n"
        "custom_all_reduce_two_shot_latency_us: 0\ncustom_all_reduce_link_efficiency: 1\ncustom_all_reduce_max_bytes: 0\n"
        "tp_all_reduce_call_overhead_us: 0\n"
    )
    ((_, run),) = load_run_configs(["workload=inference", "engine=myengine"], [str(tmp_path)])
    assert (run.engine.name, run.engine.request_overhead_ms, run.engine.moe_layer_overhead_us) == ("myengine", 2, 3)


def test_conf_files_hold_values_only():
    """conf/workload and conf/grid restate no spec default (defaults live once, in parallmelism/specs/)."""
    from parallmelism.config.compose import _read_mapping
    from parallmelism.config.schema import group_class, spec_defaults

    for group in ("workload", "grid"):
        for name, path in option_files(group, []).items():
            values, package = _read_mapping(path)
            values = values.get(group, {}) if package == "_global_" else values
            defaults = spec_defaults(group_class(group, values))
            restated = [k for k, v in values.items() if k != "kind" and k in defaults and defaults[k] == v]
            assert restated == [], f"{path} restates the spec defaults of {restated}"


def test_yaml_key_given_twice_is_one_sentence(tmp_path):
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "twice.yaml").write_text(
        "hidden: 1024\nlayers: 2\nheads: 8\nffn_hidden: 4096\nvocab: 100\nhidden: 2048\n"
    )
    with pytest.raises(UserError, match="duplicate key 'hidden'"):
        load_option("model", "twice", [str(tmp_path)])


@pytest.mark.parametrize(
    "name",
    ["b200-180gb", "gb200-nvl72", "gb300-nvl72", "h200-sxm-141gb", "mi300x-192gb", "tpu-v5p"]
    + ["h100-grand-teton-96gb", "h100-nvl-94gb", "h800-sxm-80gb", "h20-96gb", "b300-288gb"]
    + ["mi325x-256gb", "mi355x-288gb", "tpu-v5e", "tpu-v6e"],
)
def test_unmeasured_accelerators_take_the_stacks_h100_overheads(name):
    """One fit, one place: accelerators without end-to-end rows take megatron-te's H100 fit (its
    stated fallback), and no hardware file carries a block of its own."""
    stack = load_option("stack", "megatron-te")
    h100, _ = stack.overheads_for("h100-sxm-80gb")
    got, where = stack.overheads_for(name)
    assert got == h100 and "fallback" in where
    assert load_option("hardware", name).overheads is None
    assert h100.layer_launch_us > 0  # the fitted block, not the spec's zeros
    assert stack.overheads_for("a100-sxm-40gb")[0] == stack.overheads_for("a100-sxm-80gb")[0]


def test_user_overheads_are_honoured_and_from_is_one_sentence(tmp_path):
    """A hardware file of one's own that states its overheads keeps them (over the stack's fit); one
    that inherits with `from:` (the rule before the stack group) is told where overheads live now."""
    _hw(tmp_path, "mygpu", "efficiency: {from: h100-sxm-80gb}\noverheads:\n  step_fixed_ms: 7\n")
    oh = load_option("hardware", "mygpu", [str(tmp_path)]).overheads
    assert oh.step_fixed_ms == 7 and oh.layer_launch_us == 0
    _hw(tmp_path, "mygpu", "efficiency: {from: h100-sxm-80gb}\noverheads: {from: h100-sxm-80gb}\n")
    with pytest.raises(UserError, match="training overheads belong to the software stack"):
        load_option("hardware", "mygpu", [str(tmp_path)])


def test_efficiency_has_no_numbers_a_hardware_file_could_fall_back_to():
    """Every efficiency value is a hardware file's (or the file it names with `from:`); the spec
    holds none (matmul_fp8's None means `matmul`, not a number)."""
    from pydantic import ValidationError

    from parallmelism.specs.accelerator import AcceleratorSpec, Efficiency

    defaults = {n: f.default for n, f in Efficiency.model_fields.items() if not f.is_required()}
    assert defaults == {"matmul_fp8": None}
    assert AcceleratorSpec.model_fields["efficiency"].is_required()
    with pytest.raises(ValidationError):
        Efficiency(matmul=0.7)


def test_an_accelerator_without_a_collective_launch_is_refused_by_name(tmp_path):
    """scale_up.collective_launch_us is required (no silent default): a file that leaves it out gets
    one line naming the field and exit code 2, not a traceback."""
    from conftest import run_cli

    d = tmp_path / "hardware"
    d.mkdir()
    (d / "nolaunch.yaml").write_text(
        "hbm_capacity_gib: 80\nhbm_usable_gib: 79\nhbm_bandwidth_gbps: 3000\npeak_tflops: {bf16: 900}\n"
        "scale_up: {domain_size: 8, bandwidth_gbps: 400}\nefficiency:\n  from: h100-sxm-80gb\n"
    )
    r = run_cli("sweep", "-cd", tmp_path, "model=llama3.1-8b", "hardware=nolaunch")
    assert r.returncode == 2
    assert "scale_up.collective_launch_us: Field required" in r.stderr and "Traceback" not in r.stderr
