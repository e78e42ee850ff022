"""Lint is part of the suite: `ruff check` and `ruff format --check` (config in pyproject.toml) pass on the package, tests
and benchmarks. ruff comes with the test extra, so CI runs it through the README's test command."""

import subprocess
import sys

from conftest import REPO


PATHS = ["parallmelism", "tests", "benchmarks"]


def _ruff(*args):
    return subprocess.run(
        [sys.executable, "-m", "ruff", *args, "--no-cache", *PATHS], cwd=REPO, capture_output=True, text=True
    )


def test_ruff_check_is_clean():
    r = _ruff("check")
    assert r.returncode == 0, r.stdout + r.stderr


def test_ruff_format_is_clean():
    r = _ruff("format", "--check")
    assert r.returncode == 0, r.stdout + r.stderr
