"""fp8 as Transformer Engine runs it: which GEMMs, cast bytes, weight copies, grad-reduce dtype, MFU columns."""

import numpy as np
import pandas as pd
import pytest

from conftest import REFERENCE, invoke, stacked
from parallmelism.config.kernel_tables import kernel_model
from parallmelism.config import load_option
from parallmelism.cost.flops import head_ops, layer_ops
from parallmelism.cost.roofline import Rates, low_precision_cast_bytes, op_times
from parallmelism.engine import evaluate
from parallmelism.errors import UserError
from parallmelism.specs import DPSharding, GridSpec, RunConfig, TrainWorkload

H100 = load_option("hardware", "h100-sxm-80gb")
A100 = load_option("hardware", "a100-sxm-80gb")
B200 = load_option("hardware", "b200-180gb")
MODEL = load_option("model", "llama3.1-70b")
CURVES = REFERENCE / "h100_kernel_curves.csv"


def one(hw=H100, **wl):
    wl = TrainWorkload(**{"seq_len": 4096, "global_batch": 256, **wl})
    grid = GridSpec(
        ngpus=[64],
        tp=[8],
        pp=[2],
        cp=[1],
        ep=[1],
        vpp=[1],
        micro_batch=[1],
        dp_sharding=["OPTIMIZER_STATES"],
        recompute=["none"],
        sequence_parallel=[True],
    )
    df, _ = evaluate(
        RunConfig(stack=load_option("stack", "megatron-te"), model=MODEL, hardware=hw, workload=wl, grid=grid)
    )
    assert len(df) == 1
    return df.iloc[0]


def test_logits_gemm_stays_bf16_and_layer_gemms_run_fp8():
    rates = Rates(H100, "fp8", kernel_model(H100))
    ops = {op.name: op for op in layer_ops(MODEL, 4096, 1, 8, 1, True, True)}
    logits = [op for op in head_ops(MODEL, 4096, 1, 8, 1, True) if op.name == "logits"][0]
    assert rates.gemm_dtype(logits) == "bf16"
    assert all(rates.gemm_dtype(ops[n]) == "fp8" for n in ("qkv", "out_proj", "gate_up", "down"))
    f_bf = op_times(logits, Rates(H100, "bf16", kernel_model(H100)))[0]
    f_8 = op_times(logits, rates)[0]
    assert float(f_8) == pytest.approx(float(f_bf))


def test_cast_bytes_follow_transformer_engine():
    """qkv: cast fused into the norm (writes fp8 row + column copies, 2 B per input element);
    down: unfused (read 2 + write 2); backward dY cast + transpose 4 B per output element."""
    ops = {op.name: op for op in layer_ops(MODEL, 4096, 1, 8, 1, True, True)}
    T, h = 4096.0, 8192.0
    f, b = low_precision_cast_bytes(ops["qkv"], "fp8")
    assert float(f) == pytest.approx(2 * T * h)
    assert float(b) == pytest.approx(4 * T * float(ops["qkv"].mkn[2]))
    f, _ = low_precision_cast_bytes(ops["down"], "fp8")
    assert float(f) == pytest.approx(4 * T * 28672 / 8)


def test_cast_cost_is_hbm_bytes_at_the_measured_bandwidth():
    """h100_kernel_curves.csv cast_input_s: PyTorch eager amax + scale + cast of A, an upper bound on
    Transformer Engine's fused cast. Counted as HBM bytes the eager chain is abs (read 2, write 2 B),
    amax (read 2), scale (read 2, write 2), cast (read 2, write 1) = 13 B per element: at the measured
    bandwidth for that size it reproduces every large row (m·k >= 16M elements) within 40 %; the fused
    cast we charge (read 2, write 1 B) stays below each measured row."""

    km = kernel_model(H100)
    c = pd.read_csv(CURVES, comment="#")
    c = c[(c.family == "gemm") & (c.dtype == "fp8") & (c.m * c.k >= 16 * 2**20)]
    assert len(c) > 10
    measured = c.cast_input_s.to_numpy()
    eager = np.array([float(km.memory_s(13.0 * r.m * r.k)) for r in c.itertuples()])
    fused = np.array([float(km.memory_s(3.0 * r.m * r.k)) for r in c.itertuples()])
    assert np.all(np.abs(eager / measured - 1) <= 0.40)
    assert np.all(fused < measured)


def test_fp8_speedup_is_below_the_peak_ratio():
    """fp8 GEMMs run ~1.7x bf16 before casts; with casts, bf16 attention and bf16 logits, a Llama-70B
    step gains far less than the 2x peak ratio; MFU is against the fp8 peak, with the bf16-peak column beside."""
    bf, f8 = one(precision="bf16"), one(precision="fp8")
    speedup = bf["time_step_s"] / f8["time_step_s"]
    assert 1.1 < speedup < 1.6
    assert f8["mfu_bf16_peak"] == pytest.approx(f8["mfu"] * 1979 / 989)
    assert bf["mfu_bf16_peak"] == pytest.approx(bf["mfu"])


def test_fp8_weight_copies_and_bf16_grad_reduce():
    """fp8 adds the row-wise + transposed fp8 weight copies (2 B/param); grad_reduce_dtype=bf16
    halves the gradient buffer (4 -> 2 B/param) and the DP reduce-scatter bytes."""
    bf = one()
    f8 = one(precision="fp8")
    g16 = one(grad_reduce_dtype="bf16")
    assert f8["mem_weights_gib"] == pytest.approx(bf["mem_weights_gib"] * 4 / 2)
    assert g16["mem_grads_gib"] == pytest.approx(bf["mem_grads_gib"] / 2)
    assert g16["time_comm_dp_s"] < 0.75 * bf["time_comm_dp_s"]


def test_fp8_parameters_replace_the_bf16_weights_and_halve_the_gather():
    """fp8 parameters (workload.fp8_param_gather: Megatron --fp8-param-gather, NeMo fp8_params) are
    the fp8 row-wise + transposed copies alone: 2 B/param where bf16 + copies are 4 B; the ZeRO-1
    parameter all-gather moves 1 B/param instead of 2, and FSDP's gathered units shrink alike."""
    f8 = one(precision="fp8")
    f8p = one(precision="fp8", fp8_param_gather=True)
    assert f8p["mem_weights_gib"] == pytest.approx(f8["mem_weights_gib"] / 2)
    assert f8p["time_comm_dp_s"] < f8["time_comm_dp_s"]
    code, out = invoke("show", "model=llama3.1-8b", "grid.ngpus=[8]", "workload.fp8_param_gather=true")
    assert code == 2 and "fp8_param_gather" in out and "precision=fp8" in out and "Traceback" not in out


def test_low_precision_needs_its_peak():
    with pytest.raises(UserError, match="fp8"):
        Rates(A100, "fp8")
    with pytest.raises(UserError, match="fp4"):
        Rates(H100, "fp4")
    assert "fp4" in B200.peak_tflops
    r = one(hw=B200, precision="fp4")
    assert r["mfu"] == pytest.approx(r["mfu_bf16_peak"] * B200.peak_tflops["bf16"] / B200.peak_tflops["fp4"])


def test_cli_fp8_on_a100_is_one_sentence_and_exit_2():
    code, out = invoke(
        "best", "model=llama3.1-8b", "hardware=a100-sxm-80gb", "workload.precision=fp8", "grid.ngpus=[8]"
    )
    assert code == 2, out
    assert "fp8" in out and "Traceback" not in out


def test_bf16_edge_layers_cost_bf16_time():
    """fp8_bf16_edge_layers = 2 on a 2-stage pipeline: the first stage runs its first 2 layers and the
    last stage its last 2 layers in bf16; each stage's layer compute grows by 2 x (bf16 - fp8 layer)."""
    from parallmelism.cost.steptime import _micro_batch_terms
    from parallmelism.grid import RECOMPUTE_CODE

    from parallmelism.cost.layout import TrainingLayout

    cols = {
        "ngpus": np.array([16]),
        "dp": np.array([1]),
        "vpp": np.array([1]),
        "tp": np.array([8]),
        "pp": np.array([2]),
        "cp": np.array([1]),
        "ep": np.array([1]),
        "micro_batch": np.array([1]),
        "sequence_parallel": np.array([True]),
        "recompute": np.array([RECOMPUTE_CODE["none"]]),
        "layers_first_stage": np.array([40]),
        "layers_per_stage": np.array([40]),
        "layers_last_stage": np.array([40]),
        "num_micro_batches": np.array([32]),
        "dp_sharding": np.array([int(DPSharding.OPTIMIZER_STATES)]),
    }
    terms = {}
    for name, wl in (
        ("bf16", TrainWorkload(seq_len=4096, global_batch=256)),
        ("fp8", TrainWorkload(seq_len=4096, global_batch=256, precision="fp8")),
        ("edge", TrainWorkload(seq_len=4096, global_batch=256, precision="fp8", fp8_bf16_edge_layers=2)),
    ):
        terms[name] = _micro_batch_terms(
            TrainingLayout.of(cols), MODEL, stacked(H100), wl, Rates(H100, wl.precision, kernel_model(H100))
        )
    for stage in ("first", "last"):
        per_layer_gap = (terms["bf16"][stage]["compute_mb"] - terms["fp8"][stage]["compute_mb"]) / 40
        extra = terms["edge"][stage]["compute_mb"] - terms["fp8"][stage]["compute_mb"]
        assert per_layer_gap[0] > 0
        assert extra[0] == pytest.approx(2 * per_layer_gap[0], rel=1e-6)


def test_weight_casts_once_per_step_or_per_use():
    """Transformer Engine casts a kept weight once per step (Megatron's is_first_microbatch: 1/m of
    a cast per micro-batch); FULLY_SHARD gathers bf16 weights for every use, so each forward casts,
    and each backward too when the weights are resharded after forward; fp8 parameters cast
    nothing. One cast of qkv reads its bf16 weight (2 B) and writes its fp8 row-wise and transposed
    copies (2 B): 4 B per parameter at the HBM bandwidth measured for that size."""
    from parallmelism.cost.roofline import training_ops_times
    from parallmelism.cost.steptime import weight_casts_per_micro_batch

    from parallmelism.cost.layout import TRAINING_FIELDS, TrainingLayout

    ones = {name: np.array([1, 1]) for name in TRAINING_FIELDS}
    cols = TrainingLayout.of(
        {
            **ones,
            "dp_sharding": np.array([int(DPSharding.OPTIMIZER_STATES), int(DPSharding.FULLY_SHARD)]),
            "num_micro_batches": np.array([32, 32]),
        }
    )
    f, b = weight_casts_per_micro_batch(cols, TrainWorkload(seq_len=4096, global_batch=256, precision="fp8"))
    assert list(f) == [1 / 32, 1.0] and list(b) == [0.0, 1.0]
    keep = TrainWorkload(seq_len=4096, global_batch=256, precision="fp8", fsdp_reshard_after_forward=False)
    assert list(weight_casts_per_micro_batch(cols, keep)[1]) == [0.0, 0.0]
    fp8p = TrainWorkload(seq_len=4096, global_batch=256, precision="fp8", fp8_param_gather=True)
    assert weight_casts_per_micro_batch(cols, fp8p) is None
    assert weight_casts_per_micro_batch(cols, TrainWorkload(seq_len=4096, global_batch=256)) is None

    ops = layer_ops(MODEL, 4096, 1, 8, 1, True, True)
    wl = TrainWorkload(seq_len=4096, global_batch=256, precision="fp8")
    qkv = [
        t for op, t in zip(ops, training_ops_times(ops, Rates(H100, "fp8", kernel_model(H100)), wl)) if op.name == "qkv"
    ][0]
    params = 8192 * (8192 + 2 * 128 * 8) / 8
    assert float(qkv[6]) == pytest.approx(4.0 * params)
    assert float(qkv[5]) == pytest.approx(float(kernel_model(H100).memory_s(4.0 * params)))
    assert bool(qkv[7])


def test_gemms_too_small_for_fp8_stay_bf16():
    """torchtitan's auto_filter_small_kn as workload.low_precision_gemms=where_faster (the default):
    DeepSeek-V3's experts split 64 ways by tp have k = 2048/64 = 32 rows of weights per expert GEMM
    (down projection), where fp8's casts of the input and of the 7168-wide output gradient cost
    more than fp8 saves: those GEMMs run in bf16, at bf16's kernel times and with no weight cast,
    while Llama-3.1-70B's layer GEMMs at tp 8 all run in fp8. With `all` (Transformer Engine's
    fp8_autocast over the model) every GEMM is fp8, and slower there."""
    from parallmelism.cost.roofline import ops_times, training_ops_times

    dsv3 = load_option("model", "deepseek-v3")
    ops = layer_ops(dsv3, 4096, 16, 64, 1, False, True, moe_layer=True, ep=1)
    wl = TrainWorkload(seq_len=4096, global_batch=1024, precision="fp8")
    rates = Rates(H100, "fp8", kernel_model(H100))
    picked = {op.name: t for op, t in zip(ops, training_ops_times(ops, rates, wl))}
    bf16 = {op.name: t for op, t in zip(ops, ops_times(ops, Rates(H100, "bf16", kernel_model(H100))))}
    fp8 = {op.name: t for op, t in zip(ops, ops_times(ops, rates))}
    down = "experts_down"
    assert not bool(picked[down][7]) and float(picked[down][5]) == 0.0
    assert float(picked[down][0]) == float(bf16[down][0]) and float(picked[down][1]) == float(bf16[down][1])
    assert float(fp8[down][0] + fp8[down][1]) > float(bf16[down][0] + bf16[down][1])  # fp8 would be slower
    everything = training_ops_times(ops, rates, wl.model_copy(update={"low_precision_gemms": "all"}))
    gemms = [op.name for op in ops if op.mkn is not None and rates.gemm_dtype(op) == "fp8"]
    assert {"experts_up", "experts_down"} <= set(gemms)
    assert all(bool(t[7]) for op, t in zip(ops, everything) if op.name in gemms)
    llama = layer_ops(MODEL, 4096, 1, 8, 1, True, True)
    runs = {op.name: bool(t[7]) for op, t in zip(llama, training_ops_times(llama, rates, wl))}
    assert all(runs[n] for n in ("qkv", "out_proj", "gate_up", "down"))
    # where FULLY_SHARD casts the weights again in backward, out_proj (k = 8192/8 = 1024) saves
    # less in its backward (0.1835 -> 0.178 ms, its 8192-wide output gradient cast and transposed)
    # than the recast of its 8.4 M weights costs: it stays bf16 there
    recast = {op.name: bool(t[7]) for op, t in zip(llama, training_ops_times(llama, rates, wl, True))}
    assert not recast["out_proj"] and all(recast[n] for n in ("qkv", "gate_up", "down"))


def test_rowwise_casts_each_operand_per_gemm_and_per_linear():
    """torchao's rowwise recipe (workload.fp8_scaling=rowwise): an axiswise cast is an amax pass
    (read 2 B) and the cast (read 2, write 1) = 5 B per element, never fused into the norm. q, k and v
    are three Linears over one input (3 casts of X in the forward, 3 more along m for wgrad), gate and
    up two; dY is cast twice (along n for dgrad, along m for wgrad); weights twice (k and n)."""
    from parallmelism.cost.roofline import weight_cast_bytes

    ops = {op.name: op for op in layer_ops(MODEL, 4096, 1, 8, 1, True, True)}
    T, h = 4096.0, 8192.0
    f, b = low_precision_cast_bytes(ops["qkv"], "fp8", "rowwise")
    n = float(ops["qkv"].mkn[2])
    assert float(f) == pytest.approx(3 * 5 * T * h)
    assert float(b) == pytest.approx(2 * 5 * T * n + 3 * 5 * T * h)
    f, b = low_precision_cast_bytes(ops["gate_up"], "fp8", "rowwise")
    assert float(f) == pytest.approx(2 * 5 * T * h)
    f, b = low_precision_cast_bytes(ops["down"], "fp8", "rowwise")
    assert float(f) == pytest.approx(5 * T * 28672 / 8)
    assert float(b) == pytest.approx(2 * 5 * T * h + 5 * T * 28672 / 8)
    w = float(ops["down"].weight_params)
    assert float(weight_cast_bytes(ops["down"], "fp8", "rowwise")) == pytest.approx(10 * w)
    assert float(weight_cast_bytes(ops["down"], "fp8")) == pytest.approx(4 * w)


def test_rowwise_is_slower_than_tensorwise_by_its_casts_and_needs_fp8():
    """Same GEMM kernels, more HBM passes: the rowwise step is longer; bf16 with rowwise is refused."""
    tensor = one(precision="fp8", low_precision_gemms="all")
    row = one(precision="fp8", low_precision_gemms="all", fp8_scaling="rowwise")
    assert row["time_step_s"] > tensor["time_step_s"]
    assert row["mfu"] < tensor["mfu"]
    with pytest.raises(ValueError, match="fp8_scaling=rowwise needs workload.precision=fp8"):
        TrainWorkload(seq_len=4096, global_batch=256, fp8_scaling="rowwise")
