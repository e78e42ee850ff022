"""Lint is part of the suite: `ruff check` (config in pyproject.toml) passes on the package, tests
and benchmarks. ruff comes with the test extra, so CI runs it through the README's test command."""

import subprocess
import sys

from conftest import REPO


def test_ruff_check_is_clean():
    r = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "parallmelism", "tests", "benchmarks"],
                       cwd=REPO, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
