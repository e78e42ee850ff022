"""Quantized serving (workload.quantization, specs/quantization.py): bytes per weight with their scales,
Llama-3.1-70B's weights per GPU and a decode GEMM's weight-streaming time under each scheme against hand
arithmetic, the engine and accelerator refusals through the CLI, and the engines' export flags."""

from __future__ import annotations

import sys

import pytest

from conftest import run_cli
from parallmelism.config.compose import load_option
from parallmelism.cost.inference_ops import weight_elements_per_gpu
from parallmelism.specs import InferenceWorkload
from parallmelism.specs.quantization import SCHEMES, linear_weight_bytes

# bytes per linear weight element: the element + its scales (+ zero points), by hand
#   fp8_tensor  1 + 4 B / whole tensor                     = 1
#   fp8_block   1 + 4 B / (128 x 128)                      = 1 + 1/4096
#   nvfp4       0.5 + 1 B (fp8 scale) / 16                 = 0.5625
#   int4 (AWQ, GPTQ) 0.5 + (2 B fp16 scale + 0.5 B 4-bit zero) / 128 = 0.51953125
BYTES = {
    "none": 2.0,
    "fp8_tensor": 1.0,
    "fp8_block": 1.0 + 1.0 / 4096,
    "nvfp4": 0.5625,
    "int4_awq": 0.51953125,
    "int4_gptq": 0.51953125,
}

# Llama-3.1-70B at TP8 (h 8192, 80 layers, 64 query / 8 KV heads of 128, FFN 28672, vocabulary 128256,
# untied): per GPU, linear = 80 x (8192 x (1024 + 2 x 128) + 1024 x 8192 + 3 x 8192 x 3584)
# = 80 x 106,954,752 = 8,556,380,160 (68,451,041,280 / 8); 16-bit rest = 80 x 2 x 8192 norms + 2 x 128256
# x 8192 / 8 embedding and head + 8192 final norm = 263,987,200
LINEAR_70B_TP8 = 8_556_380_160
HALF_70B_TP8 = 263_987_200
# weight bytes per GPU = linear x B/element + 2 x HALF: by hand from the two counts above
WEIGHT_BYTES_70B_TP8 = {
    "none": 17_640_734_720,  # 2 x (8,556,380,160 + 263,987,200)
    "fp8_tensor": 9_084_354_560,  # 8,556,380,160 + 527,974,400
    "fp8_block": 9_086_443_520,  # + 8,556,380,160 x 4 / 16384 = 2,088,960 of scales
    "nvfp4": 5_340_938_240,  # 4,812,963,840 + 527,974,400
    "int4_awq": 4_973_281_280,  # 4,278,190,080 + 167,116,800 (66,846,720 groups x 2.5 B) + 527,974,400
}


@pytest.mark.parametrize("scheme", list(BYTES))
def test_bytes_per_weight_element_with_scales(scheme):
    assert linear_weight_bytes(InferenceWorkload(quantization=scheme)) == pytest.approx(BYTES[scheme], rel=1e-12)


@pytest.mark.parametrize("scheme", list(WEIGHT_BYTES_70B_TP8))
def test_llama_70b_weight_bytes_per_gpu_at_tp8(scheme):
    from parallmelism.cost.inference_memory import inference_memory
    from parallmelism.cost.layout import ServingLayout
    import numpy as np

    model = load_option("model", "llama3.1-70b")
    linear, half = weight_elements_per_gpu(model, 8, 1, 80, 1)
    assert (float(linear), float(half)) == (LINEAR_70B_TP8, HALF_70B_TP8)
    hw = load_option("hardware", "b200-180gb")  # every scheme's dtype (fp4 too)
    cols = {k: np.array([v]) for k, v in dict(tp=8, pp=1, sp=1, ep=1, dp=1, batch=1, layers_per_stage=80).items()}
    wl = InferenceWorkload(quantization=scheme)
    mem = inference_memory(ServingLayout.of(cols), model, hw, wl, np.array([1.0]), np.array([1.0]))
    assert float(mem["mem_weights_gib"][0]) * 2**30 == pytest.approx(WEIGHT_BYTES_70B_TP8[scheme], rel=1e-12)


def test_a_scheme_sets_the_dtypes_and_refuses_a_contradiction():
    wl = InferenceWorkload(quantization="int4_awq")
    assert (wl.weight_dtype, wl.precision) == ("int4", "bf16")  # W4A16: bf16 GEMMs after dequantization
    wl = InferenceWorkload(quantization="nvfp4")
    assert (wl.weight_dtype, wl.precision) == ("fp4", "fp4")
    with pytest.raises(ValueError, match="contradicts it"):
        InferenceWorkload(quantization="fp8_block", weight_dtype="int4")
    with pytest.raises(ValueError, match="needs its scales"):
        InferenceWorkload(weight_dtype="int4")  # int4 without a scheme would drop its scales' bytes
    assert {s.precision for s in SCHEMES.values()} == {"fp8", "fp4", "bf16"}


def test_int4_decode_gemm_streams_a_quarter_of_the_bytes_plus_launch():
    """Llama-3.1-70B at TP8 on H100, batch 1, one decode step's gate+up GEMM (m 1, k 8192, n 2 x 3584):
    the kernel model's physics, t = (2·m·k + w·k·n + 2·m·n) / (3350 GB/s x 0.85) + 7 us (GEMM_HBM_FRACTION,
    GEMM_LAUNCH_S), times the measured skinny-GEMM residual of that shape, the same for both dtypes:
      bf16  (16,384 + 2 x 58,720,256 + 14,336) B / 2.8475e12 B/s = 41.254 us, + 7 = 48.254 us
      int4  (16,384 + 0.51953125 x 58,720,256 + 14,336) B / 2.8475e12 B/s = 10.724 us, + 7 = 17.724 us
    ratio 0.36731; the weight streaming alone 0.51953125 / 2 = 0.2598. The dequantization adds no term
    (Marlin overlaps it with the loads: specs/quantization.py)."""
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
    from test_serving_kernels import decode_pass

    bf16 = decode_pass("llama3.1-70b", 1, tp=8)
    int4 = decode_pass("llama3.1-70b", 1, tp=8, quantization="int4_awq")
    assert int4["gate_up_proj"] / bf16["gate_up_proj"] == pytest.approx(17.7244 / 48.2541, rel=1e-4)
    # qkv (n 1280): (16,384 + 0.51953125 x 10,485,760 + 2,560) / 2.8475e12 + 7 us over (16,384 + 2 x
    # 10,485,760 + 2,560) / 2.8475e12 + 7 us = 8.9198 / 14.3714
    assert int4["qkv_proj"] / bf16["qkv_proj"] == pytest.approx(8.9198 / 14.3714, rel=1e-4)
    # norms, attention over the bf16 KV cache and the 16-bit output head do not change
    for op in ("attention_qk", "attention_pv", "lm_head", "attn_norm"):
        assert int4[op] == bf16[op]


def test_int4_prefill_gemm_runs_at_the_bf16_rate():
    """A prefill-sized GEMM is compute-bound: W4A16 multiplies in bf16 after dequantizing, so its time
    is bf16's (the weights' bytes are not what limits it)."""
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
    from test_serving_kernels import decode_pass

    bf16 = decode_pass("llama3.1-70b", 4096, tp=8)
    int4 = decode_pass("llama3.1-70b", 4096, tp=8, quantization="int4_awq")
    assert int4["gate_up_proj"] == pytest.approx(bf16["gate_up_proj"], rel=1e-9)


SHOW = ["show", "workload=inference", "model=llama3.1-70b", "grid.ngpus=[8]", "grid.tp=8"]


@pytest.mark.parametrize(
    "args,words",
    [
        (["hardware=a100-sxm-80gb", "workload.quantization=fp8_block"], "lists no fp8 tensor-core peak"),
        (["hardware=h100-sxm-80gb", "workload.quantization=nvfp4"], "lists no fp4 tensor-core peak"),
        (["hardware=mi355x-288gb", "workload.quantization=nvfp4"], "does not run it"),
        (["engine=nim", "workload.quantization=int4_awq"], "does not run workload.quantization=int4_awq"),
        (["workload.quantization=int4_awq", "workload.precision=fp8"], "contradicts it"),
        (["workload.quantization=w8a8"], "workload.quantization"),
    ],
)
def test_cli_refuses_a_scheme_in_one_sentence(args, words):
    r = run_cli(*SHOW, *args)
    assert r.returncode == 2, r.stderr
    assert words in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_show_names_the_scheme_and_its_bytes():
    r = run_cli(*SHOW, "workload.quantization=int4_awq")
    assert r.returncode == 0, r.stderr
    line = next(s for s in r.stdout.splitlines() if s.startswith("weights:"))
    assert "int4_awq" in line and "0.519531 B per linear weight" in line and "GEMMs bf16" in line
    assert f"{WEIGHT_BYTES_70B_TP8['int4_awq'] / 2**30:.2f} GiB of weights per GPU" in line


@pytest.mark.parametrize(
    "scheme,hardware,vllm,trtllm",
    [
        ("int4_awq", "h100-sxm-80gb", "awq_marlin", "W4A16_AWQ"),
        ("int4_gptq", "h100-sxm-80gb", "gptq_marlin", "W4A16_GPTQ"),
        ("fp8_block", "h200-sxm-141gb", "fp8", "FP8_BLOCK_SCALES"),
        ("nvfp4", "b200-180gb", "modelopt_fp4", "NVFP4"),
    ],
)
def test_export_writes_the_scheme_and_reads_it_back(scheme, hardware, vllm, trtllm):
    from parallmelism.cli.export_cmd import _planned
    from parallmelism.export import target_module
    from parallmelism.export.shell import flags_of

    overrides = SHOW[1:] + [f"hardware={hardware}", "grid.batch=[8]", f"workload.quantization={scheme}"]
    planned = _planned(overrides, None)[0]
    for target, flag in (("vllm", vllm), ("sglang", vllm)):
        module = target_module(target)
        text = module.render(planned)
        assert flags_of(text, {f: m for f, (_, m) in module.FIELDS.items()})["--quantization"] == flag
        back = module.parse(text, None, planned.layers)
        assert back["workload.quantization"] == scheme
        assert back["workload.weight_dtype"] == SCHEMES[scheme].weight_dtype
    trt = target_module("trtllm")
    text = trt.render(planned)
    assert f"# quantization {scheme}: MODEL is a {trtllm} (ModelOpt) checkpoint" in text
    assert trt.parse(text, None, planned.layers)["workload.quantization"] == scheme


def test_fp8_block_scales_keep_trtllms_measured_block_scaled_gemm():
    """DeepSeek-V3's prefill on TensorRT-LLM/H200 takes the engine's measured fp8 block-scale GEMMs
    (cost/engine_gemm.py) whether the weights are named by weight_dtype=fp8 or by the fp8_block scheme,
    whose 1 + 1/4096 B a weight (the scales) must not hide them: the prefill moves by the scales' bytes only."""

    def prefill_ms(*args):
        r = run_cli(
            "show",
            "workload=inference",
            "model=deepseek-v3",
            "hardware=h200-sxm-141gb",
            "engine=trtllm",
            "grid.ngpus=[8]",
            "grid.tp=[8]",
            "grid.ep=[1]",
            "grid.batch=[8]",
            "workload.input_len=8192",
            *args,
        )
        assert r.returncode == 0, r.stderr
        line = next(s for s in r.stdout.splitlines() if s.startswith("│ prefill_ms "))
        return float(line.split("│")[2])

    legacy = prefill_ms("workload.weight_dtype=fp8", "workload.precision=fp8")
    assert prefill_ms("workload.quantization=fp8_block") == pytest.approx(legacy, rel=1e-3)
