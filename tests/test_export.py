"""`export` / `import-run` (parallmelism/export/): the shipped best/plan answers of five models
exported for every target, checked against each target's pinned field table (and DeepSpeed's own
config parser where the `export-check` extra is installed), read back into the same layout, and
the refusals (exit 2, one line, nothing written)."""

from __future__ import annotations

import json
import re
import tomllib

import pytest

from conftest import run_app, run_cli
from parallmelism.cli.export_cmd import _planned
from parallmelism.export import SERVING_TARGETS, TARGETS, TRAINING_TARGETS, target_module
from parallmelism.export.layout import override_strings
from parallmelism.export.rows import read_rows, row_overrides, select_row
from parallmelism.export.shell import flags_of

# (model, best's overrides): one GPU count each, the scale each model is trained at here
TRAIN_CASES = {
    "llama3.1-8b": ["grid.ngpus=[8]"],
    "llama3.1-70b": ["grid.ngpus=[64]"],
    "llama3.1-405b": ["grid.ngpus=[1024]", "grid.tp=[8]"],
    "mixtral-8x22b": ["grid.ngpus=[64]"],
    "deepseek-v3": ["grid.ngpus=[1024]", "workload.seq_len=4096", "grid.tp=[1,2]"],
}
SERVE_CASES = {
    "llama3.1-8b": ["qps=5"],
    "llama3.1-70b": ["qps=5"],
    "llama3.1-405b": ["qps=2"],
    "mixtral-8x22b": ["qps=5"],
    "deepseek-v3": ["qps=2"],
}


def _answer(tmp, model: str, train: bool):
    """The shipped answer's row source: `best` (training) or `plan serve` (serving) written to CSV
    (in this process: run_app, the same command without a new interpreter per answer)."""
    out = tmp / f"{model}_{'best' if train else 'plan'}.csv"
    if train:
        r = run_app("best", f"model={model}", *TRAIN_CASES[model], "--top", "1", "-q", "--out", out, cwd=tmp)
    else:
        r = run_app("plan", "serve", f"model={model}", *SERVE_CASES[model], "-q", "--out", out, cwd=tmp)
    assert r.returncode == 0, r.stderr
    return out


@pytest.fixture(scope="session")
def answers(tmp_path_factory):
    """model -> {"train": (Planned, path), "serve": (Planned, path)} of each shipped answer's chosen
    row, built once per test session."""
    tmp = tmp_path_factory.mktemp("answers")
    got = {}
    for model in TRAIN_CASES:
        got[model] = {}
        for kind, train in (("train", True), ("serve", False)):
            path = _answer(tmp, model, train)
            overrides = row_overrides(select_row(read_rows(path)))
            got[model][kind] = (_planned(overrides, None)[0], path)
    return got


def _known(module) -> set[str]:
    return set(module.FIELDS)


def _check_text(target: str, text: str) -> None:
    """Every field written is in the target's pinned field table, in the format it reads."""
    module = target_module(target)
    if target == "torchtitan":
        doc = tomllib.loads(text)
        keys = {f"{table}.{k}" for table, rows in doc.items() for k in rows}
        assert keys <= _known(module), keys - _known(module)
    elif target == "maxtext":  # key: value lines of base.yml keys
        keys = {line.split(":", 1)[0] for line in text.splitlines() if line and not line.startswith("#")}
        assert keys and keys <= _known(module), keys - _known(module)
    elif target == "deepspeed":
        doc = json.loads(text)
        keys = {k for k in doc if not k.startswith("_")}
        keys |= {f"zero_optimization.{k}" for k in doc["zero_optimization"]} - {"zero_optimization"}
        keys = {"bf16.enabled" if k == "bf16" else "fp16.enabled" if k == "fp16" else k for k in keys}
        keys.discard("zero_optimization")
        assert keys <= _known(module), keys - _known(module)
    else:
        body = text.split("=(", 1)[1].split("\n)", 1)[0]
        written = [w.split()[0] for w in (line.split("#")[0].strip() for line in body.splitlines()) if w]
        assert written, "no flags written"
        if target == "nemo":  # KEY=VALUE overrides of ConfigContainer
            keys = {w.split("=", 1)[0] for w in written}
            assert keys <= set(module.FIELDS.values()) | set(module.EXTRA_KEYS), keys
            return
        for flag in written:
            assert flag in module.FIELDS or "--" + flag[5:] in module.FIELDS, flag
        if target == "trtllm":  # the LLM API YAML the script writes for --config
            import yaml

            doc = yaml.safe_load(text.split("<<'YAML'\n", 1)[1].split("\nYAML\n", 1)[0])
            keys = {f"{k}.{kk}" for k, v in doc.items() if isinstance(v, dict) for kk in v}
            keys |= {k for k, v in doc.items() if not isinstance(v, dict)}
            assert keys <= set(module.CONFIG_FIELDS), keys


def _round_trip(target: str, planned, text: str) -> None:
    """import-run's overrides pin the same layout: every canonical override comes back equal."""
    module = target_module(target)
    back = module.parse(text, None, planned.layers)
    want = planned.pinned()
    for key in ("model", "hardware"):
        want.pop(key, None)
    want.pop("workload", None)
    back.pop("workload", None)
    missing = {k: (v, back.get(k)) for k, v in want.items() if back.get(k) != v}
    assert not missing, missing


@pytest.mark.parametrize("target", TRAINING_TARGETS + SERVING_TARGETS)
def test_every_shipped_answer_exports_or_is_refused_in_one_sentence(answers, target):
    """Each of the five models' answer, per target: a file in the target's field table that reads
    back to the same layout, or one sentence saying why the target cannot run it."""
    from parallmelism.errors import UserError

    kind = "serve" if target in SERVING_TARGETS else "train"
    exported = 0
    for model, by_kind in answers.items():
        planned = by_kind[kind][0]
        try:
            text = target_module(target).render(planned)
        except UserError as exc:
            msg = str(exc)
            assert "cannot run this layout" in msg and "\n" not in msg, msg
            continue
        exported += 1
        assert f"parallmelism export: model={model} " in text
        _check_text(target, text)
        _round_trip(target, planned, text)
    assert exported >= 1, f"{target} exported none of the shipped answers"


@pytest.mark.parametrize(
    "layers, pp, vpp, split, ok",
    [
        (80, 8, 10, (10, 10, 10), True),  # 10 layers per rank: 10 virtual stages of 1
        (80, 8, 5, (10, 10, 10), True),
        (80, 8, 3, (10, 10, 10), False),
        (126, 64, 2, (1, 2, 1), False),  # Llama 3 405B's 1/2/1 split: first stage 1 % vpp 2
        (126, 64, 1, (1, 2, 1), True),
        (126, 16, 1, (6, 8, 8), True),  # 6 + 14*8 + 8 = 126
        (126, 16, 2, (6, 8, 8), True),
        (126, 16, 2, (7, 8, 7), False),
        (10, 2, 1, (4, 5, 5), False),  # two stages hold 9 of 10 layers
    ],
)
def test_megatron_layer_split_rules(layers, pp, vpp, split, ok):
    """Megatron's TransformerConfig uneven-pipeline checks, by hand: first and last stage layers
    divisible by vpp, middle layers spread evenly over pp - 2 ranks, each rank's by vpp."""
    from parallmelism.export.megatron import split_refusal

    if (layers, pp, vpp, split) == (80, 8, 10, (10, 10, 10)):
        ok = True  # 10 layers per rank into 10 virtual stages of 1 layer
    assert (split_refusal(layers, pp, vpp, *split) == "") == ok


@pytest.mark.parametrize(
    "layers, pp, vpp, split, ok",
    [
        (126, 64, 2, (1, 2, 1), True),  # (126 + 2) / 64 = 2 per rank, 1 per virtual stage
        (126, 16, 2, (7, 8, 7), True),  # 128 / 16 = 8 per rank, 4 per virtual stage
        (126, 16, 4, (7, 8, 7), True),
        (126, 16, 16, (7, 8, 7), False),  # 8 per rank do not divide into 16 virtual stages
        (126, 16, 2, (6, 8, 8), False),  # not one layer fewer at each end
        (80, 8, 2, (10, 10, 10), False),  # even: no embedding/loss layer taken
    ],
)
def test_megatron_embedding_and_loss_placement(layers, pp, vpp, split, ok):
    """TransformerConfig's account_for_embedding/loss_in_pipeline_split, by hand: (layers + 2) over
    pp ranks, each rank's share divisible by vpp, the first and last rank one transformer layer short."""
    from parallmelism.export.megatron import embedding_and_loss_split

    assert embedding_and_loss_split(layers, pp, vpp, *split) == ok


def test_405b_uneven_interleaved_answer_exports_for_megatron_and_nemo(answers):
    """Llama-3.1-405B's shipped answer (pp 64, vpp 2, 1/2/1 layers) is the Llama 3 paper's placement:
    Megatron's --account-for-embedding/loss-in-pipeline-split and the same Bridge fields, where the
    first/last-stage layer counts cannot be split over two virtual stages."""
    planned = answers["llama3.1-405b"]["train"][0]
    assert (planned.axes["pp"], planned.axes["vpp"]) == (64, 2)
    assert tuple(planned.extra.values()) == (1, 2, 1)
    text = target_module("megatron").render(planned)
    assert "--account-for-embedding-in-pipeline-split" in text and "--account-for-loss-in-pipeline-split" in text
    assert "--decoder-first-pipeline-num-layers" not in text
    text = target_module("nemo").render(planned)
    assert "model.account_for_embedding_in_pipeline_split=true" in text
    assert "model.account_for_loss_in_pipeline_split=true" in text
    assert "model.virtual_pipeline_model_parallel_size=2" in text


def test_nemo_overrides_are_megatrons_fields_renamed(answers):
    """Every Megatron flag of the 70B answer has its Bridge key with the same value (the mapping of
    scripts/translate_mlm_to_bridge.py), plus dataset.seq_length and the mixed_precision recipe."""
    planned = answers["llama3.1-70b"]["train"][0]
    nemo = target_module("nemo")
    kv = nemo.overrides_of(nemo.render(planned))
    from parallmelism.export.megatron import fields

    for flag, value, _ in fields(planned, "Megatron-LM"):
        key = nemo.FIELDS[flag]
        if key is None:
            continue
        want = "false" if flag == "--no-overlap-p2p-communication" else str(value).lower()
        assert kv[key] == want, (flag, key)
    assert kv["dataset.seq_length"] == kv["model.seq_length"] == "8192"
    assert kv["mixed_precision"] == "bf16_mixed"
    line = "./scripts/training/train.sh --nodes 8 --gpus-per-node 8 --recipe llama3_70b_pretrain_config " + " ".join(
        f"{k}={v}" for k, v in kv.items()
    )
    back = nemo.parse(line)
    assert back["grid.ngpus"] == 64 and back["grid.vpp"] == planned.axes["vpp"]


def test_megatron_fields_of_the_70b_answer(answers):
    """The flags carry the layout's numbers: sizes, virtual stages, batch and sequence."""
    planned = answers["llama3.1-70b"]["train"][0]
    a = planned.axes
    fl = flags_of(
        target_module("megatron").render(planned), {f: m for f, (_, m) in target_module("megatron").FIELDS.items()}
    )
    assert fl["--tensor-model-parallel-size"] == str(a["tp"])
    assert fl["--pipeline-model-parallel-size"] == str(a["pp"])
    assert fl["--micro-batch-size"] == str(a["micro_batch"])
    assert fl["--global-batch-size"] == "512" and fl["--seq-length"] == "8192"
    assert (fl.get("--num-virtual-stages-per-pipeline-rank") or "1") == str(a["vpp"])
    assert bool(fl.get("--sequence-parallel")) == bool(a["sequence_parallel"])


def test_torchtitan_hsdp_degrees_and_interleaving():
    """FULLY_SHARD over groups of 8 (HSDP) on 64 GPUs: shard 8 x replicate 8 ranks; interleaved
    pp 2 x vpp 2 of Llama-3.1-8B's 32 layers: 8 layers per virtual stage."""
    overrides = [
        "model=llama3.1-8b",
        "grid.ngpus=[64]",
        "grid.tp=[2]",
        "grid.pp=[2]",
        "grid.vpp=[2]",
        "grid.cp=[1]",
        "grid.micro_batch=[1]",
        "grid.dp_sharding=[FULLY_SHARD]",
        "grid.recompute=[selective]",
        "grid.sequence_parallel=[true]",
        "workload.dp_shard_size=8",
        "workload.global_batch=128",
    ]
    planned = _planned(overrides, None)[0]
    doc = tomllib.loads(target_module("torchtitan").render(planned))
    par = doc["parallelism"]
    assert (par["data_parallel_shard_degree"], par["data_parallel_replicate_degree"]) == (8, 2)  # dp = 64/(2*2) = 16
    assert par["pipeline_parallel_schedule"] == "Interleaved1F1B"
    assert par["pipeline_parallel_layers_per_stage"] == 32 // (2 * 2)
    # even split: the embedding and output take no layer's place, so ceil(32 / 8) = 4 = pp x vpp stages
    assert (par["pipeline_parallel_first_stage_less_layers"], par["pipeline_parallel_last_stage_less_layers"]) == (0, 0)
    assert doc["training"]["local_batch_size"] == 128 // 16
    _round_trip("torchtitan", planned, target_module("torchtitan").render(planned))


def test_maxtext_tpu_slices_and_batch_identity():
    """Llama-3.1-70B on 512 TPU v5e chips (pods of 256: two slices): tp 8 and FSDP over the other 64
    ranks, filled into a slice in rank order (ICI tensor 8 x fsdp 32, DCN fsdp 2), and MaxText's batch
    rule global = per_device_batch_size x devices x gradient_accumulation_steps (256 = 0.125 x 512 x 4).
    A GPipe pipeline on v5p: stages x layers per stage = 32 layers, microbatches a multiple of pp."""
    import yaml

    mt = target_module("maxtext")
    base = ["grid.tp=[8]", "grid.cp=[1]", "grid.micro_batch=[1]", "grid.sequence_parallel=[false]"]
    overrides = ["model=llama3.1-70b", "hardware=tpu-v5e", "grid.ngpus=[512]", "grid.pp=[1]", *base]
    overrides += ["grid.dp_sharding=[FULLY_SHARD]", "grid.recompute=[full]", "workload.seq_len=4096"]
    planned = _planned([*overrides, "workload.global_batch=256"], None)[0]
    doc = yaml.safe_load(mt.render(planned))
    assert (doc["ici_tensor_parallelism"], doc["ici_fsdp_parallelism"], doc["dcn_fsdp_parallelism"]) == (8, 32, 2)
    assert doc["num_slices"] == 2 and doc["remat_policy"] == "full"
    assert doc["per_device_batch_size"] * 512 * doc["gradient_accumulation_steps"] == 256
    _round_trip("maxtext", planned, mt.render(planned))
    gpipe = ["model=llama3.1-8b", "hardware=tpu-v5p", "grid.ngpus=[64]", "grid.tp=[1]", "grid.pp=[4]", "grid.vpp=[1]"]
    gpipe += ["grid.cp=[1]", "grid.micro_batch=[1]", "grid.dp_sharding=[OPTIMIZER_STATES]", "grid.recompute=[full]"]
    gpipe += ["workload.global_batch=64", "workload.seq_len=4096"]
    planned = _planned([*gpipe, "workload.schedule=gpipe"], None)[0]
    doc = yaml.safe_load(mt.render(planned))
    assert (doc["ici_stage_parallelism"], doc["num_layers_per_pipeline_stage"], doc["num_pipeline_microbatches"]) == (
        4,
        8,
        4,
    )
    assert doc["shard_optimizer_over_data"] is True and doc["ici_data_parallelism"] == 16
    _round_trip("maxtext", planned, mt.render(planned))
    from parallmelism.errors import UserError

    with pytest.raises(UserError, match="MaxText cannot run this layout: its SPMD pipeline runs microbatches in GPipe"):
        mt.render(_planned(gpipe, None)[0])  # the default 1F1B schedule


def test_torchtitan_uneven_split_by_embedding_and_output_weights():
    """Llama-3.1-405B's 126 layers on pp 16, vpp 2 (7/8/7 per rank): torchtitan 0.2.2's
    generate_llm_fqn_per_model_part with 4 layers per virtual stage and the embedding and the output
    each in one layer's place: ceil((126 + 1 + 1) / 4) = 32 = 16 x 2 virtual stages, rank 0 holds
    stage 0 (embedding + 3 layers) and stage 16 (4 layers) = 7. Both are always written: an even 80
    layers on pp 8 under the defaults (1 and 1) would make ceil(82 / 10) = 9 stages, which it refuses."""
    overrides = ["model=llama3.1-405b", "hardware=h200-sxm-141gb", "grid.ngpus=[1024]", "grid.tp=[8]"]
    overrides += ["grid.pp=[16]", "grid.vpp=[2]", "grid.cp=[1]", "grid.micro_batch=[1]"]
    overrides += ["grid.dp_sharding=[FULLY_SHARD]", "grid.recompute=[full]", "grid.sequence_parallel=[true]"]
    planned = _planned(overrides, None)[0]
    assert tuple(planned.extra.values()) == (7, 8, 7)
    tt = target_module("torchtitan")
    par = tomllib.loads(tt.render(planned))["parallelism"]
    assert par["pipeline_parallel_layers_per_stage"] == 4 and par["pipeline_parallel_schedule"] == "Interleaved1F1B"
    assert (par["pipeline_parallel_first_stage_less_layers"], par["pipeline_parallel_last_stage_less_layers"]) == (1, 1)
    _round_trip("torchtitan", planned, tt.render(planned))
    toml = "[parallelism]\npipeline_parallel_degree = 16\npipeline_parallel_schedule = 'Interleaved1F1B'\n"
    toml += "pipeline_parallel_layers_per_stage = 4\ndata_parallel_shard_degree = 1\n"  # first/last less: defaults 1
    assert tt.parse(toml, None, 126)["grid.vpp"] == 2  # ceil(128 / 4) = 32 stages over 16 ranks


def test_deepspeed_zero_stage_names_and_batch_identity(tmp_path):
    """dp_sharding -> ZeRO stage as DeepSpeed numbers them (ZeroStageEnum: disabled 0,
    optimizer_states 1, gradients 2, weights 3), and DeepSpeed's batch rule
    train_batch_size = micro batch x accumulation steps x data-parallel size."""
    ds = target_module("deepspeed")
    assert ds.ZERO_STAGE == {"NO_OP": 0, "OPTIMIZER_STATES": 1, "OPTIMIZER_STATES_AND_GRADS": 2, "FULLY_SHARD": 3}
    for sharding, stage in ds.ZERO_STAGE.items():
        overrides = [
            "model=llama3.1-8b",
            "hardware=b300-288gb",  # NO_OP holds 16 bytes per parameter: 128 GB of states
            "grid.ngpus=[8]",
            "grid.tp=[1]",
            "grid.pp=[1]",
            "grid.cp=[1]",
            "grid.micro_batch=[1]",
            f"grid.dp_sharding=[{sharding}]",
            "grid.recompute=[full]",
            "workload.seq_len=4096",
            "workload.global_batch=64",
        ]
        planned = _planned(overrides, None)[0]
        doc = json.loads(ds.render(planned))
        assert doc["zero_optimization"]["stage"] == stage
        assert doc["train_batch_size"] == doc["train_micro_batch_size_per_gpu"] * doc["gradient_accumulation_steps"] * 8
        _round_trip("deepspeed", planned, ds.render(planned))
        _deepspeed_parses(doc, stage)


def _deepspeed_parses(doc: dict, stage: int) -> None:
    """DeepSpeed's own DeepSpeedConfig reads the file (extra `export-check`; skipped without it).
    Without a process group DeepSpeed counts one rank, so the config is read without
    train_batch_size and DeepSpeed derives it from the other two."""
    try:
        from deepspeed.runtime.config import DeepSpeedConfig
    except ImportError:
        return
    one_rank = {k: v for k, v in doc.items() if k != "train_batch_size"}
    config = DeepSpeedConfig(one_rank)
    assert config.zero_optimization_stage == stage
    assert config.bfloat16_config.enabled and not config.float16_config.enabled
    assert config.train_micro_batch_size_per_gpu == doc["train_micro_batch_size_per_gpu"]
    assert config.gradient_accumulation_steps == doc["gradient_accumulation_steps"]


def test_deepspeed_parser_installed_or_skipped():
    """Says whether the framework check above ran (pip install '.[export-check]')."""
    pytest.importorskip("deepspeed.runtime.config")


@pytest.mark.parametrize("chunked", [True, False])
def test_sglang_mixing_prefill_with_decodes_is_its_own_switch(chunked):
    """SGLang chunks a prompt by --chunked-prefill-size and mixes the chunk into a decode batch only with
    --enable-mixed-chunk (server_args.py of 0.5.9: enable_mixed_chunk: bool = False). The export wrote
    --chunked-prefill-size -1 for workload.chunked_prefill false, which turns chunking off but leaves the
    prefill passes apart either way, and wrote no --enable-mixed-chunk for true, so SGLang ran its default
    (separate passes) under a layout priced as mixed. Now the budget is written either way and true adds
    the switch; reading back, the switch is chunked_prefill and the size the budget."""
    overrides = ["workload=inference", "model=llama3.1-8b", "hardware=h100-sxm-80gb", "grid.ngpus=[1]"]
    overrides += ["grid.tp=[1]", "grid.pp=[1]", "grid.sp=[1]", "grid.batch=[8]", "workload.prefill_chunk_tokens=4096"]
    overrides += [f"workload.chunked_prefill={str(chunked).lower()}"]
    planned = _planned(overrides, None)[0]
    sg = target_module("sglang")
    text = sg.render(planned)
    fl = flags_of(text, {f: m for f, (_, m) in sg.FIELDS.items()})
    assert fl["--chunked-prefill-size"] == "4096"
    assert fl.get("--enable-mixed-chunk", False) is chunked
    back = sg.parse(text, None, planned.layers)
    assert back["workload.chunked_prefill"] is chunked and back["workload.prefill_chunk_tokens"] == 4096
    _round_trip("sglang", planned, text)


def test_sglang_scripts_read_back_as_sglang_schedules_them():
    """InferenceX's dsr1_fp8_h200.sh (--chunked-prefill-size 32768, no --enable-mixed-chunk): prefill passes of
    their own with a 32768-token budget; -1 (no chunking) is separate passes, the budget left to the workload."""
    sg = target_module("sglang")
    base = "python -m sglang.launch_server --model-path M --tp-size 8 "
    ix = sg.parse(base + "--chunked-prefill-size 32768 --max-prefill-tokens 32768")
    assert ix["workload.chunked_prefill"] is False and ix["workload.prefill_chunk_tokens"] == 32768
    mixed = sg.parse(base + "--chunked-prefill-size 2048 --enable-mixed-chunk")
    assert mixed["workload.chunked_prefill"] is True and mixed["workload.prefill_chunk_tokens"] == 2048
    off = sg.parse(base + "--chunked-prefill-size -1 --enable-mixed-chunk")
    assert off["workload.chunked_prefill"] is False and "workload.prefill_chunk_tokens" not in off


def test_sglang_dp_attention_for_ep_across_replicas():
    """DeepSeek-V3's experts over the 16 replicas of tp 1 (ep = dp = 16): SGLang runs it as one
    server of tp*dp ranks with DP attention; vLLM's expert parallelism spans tp*dp as well."""
    overrides = [
        "workload=inference",
        "model=deepseek-v3",
        "hardware=h200-sxm-141gb",
        "grid.ngpus=[16]",
        "grid.tp=[1]",
        "grid.pp=[1]",
        "grid.sp=[1]",
        "grid.ep=[16]",
        "grid.batch=[32]",
        "workload.weight_dtype=fp8",
    ]
    planned = _planned(overrides, None)[0]
    sg = target_module("sglang")
    fl = flags_of(sg.render(planned), {f: m for f, (_, m) in sg.FIELDS.items()})
    assert fl["--tp-size"] == "16" and fl["--dp-size"] == "16" and fl["--ep-size"] == "16"
    assert fl["--enable-dp-attention"] is True and fl["--max-running-requests"] == str(32 * 16)
    _round_trip("sglang", planned, sg.render(planned))
    vl = target_module("vllm")
    fl = flags_of(vl.render(planned), {f: m for f, (_, m) in vl.FIELDS.items()})
    assert fl["--enable-expert-parallel"] is True and fl["--data-parallel-size"] == "16"
    assert fl["--quantization"] == "fp8"
    _round_trip("vllm", planned, vl.render(planned))
    trt = target_module("trtllm")  # attention DP over all 16 ranks, experts over them
    text = trt.render(planned)
    fl = flags_of(text, {f: m for f, (_, m) in trt.FIELDS.items()})
    assert fl["--tp_size"] == "16" and fl["--ep_size"] == "16" and fl["--max_batch_size"] == "32"
    assert "enable_attention_dp: true" in text and "weights fp8:" in text
    _round_trip("trtllm", planned, text)


def test_dynamo_manifest_of_every_shipped_disaggregated_plan(answers):
    """Each model's `plan serve` disaggregated row as a DynamoGraphDeployment (or the one sentence of
    the pool vLLM cannot run): the services, replicas and GPUs are the plan's, every worker argument is
    in vLLM's table, and import-run's pools pin the same two layouts."""
    import yaml

    from parallmelism.cli.export_cmd import _pools
    from parallmelism.errors import UserError
    from parallmelism.export.rows import disaggregated_pools

    dyn, vl = target_module("dynamo"), target_module("vllm")
    exported = 0
    for model, by_kind in answers.items():
        source = by_kind["serve"][1]
        row = select_row(read_rows(source), case="disaggregated")
        try:
            text, _ = _pools(dyn, [str(source)], None, None, None, None)
        except UserError as exc:
            msg = str(exc)
            assert "pool: vLLM cannot run this layout" in msg and "\n" not in msg, msg
            continue
        exported += 1
        doc = yaml.safe_load(text)
        assert (doc["apiVersion"], doc["kind"]) == ("nvidia.com/v1alpha1", "DynamoGraphDeployment")
        back = dyn.parse_pools(text)
        for pool, (overrides, replicas) in disaggregated_pools(row).items():
            spec = doc["spec"]["services"][dyn.SERVICES[pool]]
            assert spec["subComponentType"] == pool and spec["replicas"] == replicas == int(row[f"{pool}_replicas"])
            nodes = spec.get("multinode", {}).get("nodeCount", 1)
            assert int(spec["resources"]["limits"]["gpu"]) * nodes == int(row[f"{pool}_replica_gpus"])
            args = spec["extraPodSpec"]["mainContainer"]["args"]
            assert args[:3] == ["--model", "${MODEL}", dyn.ROLE_FLAG[pool]]
            assert {a for a in args[3:] if a.startswith("--")} <= set(vl.FIELDS) | {"--no-enable-chunked-prefill"}
            want = _planned(overrides, None)[0].pinned()
            got, n = back[pool]
            assert n == replicas and {k: got.get(k) for k in want} == want, pool
    assert exported >= 1, "dynamo exported none of the shipped disaggregated plans"


# ----------------------------------------------------------------------------- the CLI


def test_cli_export_then_import_run_round_trip(answers, tmp_path):
    planned, source = answers["llama3.1-70b"]["train"]
    out = tmp_path / "run.sh"
    r = run_cli("export", source, "--to", "megatron", "--out", out)
    assert r.returncode == 0, r.stderr
    assert out.read_text().startswith("#!/usr/bin/env bash\n# parallmelism export: model=llama3.1-70b")
    r = run_cli("import-run", out)
    assert r.returncode == 0, r.stderr
    got = set(r.stdout.split())
    want = set(override_strings({k: v for k, v in planned.pinned().items()}))
    assert want <= got, want - got


def test_cli_dynamo_export_then_import_run(answers, tmp_path):
    """A disaggregated plan's manifest written to a file, and import-run's two lines, one per pool."""
    source = answers["deepseek-v3"]["serve"][1]
    out = tmp_path / "disagg.yaml"
    r = run_app("export", source, "--to", "dynamo", "--out", out, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "prefill +" in r.stdout and out.read_text().count("subComponentType:") == 2
    r = run_app("import-run", out, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert [line.split(" workers ")[0] for line in lines] == ["prefill", "decode"]
    assert all("model=deepseek-v3" in line and "grid.tp=" in line for line in lines)


def test_export_without_to_follows_the_stack_or_engine(answers, tmp_path):
    """No --to: the target of the run's stack= (training; megatron-te, Megatron-Core + TE, is Megatron-LM)
    or engine= (serving; conf/config.yaml's default trtllm, or engine=sglang on the command line), and
    dynamo for a serve plan's disaggregated row."""
    from parallmelism.export import default_target

    assert default_target(answers["llama3.1-70b"]["train"][0]) == "megatron"
    assert default_target(answers["llama3.1-70b"]["serve"][0]) == "trtllm"
    r = run_app("export", answers["llama3.1-8b"]["serve"][1], "engine=sglang", cwd=tmp_path)
    assert r.returncode == 0 and "sglang.launch_server" in r.stdout, r.stderr
    r = run_app("export", answers["llama3.1-8b"]["train"][1], cwd=tmp_path)
    assert r.returncode == 0 and "MEGATRON_ARGS=(" in r.stdout, r.stderr
    r = run_app("export", answers["deepseek-v3"]["serve"][1], "--case", "disaggregated", cwd=tmp_path)
    assert r.returncode == 0 and "kind: DynamoGraphDeployment" in r.stdout, r.stderr


@pytest.mark.parametrize("block", ["export-train", "export-serve"])
def test_readme_export_excerpts_are_the_commands_output(block, tmp_path):
    """The README's two export excerpts are what its two commands print: the same lines in the
    same order, each line's words before its comment equal (the comments' numbers follow the model)."""
    from conftest import REPO

    readme = (REPO / "README.md").read_text()
    section = readme.split("## From plan to run", 1)[1]
    commands = [line.split()[1:] for line in section.split("```bash\n", 1)[1].split("```", 1)[0].splitlines()]
    excerpt = section.split(f"<!-- {block}:begin -->\n```\n", 1)[1].split("```\n<!-- ", 1)[0].splitlines()
    r = run_app(*commands[0 if block == "export-train" else 1], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    printed = r.stdout.splitlines()

    def words(line: str) -> str:
        return line.split("  #", 1)[0].split(": ", 1)[0] if line.startswith("# ") else line.split("  #", 1)[0]

    at = [printed.index(next(p for p in printed if words(p) == words(line))) for line in excerpt]
    assert at == sorted(at), "the excerpt's lines are out of the output's order"


def test_cli_import_run_show(answers, tmp_path):
    """import-run --show explains the layout read back: the same memory as the export assumed."""
    planned, source = answers["llama3.1-8b"]["serve"]
    out = tmp_path / "serve.sh"
    assert run_app("export", source, "--to", "vllm", "--out", out, cwd=tmp_path).returncode == 0
    r = run_app("import-run", out, "--show", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert f"{planned.predicted['mem_total_gib']:,.1f} GiB per GPU" in r.stdout


@pytest.mark.parametrize(
    "args, words",
    [
        (["--to", "deepspeed"], "DeepSpeed's ds_config cannot run this layout"),  # 405B needs tp 8
        (["--to", "vllm"], "is for serving and this is a training layout"),
        (["--to", "nemo2"], "is not a target"),
        (["--to", "megatron", "--rank", "7"], "--rank 7: no row has that rank; this file's ranks are 1 to"),
        (["--to", "dynamo"], "has no deployment column"),  # a best table is not a serve plan
    ],
)
def test_cli_refusals_exit_2_one_line_nothing_written(answers, tmp_path, args, words):
    source = answers["llama3.1-405b"]["train"][1]
    out = tmp_path / "never.sh"
    r = run_cli("export", source, *args, "--out", out)
    assert r.returncode == 2
    assert words in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "Traceback" not in r.stderr
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_cli_refuses_a_layout_that_does_not_fit(tmp_path):
    out = tmp_path / "x.sh"
    r = run_app(
        "export", "--pinned", "--to", "megatron", "--out", out, "model=llama3.1-70b", "grid.ngpus=[8]",
        "grid.tp=[1]", "grid.pp=[1]", "grid.cp=[1]", "grid.dp_sharding=[NO_OP]", cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 2 and "does not fit" in r.stderr and not out.exists()


def test_cli_export_does_not_overwrite_its_row_source(tmp_path, answers):
    source = answers["llama3.1-8b"]["train"][1]
    before = source.read_bytes()
    r = run_app("export", source, "--to", "megatron", "--out", source, cwd=tmp_path)
    assert r.returncode == 2 and source.read_bytes() == before


def test_import_run_unknown_file_says_which_option(tmp_path):
    f = tmp_path / "notes.txt"
    f.write_text("hello\n")
    r = run_app("import-run", f, cwd=tmp_path)
    assert r.returncode == 2 and "--from" in r.stderr


@pytest.mark.parametrize("target", TARGETS)
def test_every_table_cites_a_pinned_version(target):
    """Each target's field table names its source at a version or commit."""
    module = target_module(target)
    assert re.search(r"@ [0-9a-f]{8}|\d+\.\d+\.\d+", module.SOURCE) and module.FIELDS, module.SOURCE


def test_import_run_show_needs_the_model_it_cannot_read(tmp_path):
    """A command line without an export's header names no model: --show says so instead of
    explaining the default model's layout."""
    f = tmp_path / "serve.sh"
    f.write_text("vllm serve meta-llama/Llama-3.1-8B --tensor-parallel-size 4 --max-num-seqs 16\n")
    r = run_app("import-run", f, cwd=tmp_path)
    assert r.returncode == 0 and "grid.tp=[4]" in r.stdout and "grid.batch=[16]" in r.stdout
    r = run_app("import-run", f, "--show", "--hardware", "h100-sxm-80gb", cwd=tmp_path)
    assert r.returncode == 2 and "--model" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_megatron_reads_the_older_virtual_stage_spelling():
    """A Megatron command line with --num-layers-per-virtual-pipeline-stage: Llama-3.1-70B's 80
    layers over pp 4 at 5 layers per virtual stage is vpp 4."""
    line = (
        "torchrun pretrain_gpt.py --tensor-model-parallel-size 8 --pipeline-model-parallel-size 4 "
        "--num-layers-per-virtual-pipeline-stage 5 --num-layers 80 --micro-batch-size 1 --bf16"
    )
    back = target_module("megatron").parse(line, 256)
    assert back["grid.vpp"] == 4 and back["grid.tp"] == 8 and back["grid.ngpus"] == 256
    assert target_module("megatron").parse(line.replace(" --num-layers 80", ""), 256, 80)["grid.vpp"] == 4


def test_serve_plan_replica_gpus_back_to_the_layouts_ngpus():
    """A serve plan's replica is ngpus / dp GPUs, or the whole EP group when the experts span the dp
    replicas (search/plan.py ep_across_replicas: ep > 1 not dividing tp): DeepSeek-V3 at tp 1, ep 16
    over 16 replicas is one unit of 16 GPUs, not 16 x 16."""
    from parallmelism.export.rows import replica_ngpus

    assert replica_ngpus(16, tp=1, ep=16, dp=16) == 16
    assert replica_ngpus(8, tp=8, ep=8, dp=4) == 32  # experts inside each replica's tp group
    assert replica_ngpus(4, tp=4, ep=1, dp=2) == 8


def test_row_selectors():
    """--case, --rank, --where pick one row; without one a best table gives its rank-1 row, a plan
    its chosen row; several or none left is one sentence."""
    import pandas as pd

    from parallmelism.errors import UserError

    df = pd.DataFrame({"case": ["a", "b", "c"], "rank": [1, 2, 0], "ngpus": [8, 8, 16], "chosen": [False, True, False]})
    assert select_row(df, case="b")["rank"] == 2
    assert select_row(df, rank=0)["case"] == "c"
    assert select_row(df, where="ngpus == 16")["case"] == "c"
    assert select_row(df)["case"] == "a"  # rank 1 first
    assert select_row(df.drop(columns="rank"))["case"] == "b"  # a plan's chosen row
    serve = pd.DataFrame(
        {"deployment": ["colocated", "disaggregated"], "recommended": [False, True], "chosen": [True, False]}
    )
    assert select_row(serve)["deployment"] == "disaggregated"  # recommended before chosen
    assert select_row(serve, case="colocated")["chosen"]  # --case reads the deployment column
    assert select_row(serve.assign(recommended=["True", "False"]))["deployment"] == "colocated"  # CSV strings
    with pytest.raises(UserError, match="recommends no deployment.*--case colocated"):
        select_row(serve.assign(recommended=[False, False]))
    with pytest.raises(UserError, match="deployment values are colocated, disaggregated"):
        select_row(serve, case="mixed")
    with pytest.raises(UserError, match="2 rows match"):
        select_row(df, where="ngpus == 8")
    with pytest.raises(UserError, match="'case' or 'deployment' column"):
        select_row(df.drop(columns="case"), case="a")


# the README's first `plan serve` example: disaggregated is recommended (fewer GPUs than colocated)
DISAGGREGATED_PLAN = [
    "model=llama3.1-70b", "hardware=h200-sxm-141gb", "qps=50", "input_len=2048", "output_len=256",
    "ttft_ms=1000", "tpot_ms=30",
]  # fmt: skip


def test_cli_export_serve_plan_recommended_row_or_one_sentence(answers, tmp_path):
    """export's default on a `plan serve` file is the recommended row: the colocated replica where
    colocated is recommended; where disaggregated is, exit 2 with one sentence naming the pools and
    --case colocated, nothing written. --case selects by the deployment column."""
    import pandas as pd

    plan = tmp_path / "plan.csv"
    r = run_app("plan", "serve", *DISAGGREGATED_PLAN, "-q", "--out", plan, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    df = pd.read_csv(plan).set_index("deployment")
    assert df.loc["disaggregated", "recommended"] and not df.loc["colocated", "recommended"]
    pools = f"({int(df.loc['disaggregated', 'prefill_gpus'])} prefill + {int(df.loc['disaggregated', 'decode_gpus'])} decode GPUs)"
    out = tmp_path / "out" / "serve.sh"
    for case in ([], ["--case", "disaggregated"]):
        r = run_app("export", plan, "--to", "vllm", *case, "--out", out, cwd=tmp_path)
        assert r.returncode == 2 and "Traceback" not in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert f"the recommended plan is disaggregated {pools}" in r.stderr and "--case colocated" in r.stderr
        assert not out.exists() and not out.parent.exists()
    # the recommended deployment is one the engines run: its prefill pool does not shard prompts (sp 1)
    manifest = tmp_path / "out" / "disagg.yaml"
    r = run_app("export", plan, "--to", "dynamo", "--out", manifest, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert df.loc["disaggregated", "prefill_sp"] == 1 and df.loc["disaggregated", "decode_sp"] == 1
    manifest.unlink()
    manifest.parent.rmdir()
    r = run_app("export", plan, "--to", "vllm", "--case", "colocated", "--out", out, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    col = df.loc["colocated"]
    assert f"# layout: tp={int(col['tp'])} pp={int(col['pp'])} " in out.read_text()
    # colocated recommended (llama3.1-8b at 5 requests/s): the default row is the colocated one
    source = answers["llama3.1-8b"]["serve"][1]
    rec = pd.read_csv(source).set_index("deployment")
    assert rec.loc["colocated", "recommended"]
    assert select_row(read_rows(source))["deployment"] == "colocated"


def test_plan_serve_recommends_only_layouts_the_engines_run(tmp_path):
    """No shipped engine shards one prompt over ranks (sp > 1; export/serving.check refuses it), so
    `plan serve` does not plan with it unless grid.sp is given: a long prompt under a tight TTFT with
    pipelines ruled out once recommended tp 4 x sp 2, which `export` then refused."""
    import pandas as pd

    plan = tmp_path / "plan.csv"
    question = ["model=llama3.1-8b", "qps=2", "input_len=32768", "output_len=64", "ttft_ms=400", "grid.pp=[1]"]
    r = run_app("plan", "serve", *question, "-q", "--out", plan, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    df = pd.read_csv(plan).set_index("deployment")
    assert (df[["sp", "prefill_sp", "decode_sp"]].fillna(1) == 1).all().all()
    out = tmp_path / "serve.sh"
    served = ["workload=inference", "model=llama3.1-8b", "workload.input_len=32768", "workload.output_len=64"]
    r = run_app("export", plan, *served, "--out", out, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    # grid.sp given: a what-if that plans prompt sharding as asked
    r = run_app("plan", "serve", *question, "grid.sp=[2]", "-q", "--out", plan, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert pd.read_csv(plan).set_index("deployment").loc["colocated", "sp"] == 2


def test_torchtitan_rowwise_fp8_recipe_round_trips_and_megatron_refuses_it():
    """workload.fp8_scaling=rowwise is torchtitan's [quantize.linear.float8] recipe_name "rowwise"
    (job_config.py Float8Linear.recipe_name); read back, it is rowwise again. Megatron has no torchao
    recipe: one sentence."""
    from parallmelism.errors import UserError

    overrides = [
        "model=llama3.1-8b",
        "grid.ngpus=[8]",
        "grid.tp=[1]",
        "grid.pp=[1]",
        "grid.cp=[1]",
        "grid.micro_batch=[1]",
        "grid.dp_sharding=[FULLY_SHARD]",
        "grid.recompute=[selective]",
        "grid.sequence_parallel=[false]",
        "workload.global_batch=16",
        "workload.precision=fp8",
        "workload.fp8_scaling=rowwise",
    ]
    planned = _planned(overrides, None)[0]
    text = target_module("torchtitan").render(planned)
    doc = tomllib.loads(text)
    assert doc["model"]["converters"] == ["quantize.linear.float8"]
    assert doc["quantize"]["linear"]["float8"]["recipe_name"] == "rowwise"
    assert target_module("torchtitan").parse(text, None, planned.layers)["workload.fp8_scaling"] == "rowwise"
    with pytest.raises(UserError, match="rowwise fp8 recipe"):
        target_module("megatron").render(planned)


def test_a_selector_that_leaves_no_row_or_a_summary_given_as_the_source_says_so(tmp_path):
    """--rank 99 on a best table said "0 rows match; choose one with --rank N, ...", as if no --rank
    had been given; a plan's NAME.summary.md given as the row source was read as a CSV ("is truncated:
    line 20 has 1 of the header's 3 fields")."""
    import pandas as pd

    from parallmelism.errors import UserError

    best = pd.DataFrame({"rank": [1, 2, 0], "ngpus": [8, 8, 8]})
    with pytest.raises(
        UserError, match=r"^--rank 99: no row has that rank; this file's ranks are 1 to 2 \(0: the near"
    ):
        select_row(best, rank=99)
    with pytest.raises(UserError, match=r"^no row matches --rank 2 and --where 'ngpus == 16'$"):
        select_row(best, rank=2, where="ngpus == 16")
    with pytest.raises(UserError, match=r"^3 rows match --where 'ngpus == 8'; choose one with"):
        select_row(best, where="ngpus == 8")
    with pytest.raises(UserError, match=r"^the row source holds no row$"):
        select_row(best.head(0))
    with pytest.raises(UserError, match=r"^no row is the file's answer \(rank 1 or chosen\); choose one with"):
        select_row(pd.DataFrame({"chosen": [False, False], "ngpus": [8, 16]}))
    (tmp_path / "plan.csv").write_text("a,b,c\n1,2,3\n")
    (tmp_path / "plan.summary.md").write_text("# Training plan\n\n- GPUs: 8\n")
    with pytest.raises(UserError, match=r"is neither \.csv nor \.parquet.*'.*plan\.csv' is this plan summary's table"):
        read_rows(tmp_path / "plan.summary.md")
