"""README truth and packaging: the first lines, CI calling the same test command, configs in the wheel."""

import subprocess
import sys
import zipfile

from tests.conftest import REPO


def readme_commands():
    lines = (REPO / "README.md").read_text().splitlines()
    block = lines[lines.index("```bash") + 1 :]
    block = block[: block.index("```")]
    return [l.split("  #")[0].strip() for l in block if l.strip()]


def test_readme_first_lines_are_install_run_and_test():
    run, test = readme_commands()[:2]
    assert run.startswith("pip install .") and "parallmelism sweep" in run
    assert test.startswith("pip install") and test.endswith("python -m pytest")


def test_ci_runs_exactly_the_readme_test_command():
    test = readme_commands()[1]
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    assert test in [l.strip() for l in ci]


def test_wheel_ships_configs(tmp_path):
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(REPO),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    wheel = next(tmp_path.glob("parallmelism-*.whl"))
    from parallmelism import __version__

    assert wheel.name.startswith(f"parallmelism-{__version__}-")  # the version lives in one place
    names = zipfile.ZipFile(wheel).namelist()
    for must in (
        "parallmelism/_data/conf/config.yaml",
        "parallmelism/_data/models/llama3.1-405b.yaml",
        "parallmelism/_data/hardware/h100-sxm-80gb.yaml",
        "parallmelism/cases/memory_measured.csv",
    ):
        assert must in names
