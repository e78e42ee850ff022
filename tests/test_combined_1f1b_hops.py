"""benchmarks/combined_1f1b_hops.py's event simulation of Megatron-Core's interleaved 1F1B schedule (issue 32, the
Qwen3-30B-A3B PP 2 x VP 12 row): held to what Megatron-Core's own code says of its schedule (core_v0.15.0
pipeline_parallel/schedules.py), not to its own output."""

from __future__ import annotations

import pytest

from conftest import benchmark_module


@pytest.fixture(scope="module")
def hops():
    return benchmark_module("combined_1f1b_hops")


def test_the_schedule_table_is_megatrons(hops):
    """get_schedule_table's docstring example (convert_schedule_table_to_order): PP 2, 5 micro-batches in groups of
    3, VP 2 runs micro-batches 0 1 2 0 1 2 on chunks 0 0 0 1 1 1 forward; here with groups of p = 2 and 4
    micro-batches: 0 1 0 1 2 3 2 3 on chunks 0 0 1 1 0 0 1 1, backward on the chunks reversed."""
    steps = hops.rank_steps(2, 2, 4, 1, 2, combined=False)
    forwards = [op for step in steps for op in step if op[0] == "F"]
    backwards = [op for step in steps for op in step if op[0] == "B"]
    assert [(mb, c) for _, mb, c in forwards] == [(0, 0), (1, 0), (0, 1), (1, 1), (2, 0), (3, 0), (2, 1), (3, 1)]
    assert [(mb, c) for _, mb, c in backwards] == [(0, 1), (1, 1), (0, 0), (1, 0), (2, 1), (3, 1), (2, 0), (3, 0)]
    # the last rank's warm-up: (v - 1) g forwards, +1 under the A2A overlap (get_pp_rank_microbatches)
    assert sum(len(s) == 1 for s in hops.rank_steps(2, 2, 4, 1, 2, combined=True)[:3]) == 3


def test_merged_steps_need_the_extra_warmup_forward(hops):
    """Megatron-Core adds one warm-up forward under the A2A overlap "to ensure the forward and backward
    computations are independent in all 1f1b steps": merged without it, the schedule cannot run."""
    with pytest.raises(RuntimeError, match="deadlock"):
        hops.simulate(2, 12, 64, 1.0, 2.0, 0.0, combined=True, plus_one=False)
    no_hop = hops.simulate(2, 12, 64, 1.0, 2.0, 0.0, combined=True)
    # with no hop the merged schedule is the ideal step plus the (p - 1)/(v m) bubble
    assert no_hop == pytest.approx(64 * 12 * 3.0 * (1 + 1 / (12 * 64)), rel=0.01)


def test_conventional_interleaving_hides_the_hops_the_merged_schedule_waits_for(hops):
    """overlap_p2p_comm's point: conventional interleaving leaves only the warm-up and cool-down chain's hops
    (2 (p - 1) v a step, the model's fill_drain); the merged schedule waits about one more per merged step."""
    combined, conventional = hops.exposed_hops_per_step(2, 12, 64)
    assert conventional * 64 * 12 <= 2 * 2 * (2 - 1) * 12
    assert 0.9 <= combined - conventional <= 1.1
