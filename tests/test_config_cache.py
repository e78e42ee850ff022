"""Composition cache (config/cache.py): a command line composed before comes back equal without
Hydra; any change to the inputs composes again; the cache can be off or unwritable."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import REPO
from parallmelism.config import cache
from parallmelism.config.compose import load_run_configs

OVERRIDES = ["model=llama3.1-8b", "hardware=h100-sxm-80gb", "grid.ngpus=[8]", "workload.global_batch=64"]


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("PARALLMELISM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("PARALLMELISM_CACHE", raising=False)
    return tmp_path / "cache" / cache.SUBFOLDER  # where the entries are: the cache's own subfolder


def test_second_load_comes_from_the_cache_and_is_equal(cache_dir, monkeypatch):
    first = load_run_configs(OVERRIDES)
    assert len(list(cache_dir.glob(f"*{cache.SUFFIX}"))) == 1

    def no_composition(*args, **kwargs):
        raise AssertionError("composed again")

    monkeypatch.setattr(sys.modules["parallmelism.config.compose"], "compose", no_composition)
    second = load_run_configs(OVERRIDES)
    assert second == first
    assert second[0][1].model.hidden == 4096 and second[0][1].grid.ngpus == [8]


def test_a_sweep_is_cached_as_its_points(cache_dir):
    runs = load_run_configs(["model=llama3.1-8b,llama3.1-70b", "grid.ngpus=[8]"])
    assert [rc.model.name for _, rc in runs] == ["llama3.1-8b", "llama3.1-70b"]
    assert load_run_configs(["model=llama3.1-8b,llama3.1-70b", "grid.ngpus=[8]"]) == runs


def test_editing_a_user_model_file_composes_again(cache_dir, tmp_path):
    user = tmp_path / "user"
    (user / "models").mkdir(parents=True)
    src = (REPO / "models" / "llama3.1-8b.yaml").read_text()
    (user / "models" / "mine.yaml").write_text(src.replace("name: llama3.1-8b", "name: mine"))
    a = load_run_configs(["model=mine"], [str(user)])[0][1]
    # same size, other content: the key hashes contents, not modification times
    (user / "models" / "mine.yaml").write_text(
        src.replace("name: llama3.1-8b", "name: mine").replace("layers: 32", "layers: 16")
    )
    b = load_run_configs(["model=mine"], [str(user)])[0][1]
    assert (a.model.layers, b.model.layers) == (32, 16)


def test_the_key_reads_the_yaml_files_and_only_the_presence_of_other_files(cache_dir, tmp_path):
    """Composition reads the option YAMLs, and of a kernel table CSV only whether it is there (a
    table beside its hardware YAML, compose.py `table_beside_file`): the key hashes the YAMLs'
    contents and every file's path, not 1 MB of CSV contents (issue 29: hashed twice a command).
    The tables' contents key their own entries (cache.kernel_table)."""
    user = tmp_path / "user"
    (user / "hardware" / "kernels").mkdir(parents=True)
    yaml_file = user / "hardware" / "mine.yaml"
    yaml_file.write_text("name: mine\n")
    key = lambda: cache.cache_key(OVERRIDES, [user])  # noqa: E731
    before = key()
    table = user / "hardware" / "kernels" / "mine.csv"
    table.write_text("op,m,n,k,time_us\n")
    with_table = key()
    assert with_table != before  # a table appearing beside the YAML changes what composition finds
    table.write_text("op,m,n,k,time_us\ngemm,1,1,1,2.0\n")
    assert key() == with_table  # its contents are not composition's
    yaml_file.write_text("name: mine\nhbm_gib: 80\n")
    assert key() != with_table  # a YAML's contents are
    table.unlink()
    assert key() not in (before, with_table)


def test_cache_off_and_unwritable_cache_still_compose(tmp_path, monkeypatch):
    monkeypatch.setenv("PARALLMELISM_CACHE", "0")
    assert cache.cache_key(OVERRIDES, []) is None
    assert load_run_configs(OVERRIDES)[0][1].model.name == "llama3.1-8b"
    monkeypatch.delenv("PARALLMELISM_CACHE")
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("PARALLMELISM_CACHE_DIR", str(blocker / "cache"))  # under a file: cannot be made
    assert load_run_configs(OVERRIDES)[0][1].model.name == "llama3.1-8b"


def test_a_corrupt_entry_is_composed_again(cache_dir):
    load_run_configs(OVERRIDES)
    (entry,) = cache_dir.glob(f"*{cache.SUFFIX}")
    entry.write_text("{not json")
    assert load_run_configs(OVERRIDES)[0][1].model.name == "llama3.1-8b"


def test_an_entry_naming_other_code_is_composed_again_not_run(cache_dir, tmp_path):
    """Entries are pickled specs; loading accepts the classes of parallmelism.specs only, so an
    entry naming any other callable (here one that would write a file) is refused and composed again."""
    import pickle
    from pathlib import Path

    load_run_configs(OVERRIDES)
    (entry,) = cache_dir.glob(f"*{cache.SUFFIX}")
    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self):
            return (Path.touch, (marker,))

    entry.write_bytes(pickle.dumps({"format": cache.FORMAT, "jobs": [OVERRIDES], "runs": [Payload()]}))
    assert load_run_configs(OVERRIDES)[0][1].model.name == "llama3.1-8b"
    assert not marker.exists()


def test_failures_are_not_cached(cache_dir):
    from parallmelism.errors import UserError

    with pytest.raises(UserError):
        load_run_configs(["model=no-such-model"])
    assert not cache_dir.exists() or not list(cache_dir.glob(f"*{cache.SUFFIX}"))


def test_pinned_show_imports_neither_hydra_nor_pandas_once_cached(cache_dir):
    """Start-up (issue 15): a repeated pinned `show` skips Hydra (cache) and pandas (numpy records)."""
    args = ["show", *OVERRIDES, "grid.tp=1", "grid.pp=1", "grid.cp=1", "grid.micro_batch=[1]"]
    probe = (
        "import sys\n"
        "from parallmelism.cli.app import main\n"
        f"sys.argv = ['parallmelism', *{args!r}]\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "from parallmelism.specs import AcceleratorSpec, RunConfig\n"
        "print('LOADED', 'hydra' in sys.modules, 'pandas' in sys.modules, file=sys.stderr)\n"
        # the specs defer building their validators; a cached run validates nothing, so builds none
        "print('BUILT', RunConfig.__pydantic_complete__, AcceleratorSpec.__pydantic_complete__, file=sys.stderr)\n"
    )
    env = {"PYTHONPATH": str(REPO), "PARALLMELISM_CACHE_DIR": str(cache_dir.parent), "PATH": "/usr/bin:/bin"}
    first = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, cwd=REPO)
    second = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, cwd=REPO)
    assert "LOADED True False" in first.stderr, first.stderr
    assert "LOADED False False" in second.stderr, second.stderr
    assert "BUILT False False" in second.stderr, second.stderr
    assert first.stdout == second.stdout and "time_step_s" in first.stdout


@pytest.mark.parametrize(
    "command",
    [
        ["show", "grid.tp=1", "grid.pp=1", "grid.cp=1", "grid.micro_batch=[1]", "grid.vpp=1"],
        ["best", "-q"],
        ["sweep", "-q", "--out", "{tmp}/s.parquet"],
        ["sweep", "-q", "--out", "{tmp}/s.csv"],
        ["best", "-q", "--full-output", "{tmp}/all"],
    ],
    ids=["show", "best", "sweep-parquet", "sweep-csv", "best-full-output"],
)
def test_small_best_and_sweep_import_neither_hydra_nor_pandas_once_cached(cache_dir, tmp_path, command):
    """Start-up (issue 29): best's table is row dicts (report/records.py) and sweep writes Arrow
    record batches from the evaluated arrays (search/frames.py arrow_of_run; --full-output's files
    dataset_arrow_of_run): no pandas; the
    kernel tables' reference accelerator is read without OmegaConf (config/compose.py _resolved), and once cached without YAML."""
    args = [c.format(tmp=tmp_path) for c in command] + OVERRIDES
    probe = (
        "import sys\n"
        "from parallmelism.cli.app import main\n"
        f"sys.argv = ['parallmelism', *{args!r}]\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print('LOADED', *(m in sys.modules for m in ('hydra', 'pandas', 'omegaconf', 'yaml')), file=sys.stderr)\n"
    )
    env = {"PYTHONPATH": str(REPO), "PARALLMELISM_CACHE_DIR": str(cache_dir.parent), "PATH": "/usr/bin:/bin"}
    subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, cwd=REPO)
    second = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, cwd=REPO)
    assert "LOADED False False False False" in second.stderr, second.stderr


def test_the_cache_removes_only_its_own_files(cache_dir, monkeypatch):
    """Issue 28: pointed at a folder of 300 user JSON files, pruning deleted 45 of them. The cache
    writes into its own subfolder and prunes only its own names, even past MAX_ENTRIES."""
    import os
    import time

    users = cache_dir.parent
    users.mkdir(parents=True)
    for i in range(300):
        (users / f"mine{i}.json").write_text("{}")
    cache_dir.mkdir()
    for i in range(3):  # user files inside the subfolder too, one of them named like a temporary
        (cache_dir / f"notes{i}.json").write_text("{}")
    (cache_dir / ".entry.notes.txt").write_text("x")
    monkeypatch.setattr(cache, "MAX_ENTRIES", 2)
    for batch in (4, 8, 16):
        load_run_configs([*OVERRIDES, f"workload.global_batch={batch}"])
    assert len(list(users.glob("mine*.json"))) == 300
    assert len(list(cache_dir.glob("notes*.json"))) == 3 and (cache_dir / ".entry.notes.txt").exists()
    assert len([p for p in cache_dir.iterdir() if cache.ENTRY_NAME.match(p.name)]) == 2
    # a killed run's temporary goes once it is stale; a fresh one (a store under way) stays
    stale, fresh = cache_dir / ".entry.abc123.tmp", cache_dir / ".entry.def456.tmp"
    stale.write_text("{")
    fresh.write_text("{")
    old = time.time() - cache.STALE_TEMP_S - 60
    os.utime(stale, (old, old))
    load_run_configs([*OVERRIDES, "workload.global_batch=32"])
    assert not stale.exists() and fresh.exists()


def test_a_kernel_table_comes_back_from_the_cache_equal_and_rebuilt_when_its_file_changes(cache_dir, tmp_path):
    """Issue 29: reading and fitting the H100 kernel table (~1,000 rows) cost ~14 ms per command;
    the fitted table is cached on the file's content and its physics. A cached table is the built
    one (same residual points and values, same kernel times), and an edited file is read again."""
    import numpy as np

    from parallmelism.config.kernel_tables import REFERENCE_TABLE, read_rows, resolve_table
    from parallmelism.cost.kernels import KernelTable

    src = resolve_table(REFERENCE_TABLE)
    path = tmp_path / "table.csv"
    path.write_bytes(src.read_bytes())
    params = ((("bf16", 989.0), ("fp8", 1979.0)), 3350.0, 132, True)
    built = []

    def build():
        built.append(1)
        return KernelTable(read_rows(path), dict(params[0]), 3350.0, 132, True, path=path)

    first = cache.kernel_table(path, params, build)
    second = cache.kernel_table(path, params, build)
    assert len(built) == 1 and second.path == path and second is not first
    for dtype, res in first.gemm.items():
        assert np.array_equal(res.points, second.gemm[dtype].points)
        assert np.array_equal(res.values, second.gemm[dtype].values, equal_nan=True)
    m, k, n = np.array([4096.0, 8192.0]), np.array([4096.0, 4096.0]), np.array([14336.0, 1024.0])
    assert np.array_equal(first.gemm["bf16"](m, k, n, extra=0.0), second.gemm["bf16"](m, k, n, extra=0.0))
    cache.kernel_table(path, (params[0], 3000.0, 132, True), build)  # other physics: built again
    assert len(built) == 2
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:-1]))  # one row fewer
    cache.kernel_table(path, params, build)
    assert len(built) == 3


def test_a_kernel_table_entry_naming_other_code_is_built_again_not_run(cache_dir, tmp_path):
    """A kernel table entry may name the classes of cost/kernels.py and numpy's array pickles only."""
    import pickle
    from pathlib import Path

    from parallmelism.config.kernel_tables import REFERENCE_TABLE, read_rows, resolve_table
    from parallmelism.cost.kernels import KernelTable

    path = resolve_table(REFERENCE_TABLE)
    params = ((("bf16", 989.0),), 3350.0, 132, True)

    def build():
        return KernelTable(read_rows(path), dict(params[0]), 3350.0, 132, True, path=path)

    cache.kernel_table(path, params, build)
    (entry,) = cache_dir.glob(f"*{cache.SUFFIX}")
    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self):
            return (Path.touch, (marker,))

    entry.write_bytes(pickle.dumps({"format": cache.FORMAT, "kernel_table": {"gemm": Payload()}}))
    table = cache.kernel_table(path, params, build)
    assert not marker.exists() and "bf16" in table.gemm


def test_a_deleted_copy_of_the_same_files_does_not_hand_its_paths_to_this_install(cache_dir, tmp_path):
    """Two installs or checkouts of identical files (an old venv and a new one, two clones) share the
    user's cache folder. An entry holds absolute paths under its install (kernel tables beside their
    hardware YAML), so the key names the install's folder: once the first copy is deleted, the second
    composes its own entry instead of reading a kernel table that is gone ("not found", exit 2)."""
    import os
    import shutil

    copy = tmp_path / "copy"
    ignore = shutil.ignore_patterns("__pycache__")
    for part in ("parallmelism", "conf", "models", "hardware"):
        shutil.copytree(REPO / part, copy / part, ignore=ignore)
    here = tmp_path / "cwd"  # the key includes the current folder: both runs start in the same one
    here.mkdir()
    args = [
        sys.executable,
        "-m",
        "parallmelism",
        "show",
        "model=llama3.1-8b",
        "grid.ngpus=[8]",
        "grid.tp=1",
        "grid.pp=1",
    ]
    env = {**os.environ, "PARALLMELISM_CACHE_DIR": str(cache_dir.parent), "COLUMNS": "200"}
    first = subprocess.run(args, cwd=here, env={**env, "PYTHONPATH": str(copy)}, capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    shutil.rmtree(copy)
    second = subprocess.run(args, cwd=here, env={**env, "PYTHONPATH": str(REPO)}, capture_output=True, text=True)
    assert second.returncode == 0, second.stderr
    assert second.stdout == first.stdout
