"""Every `parallmelism ...` command in the README runs as written (issue 14).

Each command of the README's bash blocks runs in-process in a fresh folder (outputs land there);
paths into the checkout (tests/golden, conf/compare, parallmelism/cases, tests/data) are made absolute;
no command may need ../shared (a fresh clone has none: the README points at the project's copies). Left to other
tests: the install lines (CI runs them), Hydra multirun with launchers and its merge
(tests/test_launchers.py), the SLURM recipe (needs a cluster), the user-folder example, which
needs the folder the README builds by hand, and the 10^8-layout study (two minutes on two cores;
benchmarks/bench_study.py runs it as written, and a test below runs it on a slice).
"""

from __future__ import annotations

import re
import shlex

import pytest
from typer.testing import CliRunner

from conftest import REPO

from parallmelism.cli.app import app

# the study block runs in one folder, in order (tests/test_study.py); its recipes need a cluster
SKIP = (
    "sweep -m",
    "best -m",
    "/shared/sweeps",
    "-cd mine",
    "merge multirun/",
    "--out study.csv",
    "runs/codesign",
    "/shared/studies",
)


def readme_commands(skip=SKIP) -> list[str]:
    text = (REPO / "README.md").read_text()
    cmds = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split("  #")[0].strip()
            if line.startswith("parallmelism ") and not any(s in line for s in skip):
                cmds.append(line)
    return cmds


def test_readme_has_the_commands_we_run():
    assert len(readme_commands()) >= 15


@pytest.mark.parametrize("line", readme_commands())
def test_readme_command_runs_as_written(line, tmp_path, monkeypatch):
    assert "../shared/" not in line, f"{line}: a fresh clone has no ../shared; point at the project's copy"
    monkeypatch.chdir(tmp_path)
    args = []
    for a in shlex.split(line)[1:]:
        for rel in ("tests/golden/", "tests/data/", "conf/compare/", "parallmelism/cases/"):
            a = a.replace(rel, f"{REPO}/{rel}") if a.startswith(rel) else a
        args.append(a)
    if "compare" in args[:1]:  # its baseline is the golden; its new file comes from the sweep just before
        CliRunner().invoke(app, shlex.split(readme_commands()[readme_commands().index(line) - 1])[1:])
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, f"{line}\n{res.output}"


def test_readme_user_folder_example(tmp_path, monkeypatch):
    """The README's user-folder block: copy a shipped accelerator into mine/hardware, then list and sweep."""
    import shutil

    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine" / "hardware").mkdir(parents=True)
    shutil.copy(REPO / "hardware" / "h100-sxm-80gb.yaml", tmp_path / "mine" / "hardware")
    res = CliRunner().invoke(app, ["list", "hardware", "-cd", "mine"])
    assert res.exit_code == 0 and "user folder" in res.output, res.output
    res = CliRunner().invoke(app, ["sweep", "-q", "-cd", "mine", "hardware.cost_per_gpu_hour_usd=2.1"])
    assert res.exit_code == 0, res.output


def test_readme_study_command_runs_on_a_slice(tmp_path, monkeypatch):
    """The README's 10^8-layout study, as written but on two models, one accelerator, two counts."""
    (line,) = [c for c in readme_commands(skip=()) if "--out study.csv" in c]
    args = []
    for a in shlex.split(line)[1:]:
        key = a.split("=", 1)[0]
        args.append(
            {
                "model": "model=llama3.1-8b,mixtral-8x7b",
                "hardware": "hardware=h100-sxm-80gb",
                "grid.ngpus": "grid.ngpus=[8,64]",
            }.get(key, a)
        )
    assert args != shlex.split(line)[1:] and "--top" in args and "grid.max_micro_batch=null" in args
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    import pandas as pd

    table = pd.read_csv(tmp_path / "study.csv")
    assert set(table["model"]) == {"llama3.1-8b", "mixtral-8x7b"} and set(table["ngpus"]) == {8, 64}
