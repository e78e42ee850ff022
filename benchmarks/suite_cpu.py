"""CPU-seconds of the test suite, per test file and per test: where the suite's time goes.

    python benchmarks/suite_cpu.py [tests/test_a.py ...] [--top N]

Runs each file in a pytest process of its own, one after the other, and prints per file the
CPU-seconds of that process and of the processes it waited for (user + system: the CLI
subprocesses and worker pools a test starts), and the N costliest tests overall (each test's
CPU-seconds measured the same way around its setup, call and teardown). CPU-seconds, not wall
seconds: on a shared machine the wall time follows the load (on the 2-core development machine
under a load of 7 to 11, 46 files took 1,622 s of wall time for 322 CPU-seconds), the CPU time
does not. Each file's figure includes its own interpreter start and collection (about 2 CPU-s),
which a whole-suite run pays once. Daemons a test leaves running (Ray's) are not counted.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

PLUGIN = """
import os, resource
import pytest

_rows = []


def _cpu():
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    c0 = _cpu()
    yield
    _rows.append((_cpu() - c0, item.nodeid))


def pytest_sessionfinish(session):
    with open(os.environ["SUITE_CPU_OUT"], "a") as f:
        for c, n in _rows:
            f.write(f"{c:.3f} {n}\\n")
"""


def children_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", help="test files (default: every tests/test_*.py)")
    ap.add_argument("--top", type=int, default=15, help="costliest tests to list")
    args = ap.parse_args()
    files = args.files or sorted(str(p.relative_to(REPO)) for p in (REPO / "tests").glob("test_*.py"))
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "suite_cpu_plugin.py").write_text(PLUGIN)
        per_test = Path(tmp) / "tests.txt"
        env = dict(os.environ, SUITE_CPU_OUT=str(per_test))
        env["PYTHONPATH"] = tmp + os.pathsep + env.get("PYTHONPATH", "")
        per_file = []
        for f in files:
            before = children_cpu_s()
            cmd = [sys.executable, "-m", "pytest", "-n", "0", "-p", "no:randomly", "-p", "no:cacheprovider"]
            r = subprocess.run([*cmd, "-p", "suite_cpu_plugin", f], cwd=REPO, env=env, capture_output=True, text=True)
            cpu = children_cpu_s() - before
            tail = (r.stdout.strip().splitlines() or [""])[-1]
            per_file.append((cpu, f, tail))
            print(f"{cpu:8.2f} CPU-s  {f}  ({tail})", flush=True)
        tests = sorted(
            ((float(c), n) for c, n in (line.split(" ", 1) for line in per_test.read_text().splitlines())),
            reverse=True,
        )
    print(f"\n{sum(c for c, _, _ in per_file):8.2f} CPU-s in {len(per_file)} files (each file's own start included)")
    print(f"{sum(c for c, _ in tests):8.2f} CPU-s in {len(tests)} tests (setup + call + teardown)\n")
    for c, n in tests[: args.top]:
        print(f"{c:8.2f} CPU-s  {n.strip()}")


if __name__ == "__main__":
    main()
