"""A study's folder: the manifest, the point partitions, the failure records, the temporaries.

    DIR/manifest.json                   written once at launch: every point and its values
    DIR/data/point=ID/part-0.parquet    a completed point (hive partition; pyarrow.dataset reads DIR/data)
    DIR/failures/point=ID.json          a failed point: {"point", "overrides", "reason"}
    DIR/rows/point=ID/part-0.parquet    best with full_output: every row of the point (renamed before data/)

A partition is written into `DIR/data/.point=ID.<pid>.<random>.tmp/` and renamed into place when
the point is done, so `point=ID` exists only complete; names starting with a dot are skipped by
pyarrow's dataset discovery, and `clean_temporaries` removes those a killed worker left.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from .. import SCHEMA_VERSION, __version__
from ..errors import UserError
from .spec import Point

MANIFEST = "manifest.json"
DATA = "data"
ROWS = "rows"
FAILURES = "failures"
# swept keys that the table already carries as a column of the same value (the option's name)
NAMED_COLUMNS = ("model", "hardware", "workload")


@dataclass(frozen=True)
class StudyContext:
    """Everything a worker needs to run points (small and picklable: sent once per task)."""

    folder: str
    command: str
    top: int
    overrides: tuple[str, ...]
    config_dirs: tuple[str, ...]
    chunk_rows: int
    columns: dict = field(default_factory=dict)  # swept key -> Arrow type name of its column
    full_output: bool = False  # best: every row of each point too, in DIR/rows


def column_types(points: list[Point]) -> dict[str, str]:
    """The Arrow type of each swept key's column, the same in every partition: bool, int64,
    float64 (numbers, ints and floats mixed) or string (the override text of anything else)."""
    out: dict[str, str] = {}
    for key in dict.fromkeys(k for p in points for k in p.values):
        if key in NAMED_COLUMNS:
            continue
        vals = [p.values.get(key) for p in points if p.values.get(key) is not None]
        if vals and all(isinstance(v, bool) for v in vals):
            out[key] = "bool"
        elif vals and all(isinstance(v, int) and not isinstance(v, bool) for v in vals):
            out[key] = "int64"
        elif vals and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
            out[key] = "float64"
        else:
            out[key] = "string"
    return out


def column_value(value, kind: str):
    from .spec import override_value

    if value is None:
        return None
    return override_value(value) if kind == "string" else value


def partition(folder: Path, pid: str, part: str = DATA) -> Path:
    return folder / part / f"point={pid}"


def failure_path(folder: Path, pid: str) -> Path:
    return folder / FAILURES / f"point={pid}.json"


def write_manifest(folder: Path, name: str, spec_data: dict, ctx: StudyContext, points: list[Point]) -> Path:
    from ..report.writer import atomic_write

    manifest = {
        "study": name,
        "tool_version": __version__,
        "schema_version": SCHEMA_VERSION,
        "command": ctx.command,
        "top": ctx.top,
        "overrides": list(ctx.overrides),
        "config_dirs": list(ctx.config_dirs),
        "chunk_rows": ctx.chunk_rows,
        "columns": ctx.columns,
        "full_output": ctx.full_output,
        "spec": spec_data,
        "points": [{"point": p.id, "values": p.values} for p in points],
    }
    path = folder / MANIFEST
    with atomic_write(path) as tmp:
        tmp.write_text(json.dumps(manifest, indent=1, default=str) + "\n")
    return path


def read_manifest(folder: Path) -> tuple[dict, StudyContext, list[Point]]:
    path = folder / MANIFEST
    if not path.is_file():
        raise UserError(
            f"{str(folder)!r} holds no study ({MANIFEST} is missing); start one with `study run STUDY.yaml`"
        )
    try:
        m = json.loads(path.read_text())
        points = [Point(p["point"], p["values"]) for p in m["points"]]
        ctx = StudyContext(
            str(folder),
            m["command"],
            int(m["top"]),
            tuple(m["overrides"]),
            tuple(m["config_dirs"]),
            int(m["chunk_rows"]),
            dict(m["columns"]),
            bool(m.get("full_output", False)),
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise UserError(
            f"{str(path)!r} is not a study manifest this tool wrote ({type(exc).__name__}: {exc})"
        ) from None
    if str(m.get("schema_version")) != str(SCHEMA_VERSION):
        raise UserError(
            f"{str(path)!r} was written with output schema {m.get('schema_version')}, this parallmelism writes "
            f"{SCHEMA_VERSION}; run the study again into a new folder"
        )
    return m, ctx, points


def is_study(folder: Path) -> bool:
    return (folder / MANIFEST).is_file()


def completed(folder: Path) -> set[str]:
    """Ids of the points whose partition is complete (renamed into place)."""
    data = folder / DATA
    if not data.is_dir():
        return set()
    return {p.name[len("point=") :] for p in data.iterdir() if p.name.startswith("point=") and p.is_dir()}


def failures(folder: Path) -> dict[str, dict]:
    """Failure records by point id (a record whose point has since completed is stale and skipped)."""
    out: dict[str, dict] = {}
    where = folder / FAILURES
    if not where.is_dir():
        return out
    done = completed(folder)
    for f in sorted(where.glob("point=*.json")):
        try:
            rec = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        if rec.get("point") not in done:
            out[rec["point"]] = rec
    return out


def write_failure(folder: Path, point: Point, reason: str) -> None:
    from ..report.writer import atomic_write

    rec = {"point": point.id, "overrides": point.overrides, "reason": reason}
    with atomic_write(failure_path(folder, point.id)) as tmp:
        tmp.write_text(json.dumps(rec, default=str) + "\n")


def clear_failure(folder: Path, pid: str) -> None:
    failure_path(folder, pid).unlink(missing_ok=True)


def clean_temporaries(folder: Path) -> int:
    """Remove the temporaries of points a killed worker left (`.point=*.tmp`, `.point=*.json.*.tmp`)."""
    from ..report.writer import remove_temp

    n = 0
    for sub in (folder / DATA, folder / ROWS, folder / FAILURES):
        if sub.is_dir():
            for p in sub.iterdir():
                if p.name.startswith(".") and p.name.endswith(".tmp"):
                    remove_temp(p)
                    n += 1
    return n


def commit_partition(tmp: Path, final: Path, replace: bool = False) -> bool:
    """Rename a finished partition folder into place; False (and the temporary removed) when the
    point was completed meanwhile (a retried task that raced its first attempt). replace: a
    partition already there is stale (a rows/ partition whose data/ partition never came) and goes."""
    import shutil

    from ..report.writer import remove_temp
    from ..stop import raise_if_stopped

    raise_if_stopped()
    if replace and final.is_dir():
        shutil.rmtree(final)
    try:
        os.rename(tmp, final)
        return True
    except OSError:
        if final.is_dir():
            remove_temp(tmp)
            return False
        raise
