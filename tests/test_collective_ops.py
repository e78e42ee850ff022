"""The communication records of the op inventory (cost/collective_ops.py): bytes on the wire by
nccl-tests' convention, the link each record runs on as cost/links.py places its axis, and one
per-call time for a record whoever builds it."""

from __future__ import annotations

import numpy as np
import pytest

from parallmelism.config import load_option
from parallmelism.cost import comm
from parallmelism.cost.collective_ops import collective, transfer_time_s
from parallmelism.cost.collectives import group_collective_time_s
from parallmelism.cost.links import axes_on_scale_out

H100 = load_option("hardware", "h100-sxm-80gb")
MODEL = load_option("model", "mixtral-8x7b")


@pytest.mark.parametrize(
    "kind, n, factor",
    [("all_reduce", 8, 2 * 7 / 8), ("all_gather", 4, 3 / 4), ("reduce_scatter", 16, 15 / 16), ("all_to_all", 8, 7 / 8)],
)
def test_wire_bytes_are_nccl_tests_bus_bytes(kind, n, factor):
    """nccl-tests PERFORMANCE.md: a ring rank sends busbw/algbw x S bytes each way."""
    op = collective(H100, "tp", "tp", kind, 1 << 20, n, 1)
    assert float(op.wire_bytes) == pytest.approx(factor * (1 << 20), rel=1e-15)
    assert float(op.time_s) == float(group_collective_time_s(H100, kind, 1 << 20, n, 1))


def test_a_send_recv_puts_its_bytes_on_the_wire_once_and_a_lone_rank_sends_nothing():
    hop = comm.pp_hop_op(
        H100, MODEL, np.array([4096.0, 4096.0]), np.array([4.0, 4.0]), np.array([4.0, 4.0]), np.array([2, 1])
    )
    assert float(hop.wire_bytes[0]) == 2.0 * 4096 * MODEL.hidden / 4
    assert float(hop.time_s[0]) > 0 and float(hop.time_s[1]) == 0.0  # pp = 1: no boundary


@pytest.mark.parametrize("tp, cp, dp, ep, pp", [(8, 1, 8, 8, 2), (2, 2, 16, 4, 4), (4, 4, 4, 2, 1), (1, 1, 64, 64, 1)])
def test_each_record_runs_on_the_link_its_axis_is_placed_on(tp, cp, dp, ep, pp):
    """A record leaves the domain iff its group·stride does, as links.axes_on_scale_out places its
    axis: TP stride 1, CP ring stride t, EP stride t, DP over dp·cp stride t, PP hop t·cp·dp."""
    T = np.array([4096.0])
    a = {k: np.array([float(v)]) for k, v in dict(tp=tp, cp=cp, dp=dp, ep=ep, pp=pp).items()}
    records = comm.tp_layer_ops(H100, MODEL, T, a["tp"], {"all_reduce": 2.0})
    records += comm.cp_layer_ops(H100, MODEL, 4096, 1, a["tp"], a["cp"], False)
    records += comm.ep_layer_ops(H100, MODEL, T, a["tp"], a["ep"], 1.0, False)[:1]
    records += list(comm.dp_group_ops(H100, 1e9, a["dp"] * a["cp"], a["tp"], 0, 1.0, None, 4.0, 2.0).values())
    records.append(comm.pp_hop_op(H100, MODEL, T, a["tp"], a["tp"] * a["cp"] * a["dp"], a["pp"]))
    placed = axes_on_scale_out(H100, a["tp"], a["cp"], a["dp"], a["ep"], a["pp"])
    for op in records:
        if op.axis == "pp" and pp == 1:
            continue
        assert bool(op.on_scale_out(H100)[0]) == bool(placed[op.axis][0]), op
        # and its per-call seconds are the one link model's for its bytes, group and stride
        if op.axis != "ep":
            assert np.array_equal(op.time_s, transfer_time_s(H100, op.kind, op.nbytes, op.group, op.stride))
