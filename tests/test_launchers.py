"""Hydra multirun with real launcher plugins (joblib, submitit_local), then `merge` of the parts.

The plugins are optional extras (`pip install ".[joblib]"`, `".[submitit]"`); without them these
tests skip with the reason. Each job evaluates one model x hardware x workload shard and writes
its own part; merging the parts gives exactly the rows of the shards evaluated one by one.
"""

from __future__ import annotations

import importlib.util

import pandas as pd
import pytest

from conftest import run_app, run_cli

SHARDS = ["llama3.1-8b", "mixtral-8x7b"]
COMMON = ["grid.ngpus=[8]", "grid.max_micro_batch=1"]


def _plugin(module: str) -> None:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed (pip install the matching parallmelism extra)")


@pytest.fixture(scope="module")
def expected_rows():
    from parallmelism.config import load_run_configs
    from parallmelism.engine import evaluate

    return {m: len(evaluate(load_run_configs([f"model={m}", *COMMON])[0][1])[0]) for m in SHARDS}


@pytest.mark.parametrize(
    "launcher, module, extra",
    [
        ("joblib", "hydra_plugins.hydra_joblib_launcher", ["hydra.launcher.n_jobs=2"]),
        ("submitit_local", "hydra_plugins.hydra_submitit_launcher", ["hydra.launcher.timeout_min=5"]),
    ],
)
def test_multirun_launcher_writes_one_part_per_shard_and_merge_combines_them(
    launcher, module, extra, tmp_path, expected_rows
):
    _plugin(module)
    sweep_dir = tmp_path / "multirun"
    r = run_cli(
        "sweep",
        "-m",
        "model=" + ",".join(SHARDS),
        *COMMON,
        f"hydra/launcher={launcher}",
        *extra,
        f"hydra.sweep.dir={sweep_dir}",
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    parts = sorted(sweep_dir.glob("*/part.csv"))
    assert len(parts) == len(SHARDS)
    by_model = {pd.read_csv(p)["model"].iloc[0]: len(pd.read_csv(p)) for p in parts}
    assert by_model == expected_rows
    out = tmp_path / "merged.parquet"
    r = run_app("merge", *parts, "--out", out, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    merged = pd.read_parquet(out)
    assert merged["model"].value_counts().to_dict() == expected_rows


def test_best_multirun_merges_to_the_single_process_best_table(tmp_path):
    """`best -m` (one search per job, joblib) then `merge` gives the table one `best` process gives
    for the same models: the study recipe across machines (benchmarks/bench_study.py --launcher)."""
    _plugin("hydra_plugins.hydra_joblib_launcher")
    common = ["grid.ngpus=[8,64]", "grid.max_micro_batch=1", "--top", "2"]
    sweep_dir = tmp_path / "multirun"
    r = run_cli(
        "best",
        "-m",
        "model=" + ",".join(SHARDS),
        *common,
        "hydra/launcher=joblib",
        "hydra.launcher.n_jobs=2",
        f"hydra.sweep.dir={sweep_dir}",
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    parts = sorted(sweep_dir.glob("*/part.csv"))
    assert len(parts) == len(SHARDS)
    merged = tmp_path / "merged.csv"
    assert run_app("merge", *parts, "--out", merged, cwd=tmp_path).returncode == 0
    single = tmp_path / "single.csv"
    r = run_app(
        "best", "model=" + ",".join(SHARDS), *common, "--quiet", "--out", single, "--workers", "1", cwd=tmp_path
    )
    assert r.returncode == 0, r.stderr
    key = ["model", "ngpus", "rank"]
    a = pd.read_csv(merged).sort_values(key).reset_index(drop=True)
    b = pd.read_csv(single).sort_values(key).reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b, check_like=True)  # merge orders columns by the schema


def test_best_multirun_bad_option_is_one_sentence(tmp_path):
    r = run_cli("best", "-m", "model=llama3.1-8b,nope", "grid.ngpus=[8]", cwd=tmp_path)
    assert r.returncode == 2
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_a_refused_slurm_launch_leaves_no_sweep_folder(tmp_path):
    """submitit_slurm off a SLURM machine is refused (exit 2) before hydra.sweep.dir is made: the
    refusal used to come after creating it, leaving an empty folder tree behind."""
    import shutil

    _plugin("hydra_plugins.hydra_submitit_launcher")
    if shutil.which("srun") is not None:
        pytest.skip("this machine has srun: the launch would not be refused")
    sweep_dir = tmp_path / "sub" / "dir"
    r = run_cli(
        "sweep", "-m", "model=llama3.1-8b", *COMMON, "hydra/launcher=submitit_slurm", f"hydra.sweep.dir={sweep_dir}"
    )
    assert r.returncode == 2 and "no srun" in r.stderr, r.stderr
    assert list(tmp_path.iterdir()) == []
