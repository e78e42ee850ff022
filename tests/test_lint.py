"""Lint and types are part of the suite: `ruff check` and `ruff format --check` pass on the package,
tests and benchmarks, and `mypy parallmelism` on the package (config in pyproject.toml). ruff and
mypy come with the test extra, so CI runs them through the README's test command."""

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


def test_mypy_is_clean():
    """`mypy parallmelism` (config in pyproject.toml: pydantic plugin) finds no error.

    Incremental, with the checkout's .mypy_cache (gitignored; the one `mypy parallmelism` keeps
    too): a clean clone (CI) checks every module as --no-incremental did (measured 12.6 vs 13.3 CPU
    s), a later run only the changed ones and their dependents (0.6 CPU s when nothing changed)."""
    r = subprocess.run([sys.executable, "-m", "mypy", "parallmelism"], cwd=REPO, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
