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


# DeepEP's published low-latency table (github.com/deepseek-ai/DeepEP docs/legacy.md, "Low-latency
# kernels with pure RDMA"): H800 with a CX7 400 Gb/s NIC per GPU, 128 tokens per rank, hidden 7168,
# top-8, FP8 dispatch, BF16 combine; latency in us per EP size
DEEPEP_LL_DISPATCH_US = {8: 77, 16: 118, 32: 155, 64: 173, 128: 192, 256: 194}
DEEPEP_LL_COMBINE_US = {8: 114, 16: 195, 32: 273, 64: 314, 128: 369, 256: 360}


def test_deepep_low_latency_reproduces_its_published_table():
    import numpy as np
    import pytest

    from parallmelism.config import load_option
    from parallmelism.cost.collective_ops import deepep_low_latency_times_s

    h800 = load_option("hardware", "h800-sxm-80gb")
    ep = np.array(list(DEEPEP_LL_DISPATCH_US), dtype=float)
    S = 128 * 8 * 7168 * 2.0  # the routed copies in bf16
    dispatch, combine = deepep_low_latency_times_s(h800, S, ep, 1)
    for got, table in ((dispatch, DEEPEP_LL_DISPATCH_US), (combine, DEEPEP_LL_COMBINE_US)):
        err = got * 1e6 / np.array(list(table.values())) - 1.0
        assert np.all(np.abs(err) <= 0.11), err
    # EP 32, by hand: 24/32 of the copies on the 47 GB/s NIC (FP8 + 4 B scales per 128), 38 us fixed
    fp8 = S / 2 * (1 + 4 / 128)
    assert dispatch[2] == pytest.approx(38e-6 + 0.75 * fp8 / 47e9)
    assert combine[2] == pytest.approx(38e-6 + 0.75 * S / 47e9)


WIDE_EP = [
    "workload=inference",
    "model=deepseek-v3",
    "hardware=h100-sxm-80gb",
    "grid.ngpus=[32]",
    "grid.tp=[1]",
    "grid.pp=[1]",
    "grid.sp=[1]",
    "grid.ep=[32]",
    "workload.weight_dtype=fp8",
    "workload.precision=fp8",
    "workload.kv_dtype=fp8",
    "workload.batch=128",
    "workload.input_len=2000",
    "workload.output_len=100",
    "workload.phase=decode",
    "workload.batching=static",
    "workload.moe_dispatcher=deepep",
]


def test_wide_ep_decode_on_32_gpus_builds_and_times():
    """DP-attention + EP32 (SGLang/Dynamo's wide-EP DeepSeek decode): every GPU its own attention
    replica, experts over 32 GPUs on four nodes, DeepEP low-latency dispatch and combine."""
    r = run_cli("show", *WIDE_EP)
    assert r.returncode == 0, r.stderr
    decode = [line for line in r.stdout.splitlines() if "decode" in line and "ep_all_to_all" in line]
    assert len(decode) == 1 and "116" in decode[0]  # dispatch + combine on each of the 58 MoE layers


def test_deepep_decode_collective_by_hand():
    """The decode pass's EP record under moe_dispatcher=deepep: DeepEP's low-latency dispatch
    (FP8) and combine (bf16) averaged per call, by hand from the H100 file."""
    import numpy as np
    import pytest

    from parallmelism.config import load_option
    from parallmelism.config.kernel_tables import kernel_model
    from parallmelism.cost.inference import decode_terms
    from parallmelism.cost.layout import ServingLayout
    from parallmelism.specs import InferenceWorkload

    hw = load_option("hardware", "h100-sxm-80gb")
    model = load_option("model", "deepseek-v3")
    wl = InferenceWorkload(
        batch=128, input_len=2000, output_len=100, weight_dtype="fp8", precision="fp8", moe_dispatcher="deepep"
    )
    one = np.array([1])
    lay = ServingLayout(tp=one, pp=one, sp=one, ep=one * 32, dp=one * 32, batch=one * 128, layers_per_stage=one * 61)
    terms = decode_terms(model, hw, wl, lay, km=kernel_model(hw))
    (ep,) = [op for op in terms["collectives"] if op.role == "ep"]
    S = 2.0 * 128 * 8 * 7168  # bf16 routed copies of the rank's 128 decode tokens
    nic, nvl = 50e9 * 0.94, 450e9 * 0.8
    one_call = [38e-6 + max(24 / 32 * b / nic, 7 / 32 * b / nvl) for b in (S / 2 * (1 + 4 / 128), S)]
    assert float(ep.time_s[0]) == pytest.approx(sum(one_call) / 2)
    assert float(ep.calls[0]) == 2 * 58


def test_eplb_redundant_experts_make_ep72_possible_and_cap_the_imbalance():
    """SGLang's 96-GPU deployment decodes on EP72 with 32 redundant experts (256 + 32 = 288 slots,
    4 per GPU): without EPLB 72 does not divide 256 experts; with it, the layout builds, each GPU
    holds 4 experts' weights, and the busiest rank's load is capped at 1 + 72/288 = 1.25."""
    import numpy as np
    import pytest

    from parallmelism.config import load_option
    from parallmelism.cost.eplb import eplb_imbalance, physical_experts_model
    from parallmelism.cost.shapes import experts_per_rank
    from parallmelism.grid.inference import enumerate_inference_layouts
    from parallmelism.specs import GridSpec, InferenceWorkload

    h100, dsv3 = load_option("hardware", "h100-sxm-80gb"), load_option("model", "deepseek-v3")
    g = GridSpec(ngpus=[72], tp=[1], pp=[1], sp=[1], ep=[72])
    plain = enumerate_inference_layouts(dsv3, h100, InferenceWorkload(), g)
    assert len(plain) == 0 and plain.dropped["experts_not_divisible_by_ep"] == 1
    eplb = enumerate_inference_layouts(dsv3, h100, InferenceWorkload(eplb_redundant_experts=32), g)
    assert eplb.columns["ep"].tolist() == [72]
    physical = physical_experts_model(dsv3, 32)
    assert physical.moe.num_experts == 288 and float(experts_per_rank(288, 72)) == 4.0
    assert physical_experts_model(dsv3, 0) is dsv3
    assert float(eplb_imbalance(1.5, 288, 72, 32)) == pytest.approx(1.25)
    assert float(eplb_imbalance(1.1, 288, 72, 32)) == pytest.approx(1.1)  # already better than the bound
    assert eplb_imbalance(1.5, 256, np.array([72]), 0) == 1.5  # no EPLB: the workload's imbalance


def test_wide_ep72_decode_with_eplb_builds_and_times():
    """The LMSYS large-scale-EP decode layout (9 nodes x 8 H100, EP72, DP attention, DeepEP
    low-latency, EPLB 32 redundant experts, 256 sequences per GPU at ~2,000 tokens of KV)."""
    args = [a for a in WIDE_EP if not a.startswith(("grid.ngpus", "grid.ep", "workload.batch="))]
    r = run_cli("show", *args, "grid.ngpus=[72]", "grid.ep=[72]", "workload.batch=256")
    assert r.returncode == 2 and "experts are not divisible by ep" in r.stderr
    r = run_cli(
        "show",
        *[a for a in args if a != "workload.batching=static"],
        "grid.ngpus=[72]",
        "grid.ep=[72]",
        "workload.batch=256",
        "workload.eplb_redundant_experts=32",
    )
    assert r.returncode == 0, r.stderr
    assert "decode_step_ms" in r.stdout and "ep_all_to_all" in r.stdout


def test_training_tp16_across_nodes_is_priced_on_the_nic():
    """Issue 32 item 4: TP spanning nodes in training, when asked, builds and lists its TP
    all-reduce on the scale-out link (warning, not refusal); without the option it is refused."""
    args = [
        "model=llama3.1-405b",
        "workload.global_batch=64",
        "grid.ngpus=[128]",
        "grid.tp=16",
        "grid.pp=4",
        "grid.cp=1",
        "grid.vpp=1",
        "grid.micro_batch=1",
        "grid.recompute=full",
        "grid.sequence_parallel=false",
        "grid.dp_sharding=OPTIMIZER_STATES",
    ]
    r = run_cli("show", *args)
    assert r.returncode == 2 and "grid.cross_node_tp=true" in r.stderr
    r = run_cli("show", *args, "grid.cross_node_tp=true")
    assert r.returncode == 0, r.stderr
    assert "warning: grid.cross_node_tp=true" in r.stderr
    (tp_row,) = [line for line in r.stdout.splitlines() if line.startswith("│ tp ") and "all_reduce" in line]
    assert "scale_out" in tp_row


def test_validate_keeps_a_measured_cross_node_layout(tmp_path):
    """A case row's layout is what ran: validate keeps its tp beyond the NVLink domain and reads the
    optional moe_dispatcher and eplb_redundant_experts columns (the SGLang rows of the engine survey)."""
    cases = tmp_path / "cases.csv"
    cases.write_text(
        "case,model,accelerator,precision,gpus,tp,pp,ep,input_len,output_len,concurrency,measured_ttft_ms,"
        "measured_itl_ms,engine,moe_dispatcher,eplb_redundant_experts,disaggregated\n"
        "tp16,deepseek-v3,h100-sxm-80gb,fp8,16,16,1,1,128,128,1,179.7,23.1,sglang,,,\n"
        "ep72,deepseek-v3,h100-sxm-80gb,fp8,72,1,1,72,1900,200,18432,,91.9,sglang,deepep,32,true\n"
    )
    r = run_cli("validate", "--cases", cases, "--out", tmp_path / "out.csv")
    assert r.returncode == 0, r.stderr
    out = (tmp_path / "out.csv").read_text()
    assert out.count('"tp16",') == 2 and out.count('"ep72",') == 1


def test_sglang_export_of_a_wide_ep_plan_names_deepep_and_eplb():
    """The wide-EP decode layout exports as SGLang runs it (DP attention, --moe-a2a-backend deepep
    --deepep-mode auto, --ep-num-redundant-experts) and reads back to the same workload; vLLM,
    whose flags for them are not exported, refuses in one sentence."""
    import pytest

    from parallmelism.cli.export_cmd import _planned
    from parallmelism.errors import UserError
    from parallmelism.export import target_module
    from parallmelism.export.shell import flags_of

    args = [a for a in WIDE_EP if a != "workload.batching=static"] + ["workload.eplb_redundant_experts=32"]
    planned = _planned(args, None)[0]
    sg = target_module("sglang")
    text = sg.render(planned)
    fl = flags_of(text, {f: m for f, (_, m) in sg.FIELDS.items()})
    assert fl["--enable-dp-attention"] is True and fl["--ep-size"] == "32"
    assert fl["--moe-a2a-backend"] == "deepep" and fl["--deepep-mode"] == "auto"
    assert fl["--ep-num-redundant-experts"] == "32"
    back = sg.parse(text, None, planned.layers)
    assert back["workload.moe_dispatcher"] == "deepep" and back["workload.eplb_redundant_experts"] == 32
    with pytest.raises(UserError, match="vLLM"):
        target_module("vllm").render(planned)


def test_sglang_export_of_tp16_over_two_nodes_round_trips(tmp_path):
    """DeepSeek-R1 at TP16 on two 8xH100 nodes: SGLang's --nnodes 2 (16 GPUs / domain of 8), the
    node rank and rank 0's address left as placeholders the script stops on until set; import-run
    reads it back to the same layout with grid.cross_node_tp, which show then prices. A --nnodes
    that does not divide the server's GPUs is one sentence."""
    from parallmelism.export import target_module
    from parallmelism.export.shell import flags_of

    out = tmp_path / "r1.sh"
    r = run_cli("export", "--pinned", "--to", "sglang", "--out", out, *DSR1_TP16, "grid.cross_node_tp=true")
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    sg = target_module("sglang")
    fl = flags_of(text, {f: m for f, (_, m) in sg.FIELDS.items()})
    assert fl["--tp-size"] == "16" and fl["--nnodes"] == "2"
    assert fl["--node-rank"] == "${NODE_RANK:?set NODE_RANK to this node rank, 0 to 1}"
    assert fl["--dist-init-addr"].startswith("${DIST_INIT_ADDR:?")
    r = run_cli("import-run", out)
    assert r.returncode == 0, r.stderr
    got = set(r.stdout.split())
    assert {"grid.ngpus=[16]", "grid.tp=[16]", "grid.pp=[1]", "grid.cross_node_tp=true"} <= got, got
    assert {"model=deepseek-v3", "hardware=h100-sxm-80gb", "workload.weight_dtype=fp8"} <= got, got
    r = run_cli("import-run", out, "--show")
    assert r.returncode == 0 and "tp_all_reduce" in r.stdout, r.stderr
    bad = tmp_path / "bad.sh"
    bad.write_text(text.replace("--nnodes 2", "--nnodes 3"))
    r = run_cli("import-run", bad)
    assert r.returncode == 2 and "--nnodes 3" in r.stderr and "Traceback" not in r.stderr


def test_engines_without_multi_node_flags_refuse_tp16_over_two_nodes():
    """vLLM (a Ray cluster) and TensorRT-LLM (an MPI job) run a TP group over nodes with machinery
    their pinned field tables do not write: one sentence each, naming it. A single-domain layout
    gets no --nnodes; the wide-EP DP-attention server of 32 GPUs gets --nnodes 4."""
    import pytest

    from parallmelism.cli.export_cmd import _planned
    from parallmelism.errors import UserError
    from parallmelism.export import target_module
    from parallmelism.export.shell import flags_of

    planned = _planned([*DSR1_TP16, "grid.cross_node_tp=true"], None)[0]
    assert planned.pinned()["grid.cross_node_tp"] is True
    with pytest.raises(UserError, match=r"vLLM cannot run this layout: .* 2 scale-up domains of 8.*Ray"):
        target_module("vllm").render(planned)
    with pytest.raises(UserError, match=r"TensorRT-LLM cannot run this layout: .* 2 scale-up domains of 8.*MPI"):
        target_module("trtllm").render(planned)
    sg = target_module("sglang")
    known = {f: m for f, (_, m) in sg.FIELDS.items()}
    tp8 = [a.replace("[16]", "[8]") for a in DSR1_TP16]
    one_node = _planned(tp8, None)[0]
    assert "grid.cross_node_tp" not in one_node.pinned()
    assert "--nnodes" not in flags_of(sg.render(one_node), known)
    wide = _planned([a for a in WIDE_EP if a != "workload.batching=static"], None)[0]
    fl = flags_of(sg.render(wide), known)
    assert fl["--enable-dp-attention"] is True and fl["--tp-size"] == "32" and fl["--nnodes"] == "4"


def test_megatron_export_of_training_tp16_reads_back_with_cross_node_tp(tmp_path):
    """Any target's file read back with a tp wider than the header's accelerator's scale-up
    domain pins grid.cross_node_tp, so `show` takes the layout again instead of refusing it."""
    args = [
        "model=llama3.1-405b",
        "workload.global_batch=64",
        "grid.ngpus=[256]",
        "grid.tp=[16]",
        "grid.pp=[8]",
        "grid.cp=[1]",
        "grid.vpp=[1]",
        "grid.micro_batch=[1]",
        "grid.recompute=[full]",
        "grid.sequence_parallel=[false]",
        "grid.dp_sharding=[OPTIMIZER_STATES]",
        "grid.cross_node_tp=true",
    ]
    out = tmp_path / "run.sh"
    r = run_cli("export", "--pinned", "--to", "megatron", "--out", out, *args)
    assert r.returncode == 0, r.stderr
    r = run_cli("import-run", out)
    assert r.returncode == 0, r.stderr
    assert {"grid.tp=[16]", "grid.cross_node_tp=true"} <= set(r.stdout.split()), r.stdout
