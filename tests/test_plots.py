"""Where the roofline plot places a layer's ops (report.plots.roofline_points): at the FLOP/s the
training model runs them, checked against the H100 kernel measurements and the roofs."""

import csv

import numpy as np
import pytest

from conftest import shared_reference
from parallmelism.config import load_option
from parallmelism.report.plots import roofline_points
from parallmelism.specs import TrainWorkload


def _measured_tflops(shape_of, m):
    with open(shared_reference("h100_kernels_measured.csv")) as f:
        rows = [r for r in csv.DictReader(line for line in f if not line.startswith("#"))]
    (r,) = [r for r in rows if (r["shape_of"], r["part"], r["dtype"], r["m"]) == (shape_of, "fwd", "bf16", str(m))]
    return float(r["flops"]) / float(r["measured_s"]) / 1e12


def test_llama_8b_gemms_sit_at_their_measured_rates_and_under_the_roofs():
    hw = load_option("hardware", "h100-sxm-80gb")
    model = load_option("model", "llama3.1-8b")
    wl = TrainWorkload(seq_len=4096, global_batch=64)
    points = {name: (ai, rate) for name, _, ai, rate in roofline_points(model, hw, wl, 1, 1, 1, False)}
    # h100_kernels_measured.csv, llama3.1-8b tp1 at m = 4096 tokens: qkv 787, gate_up 710 TFLOP/s
    for op, shape in (("qkv", "llama3.1-8b tp1 qkv"), ("gate_up", "llama3.1-8b tp1 gate_up")):
        assert points[op][1] / 1e12 == pytest.approx(_measured_tflops(shape, 4096), rel=0.10), op
    peak, hbm = hw.peak_flops("bf16"), hw.hbm_bandwidth_gbps * 1e9
    for name, (ai, rate) in points.items():
        assert rate <= min(peak, ai * hbm) * (1 + 1e-9), name
    assert points["norm_attn"][1] == 0.0  # no FLOPs: drawn as an elementwise marker
    assert np.isfinite([ai for ai, _ in points.values()]).all()
