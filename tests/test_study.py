"""Studies (parallmelism/study/): points, failure records, resume, the Ray engine and the streamed merge.

The reference for a study's rows is the project's own single-point commands: a point's partition
holds exactly the rows `parallmelism best` (or `sweep`) writes for the same overrides, plus the
point's columns; and a Ray study, killed worker and failed point included, resumed, equals the
same study run in one process.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import REPO, run_app, run_cli

from parallmelism.errors import UserError
from parallmelism.study.spec import StudySpec, expand_points, point_id

TINY = """name: tiny-gpt
display_name: a small GPT with a learned position table
source: test
hidden: 1024
layers: 8
heads: 16
kv_heads: 16
ffn_hidden: 4096
mlp: gelu
norm: layernorm
vocab: 51200
tie_embeddings: true
bias: true
position_embedding: learned
max_position: {rows}
"""


def _spec(**points):
    return StudySpec.model_validate({"out": "x", "points": points})


def test_points_are_product_then_zip_then_csv_with_stable_ids(tmp_path):
    (tmp_path / "p.csv").write_text("grid.ngpus,workload.seq_len\n[8],4096\n[16],null\n")
    spec = _spec(
        product={"model": ["a", "b"]},
        zip={"hardware.peak_tflops.bf16": [900, 1000], "hardware.hbm_bandwidth_gbps": [3000, 4000]},
        csv="p.csv",
    )
    points = expand_points(spec, tmp_path)
    assert len(points) == 2 * 2 * 2
    assert points[0].values == {
        "model": "a",
        "hardware.peak_tflops.bf16": 900,
        "hardware.hbm_bandwidth_gbps": 3000,
        "grid.ngpus": [8],
        "workload.seq_len": 4096,
    }
    assert points[1].overrides[-2:] == ["grid.ngpus=[16]", "workload.seq_len=null"]
    assert len({p.id for p in points}) == len(points)
    # the id is the point's, whatever its order in the file or the study
    assert point_id(dict(reversed(list(points[0].values.items())))) == points[0].id


@pytest.mark.parametrize(
    "points, words",
    [
        ({"zip": {"a.b": [1, 2], "c.d": [1]}}, "one length"),
        ({"product": {"model": ["a"]}, "zip": {"model": ["b"]}}, "two blocks"),
        ({"product": {"model": ["a", "a"]}}, "given twice"),
        ({}, "no points"),
    ],
)
def test_bad_points_are_one_sentence(points, words, tmp_path):
    with pytest.raises(UserError, match=words):
        expand_points(_spec(**points), tmp_path)


def _write_study(folder: Path, name: str, engine: dict, out: str) -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(
        json.dumps(
            {
                "command": "best",
                "top": 1,
                "out": out,
                "config_dir": ["mine"],
                "overrides": ["grid.ngpus=[8]"],
                "points": {"csv": "points.csv"},
                "engine": engine,
            }
        )
    )
    return path


def _points_csv(folder: Path) -> list[dict]:
    """20 co-design points of llama3.1-8b (peak FLOP/s x NVLink domain x HBM bandwidth) and one of
    tiny-gpt, whose position table (2,048 rows) is shorter than the 8,192-token sequence."""
    rows = [
        {"model": "llama3.1-8b", "hardware.peak_tflops.bf16": f, "hardware.scale_up.domain_size": d}
        for f in (700, 800, 900, 989, 1200)
        for d in (2, 4, 8, 16)
    ]
    rows.insert(7, {"model": "tiny-gpt", "hardware.peak_tflops.bf16": 989, "hardware.scale_up.domain_size": 8})
    lines = ["model,hardware.peak_tflops.bf16,hardware.scale_up.domain_size"]
    lines += [f"{r['model']},{r['hardware.peak_tflops.bf16']},{r['hardware.scale_up.domain_size']}" for r in rows]
    (folder / "points.csv").write_text("\n".join(lines) + "\n")
    return rows


def test_a_point_holds_the_rows_best_writes_for_its_overrides(tmp_path):
    """Reference: the `best` command on the same overrides (composed by Hydra, not by the study)."""
    import pyarrow.parquet as pq

    (tmp_path / "mine" / "models").mkdir(parents=True)
    (tmp_path / "mine" / "models" / "tiny-gpt.yaml").write_text(TINY.format(rows=8192))
    (tmp_path / "points.csv").write_text(
        "model,hardware.peak_tflops.bf16,hardware.scale_up.domain_size\ntiny-gpt,1200,4\nllama3.1-8b,800,16\n"
    )
    study = _write_study(tmp_path, "two", {"kind": "local", "workers": 1}, "two")
    res = run_cli("study", "run", study, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "2 of 2 points complete" in res.stdout
    for model, flops, domain in (("tiny-gpt", 1200, 4), ("llama3.1-8b", 800, 16)):
        values = {"model": model, "hardware.peak_tflops.bf16": flops, "hardware.scale_up.domain_size": domain}
        got = pq.read_table(tmp_path / "two" / "data" / f"point={point_id(values)}" / "part-0.parquet").to_pandas()
        best = run_app(
            "best", f"model={model}", f"hardware.peak_tflops.bf16={flops}", f"hardware.scale_up.domain_size={domain}",
            "grid.ngpus=[8]", "-cd", "mine", "--top", "1", "-q", "--out", "best.parquet", cwd=tmp_path,
        )  # fmt: skip
        assert best.returncode == 0, best.stderr
        want = pq.read_table(tmp_path / "best.parquet").to_pandas()
        assert list(got.columns[-2:]) == ["hardware.peak_tflops.bf16", "hardware.scale_up.domain_size"]
        assert (got["hardware.peak_tflops.bf16"] == flops).all() and (
            got["hardware.scale_up.domain_size"] == domain
        ).all()
        got = got.drop(columns=["hardware.peak_tflops.bf16", "hardware.scale_up.domain_size"])
        assert got.equals(want), got.compare(want) if got.shape == want.shape else (got.shape, want.shape)


def test_ray_study_survives_a_failed_point_and_a_killed_worker_and_resumes(tmp_path):
    """21 points on a local Ray (2 CPUs): one point's input is wrong (a fixable user error), one
    worker dies mid-batch (os._exit, as a lost node). The summary names the failed point and exits
    2; Ray re-runs the dead worker's batch; merge refuses the incomplete study; after the input is
    fixed, `study resume` runs that point alone, cleans a stray temporary, and the merged dataset
    equals the same study run in one process."""
    pytest.importorskip("ray")
    import pyarrow.parquet as pq

    (tmp_path / "mine" / "models").mkdir(parents=True)
    tiny = tmp_path / "mine" / "models" / "tiny-gpt.yaml"
    tiny.write_text(TINY.format(rows=2048))
    rows = _points_csv(tmp_path)
    failing = point_id(rows[7])
    crashing = point_id(rows[12])
    marker = tmp_path / "crashed-once"
    study = _write_study(tmp_path, "codesign", {"kind": "ray", "num_cpus": 2, "batch": 3}, "out")
    env = {"PARALLMELISM_STUDY_CRASH_ONCE": f"{crashing}:{marker}"}

    first = run_cli("study", "run", study, cwd=tmp_path, env=env)
    assert first.returncode == 2, first.stdout + first.stderr
    assert marker.exists()  # the worker died at that point, once
    assert "20 of 21 points complete" in first.stdout and "1 point failed" in first.stdout, first.stdout
    assert f"point {failing}" in first.stderr and "learned position table" in first.stderr, first.stderr
    assert (tmp_path / "out" / "data" / f"point={crashing}" / "part-0.parquet").is_file()
    record = json.loads((tmp_path / "out" / "failures" / f"point={failing}.json").read_text())
    assert record["point"] == failing and "max_position=2048" in record["reason"]

    refused = run_app("merge", "out", "--out", "m.parquet", cwd=tmp_path)
    assert refused.returncode == 2 and "incomplete: 1 of 21 points" in refused.stderr, refused.stderr
    assert not (tmp_path / "m.parquet").exists()
    partial = run_app("merge", "out", "--out", "partial.parquet", "--allow-partial", cwd=tmp_path)
    assert partial.returncode == 0 and "from 20 points, 1 missing" in partial.stderr + partial.stdout

    stray = tmp_path / "out" / "data" / f".point={failing}.999.deadbeef.tmp"
    stray.mkdir()
    tiny.write_text(TINY.format(rows=8192))  # the user fixes the input
    resumed = run_cli("study", "resume", "out", cwd=tmp_path, env=env)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "21 of 21 points complete (1 run now" in resumed.stdout, resumed.stdout
    assert not stray.exists() and not list((tmp_path / "out" / "failures").iterdir())

    local = _write_study(tmp_path, "one-process", {"kind": "local", "workers": 1}, "single")
    single = run_cli("study", "run", local, cwd=tmp_path)
    assert single.returncode == 0, single.stderr
    for folder in ("out", "single"):
        res = run_app("merge", folder, "--out", f"{folder}.parquet", cwd=tmp_path)
        assert res.returncode == 0, res.stderr
    ray_rows = pq.read_table(tmp_path / "out.parquet")
    one_rows = pq.read_table(tmp_path / "single.parquet")
    assert ray_rows.num_rows == one_rows.num_rows >= 21
    assert ray_rows.equals(one_rows)  # manifest order, every column and value
    assert set(ray_rows.column("point").to_pylist()) == {point_id(r) for r in rows}
    cmp = run_app("compare", "single.parquet", "out.parquet", "--rtol", "0", cwd=tmp_path)  # keyed by point too
    assert cmp.returncode == 0, cmp.stdout + cmp.stderr


def test_study_refuses_a_folder_holding_it_and_unknown_options(tmp_path):
    (tmp_path / "mine" / "models").mkdir(parents=True)
    (tmp_path / "points.csv").write_text("model\nllama3.1-8b\nnot-a-model\n")
    study = _write_study(tmp_path, "bad", {"kind": "local", "workers": 1}, "bad")
    res = run_cli("study", "run", study, cwd=tmp_path)
    assert res.returncode == 2 and "model=not-a-model is not a model option" in res.stderr, res.stderr
    assert "Traceback" not in res.stderr and not (tmp_path / "bad").exists()
    status = run_app("study", "status", tmp_path / "nowhere", cwd=tmp_path)
    assert status.returncode == 2 and "holds no study" in status.stderr


def test_resume_of_a_copied_study_keeps_its_points(tmp_path):
    """`study resume STUDY.yaml` refuses a study file whose points changed since launch."""
    (tmp_path / "mine").mkdir()
    (tmp_path / "points.csv").write_text("model,hardware.peak_tflops.bf16\nllama3.1-8b,900\n")
    study = _write_study(tmp_path, "s", {"kind": "local", "workers": 1}, "s")
    assert run_cli("study", "run", study, cwd=tmp_path).returncode == 0
    shutil.copy(tmp_path / "points.csv", tmp_path / "old.csv")
    (tmp_path / "points.csv").write_text("model,hardware.peak_tflops.bf16\nllama3.1-8b,900\nllama3.1-8b,1000\n")
    res = run_app("study", "resume", study, cwd=tmp_path)
    assert res.returncode == 2 and "now lists other points" in res.stderr, res.stderr
    again = run_app("study", "run", study, cwd=tmp_path)
    assert again.returncode == 2 and "holds another study" in again.stderr, again.stderr


def test_readme_study_block_runs_in_order(tmp_path, monkeypatch):
    """The README's study commands, in one folder and in order (the example study file, local engine)."""
    import re
    import shlex

    from typer.testing import CliRunner

    from parallmelism.cli.app import app

    text = (REPO / "README.md").read_text()
    lines = [
        line.split("  #")[0].strip()
        for block in re.findall(r"```bash\n(.*?)```", text, re.S)
        for line in block.splitlines()
        if line.startswith("parallmelism ") and "runs/codesign" in line
    ]
    assert [shlex.split(line)[1] for line in lines] == ["study", "study", "merge"]
    monkeypatch.chdir(tmp_path)
    for line in lines:
        args = [a.replace("examples/", f"{REPO}/examples/") for a in shlex.split(line)[1:]]
        res = CliRunner().invoke(app, args)
        assert res.exit_code == 0, f"{line}\n{res.output}"
    assert (tmp_path / "results" / "codesign.parquet").is_file()


def test_submitit_engine_runs_a_study(tmp_path):
    """The submitit engine through submitit's local executor (the SLURM one needs a cluster)."""
    pytest.importorskip("submitit")
    (tmp_path / "mine").mkdir()
    (tmp_path / "points.csv").write_text("model,hardware.peak_tflops.bf16\nllama3.1-8b,900\nllama3.1-8b,1000\n")
    study = _write_study(tmp_path, "s", {"kind": "submitit", "cluster": "local", "parameters": {"timeout_min": 5}}, "s")
    res = run_cli("study", "run", study, cwd=tmp_path)
    assert res.returncode == 0 and "2 of 2 points complete" in res.stdout, res.stdout + res.stderr


def test_best_full_output_keeps_every_row_as_sweep_writes_it(tmp_path):
    """full_output: true keeps each point's every row in DIR/rows; merged, they are the rows `sweep`
    writes for the same overrides (plus best's usd_per_step)."""
    import pandas as pd

    (tmp_path / "mine").mkdir()
    (tmp_path / "points.csv").write_text("model,hardware.peak_tflops.bf16\nllama3.1-8b,800\nllama3.1-8b,989\n")
    study = _write_study(tmp_path, "s", {"kind": "local", "workers": 1}, "s")
    study.write_text(study.read_text().replace('"top": 1,', '"top": 1, "full_output": true,'))
    assert run_cli("study", "run", study, cwd=tmp_path).returncode == 0
    res = run_app("merge", "s/rows", "--out", "rows.parquet", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    sweep = run_app(
        "sweep", "model=llama3.1-8b", "grid.ngpus=[8]", "hardware.peak_tflops.bf16=800", "-q", "--out", "s.parquet",
        cwd=tmp_path,
    )  # fmt: skip
    assert sweep.returncode == 0, sweep.stderr
    rows = pd.read_parquet(tmp_path / "rows.parquet")
    want = pd.read_parquet(tmp_path / "s.parquet").astype(object)
    got = rows[rows["hardware.peak_tflops.bf16"] == 800][list(want.columns)].reset_index(drop=True).astype(object)
    assert len(got) == len(want) > 1000
    pd.testing.assert_frame_equal(got, want, check_exact=True)


def test_fields_set_on_a_composed_base_equal_hydra_composing_them():
    """The workers' fast path (config.compose.run_with_fields) gives the RunConfig Hydra composes
    from the same overrides, for the co-design fields and others; a key that is no field is a
    KeyError (the worker then composes), and a bad value one sentence."""
    from parallmelism.config import load_run_configs
    from parallmelism.config.compose import run_with_fields

    base = load_run_configs(["model=llama3.1-70b", "hardware=b200-180gb"])[0][1]
    fields = {
        "hardware.peak_tflops.bf16": 3000,
        "hardware.hbm_bandwidth_gbps": 12000,
        "hardware.hbm_capacity_gib": 288,
        "hardware.hbm_usable_gib": 280.5,
        "hardware.scale_up.bandwidth_gbps": 1800,
        "hardware.scale_up.domain_size": 72,
        "hardware.scale_out.bandwidth_gbps": 100,
        "workload.seq_len": 4096,
        "grid.ngpus": [64, 128],
    }
    from parallmelism.study.spec import Point

    overrides = Point("x", fields).overrides
    want = load_run_configs(["model=llama3.1-70b", "hardware=b200-180gb", *overrides])[0][1]
    assert run_with_fields(base, fields) == want
    with pytest.raises(KeyError):
        run_with_fields(base, {"hardware.no_such_field": 1})
    with pytest.raises(UserError, match="peak_tflops"):
        run_with_fields(base, {"hardware.peak_tflops.bf16": -1})


def test_local_engine_reruns_a_lost_worker_and_records_nothing_fitting(tmp_path):
    """Local processes: a worker that dies breaks the pool; the batches it left unanswered run again
    in a new pool (max_retries), or, with max_retries 0, are 'not run' with no failure record until
    `study resume`. A `best` where nothing fits is a failure record either way."""
    (tmp_path / "mine").mkdir()
    rows = ["llama3.1-8b,800", "llama3.1-8b,900", "llama3.1-405b,989", "llama3.1-8b,1000", "llama3.1-8b,1100"]
    (tmp_path / "points.csv").write_text("model,hardware.peak_tflops.bf16\n" + "\n".join(rows) + "\n")
    crashing = point_id({"model": "llama3.1-8b", "hardware.peak_tflops.bf16": 1000})
    nothing_fits = point_id({"model": "llama3.1-405b", "hardware.peak_tflops.bf16": 989})
    for retries, out in ((3, "r"), (0, "s")):
        study = _write_study(tmp_path, out, {"kind": "local", "workers": 2, "batch": 1, "max_retries": retries}, out)
        env = {"PARALLMELISM_STUDY_CRASH_ONCE": f"{crashing}:{tmp_path / (out + '-crashed')}"}
        first = run_cli("study", "run", "-q", study, cwd=tmp_path, env=env)
        assert first.returncode == 2 and (tmp_path / (out + "-crashed")).exists(), first.stdout + first.stderr
        if retries:
            assert "4 of 5 points complete" in first.stdout and "1 point failed" in first.stdout, first.stdout
            assert f"point {nothing_fits}" in first.stderr and "fits in memory" in first.stderr, first.stderr
            continue
        assert "not run (lost workers)" in first.stdout, first.stdout
        assert f"point {crashing} was not run: its worker was lost" in first.stderr, first.stderr
        assert not (tmp_path / out / "failures" / f"point={crashing}.json").exists()
        resumed = run_cli("study", "resume", "-q", out, cwd=tmp_path, env=env)
        assert resumed.returncode == 2, resumed.stdout + resumed.stderr
        assert "4 of 5 points complete" in resumed.stdout and "1 point failed" in resumed.stdout, resumed.stdout
        assert (tmp_path / out / "data" / f"point={crashing}" / "part-0.parquet").is_file()
        status = run_app("study", "status", out, cwd=tmp_path)
        assert status.returncode == 2 and "5 points, 4 complete, 1 failed, 0 not run" in status.stdout, status.stdout
