"""workload=inference end to end: sweep writes the serving CSV, show explains per op, validate
meets the 20 % bar on the shipped serving cases, bad input is one line with exit 2."""

from __future__ import annotations

import pandas as pd
import pytest

from conftest import invoke, run_cli, shared_reference
from parallmelism.schema import INFERENCE_COLUMNS


def test_sweep_writes_every_inference_column(tmp_path):
    out = tmp_path / "serve.csv"
    code, text = invoke(
        "sweep", "workload=inference", "model=llama3.1-8b", "grid.ngpus=[1,2]", f"output.path={out}", "workload.batch=4"
    )
    assert code == 0, text
    df = pd.read_csv(out)
    ours = [c for c in df.columns if c in INFERENCE_COLUMNS]
    assert ours == list(INFERENCE_COLUMNS)  # every schema column, in schema order
    assert (df["ngpus"] == df["tp"] * df["pp"] * df["sp"] * df["dp"]).all()
    assert set(df["bound_decode"]) <= {"compute", "memory", "communication"}


def test_show_explains_one_layout_per_op():
    code, text = invoke("show", "workload=inference", "grid.ngpus=[8]", "grid.tp=[8]", "grid.pp=[1]", "grid.sp=[1]")
    assert code == 0, text
    for op in (
        "qkv_proj",
        "attention_qk",
        "attention_pv",
        "output_proj",
        "gate_up_proj",
        "down_proj",
        "tp_all_reduce",
        "ttft_ms",
        "tpot_ms",
    ):
        assert op in text


def test_validate_shipped_serving_cases_within_20_percent():
    from parallmelism.validate.runner import run_validation, shipped_case_files

    files = [f for f in shipped_case_files() if f.name == "inference_measured.csv"]
    assert files, "parallmelism/cases/inference_measured.csv is shipped"
    table = run_validation(files, [], None)
    assert set(table["quantity"]) == {"ttft_ms", "itl_ms"}
    assert len(table) == 6
    assert (table["error_pct"].abs() <= 20).all(), table


def test_shipped_cases_are_the_reference_cases():
    from parallmelism.validate.runner import shipped_case_files

    ref = pd.read_csv(shared_reference("inference_measured.csv"))
    ours = pd.read_csv([f for f in shipped_case_files() if f.name == "inference_measured.csv"][0])
    # the reference columns verbatim; the shipped copy may add serving-stack configuration columns
    pd.testing.assert_frame_equal(ref, ours[list(ref.columns)].iloc[: len(ref)])


@pytest.mark.parametrize(
    "arg,key",
    [("workload.weight_dtype=fp4", "weight_dtype"), ("grid.sp=[0]", "sp"), ("workload.batching=dynamic", "batching")],
)
def test_bad_inference_input_is_one_line_exit_2(tmp_path, arg, key):
    out = tmp_path / "x.csv"
    p = run_cli("sweep", "workload=inference", arg, f"output.path={out}")
    assert p.returncode == 2
    assert "Traceback" not in p.stderr and key in p.stderr
    assert not out.exists()


def _readme():
    from conftest import REPO

    return (REPO / "README.md").read_text()


def _readme_section():
    text = _readme()
    return text[text.index("### Llama-3-70B on H100: TP8 vs TP16") :]


def test_readme_serving_commands_run(tmp_path):
    text = _readme()
    block = text[text.index("## Serving (workload=inference)") : text.index("### Validation: serving latency")]
    cmds = [ln.split("#")[0].split() for ln in block.splitlines() if ln.startswith("parallmelism ")]
    assert len(cmds) == 4
    for cmd in cmds:
        extra = [f"output.path={tmp_path / 'x.csv'}"] if cmd[1] == "sweep" else []
        code, out = invoke(*cmd[1:], *extra)
        assert code == 0, out


def test_readme_tp8_vs_tp16_table_is_what_the_command_prints(tmp_path):
    """The README numbers come from the command shown there; the physics is checked in closed form."""
    section = _readme_section()
    cmd = next(ln for ln in section.splitlines() if ln.startswith("parallmelism sweep")).split()
    out = tmp_path / "tp.csv"
    code, text = invoke(*cmd[1:], f"output.path={out}")
    assert code == 0, text
    df = pd.read_csv(out).set_index("tp")
    table = {}
    for ln in section.splitlines():
        cells = [c.strip() for c in ln.strip().strip("|").split("|")]
        cells[0] = cells[0].removesuffix(" (USD)")  # (the cost row names its unit; it was left unchecked)
        if len(cells) == 3 and cells[0] in df.columns:
            table[cells[0]] = cells[1:]
    assert len(table) >= 10 and "cost_per_million_tokens" in table
    for col, (tp8, tp16) in table.items():
        for tp, shown in ((8, tp8), (16, tp16)):
            assert float(shown) == pytest.approx(round(float(df.loc[tp, col]), 2), abs=0.006), (col, tp)
    # the prose's two ratios, from the same rows
    cut = round(100 * (1 - df.loc[16, "tpot_ms"] / df.loc[8, "tpot_ms"]))
    more = round(
        100 * (df.loc[8, "throughput_tokens_per_s_per_gpu"] / df.loc[16, "throughput_tokens_per_s_per_gpu"] - 1)
    )
    assert f"cuts the inter-token latency by {cut} %" in section
    assert f"serves {more} % more tokens per GPU" in section
    # closed forms: 2·80·8·128·2 B per token · (2048 + 512) tokens · 32 sequences ÷ 8 KV heads per GPU
    kv_gib = 2 * 80 * 8 * 128 * 2 * 2560 * 32 / 8 / 2**30
    assert df.loc[8, "mem_kv_cache_gib"] == pytest.approx(kv_gib) == df.loc[16, "mem_kv_cache_gib"]
    assert df.loc[16, "kv_replication"] == 2 and df.loc[8, "kv_replication"] == 1
    # weights: TP16 holds half of TP8's except the replicated K/V projections
    assert 0.5 < df.loc[16, "mem_weights_gib"] / df.loc[8, "mem_weights_gib"] < 0.52


def test_validate_nim_concurrency_sweep():
    """NIM 1.8.0 (H100, fp8, Llama 3.1 8B TP1 and 3.3 70B TP2): ITL at concurrency 1-250 and TTFT
    at concurrency 1 (the file's rules), the efficiency constants of hardware/h100-sxm-80gb.yaml."""
    from parallmelism.validate.runner import run_validation, shipped_case_files

    files = [f for f in shipped_case_files() if f.name == "inference_nim_h100.csv"]
    table = run_validation(files, [], None)
    itl = table[table["quantity"] == "itl_ms"]["error_pct"].abs()
    ttft = table[table["quantity"] == "ttft_ms"]["error_pct"].abs()
    assert len(itl) >= 40 and len(ttft) >= 10
    assert itl.median() < 10 and (itl <= 20).mean() >= 0.9
    assert ttft.median() < 15 and (ttft <= 20).mean() >= 0.8
