"""A plain show or best (overrides and bare flags) runs its body without typer (cli/app.py
`plain_call`, issue 29 start-up): the same values as typer would hand it, the same output."""

from __future__ import annotations

import inspect
import subprocess
import sys

import pytest

from conftest import REPO
from parallmelism.cli.app import PLAIN, build_app, plain_call

PINNED = ["model=llama3.1-8b", "grid.ngpus=[8]", "grid.tp=1", "grid.pp=1", "grid.cp=1", "grid.micro_batch=[1]"]


@pytest.mark.parametrize("name", sorted(PLAIN))
def test_a_plain_body_takes_the_defaults_and_flags_typer_declares(name):
    """Every parameter of the body has the default of typer's declaration, and each bare flag of
    PLAIN is a boolean flag of that command setting that parameter."""
    import importlib

    import typer

    module, function, flags = PLAIN[name]
    body = inspect.signature(getattr(importlib.import_module(f"parallmelism.cli.{module}"), function)).parameters
    group = typer.main.get_command(build_app(name))
    declared = {p.name: p for p in group.commands[name].params if p.name != "help"}  # type: ignore[attr-defined]
    assert set(body) == set(declared)
    for param_name, param in declared.items():
        assert body[param_name].default == param.default, param_name
    for flag, param_name in flags.items():
        assert flag in declared[param_name].opts and declared[param_name].is_flag, flag


def test_plain_call_takes_only_overrides_and_bare_flags(monkeypatch):
    monkeypatch.delenv("_PARALLMELISM_COMPLETE", raising=False)
    assert plain_call(["show", "model=x", "grid.tp=1"]) == ("show_run", "show", {"overrides": ["model=x", "grid.tp=1"]})
    assert plain_call(["best", "-q", "model=x"]) == ("best_run", "best", {"overrides": ["model=x"], "quiet": True})
    assert plain_call(["best"]) == ("best_run", "best", {"overrides": []})
    for typers in (
        ["show", "-q", "model=x"],  # not a flag of show: click's error
        ["show", "--help"],
        ["best", "--top", "3"],
        ["best", "-qk", "3"],
        ["best", "--", "model=x"],
        ["sweep", "model=x"],
        ["--version"],
        [],
    ):
        assert plain_call(typers) is None, typers
    monkeypatch.setenv("_PARALLMELISM_COMPLETE", "bash_complete")  # click's shell completion
    assert plain_call(["show", "model=x"]) is None


PROBE = """
import sys
sys.argv = ["parallmelism", *{args!r}]
from parallmelism.cli import app
try:
    {call}
except SystemExit as exc:
    code = exc.code
print("TYPER", "typer" in sys.modules, file=sys.stderr)
print("CODE", code, file=sys.stderr)
"""


@pytest.mark.parametrize(
    "args",
    [
        ["show", *PINNED],
        ["best", "model=llama3.1-8b", "grid.ngpus=[8]"],
        ["best", "-q", "model=llama3.1-8b", "grid.ngpus=[8]"],
        ["show", "model=no-such-model"],
        ["best", "model=llama3.1-8b", "grid.ngpus=[8]", "grid.tp=3"],
    ],
    ids=["show", "best", "best-quiet", "unknown-model", "no-layout"],
)
def test_a_plain_command_line_prints_what_typer_prints_without_typer(tmp_path, args):
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "PARALLMELISM_CACHE_DIR": str(tmp_path)}
    plain, typed = (
        subprocess.run(
            [sys.executable, "-c", PROBE.format(args=args, call=call)],
            capture_output=True,
            text=True,
            env=env,
            cwd=REPO,
            timeout=120,
        )
        for call in ("app.main()", "code = app.run_typer(sys.argv[1]) or 0")
    )
    failed = "CODE 0" not in plain.stderr
    assert f"TYPER {failed}" in plain.stderr, plain.stderr  # an error's one sentence is typer.Exit's (fail())
    assert "TYPER True" in typed.stderr, typed.stderr
    strip = lambda text: text.replace("TYPER False", "").replace("TYPER True", "")  # noqa: E731
    assert plain.stdout == typed.stdout and strip(plain.stderr) == strip(typed.stderr)
    assert ("error:" in plain.stderr and "CODE 2" in plain.stderr) if failed else plain.stdout or "-q" in args
