"""`study run` and `study resume`: write the manifest, run the points not yet complete, summarise."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import UserError
from . import dataset as ds
from .engines import EngineRun, run_engine
from .spec import EngineSpec, Point, expand_points, read_study


@dataclass
class StudyOutcome:
    folder: Path
    points: list[Point]
    ran: EngineRun
    pending: int  # points this call ran
    failed: dict  # point id -> failure record (every failed point of the study, this call or before)
    lost: list  # (point id, why) of batches lost for good in this call
    missing: int  # points of the study without a completed partition at the end

    @property
    def complete(self) -> bool:
        return self.missing == 0


def _context(spec, base: Path, points: list[Point], out: str | Path | None = None) -> ds.StudyContext:
    """The workers' context; `out` replaces the file's out: (either relative to the current folder)."""
    dirs = tuple(str((base / d).resolve()) for d in spec.config_dir)
    folder = out if out is not None else spec.out
    if folder is None:  # was "out: Field required" even beside --out
        raise UserError("the study has no folder: give out: DIR in the study file or --out DIR")
    return ds.StudyContext(
        str(Path(folder).resolve()),
        spec.command,
        spec.top,
        tuple(spec.overrides),
        dirs,
        spec.chunk_rows,
        ds.column_types(points),
        spec.full_output and spec.command == "best",
    )


def _check_before_launch(ctx: ds.StudyContext, points: list[Point]) -> None:
    """Before anything runs: the study's own overrides compose, and every `model=`/`hardware=`/...
    choice names an option that exists (a typo is one sentence, not a study of failure records).
    A point that composes but is invalid (a sequence past a model's position table) runs and
    fails alone, with its record."""
    from ..config import load_run_configs, option_files, user_config_dirs

    for item in ctx.overrides:
        if "=" not in item:
            raise UserError(f"overrides: {item!r} is not key=value")
    dirs = list(ctx.config_dirs) or None
    load_run_configs(list(ctx.overrides), dirs)
    for group in ("model", "hardware", "workload", "grid"):
        names = {str(p.values[group]) for p in points if group in p.values}
        known = option_files(group, user_config_dirs(dirs)) if names else {}
        for name in sorted(names - set(known)):
            raise UserError(f"points: {group}={name} is not a {group} option (`parallmelism list {group}` shows them)")


def start_study(
    path: str | Path, engine: EngineSpec | None = None, out: str | Path | None = None, progress=None
) -> StudyOutcome:
    """`study run STUDY.yaml [--out DIR]`: a new study folder (refused when it holds another study)."""
    spec, base = read_study(path)
    points = expand_points(spec, base)
    ctx = _context(spec, base, points, out)
    folder = Path(ctx.folder)
    if ds.is_study(folder):
        _, _, old = ds.read_manifest(folder)
        if [p.id for p in old] == [p.id for p in points]:
            raise UserError(
                f"{str(folder)!r} holds this study already; `parallmelism study resume {folder}` runs the points "
                "not yet complete"
            )
        raise UserError(f"{str(folder)!r} holds another study (other points); give the study a new out: folder")
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise UserError(f"out: {str(folder)!r} exists and is not an empty folder; give the study a new folder")
    _check_before_launch(ctx, points)
    folder.mkdir(parents=True, exist_ok=True)
    ds.write_manifest(folder, spec.name or Path(path).stem, spec.model_dump(mode="json"), ctx, points)
    return _run(folder, ctx, points, engine or spec.engine_spec, progress)


def resume_study(target: str | Path, engine: EngineSpec | None = None, progress=None) -> StudyOutcome:
    """`study resume STUDY.yaml|DIR`: run the points of the manifest without a completed partition."""
    target = Path(target)
    spec_engine = None
    if target.is_file():
        spec, base = read_study(target)
        points = expand_points(spec, base)
        folder = Path(_context(spec, base, points).folder)
        spec_engine = spec.engine_spec
        _, ctx, manifest_points = ds.read_manifest(folder)
        if [p.id for p in manifest_points] != [p.id for p in points]:
            raise UserError(
                f"{str(target)!r} now lists other points than the study in {str(folder)!r} was launched with; "
                "give it a new out: folder to run it as a new study"
            )
    else:
        folder = target
        m, ctx, manifest_points = ds.read_manifest(folder)
        spec_engine = (
            EngineSpec.model_validate(m["spec"]["engine"])
            if isinstance(m["spec"]["engine"], dict)
            else (EngineSpec(kind=m["spec"]["engine"]))
        )
    return _run(folder, ctx, manifest_points, engine or spec_engine, progress)


def _run(folder: Path, ctx: ds.StudyContext, points: list[Point], engine: EngineSpec, progress=None) -> StudyOutcome:
    ds.clean_temporaries(folder)
    done = ds.completed(folder)
    todo = [p for p in points if p.id not in done]
    ran = run_engine(engine, ctx, todo, progress)
    ds.clean_temporaries(folder)
    done = ds.completed(folder)
    failed = ds.failures(folder)
    return StudyOutcome(folder, points, ran, len(todo), failed, ran.lost, sum(p.id not in done for p in points))


def summary_lines(out: StudyOutcome) -> tuple[list[str], int]:
    """(lines to print, exit code): one line per failed or lost point (at most 10), then one summary."""
    lines = []
    for pid, rec in list(out.failed.items())[:10]:
        lines.append(f"point {pid} ({' '.join(rec.get('overrides', []))}) failed: {rec.get('reason', '')}")
    for pid, why in out.lost[:10]:
        lines.append(f"point {pid} was not run: its worker was lost ({why})")
    total = len(out.points)
    rows = sum(r.rows for r in out.ran.results)
    head = (
        f"study {out.folder}: {total - out.missing:,} of {total:,} points complete "
        f"({out.pending:,} run now, {rows:,} rows written to {out.folder / ds.DATA})"
    )
    if out.failed:
        head += (
            f"; {len(out.failed):,} point{'s' if len(out.failed) != 1 else ''} failed "
            f"(records in {out.folder / ds.FAILURES})"
        )
    unrun = out.missing - len(out.failed)
    if unrun > 0:
        head += f"; {unrun:,} not run (lost workers): `parallmelism study resume {out.folder}` runs them"
    lines.append(head)
    return lines, 0 if out.complete else 2


def status_lines(folder: Path) -> tuple[list[str], int]:
    """`study status DIR`: points complete, failed and waiting."""
    m, _, points = ds.read_manifest(folder)
    done = ds.completed(folder)
    failed = ds.failures(folder)
    lines = [f"point {pid} failed: {rec.get('reason', '')}" for pid, rec in list(failed.items())[:10]]
    waiting = sum(p.id not in done and p.id not in failed for p in points)
    lines.append(
        f"study {m['study']} in {folder}: {len(points):,} points, {len(done):,} complete, "
        f"{len(failed):,} failed, {waiting:,} not run"
    )
    return lines, 0 if len(done) == len(points) else 2
