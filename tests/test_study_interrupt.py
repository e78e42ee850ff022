"""Ctrl-C during a study keeps the completed partitions, and the message says so (not 'nothing was written')."""

from __future__ import annotations

import sys

import pytest


def _main_exit(monkeypatch, argv):
    from parallmelism.cli import app as app_module

    monkeypatch.setattr(sys, "argv", ["parallmelism", *argv])
    with pytest.raises(SystemExit) as exc:
        app_module.main()
    return exc.value.code


@pytest.mark.parametrize("verb", ["run", "resume"])
def test_ctrl_c_in_a_study_says_what_is_kept(monkeypatch, capsys, tmp_path, verb):
    import parallmelism.study.run as run_module

    def interrupted(*_a, **_k):
        raise KeyboardInterrupt

    monkeypatch.setattr(run_module, "start_study", interrupted)
    monkeypatch.setattr(run_module, "resume_study", interrupted)
    study = tmp_path / "s.yaml"
    study.write_text("command: sweep\nout: runs/s\npoints: {product: {grid.ngpus: [[8]]}}\nengine: {kind: local}\n")
    code = _main_exit(monkeypatch, ["study", verb, str(study) if verb == "run" else str(tmp_path / "runs/s")])
    err = capsys.readouterr().err
    assert code == 130
    assert "nothing was written" not in err
    assert "completed so far are kept" in err and "study resume" in err
    assert "Traceback" not in err
