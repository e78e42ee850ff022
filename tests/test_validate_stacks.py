"""Step-time validation per software stack (parallmelism/cases/training_stacks.csv plus the
megatron-te rows of training_measured.csv): each stack's bar is what its fit reaches
(benchmarks/fit_stack_overheads.py), with a small margin; known gaps (validate/stacks.py) are
validated and reported but held to no bar."""

import pandas as pd
import pytest

from conftest import REPO
from parallmelism.validate.stacks import KNOWN_GAPS

CASES = REPO / "parallmelism" / "cases"
# stack -> (mean |error| %, max |error| %, |mean signed| %) reached on its rows outside KNOWN_GAPS,
# rounded up by about half a point (issue 32's target: 10, 25, 5)
BARS = {
    # reached 7.23, 19.84, -0.00 (25 rows) at the refit for FlashAttention-2's measured 16k causal kernel (100 us,
    # 0.8, 380 ms: every row 35 ms a step slower, the 405B interleaved row +19.73 -> +19.84); 7.33, 19.73, +0.00 at
    # session 21's refit (100 us, 0.8, 345 ms); 7.36, 19.29, -0.01 before; 7.39, 19.44, +0.01 on 22 while FSDP2's
    # recompute gathered again
    "torchtitan": (7.9, 19.9, 0.5),
    # reached 9.66, 21.18, +0.00 (17 rows; step_fixed_ms 135 since FlashAttention-2's 16k causal kernel is measured);
    # 9.66, 21.01, -0.01 (unit_sync_us 25 since session 21) with the fms-fsdp rows on their README's fabric
    # (400/800 Gb/s per node);
    # 11.03, 24.97, -1.46 on the accelerator files' per-GPU NICs
    "pytorch-fsdp1": (10.0, 21.3, 0.5),
    # three rows fitted (the HF blog's Granite row, ALST's two 32k baselines: step_fixed_ms and the CPU optimizer
    # path per host, cpu_optimizer_s_per_gparam) and ALST's six long-sequence rows held out (validate/stacks.py
    # HELD_OUT, never fitted): reached 4.89, 10.37, +3.41 on the nine (5.21, 11.59, +3.73 while FlashAttention-2's
    # 16k causal kernel was interpolated); 6.02, 11.58, +3.57 on the seven while the
    # one Granite row was fitted and the baselines were known gaps
    "deepspeed": (5.7, 12.1, 4.2),
    "megatron-fsdp": (7.8, 15.3, 0.5),  # reached 7.32, 14.70, +0.00 (8 rows)
    # training_measured.csv's rows (calibrate.py's fit) and the stack file's megatron-te rows, 52 outside the known
    # gaps: 5.14, 17.15, -2.52 since the ModelZoo rows state their dropless routing's moe_imbalance (the max is its
    # TP2 EP32 PP8 row, +17.2 %); 5.20, 14.98, -2.57 on the 49 rows of training_measured.csv. Session 20 added 15
    # held-out rows (validate/stacks.py HELD_OUT 'mbho*', 'nemo2412', never fitted): 5.50, 12.63, -2.35 on the 15
    # (8 Megatron-Bridge 7.15, 12.63, -2.19; 7 NeMo 24.12 3.61, 10.57, -2.53); 4.92, 17.6, -1.88 on the 64 (4.75,
    # 17.6, -1.73 on the 49 without them, main at 53d5314). Session 21's refit (A100 0 us, 0.2; H100 800 us, 110 ms):
    # 4.93, 14.98, -1.85 on the 64; the 15 held out 5.45, 12.27, -2.01 (5.50, 12.63, -2.33 at the terms before)
    "megatron-te": (5.7, 17.7, 3.1),
    # NeMo AutoModel's 3 rows of training_measured.csv (its stack column): reached 5.77, 8.75, +0.30 (one source,
    # no held-out check possible; 4.61, 8.75, +1.46 while the Llama row's recompute gathered its FSDP units again)
    "automodel": (6.3, 9.3, 1.0),
    # MaxText's 4 rows of training_measured.csv (its stack column; under megatron-te before): reached 6.23, 12.45,
    # -0.00 (one source, no held-out check possible)
    "maxtext": (6.8, 13.0, 0.5),
}


@pytest.fixture(scope="module")
def table():
    from parallmelism.validate.runner import per_stack, run_validation

    t = run_validation([CASES / "training_measured.csv", CASES / "training_stacks.csv"], [], None)
    return dict(per_stack(t))


def test_every_stack_has_rows_and_a_bar(table):
    assert set(table) == set(BARS)


@pytest.mark.parametrize("stack", sorted(BARS))
def test_each_stack_within_its_bar(table, stack):
    rows = table[stack]
    e = rows[~rows["case"].isin(set(KNOWN_GAPS))]["error_pct"]
    mean_bar, max_bar, signed_bar = BARS[stack]
    assert e.abs().mean() <= mean_bar, (stack, e.abs().mean())
    assert e.abs().max() <= max_bar, (stack, rows.set_index("case")["error_pct"].to_dict())
    assert abs(e.mean()) <= signed_bar, (stack, e.mean())


def test_deepspeed_fitted_rows_stay_where_the_fit_put_them(table):
    """deepspeed fits two terms on three rows (the HF blog's Granite 7B ZeRO-3 run, ALST's two 32k baselines
    with the optimizer on the CPU); its bar over the nine rows would let them drift by several points
    unseen, so each keeps about half a point over what the fit reached (+3.81, +0.12, -4.04 %)."""
    rows = table["deepspeed"].set_index("case")["error_pct"]
    reached = {
        "hfblog2406-granite7b-4gpu-a100-zero3": 3.81,
        "alst2506-llama31-8b-8gpu-dp8-32k-base": 0.12,
        "alst2506-llama31-8b-32gpu-dp32-32k-base": -4.04,
    }
    for case, pct in reached.items():
        assert rows[case] == pytest.approx(pct, abs=0.5), (case, rows.to_dict())


def test_known_gaps_are_rows_of_the_stack_file():
    rows = pd.read_csv(CASES / "training_stacks.csv", dtype=str)
    assert set(KNOWN_GAPS) <= set(rows["case"])


def test_held_out_sources_have_rows_outside_the_known_gaps_and_are_not_fitted():
    """A held-out source (validate/stacks.py HELD_OUT) names rows of the stack file that are held to
    their stack's bar, and benchmarks/fit_stack_overheads.py fits on none of them. Its rows are listed
    by exact case id (HELD_OUT_CASES; was: any case whose name began with the source, so a new row
    joined a held-out set unseen): every row of a held-out source is listed there or a known gap, and
    every listed id is a row of such a source."""
    import importlib.util

    from parallmelism.validate.stacks import FITTED_OF_HELD_OUT, HELD_OUT, HELD_OUT_CASES, held_out

    rows = pd.read_csv(CASES / "training_stacks.csv", dtype=str)
    source = rows["case"].str.split("-", n=1).str[0]
    for src in HELD_OUT:
        held = rows[(source == src) & ~rows["case"].isin(set(KNOWN_GAPS) | FITTED_OF_HELD_OUT)]
        assert len(held) > 0, src
        unlisted = set(held["case"]) - HELD_OUT_CASES
        assert not unlisted, (
            f"rows of held-out source {src} neither in HELD_OUT_CASES, FITTED_OF_HELD_OUT nor KNOWN_GAPS: {unlisted}"
        )
    assert HELD_OUT_CASES <= set(rows["case"]) and not HELD_OUT_CASES & set(KNOWN_GAPS)
    assert FITTED_OF_HELD_OUT <= set(rows["case"]) and not FITTED_OF_HELD_OUT & (HELD_OUT_CASES | set(KNOWN_GAPS))
    assert {c.split("-", 1)[0] for c in FITTED_OF_HELD_OUT} <= set(HELD_OUT)
    assert {c.split("-", 1)[0] for c in HELD_OUT_CASES} == set(HELD_OUT)
    assert not held_out("nemo2412-a-row-added-later") and held_out("nemo2412-llama3-8b-h100-8gpu-tp1-cp2-fp8")
    spec = importlib.util.spec_from_file_location("fso", REPO / "benchmarks" / "fit_stack_overheads.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    items = [(c, 1.0, None) for c in rows["case"]]
    fitted = {c for c, _, _ in mod.fitted_rows(items)}
    assert fitted and not fitted & set(KNOWN_GAPS)
    assert not fitted & HELD_OUT_CASES
    assert "hfblog2406-granite7b-4gpu-a100-zero3" in fitted and FITTED_OF_HELD_OUT <= fitted


def _arctic_flos(row, s: float) -> float:
    """ArcticTraining's FLOPs of one sample (arctic_training/metrics.py at c656070, the paper's runs): 8 N s +
    16 L h s^2, N the model's parameters (untied embedding and LM head, norms included)."""
    h, L, kv = int(row["hidden"]), int(row["layers"]), int(row["kv_heads"])
    hd = h // int(row["heads"])
    per_layer = 2 * h * h + 2 * h * kv * hd + 3 * h * int(row["ffn"]) + 2 * h
    n = L * per_layer + 2 * int(row["vocab"]) * h + h
    return 8 * n * s + 16 * L * h * s * s


def test_alst_rows_agree_with_their_published_tflops():
    """Each ALST row states a published iteration time and TFLOPS (arXiv 2506.13996 Tables 1 and 4). The
    publisher's formula at the row's seq_len, samples per step and iteration time gives its TFLOPS per GPU
    within 2.5 %: which pins the sequence lengths the paper rounds (3.8M where Table 1 prints 3.7M, 15.5M for
    15M: 3.7M would be 5 % off). The two 32k baselines disagree by 6 % and 12 %, as their notes say."""
    import re

    from parallmelism.validate.stacks import FITTED_OF_HELD_OUT as BASELINES

    rows = pd.read_csv(CASES / "training_stacks.csv", dtype=str)
    alst = rows[rows["case"].str.startswith("alst2506-")]
    assert len(alst) == 8
    for _, r in alst.iterrows():
        published = float(re.search(r"'TFLOPS' ([0-9.]+)", r["source"]).group(1))
        t, gpus, samples = float(r["step_time_s"]), int(r["gpus"]), int(r["global_batch"])
        tflops = samples * _arctic_flos(r, float(r["seq_len"])) / (gpus * t) / 1e12
        if r["case"] in BASELINES:
            assert 0.05 < abs(tflops / published - 1) < 0.15, (r["case"], tflops, published)
        else:
            assert abs(tflops / published - 1) < 0.025, (r["case"], tflops, published)
    three_seven = alst[alst["case"].str.contains("3800k")].iloc[0]
    ratio = _arctic_flos(three_seven, 3.7e6) / _arctic_flos(three_seven, float(three_seven["seq_len"]))
    assert ratio < 0.96


def test_eager_element_wise_ops_cost_what_their_passes_say():
    """Without compile, a PyTorch-native stack runs RMSNorm, RoPE and SwiGLU as eager kernels
    (conf/stack/torchtitan.yaml unfused_elementwise: 9x, 5x, 1.67x the fused op's HBM bytes):
    torchtitan's 8B FSDP row without compile is slower than with it, as measured (2.844 s vs 2.458 s)."""
    from parallmelism.validate.runner import run_validation

    t = run_validation([CASES / "training_stacks.csv"], [], None).set_index("case")["predicted"]
    eager, compiled = t["tt2412-8b-8gpu-fsdp"], t["tt2412-8b-8gpu-fsdp-compile"]
    assert eager > compiled * 1.02


def test_fp8_rowwise_rows_price_the_recipe():
    """torchtitan's June-2025 page: torchao rowwise ran slower than tensorwise on every layout (1.35-1.51x
    the step). With its casts modelled (workload.fp8_scaling=rowwise) each rowwise row is slower than its
    tensorwise twin by at least 15 % and within 20 % of its measured step (it was 26-31 % short)."""
    from parallmelism.validate.runner import run_validation

    t = run_validation([CASES / "training_stacks.csv"], [], None).set_index("case")
    for size in ("70b-256gpu-fsdp32", "8b-64gpu-fsdp8"):
        for tp in ("vanillatp", "asynctp"):
            row = t.loc[f"tt2506-{size}-tp8-{tp}-fp8-rowwise"]
            twin = t.loc[f"tt2506-{size}-tp8-{tp}-fp8-tensorwise"]
            assert row["predicted"] > 1.15 * twin["predicted"], (size, tp)
            assert abs(row["error_pct"]) < 20.0, (size, tp, row["error_pct"])


def _dropless_script():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "moe_dropless_imbalance", REPO / "benchmarks" / "moe_dropless_imbalance.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_modelzoo_rows_state_the_imbalance_their_forced_dropless_pairs_give():
    """The ModelZoo rows route dropless without forcing the balance and state moe_imbalance: the value
    benchmarks/moe_dropless_imbalance.py solves from the readme's four forced/dropless TFLOP/s pairs
    (16k-128k, CP1-8), not one fitted on the rows. One imbalance per layer explains all four pairs while
    the MoE share of the step falls with the sequence length: the solved values agree within 0.1."""
    mod = _dropless_script()
    xs = [x for _, _, _, x in mod.derived_imbalances()]
    assert max(xs) - min(xs) <= 0.1, xs
    assert all(1.0 < x < 2.0 for x in xs), xs
    rows = pd.read_csv(CASES / "training_stacks.csv", dtype=str)
    zoo = rows[rows["case"].str.startswith("mz-")]
    assert len(zoo) == 5
    assert set(zoo["moe_imbalance"].astype(float)) == {mod.stated_value(xs)}
    # rows that force the balance (Megatron-Bridge's tables) state none
    assert rows[~rows["case"].str.startswith("mz-")]["moe_imbalance"].isna().all()


def test_a_stated_moe_imbalance_reaches_the_workload():
    """The moe_imbalance column is a stated workload field (validate/steptime.py); a blank cell is 1."""
    from parallmelism.validate.runner import _context
    from parallmelism.validate.steptime import step_time_run_of

    rows = pd.read_csv(CASES / "training_stacks.csv", dtype=str, keep_default_na=False).replace({"": None})
    by_case = {r["case"]: r for r in rows.to_dict("records")}
    ctx = _context([], None)
    zoo = step_time_run_of(by_case["mz-qwen3-235b-h100-256gpu-tp2-ep32-pp8-deepep"], ctx)
    bridge = step_time_run_of(by_case["mb2604p1-qwen3-235b-h100-256gpu-tp2-pp8-vp4-ep32-fp8"], ctx)
    assert zoo.workload.moe_imbalance == 1.5  # benchmarks/moe_dropless_imbalance.py
    assert bridge.workload.moe_imbalance == 1.0


def test_ulysses_rows_read_the_shipped_qwen3_4b():
    """The HF Ulysses rows' architecture columns cannot say head_dim 128 (query width 4096 over hidden 2560) nor
    tied embeddings; their model_desc names Qwen3-4B, so they take models/qwen3-4b.yaml (4.02B parameters, the
    model card's 4.0B), not a head_dim-80 untied model built from the columns."""
    from parallmelism.config import option_files
    from parallmelism.config.compose import _load_option
    from parallmelism.validate.cases import model_of

    files = option_files("model", [])
    models = {n: _load_option("model", n, files) for n in files}
    rows = pd.read_csv(CASES / "training_stacks.csv", dtype=str, keep_default_na=False)
    ulysses = [r for r in rows.to_dict("records") if r["case"].startswith("hfulysses2603-")]
    assert len(ulysses) == 3
    for r in ulysses:
        spec = model_of({k: (v or None) for k, v in r.items()}, models)
        assert (spec.name, spec.head_dim, spec.tie_embeddings) == ("qwen3-4b", 128, True), r["case"]
