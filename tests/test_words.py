"""Counts beside their nouns (parallmelism/words.py): "1 GPU", never "1 GPUs", in every sentence
that prints one (plan serve's recommendation said "colocated on 1 GPUs (1 replicas x 1 GPUs)")."""

from __future__ import annotations

import pandas as pd

from parallmelism.search.serve_recommend import COLOCATED, Deployment, colocated_deployment, recommend
from parallmelism.specs.plan import PlanSpec
from parallmelism.words import counted, plural
from tests.conftest import invoke


def test_one_is_singular_and_every_other_count_plural():
    assert [counted(n, "GPU") for n in (0, 1, 2, 1024)] == ["0 GPUs", "1 GPU", "2 GPUs", "1,024 GPUs"]
    assert counted(1, "fewer GPU", "fewer GPUs") == "1 fewer GPU" and plural(1.0, "GPU") == "GPU"
    assert plural(3, "replica") == "replicas" and plural(0.5, "day") == "days"


def test_a_one_gpu_serving_plan_reads_in_the_singular():
    row = pd.Series(
        {"replicas": 1, "replica_gpus": 1, "total_gpus": 1, "replica_rps": 2.0, "ttft_ms": 50.0, "tpot_ms": 8.0}
    )
    plan = PlanSpec(qps=1, ttft_ms=1000, tpot_ms=30)
    colo = colocated_deployment(row, None, plan, 1.0)
    dis = Deployment("disaggregated", 2, "1 prefill + 1 decode GPUs", "b", (("TTFT", 0.5), ("ITL", 0.5)))
    assert colo.kind == COLOCATED
    assert recommend(colo, dis).line == (
        "Recommended: colocated on 1 GPU (1 replica x 1 GPU); the request rate (1 requests/s) binds at "
        "1 replica x 1 GPU; 1 fewer GPU than disaggregated prefill/decode (2)."
    )


def test_merging_two_parts_into_one_row_says_so(tmp_path):
    """write_frame dropped the last "s" of its whole phrase for one row: "wrote 1 rows from 2 part"."""
    (tmp_path / "p0.csv").write_text("ngpus,time_step_s\n8,1.0\n")
    (tmp_path / "p1.csv").write_text("ngpus,time_step_s\n")
    code, text = invoke("merge", tmp_path / "p0.csv", tmp_path / "p1.csv", "--out", tmp_path / "all.csv")
    assert code == 0 and f"wrote 1 row from 2 parts to {tmp_path / 'all.csv'}" in text, text
