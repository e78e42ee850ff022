"""Layouts that span scale-up domains (issue 33 item 2, issue 32 item 4): TP across nodes when
asked (grid.cross_node_tp), priced on the scale-out link; the CLI builds and times them."""

from conftest import run_cli

DSR1_TP16 = [
    "workload=inference",
    "model=deepseek-v3",
    "hardware=h100-sxm-80gb",
    "grid.ngpus=[16]",
    "grid.tp=[16]",
    "grid.pp=[1]",
    "grid.ep=[1]",
    "workload.weight_dtype=fp8",
    "workload.precision=fp8",
    "workload.batch=1",
    "workload.input_len=128",
    "workload.output_len=128",
]


def test_tp16_over_two_nodes_is_refused_with_the_option_named():
    r = run_cli("show", *DSR1_TP16)
    assert r.returncode == 2
    assert "grid.cross_node_tp=true" in r.stderr and "Traceback" not in r.stderr


def test_deepseek_r1_tp16_over_two_h100_nodes_builds_and_times():
    """SGLang's DeepSeek-R1 deployment on two 8xH100 nodes (--tp 16 --nnodes 2), as asked."""
    r = run_cli("show", *DSR1_TP16, "grid.cross_node_tp=true")
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("warning: grid.cross_node_tp=true") == 1
    assert "tp_all_reduce" in r.stdout and "tpot_ms" in r.stdout
