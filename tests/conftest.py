"""Shared test helpers: run the CLI in-process (fast) or as a real process (exit codes, no traceback)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared" / "reference"

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


def invoke(*args):
    """Run the typer app in-process. Returns (exit_code, stdout+stderr)."""
    from typer.testing import CliRunner

    from parallmelism.cli.app import app

    result = CliRunner().invoke(app, [str(a) for a in args])
    return result.exit_code, result.output


@pytest.fixture
def cli():
    return run_cli


def shared_reference(name: str) -> Path:
    path = SHARED / name
    if not path.is_file():
        pytest.skip(f"../shared/reference/{name} not present")
    return path
