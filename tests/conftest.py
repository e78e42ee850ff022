"""Shared test helpers: run the CLI in-process (fast) or as a real process (exit codes, no traceback)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from contextlib import contextmanager
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared" / "reference"  # beside the checkout; absent in a fresh clone
REFERENCE = REPO / "tests" / "data" / "reference"  # the project's copy of SHARED (tests/data/reference/README.md)

# The composition cache (config/cache.py) of the test session lives in a folder of its own, not in
# the user's ~/.cache; every in-process and subprocess CLI call of the suite inherits it.
if "PARALLMELISM_CACHE_DIR" not in os.environ:
    import tempfile

    os.environ["PARALLMELISM_CACHE_DIR"] = tempfile.mkdtemp(prefix="parallmelism-test-cache-")


def run_cli(*args, cwd=None, env=None):
    """Run `python -m parallmelism ARGS` as a real process. Returns CompletedProcess (text)."""
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = str(REPO) + os.pathsep + full_env.get("PYTHONPATH", "")
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "parallmelism", *map(str, args)],
        cwd=cwd or REPO,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def run_app(*args, cwd):
    """`run_cli` in this process (the typer app through CliRunner, in folder `cwd`): the same exit
    code and the same stdout and stderr, apart, without a new interpreter's ~1 CPU s of imports. For
    commands that start no Hydra launcher and set no process-wide state (merge, compare, best)."""
    from typer.testing import CliRunner

    from parallmelism.cli.app import app

    here = os.getcwd()
    os.chdir(cwd)
    try:
        result = CliRunner().invoke(app, [str(a) for a in args])
    finally:
        os.chdir(here)
    return subprocess.CompletedProcess(args, result.exit_code, result.stdout, result.stderr)


def invoke(*args):
    """Run the typer app in-process. Returns (exit_code, stdout+stderr)."""
    from typer.testing import CliRunner

    from parallmelism.cli.app import app

    result = CliRunner().invoke(app, [str(a) for a in args])
    return result.exit_code, result.output


@pytest.fixture
def cli():
    return run_cli


# The stop signals whose disposition a child inherits (an ignored one stays ignored across exec, a
# blocked one stays blocked) or that a test may leave handled: a CLI command run in-process
# (cli/app.py main) installs its SIGTERM and SIGHUP handlers in the pytest process and leaves them.
STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))


@contextmanager
def signals_kept():
    """The stop signals' dispositions and this thread's signal mask as they were before, whatever the
    code inside set."""
    handlers = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, []) if hasattr(signal, "pthread_sigmask") else None
    try:
        yield
    finally:
        for s, handler in handlers.items():
            if handler is not None and signal.getsignal(s) is not handler:  # None: set outside Python, kept
                signal.signal(s, handler)
        if mask is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)


@pytest.fixture(autouse=True)
def keep_signal_dispositions():
    """Every test leaves the stop signals' dispositions and the signal mask as it found them
    (`signals_kept`), so no test changes what a later test's processes inherit. (A suite started as a
    background job of a script, `pytest &` without job control, runs with SIGINT ignored from the
    start, POSIX's rule for such jobs: tests/test_signals.py starts its runs with it at the default.)"""
    if threading.current_thread() is not threading.main_thread():  # signals are the main thread's to set
        yield
        return
    with signals_kept():
        yield


def benchmark_module(name: str):
    """`benchmarks/NAME.py` imported as a module (the scripts are not a package): its functions and
    constants, for a test that holds a script to its sources."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def shared_reference(name: str) -> Path:
    """`tests/data/reference/NAME`: the shipped copy of `../shared/reference/NAME` (a missing one is a
    failure, not a skip: a fresh clone must run every test)."""
    path = REFERENCE / name
    assert path.is_file(), f"{path} is missing (copy it from ../shared/reference; tests/data/reference/README.md)"
    return path


PINNED_AXES = dict(tp=[1], pp=[1], cp=[1], ep=[1], vpp=[1], micro_batch=[1], recompute=["none"])


def pinned_row(model: str, hardware, workload, ngpus: int, **axes):
    """The one row of a fully pinned training layout (engine.evaluate), as a pandas Series: the
    axes not given take PINNED_AXES; sequence_parallel defaults to tp > 1."""
    from parallmelism.config import load_option
    from parallmelism.engine import evaluate
    from parallmelism.specs import GridSpec, RunConfig

    grid = {**PINNED_AXES, **axes}
    grid.setdefault("sequence_parallel", [grid["tp"][0] > 1])
    run = RunConfig(
        stack=load_option("stack", "megatron-te"),
        model=load_option("model", model),
        hardware=hardware,
        workload=workload,
        grid=GridSpec(ngpus=[ngpus], **grid),
    )
    df = evaluate(run)[0]
    assert len(df) == 1, len(df)
    return df.iloc[0]


def stacked(hw, stack: str = "megatron-te"):
    """An accelerator as the cost model takes it under a training stack (specs.run.under_stack: the
    stack's overheads for it and its attention kernel), for tests that call cost functions directly."""
    from parallmelism.config import load_option
    from parallmelism.specs.run import under_stack

    return under_stack(hw, load_option("stack", stack))


def golden_engine_errors():
    """Each serving engine's errors on the golden validation table (tests/golden/validation.csv, which
    test_golden keeps equal to what validate predicts): `engine_errors` rows by (engine, sample), and the
    table, with the shipped light-load serving cases' engine, sample and concurrency attached."""
    import pandas as pd

    from parallmelism.validate.engine_report import engine_errors
    from parallmelism.validate.runner import serving_case_info, shipped_case_files

    table = pd.read_csv(REPO / "tests" / "golden" / "validation.csv")
    info = []
    for f in shipped_case_files():
        df = pd.read_csv(f, dtype=str, keep_default_na=False).replace({"": None})
        if "measured_itl_ms" in df.columns and "load_stat" not in df.columns:
            info += serving_case_info(df, "trtllm")
    table.attrs["serving"] = info
    return {(r["engine"], r["sample"]): r for r in engine_errors(table)}, table
