"""Per-axis training communication against the frameworks' schedules (Megatron-LM alltoall MoE
dispatcher, pipeline P2P) and the exposed <= link invariant."""

import numpy as np
import pytest

from parallmelism.config import load_option
from parallmelism.cost.collectives import collective_time_s
from parallmelism.cost.comm import ep_layer_time_s

H100 = load_option("hardware", "h100-sxm-80gb")
GROK = load_option("model", "grok-1")


def test_alltoall_dispatch_sends_the_sequence_parallel_shard():
    # Grok-1, s = 8192, b = 1, tp 4 with SP, ep 8: each TP rank routes its s/tp = 2048 tokens,
    # top-2, h = 6144, bf16: 2048·2·6144·2 B per rank over EP. EP ranks are tp = 4 apart, so the
    # 8-rank group spans 32 GPUs: 2 members per 8-GPU node, each on its own NDR NIC (47 GB/s);
    # all-to-all over NICs moves (n-k)/n of the buffer: bandwidth 47·7/6 per rank.
    s, t, e, h, k = 8192, 4, 8, 6144, 2
    a2a_bytes = (s / t) * k * h * 2
    bw = 50 * 0.94 * (e - 1) / (e - 2)
    a2a = collective_time_s("all_to_all", a2a_bytes, e, bw, 5.0)
    # then an all-gather over TP of all s·k routed tokens (NVLink, 360 GB/s), a reduce-scatter before combine
    tp_ag = collective_time_s("all_gather", s * k * h * 2, t, 360.0, 1.0)
    ep_link, tp_link = ep_layer_time_s(H100, GROK, float(s), float(t), float(e), 1.0, False, True)
    assert float(ep_link) == pytest.approx(2 * 2 * a2a, rel=1e-9)  # dispatch + combine, fwd + bwd
    assert float(tp_link) == pytest.approx(2 * 2 * tp_ag, rel=1e-9)
    # without SP every TP rank dispatches all s tokens: tp times the bytes
    ep_nosp, tp_nosp = ep_layer_time_s(H100, GROK, float(s), float(t), float(e), 1.0, False, False)
    assert float(ep_nosp) == pytest.approx(2 * 2 * collective_time_s("all_to_all", s * k * h * 2, e, bw, 5.0))
    assert float(tp_nosp) == 0.0
