"""Step-time validation on the shipped published runs (parallmelism/cases/training_measured.csv)."""

import pandas as pd
import pytest

from conftest import REPO, invoke, shared_reference

CASES = REPO / "parallmelism" / "cases" / "training_measured.csv"


@pytest.fixture(scope="module")
def table():
    from parallmelism.validate.runner import run_validation

    return run_validation([CASES], [], None).set_index("case")


def _row(case):
    """A shipped case row as the validator reads it (blank cells None), `case` included."""
    ours = pd.read_csv(CASES, dtype=str, keep_default_na=False).replace({"": None}).set_index("case")
    row = ours.loc[case].to_dict()
    row["case"] = case
    return row


def test_korthikanti_eight_within_target(table):
    k = table.loc[[c for c in table.index if c.startswith("korthikanti") and "dp8" not in c], "error_pct"].abs()
    assert len(k) == 8
    assert k.mean() <= 3.0 and k.max() <= 6.0, k.to_dict()


# Known gaps with kernel times from kernel measurements and the named overheads fitted once per
# accelerator (python -m parallmelism.validate.calibrate: fewest rows over 15 %, then the mean):
# none. H100: the Llama 3 rows run FlashAttention-2, the kernel Meta's PyTorch stack had on H100
# during pre-training (validate/steptime.py attention_backend); read with cuDNN's kernels the
# 128k row was -30.0 % (test below). The Megatron-Core rows take the blank-micro-batch rule (the
# fastest that fits): at b = 1 the 32B row was +44 %, impossible by its own measured kernel times
# (test below). The DGX Cloud GPT-3 pair at tag v25.01 sits inside the bar on the fast side (by the
# same amount in both precisions): the same recipe at v25.04 (NeMo 24.12, VP 6) ran 7 % faster
# (parallmelism/cases/scaling/dgxc_v2504.csv). A100: none since bloom-176b states its cluster
# (Omni-Path, 6.25 GB/s per GPU) and its script's CUDA_LAUNCH_BLOCKING=1, and Narayanan's rows
# their scripts' micro-batches (validate/steptime.py).
KNOWN_GAPS: tuple[str, ...] = ()


def test_rows_over_the_bar_are_the_known_gaps(table):
    """A row newly over 15 % fails here, and so does a known gap that closes (drop it above)."""
    e = table["error_pct"].abs()
    assert sorted(e[e > 15.0].index) == sorted(KNOWN_GAPS), e[e > 15].to_dict()


def test_blank_micro_batch_is_the_fastest_that_fits():
    """The Megatron-Core README gives no micro-batch: each row takes the fastest divisor of its
    per-replica batch that is a valid layout and fits in 79.6 GiB (validate/steptime.py). 119B at
    b = 4 needs 84 GiB; 462B at b = 2 needs 99 GiB; 177B fits at b = 2 (77 GiB) but runs slower
    than at 1, and its b = 3 and 6 leave micro-batch counts the interleaved schedule refuses
    (m % pp != 0); 70B fits at b = 4 but runs 1 % faster at 2 (2.336 s against 2.359 s): its
    per-replica batch of 8 in 2 micro-batches leaves the 2-stage, 2-chunk pipeline a bubble of
    (p - 1)/(v·m) = 1/4 (0.39 s), in 4 micro-batches 1/8 (0.21 s), more than the extra per-layer
    launches and smaller GEMMs of b = 2 cost."""
    from parallmelism.validate.runner import _context
    from parallmelism.validate.steptime import fastest_micro_batch, micro_batch_candidates

    ctx = _context([], None)
    want = {"1.7b": 4, "7.1b": 4, "16b": 4, "32b": 4, "70b": 2, "119b": 2, "177b": 1, "314b": 1, "462b": 1}
    got = {size: fastest_micro_batch(_row(f"mcore-h100-{size}"), ctx) for size in want}
    assert got == want
    assert micro_batch_candidates(_row("mcore-h100-119b")) == [1, 2, 4, 8, 16]  # 768 / 48 per replica
    # a stated micro-batch wins over the rule
    from parallmelism.validate.steptime import step_time_run_of

    run = step_time_run_of({**_row("mcore-h100-32b"), "micro_batch_stated": "2"}, ctx)
    assert run.grid.micro_batch == [2]


def test_mcore_32b_at_micro_batch_1_is_slower_than_measured_on_kernels_alone():
    """Why the rule is not b = 1 (README): at b = 1 the 32B row's DP traffic on one NIC per GPU
    (fp32 reduce-scatter, bf16 all-gather of 3.9 B parameters) hides only under the first
    micro-batch's forward and the last one's backward, so kernels and exposed DP alone, with every
    named overhead at zero, exceed the measured 0.892 s; with the per-replica batch in one
    micro-batch (b = 4) the DP traffic hides under the backward and forward."""
    from parallmelism.validate.calibrate import TERMS, _with
    from parallmelism.validate.runner import _context, _evaluate_one
    from parallmelism.validate.steptime import step_time_run_of

    row = _row("mcore-h100-32b")
    measured = float(row["step_time_s"])

    def kernels_only(b):
        run = step_time_run_of({**row, "micro_batch": str(b)}, _context([], None))
        zero = _with(run.hardware, **{t: 0.0 for t in TERMS})  # every named overhead at zero
        return _evaluate_one(run.model_copy(update={"hardware": zero}))

    b1, b4 = kernels_only(1), kernels_only(4)
    assert float(b1["time_step_s"]) > measured  # 0.970 s against 0.892
    assert float(b1["time_comm_dp_exposed_s"]) > 0.3 and float(b4["time_comm_dp_exposed_s"]) < 0.01
    assert float(b4["time_step_s"]) < measured


def test_every_shipped_row_within_15_percent(table):
    e = table["error_pct"].abs()
    assert (e <= 15.0).all(), e[e > 15].to_dict()


def test_llama3_rows_read_the_stated_interleaving(table):
    """vpp_stated = 8 (Llama 3 §3.3.2): the three Llama 3 rows run interleaved 1F1B on the uneven
    7, 8x14, 7 split; without it the 16,384-GPU 8k row (m = pp = 16) is +58 %."""
    from parallmelism.validate.runner import _context
    from parallmelism.validate.steptime import fill_blanks

    models = _context([], None)[0]
    assert fill_blanks(_row("llama3-405b-8k-16384gpu"), models["llama3.1-405b"])["vpp"] == "8"
    assert abs(table.loc["llama3-405b-8k-16384gpu", "error_pct"]) <= 15.0


def test_llama3_rows_run_flash_attention_2(table):
    """Meta's PyTorch stack had FlashAttention-2 on H100 while Llama 3 pre-trained (cuDNN attention
    came to PyTorch's SDPA on H100 in 2.5, October 2024; validate/steptime.py attention_backend):
    the three rows state it. FA2's measured kernels run a 128k rank's attention (8k queries of the
    all-gather CP against up to 128k keys, 16 heads) at about 340 TFLOP/s forward and 290 backward
    where cuDNN's reach 640 and 520; the 128k row, whose attention is half its compute, would be
    -29.7 % on cuDNN's kernels (-30.0 % before a CP group across nodes ran NCCL's protocols, -29.6 % before the
    measured all-gather CP blocks of h100_attention_long.csv joined the table), outside the bar, and is inside it on the kernels it ran."""
    from parallmelism.validate.runner import _context, _evaluate_one
    from parallmelism.validate.steptime import step_time_run_of

    ctx = _context([], None)
    for case in ("llama3-405b-8k-8192gpu", "llama3-405b-8k-16384gpu", "llama3-405b-128k-16384gpu"):
        assert step_time_run_of(_row(case), ctx).attention_backend() == "flash2", case
        assert abs(table.loc[case, "error_pct"]) <= 15.0, case
    # a row that states nothing keeps the stack's backend (megatron-te: cuDNN)
    assert step_time_run_of(_row("dgxc-llama31-405b-512gpu-bf16"), ctx).attention_backend() == "cudnn"
    cudnn = step_time_run_of({**_row("llama3-405b-128k-16384gpu"), "attention_backend": "cudnn"}, ctx)
    measured = float(_row("llama3-405b-128k-16384gpu")["step_time_s"])
    assert float(_evaluate_one(cudnn)["time_step_s"]) / measured - 1.0 == pytest.approx(-0.297, abs=0.002)


def test_megatron_core_pipeline_rows_run_interleaved(table):
    """The Megatron-Core README states PP communication overlapped, which Megatron-Core r0.8.0
    allows only on the interleaved schedule (validate/steptime.py): each pipelined row takes the
    least interleaving Megatron accepts, and its micro-batch count at the blank-micro-batch rule's
    b (per-replica batch 4·pp: m = 2·pp for 70B and 119B at b = 2, 4·pp for the rest at b = 1) divides by pp as the interleaved schedule requires. Read non-interleaved, the 70B row was
    +16 % (at b = 1)."""
    from parallmelism.validate.runner import _context
    from parallmelism.validate.steptime import fill_blanks, step_time_run_of

    want = {"70b": 2, "119b": 23, "177b": 2, "314b": 2, "462b": 7}
    for size, chunks in want.items():
        row = fill_blanks(_row(f"mcore-h100-{size}"), None)  # vpp_stated given: no model consulted
        layers, pp, dp = int(row["layers"]), int(row["pp"]), int(row["dp"])
        assert int(row["vpp"]) == chunks and (layers // pp) % chunks == 0, size
        assert int(row["global_batch"]) // dp == 4 * pp, size
        run = step_time_run_of(_row(f"mcore-h100-{size}"), _context([], None))
        m = int(row["global_batch"]) // (dp * run.grid.micro_batch[0])
        assert m % pp == 0 and run.grid.vpp == [chunks], size
    assert abs(table.loc["mcore-h100-70b", "error_pct"]) <= 15.0


def test_shipped_copy_keeps_the_reference_columns():
    ref = pd.read_csv(shared_reference("training_measured.csv"), dtype=str, keep_default_na=False)
    ours = pd.read_csv(CASES, dtype=str, keep_default_na=False)
    assert list(ours.columns[: len(ref.columns)]) == list(ref.columns)
    # the reference rows first, verbatim; the published runs added since follow them
    assert ours[ref.columns].iloc[: len(ref)].equals(ref)


FP8_PAIRS = ("dgxc-llama31-8b-8gpu", "dgxc-llama31-70b-64gpu", "dgxc-llama31-405b-512gpu", "dgxc-gpt3-175b-128gpu")
FP8_PAIRS += ("dgxc-nemotron4-340b-128gpu", "dgxc-grok1-1024gpu", "dgxc-maxtext-llama2-70b-512gpu")
FP8_PAIRS += (
    pytest.param(
        "dgxc-maxtext-llama2-70b-64gpu",
        marks=pytest.mark.xfail(
            strict=True,
            reason="known gap: MaxText's fp8/bf16 step ratio is 0.618 measured on 64 GPUs and 0.711 on 512, "
            "the same recipe at the same per-GPU work (per_device_batch 2; only the DCN mesh differs); the "
            "model gives 0.710 and 0.712 (its FULLY_SHARD fp8 casts the gathered weights in every forward "
            "and backward), 15 % over the measured 64-GPU ratio, whose fp8 row is itself the outlier of its "
            "scaling series (tests/test_validate_scaling.py: +15 % from 64 to 256 GPUs, bf16 +2 %)",
        ),
    ),
)


@pytest.mark.parametrize("pair", FP8_PAIRS)
def test_fp8_speedup_of_published_pairs(table, pair):
    """NVIDIA DGX Cloud Benchmarking (NeMo / MaxText, H100): the same recipe and layout in bf16 and
    fp8, measured seconds per step. Both rows within the 15 % bar, and the predicted fp8/bf16 step
    ratio within 12 % of the measured one (e.g. 405B on 512 GPUs: 12.37 / 19.78 = 0.625; MaxText's
    512-GPU FSDP pair: 0.712 predicted against 0.711)."""
    bf16, fp8 = table.loc[f"{pair}-bf16"], table.loc[f"{pair}-fp8"]
    for row in (bf16, fp8):
        assert abs(row["error_pct"]) <= 15.0 or row.name in KNOWN_GAPS, row.name
    measured = fp8["measured"] / bf16["measured"]
    predicted = fp8["predicted"] / bf16["predicted"]
    assert predicted == pytest.approx(measured, rel=0.12)
    assert predicted < 1.0  # fp8 is faster on every one of these layouts


def test_megatron_bridge_deepseek_keeps_bf16_adam_moments():
    """Megatron-Bridge's DeepSeek-V3 recipe (25.09 container) runs the precision-aware optimizer
    with bf16 exp_avg and exp_avg_sq; the other rows keep fp32 moments."""
    from parallmelism.validate.runner import _context
    from parallmelism.validate.steptime import step_time_run_of

    ctx = _context([], None)
    assert step_time_run_of(_row("mbridge2509-deepseekv3-1024gpu-fp8"), ctx).workload.optimizer_moments_dtype == "bf16"
    assert step_time_run_of(_row("dgxc-grok1-1024gpu-fp8"), ctx).workload.optimizer_moments_dtype == "fp32"


def test_dgxc_rows_state_their_gradient_sync_dtype():
    """NVIDIA's DGX Cloud recipes reduce gradients in bf16 where their configs say so: tag v25.01's
    NeMo 1 configs (`optim.grad_sync_dtype: bf16`, bf16 and fp8 runs alike) and v25.04's Llama 3.1
    script for fp8 only (`grad_reduce_in_fp32 = False`); other rows keep the fp32 default. The
    bf16 main-gradient buffer halves the gradient bytes on the link and in memory (cost/states.py)."""
    from parallmelism.validate.runner import _context, _evaluate_one
    from parallmelism.validate.steptime import step_time_run_of

    ctx = _context([], None)

    def dtype(case):
        return step_time_run_of(_row(case), ctx).workload.grad_reduce_dtype

    for case in ("dgxc-llama31-8b-8gpu-bf16", "dgxc-gpt3-175b-128gpu-fp8", "dgxc-grok1-1024gpu-bf16"):
        assert dtype(case) == "bf16", case
    assert dtype("dgxc-llama31-405b-512gpu-fp8") == "bf16"
    assert dtype("dgxc-llama31-405b-512gpu-bf16") == "fp32"
    assert dtype("mcore-h100-32b") == dtype("dgxc-maxtext-llama2-70b-64gpu-bf16") == "fp32"
    run = step_time_run_of(_row("dgxc-nemotron4-340b-128gpu-bf16"), ctx)
    fp32 = run.model_copy(update={"workload": run.workload.model_copy(update={"grad_reduce_dtype": "fp32"})})
    r16, r32 = _evaluate_one(run), _evaluate_one(fp32)
    # the ZeRO-1 reduce-scatter moves half the bytes; the parameter all-gather is bf16 either way
    assert float(r16["time_comm_dp_s"]) < float(r32["time_comm_dp_s"])
    assert float(r16["mem_grads_gib"]) == pytest.approx(float(r32["mem_grads_gib"]) / 2, rel=1e-9)


def test_nemo_fp8_rows_gather_fp8_parameters():
    """NeMo's fp8 recipes keep fp8 parameters (`fp8_params` / `fp8_param_gather`): the ZeRO-1
    all-gather moves 1 byte per parameter instead of 2, and the weights are the fp8 row-wise and
    transposed copies alone (2 B per parameter, where bf16 + fp8 copies are 4 B); Grok-1's config
    sets fp8_params false."""
    from parallmelism.validate.runner import _context, _evaluate_one
    from parallmelism.validate.steptime import step_time_run_of

    ctx = _context([], None)
    run = step_time_run_of(_row("dgxc-llama31-405b-512gpu-fp8"), ctx)
    assert run.workload.fp8_param_gather
    assert not step_time_run_of(_row("dgxc-grok1-1024gpu-fp8"), ctx).workload.fp8_param_gather
    bf16_params = run.model_copy(update={"workload": run.workload.model_copy(update={"fp8_param_gather": False})})
    r8, r16 = _evaluate_one(run), _evaluate_one(bf16_params)
    assert float(r8["mem_weights_gib"]) == pytest.approx(float(r16["mem_weights_gib"]) / 2, rel=1e-9)
    assert float(r8["time_comm_dp_s"]) < float(r16["time_comm_dp_s"])


def test_megatron_fp16_rows_reduce_fp16_gradients():
    """Narayanan et al.'s scripts (examples/sc21/CONFIG.sh: --fp16, no
    --accumulate-allreduce-grads-in-fp32) all-reduce fp16 gradients: the DP link time of a
    NO_OP (DDP) row is half the fp32 one, and `show` names the dtype it reduces."""
    from parallmelism.validate.runner import _context, _evaluate_one
    from parallmelism.validate.steptime import step_time_run_of

    run = step_time_run_of(_row("narayanan-39.1b"), _context([], None))
    assert run.workload.grad_reduce_dtype == "fp16"
    fp32 = run.model_copy(update={"workload": run.workload.model_copy(update={"grad_reduce_dtype": "fp32"})})
    dp16, dp32 = (float(_evaluate_one(r)["time_comm_dp_s"]) for r in (run, fp32))
    # ring all-reduce time = latency + bytes/bandwidth: the bytes half, the latency steps stay
    assert 0.5 * dp32 < dp16 < 0.52 * dp32
    code, out = invoke(
        "show",
        "model=gpt3-175b",
        "hardware=a100-sxm-80gb",
        "grid.ngpus=[64]",
        "grid.tp=[8]",
        "grid.pp=[4]",
        "grid.dp_sharding=[NO_OP]",
        "workload.grad_reduce_dtype=fp16",
        "workload.precision=fp16",
        "workload.seq_len=2048",  # GPT-3's learned position table
    )
    row = next(line for line in out.splitlines() if "dp grad reduce" in line)
    assert code == 0 and "all_reduce" in row and "fp16 grads" in row, out


def test_fsdp_and_moe_rows_within_the_bar(table):
    """The published FSDP/HSDP (MaxText, NeMo AutoModel FSDP2) and MoE (Grok-1 alltoall, DeepSeek-V3
    over DeepEP with node-limited routing) rows."""
    rows = [c for c in table.index if "maxtext" in c or "automodel" in c or "deepseek" in c or "grok" in c]
    assert len(rows) == 10
    e = table.loc[rows, "error_pct"].abs()
    assert (e <= 15.0).all(), e[e > 15].to_dict()


def test_validate_reads_the_reference_file():
    code, out = invoke("validate", "--cases", str(shared_reference("training_measured.csv")))
    assert code == 0, out
    assert "step_time_s: 32 cases" in out


def test_case_columns_build_a_moe_of_the_row_architecture():
    """DGX Cloud's Grok-1 ran with the Llama 3 tokenizer (vocab 128256, not the shipped grok-1's
    131072): the row's own architecture with `experts` = 8, `top_k` = 2 (every layer routed)."""
    from parallmelism.validate.runner import _context
    from parallmelism.validate.steptime import step_time_run_of

    run = step_time_run_of(_row("dgxc-grok1-1024gpu-bf16"), _context([], None))
    moe = run.model.require_moe()
    assert (moe.num_experts, moe.top_k, moe.ffn_hidden, run.model.vocab) == (8, 2, 32768, 128256)
    run = step_time_run_of(_row("mbridge2509-deepseekv3-1024gpu-fp8"), _context([], None))
    assert run.model.name == "deepseek-v3" and run.workload.moe_dispatcher == "flex" and run.workload.overlap_ep_comm


def test_a_bad_stated_workload_value_is_one_sentence(tmp_path):
    """A case column naming a workload field is validated by the spec: a value it does not allow is
    one sentence naming the case and the field, exit 2 (it used to pass unchecked, and any dispatcher
    but alltoall was taken for DeepEP)."""
    ours = pd.read_csv(CASES, dtype=str, keep_default_na=False)
    row = ours[ours["case"] == "dgxc-grok1-1024gpu-bf16"].copy()
    row["moe_dispatcher"] = "deepepp"
    path = tmp_path / "cases.csv"
    row.to_csv(path, index=False)
    code, out = invoke("validate", "--cases", str(path))
    assert code == 2 and "dgxc-grok1-1024gpu-bf16" in out and "moe_dispatcher" in out, out
    assert "Traceback" not in out


def test_narayanan_rows_take_their_scripts_micro_batches():
    """Megatron-LM examples/sc21/run_table_1.sh: MBS 16 for 7.5B, 1 for 1T, `--DDP-impl local`
    (no overlap) from 39B on; the reference file leaves the micro-batch blank."""
    from parallmelism.validate.runner import _context
    from parallmelism.validate.steptime import step_time_run_of

    ctx = _context([], None)
    small, big = step_time_run_of(_row("narayanan-7.5b"), ctx), step_time_run_of(_row("narayanan-1008b"), ctx)
    assert small.grid.micro_batch == [16] and small.workload.overlap_dp_comm
    assert big.grid.micro_batch == [1] and not big.workload.overlap_dp_comm


def test_bloom_states_its_cluster_and_launch_blocking(table):
    """Jean Zay: four Omni-Path 100 Gb/s links per 8-GPU node (6.25 GB/s per GPU); the tr11 script
    sets CUDA_LAUNCH_BLOCKING=1, so nothing hides: every axis's exposed time is its link time."""
    from parallmelism.validate.runner import _context, _evaluate_one
    from parallmelism.validate.steptime import step_time_run_of

    run = step_time_run_of(_row("bloom-176b"), _context([], None))
    assert run.hardware.scale_out.bandwidth_gbps == 6.25 and run.hardware.name == "a100-sxm-80gb"
    assert run.workload.launch_blocking and not any(run.workload.hides(ax) for ax in ("dp", "tp", "pp", "ep"))
    r = _evaluate_one(run)
    for ax in ("tp", "dp", "pp"):
        assert float(r[f"time_comm_{ax}_exposed_s"]) == pytest.approx(float(r[f"time_comm_{ax}_s"]), rel=1e-9), ax
    assert abs(table.loc["bloom-176b", "error_pct"]) <= 15.0
    # the same layout on the accelerator file's network and with launches overlapping is faster
    free = run.model_copy(
        update={
            "hardware": run.hardware.model_copy(
                update={"scale_out": run.hardware.scale_out.model_copy(update={"bandwidth_gbps": 25.0})}
            ),
            "workload": run.workload.model_copy(update={"launch_blocking": False}),
        }
    )
    assert float(_evaluate_one(free)["time_step_s"]) < float(r["time_step_s"])


@pytest.mark.parametrize(
    "column, value, words",
    [
        ("scale_out_gbps", "-6.25", "bandwidth_gbps"),
        ("launch_blocking", "maybe", "launch_blocking"),
        ("attention_backend", "flash9", "attention_backend"),
    ],
)
def test_a_bad_cluster_column_is_one_sentence(tmp_path, column, value, words):
    ours = pd.read_csv(CASES, dtype=str, keep_default_na=False)
    row = ours[ours["case"] == "bloom-176b"].copy()
    row[column] = value
    path = tmp_path / "cases.csv"
    row.to_csv(path, index=False)
    code, out = invoke("validate", "--cases", str(path))
    assert code == 2 and "bloom-176b" in out and words in out and "Traceback" not in out, out


def test_launch_blocking_hides_nothing_and_never_shortens_a_step():
    from parallmelism.config.compose import compose, to_run_config
    from parallmelism.validate.runner import _evaluate_one

    base = [
        "model=llama3.1-70b",
        "grid.ngpus=[64]",
        "grid.tp=[4]",
        "grid.pp=[4]",
        "grid.micro_batch=[1]",
        "grid.vpp=[1]",
        "grid.recompute=[none]",
        "grid.dp_sharding=[OPTIMIZER_STATES]",
        "grid.cp=[1]",
        "grid.sequence_parallel=[true]",
        "workload.global_batch=64",
    ]
    free = _evaluate_one(to_run_config(compose(base, None)))
    blocked = _evaluate_one(to_run_config(compose([*base, "workload.launch_blocking=true"], None)))
    assert float(blocked["time_step_s"]) > float(free["time_step_s"])
    said = _evaluate_one(
        to_run_config(compose([*base, "workload.launch_blocking=true", "workload.overlap_tp_comm=true"], None))
    )
    assert float(said["time_step_s"]) == float(blocked["time_step_s"])
    assert float(blocked["time_comm_exposed_s"]) == pytest.approx(
        sum(float(blocked[f"time_comm_{ax}_s"]) for ax in ("tp", "cp", "ep", "dp", "pp")), rel=1e-9
    )


# Rows whose recompute the model cannot express, so their activation memory is not theirs.
MEMORY_NOT_REPRESENTED = {
    # MaxText remat_policy=custom (save_dot_except_mlpwi): the q/k/v/out projections and mlpwo
    # outputs are saved and the MLP up/gate recomputed; the row's `selective` is Megatron's
    # (attention core only), which keeps every MLP activation (188 GiB at b = 2, tp 1).
    "dgxc-maxtext-llama2-70b-64gpu-bf16",
    "dgxc-maxtext-llama2-70b-64gpu-fp8",
    "dgxc-maxtext-llama2-70b-512gpu-bf16",
    "dgxc-maxtext-llama2-70b-512gpu-fp8",
    # Meta's pipeline schedule (Llama 3 paper, section 3.3.2 and Figure 6) runs rounds of N
    # contiguous micro-batches with N set freely, where Megatron's interleaving (what the model
    # counts) takes N = pp: at m = 32 micro-batches its second rank holds 141 one-layer chunks in
    # flight (70 GiB of activations, 88.4 GiB in all); the 16,384-GPU rows (m = 16 = pp) hold 128.
    "llama3-405b-8k-8192gpu",
    # Megatron-Bridge's performance page states recompute_granularity selective without its
    # modules; Megatron's selective recompute of MoE layers can take the expert activations too.
    "mbridge2509-deepseekv3-1024gpu-fp8",
}


def test_published_layouts_fit_in_memory():
    """The published runs ran, so the memory model must let their layouts fit: within 5 % of the
    usable HBM (Meta's 16,384-GPU 405B layouts and NVIDIA's Nemotron-4 340B recipe come out 2.5-3 % over,
    what an allocator's early frees and a framework's buffer reuse can give back), unless the
    row's recompute policy is one the model cannot express (MEMORY_NOT_REPRESENTED)."""
    from parallmelism.validate.runner import _context, _evaluate_one
    from parallmelism.validate.steptime import step_time_run_of

    ctx = _context([], None)
    rows = pd.read_csv(CASES, dtype=str, keep_default_na=False).replace({"": None}).to_dict("records")
    over = {}
    for row in rows:
        r = _evaluate_one(step_time_run_of(row, ctx))
        usable = float(r["mem_total_gib"]) + float(r["mem_headroom_gib"])
        if row["case"] not in MEMORY_NOT_REPRESENTED and float(r["mem_total_gib"]) > 1.05 * usable:
            over[row["case"]] = round(float(r["mem_total_gib"]), 2)
    assert len(rows) == 52 and not over, over


def test_micro_batch_search_stays_small_on_a_huge_batch(monkeypatch):
    """A blank micro-batch with a huge per-replica batch (2**40 sequences) lists its 41 divisors
    without counting to 2**40, and the engine evaluates them all in one pass over the grid."""
    import parallmelism.search as search
    from parallmelism.validate import steptime
    from parallmelism.validate.runner import _context

    row = {**_row("mcore-h100-32b"), "global_batch": str(48 * 2**40)}
    assert steptime.micro_batch_candidates(row) == [2**i for i in range(41)]
    assert steptime._divisors(36) == [1, 2, 3, 4, 6, 9, 12, 18, 36]
    calls = []
    evaluate = search.evaluate_table
    monkeypatch.setattr(search, "evaluate_table", lambda run: calls.append(run) or evaluate(run))
    b = steptime.fastest_micro_batch(row, _context([], None))
    assert b in (1, 2, 4, 8) and len(calls) == 1, (b, len(calls))
    assert calls[0].grid.micro_batch == [2**i for i in range(41)]


def test_validation_reads_columns_never_the_notes():
    """Configuration comes from explicit columns only (issue 27): free text that once set a value
    (a sharding name, "interleaved", "not overlapped", "TP ... overlap") changes nothing, and the
    shipped rows carry the values it used to give in columns (interleaved, dp_sharding,
    overlap_dp_comm, overlap_tp_comm), so their predictions did not move."""
    from parallmelism.validate.cases import sharding_of
    from parallmelism.validate.runner import _context
    from parallmelism.validate.steptime import step_time_run_of

    ctx = _context([], None)
    loud = "FULLY_SHARD; interleaved; DP comm not overlapped; TP comm overlap on"
    for case in ("narayanan-39.1b", "narayanan-1.7b", "korthikanti-530b-dp8-selective", "mcore-h100-1.7b"):
        row = _row(case)
        quiet, noisy = ({**row, "notes": n} for n in ("", loud))
        assert step_time_run_of(quiet, ctx) == step_time_run_of(noisy, ctx), case
        assert sharding_of(noisy) == sharding_of(quiet)
    # the interleaved rows state it in a column, and take the least interleaving Megatron accepts
    run = step_time_run_of({**_row("narayanan-39.1b"), "notes": ""}, ctx)
    assert _row("narayanan-39.1b")["interleaved"] == "true" and run.grid.vpp[0] > 1
    assert step_time_run_of(_row("narayanan-1.7b"), ctx).grid.vpp == [1]
    # the rows whose notes named an overlap setting state it in its column
    assert _row("korthikanti-530b-dp8-selective")["overlap_dp_comm"] == "false"
    assert _row("mcore-h100-1.7b")["overlap_tp_comm"] == "true"
    # no module of validate/ reads the notes column
    sources = (REPO / "parallmelism" / "validate").glob("*.py")
    assert not [p.name for p in sources if '"notes"' in p.read_text() or "'notes'" in p.read_text()]
