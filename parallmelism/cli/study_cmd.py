"""`parallmelism study run|resume|status`: design-space studies as one partitioned dataset (parallmelism/study/)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .options import a_path

study_app = typer.Typer(
    no_args_is_help=True,
    help="Studies: design points (model, hardware fields, ...) run on local processes, Ray or SLURM into one "
    "Parquet dataset, with failure records and resume.",
)

ENGINE = typer.Option(None, "--engine", "-e", help="local, ray or submitit: overrides the study file's engine kind")
WORKERS = typer.Option(None, "--workers", "-j", min=1, help="local: processes; ray: CPUs of a local Ray")
QUIET = typer.Option(False, "--quiet", "-q", help="no progress bar; the summary line only")


def _bar(quiet: bool):
    from .common import ProgressBar

    return None if quiet else ProgressBar("points")


def _engine(kind: Optional[str], workers: Optional[int], spec_engine):
    from ..errors import UserError
    from ..study.spec import EngineSpec

    if kind is None and workers is None:
        return None
    if kind is not None and kind not in ("local", "ray", "submitit"):
        raise UserError(f"--engine {kind!r}: give local, ray or submitit")
    base = spec_engine if spec_engine is not None else EngineSpec()
    update: dict = {}
    if kind is not None and kind != base.kind:
        base = EngineSpec(kind=kind)  # (another engine's settings do not carry over)
    if workers is not None:
        update["workers" if base.kind == "local" else "num_cpus"] = workers
    return base.model_copy(update=update)


def _stop_keeping(folder_hint: str | Path):
    """Ctrl-C: the completed points stay (each partition is whole; one cut short left none), so the
    app's 'interrupted; nothing was written' would be wrong: say what is kept, exit 130."""
    from .common import console

    console(stderr=True).print(
        f"interrupted; the points completed so far are kept: `parallmelism study resume {folder_hint}` runs the rest",
        markup=False,
        soft_wrap=True,
    )
    return SystemExit(130)


def _finish(out) -> None:
    from ..study.run import summary_lines
    from .common import console

    lines, code = summary_lines(out)
    err = console(stderr=True)
    for line in lines[:-1]:
        err.print(line, markup=False, soft_wrap=True)
    console().print(lines[-1], markup=False, soft_wrap=True)
    if code:
        raise typer.Exit(code)


@study_app.command("run")
def study_run(
    study: str = typer.Argument(..., help="the study file (YAML: points, command, out, engine)"),
    engine: Optional[str] = ENGINE,
    workers: Optional[int] = WORKERS,
    out: Optional[Path] = typer.Option(
        None,
        "--out",
        "-o",
        parser=a_path,
        help="the study's folder (default: the file's out:; both relative to the current folder)",
    ),
    quiet: bool = QUIET,
):
    """Write the study's manifest, run every point, and say how many failed (exit 2 if any)."""
    from ..errors import UserError
    from ..study.run import start_study
    from ..study.spec import read_study
    from .common import fail

    try:
        spec, _ = read_study(study)
        _finish(start_study(study, _engine(engine, workers, spec.engine_spec), out, _bar(quiet)))
    except KeyboardInterrupt:
        raise _stop_keeping(out or study) from None
    except UserError as exc:
        fail(str(exc))


@study_app.command("resume")
def study_resume(
    target: str = typer.Argument(..., help="the study file, or the study's folder"),
    engine: Optional[str] = ENGINE,
    workers: Optional[int] = WORKERS,
    quiet: bool = QUIET,
):
    """Run only the points without a completed partition (failed, lost or never run)."""
    from pathlib import Path

    from ..errors import UserError
    from ..study.run import resume_study
    from ..study.spec import read_study
    from .common import fail

    try:
        spec_engine = read_study(target)[0].engine_spec if Path(target).is_file() else None
        _finish(resume_study(target, _engine(engine, workers, spec_engine), _bar(quiet)))
    except KeyboardInterrupt:
        raise _stop_keeping(target) from None
    except UserError as exc:
        fail(str(exc))


@study_app.command("status")
def study_status(target: str = typer.Argument(..., help="the study's folder")):
    """Points complete, failed and not run (exit 2 unless complete)."""
    from pathlib import Path

    from ..errors import UserError
    from ..study.run import status_lines
    from .common import console, fail

    try:
        lines, code = status_lines(Path(target))
        for line in lines:
            console().print(line, markup=False, soft_wrap=True)
        if code:
            raise typer.Exit(code)
    except UserError as exc:
        fail(str(exc))
