"""The study file: design points, command, output folder and engine, and its expansion into points.

    name: codesign                  # default: the file's stem
    command: best                   # sweep (every valid layout) or best (winners per GPU count)
    top: 1                          # best: layouts per GPU count
    full_output: false              # best: every row of each point too, in DIR/rows/point=ID/
    out: runs/codesign              # the dataset folder (relative to the current folder, as --out)
    config_dir: [mine]              # optional user folders (-cd), relative to this file's folder
                                    # (as points.csv: inputs live with the file, outputs where it runs)
    overrides: [grid.max_micro_batch=null]   # every point
    points:                         # the product of the three blocks present
      product: {model: [llama3.1-8b, llama3.1-70b], grid.ngpus: [[512], [1024]]}
      zip: {hardware.peak_tflops.bf16: [989, 1979], hardware.hbm_bandwidth_gbps: [3350, 8000]}
      csv: points.csv               # a header of keys, one point per row (cells read as YAML)
    engine: {kind: ray, num_cpus: 2}   # or just `local`, `ray`, `submitit`

A point is an ordered mapping key -> value; its id is the first 12 hex digits of the SHA-256 of
its canonical JSON (sorted keys), so the same point has the same id in any study and any order.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, PositiveInt

from ..errors import UserError

POINT_ID_HEX = 12


class EngineSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["local", "ray", "submitit"] = "local"
    workers: Optional[PositiveInt] = Field(None, description="local: processes (default: every core; 1 = in-process)")
    address: Optional[str] = Field(None, description="ray: cluster address (default: start a local Ray)")
    num_cpus: Optional[PositiveInt] = Field(None, description="ray: CPUs of a local Ray (default: every core)")
    batch: Optional[PositiveInt] = Field(None, description="points per task (default: engines.batch_size)")
    max_retries: int = Field(
        3, ge=0, description="ray, local: re-runs of a batch whose worker was lost (never user errors)"
    )
    cluster: Optional[str] = Field(None, description="submitit: slurm, local or debug (default: what submitit finds)")
    parameters: dict[str, Any] = Field(default_factory=dict, description="submitit: executor parameters")


class PointsSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    product: dict[str, list[Any]] = Field(default_factory=dict)
    zip: dict[str, list[Any]] = Field(default_factory=dict)
    csv: Optional[str] = None


class StudySpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Optional[str] = None
    command: Literal["sweep", "best"] = "sweep"
    top: PositiveInt = 1
    full_output: bool = Field(
        False, description="best: every row of each point too, in DIR/rows (as sweep writes them)"
    )
    out: Optional[str] = Field(None, description="the study's folder (or --out DIR, which replaces it)")
    config_dir: list[str] = Field(default_factory=list)
    overrides: list[str] = Field(default_factory=list)
    points: PointsSpec
    engine: Union[Literal["local", "ray", "submitit"], EngineSpec] = "local"
    chunk_rows: int = Field(1 << 18, ge=1000)

    @property
    def engine_spec(self) -> EngineSpec:
        return EngineSpec(kind=self.engine) if isinstance(self.engine, str) else self.engine


@dataclass(frozen=True)
class Point:
    """One design point: its id and its key -> value assignments, in the study's key order."""

    id: str
    values: dict

    @property
    def overrides(self) -> list[str]:
        """The point as Hydra overrides (`key=value`)."""
        return [f"{k}={override_value(v)}" for k, v in self.values.items()]


def override_value(value) -> str:
    """A value as Hydra's override grammar writes it: null, true/false, [a,b], numbers, text."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(override_value(v) for v in value) + "]"
    return str(value)


def point_id(values: dict) -> str:
    canonical = json.dumps(values, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:POINT_ID_HEX]


def read_study(path: str | Path) -> tuple[StudySpec, Path]:
    """(spec, the file's folder) of a study YAML; one sentence for a bad file."""
    import yaml
    from pydantic import ValidationError

    from ..errors import format_validation_error, require_file

    p = require_file(path, "study file")
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise UserError(f"study file {str(p)!r} is not UTF-8 text; give a study YAML") from None
    except yaml.YAMLError as exc:
        raise UserError(f"study file {str(p)!r} is not valid YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise UserError(f"study file {str(p)!r} must be a mapping (name, command, out, points, engine)")
    try:
        spec = StudySpec.model_validate(data)
    except ValidationError as exc:
        raise UserError(f"study file {str(p)!r}: {format_validation_error(exc)}") from None
    if spec.name is None:
        spec = spec.model_copy(update={"name": p.stem})
    return spec, p.resolve().parent


def _csv_points(path: Path) -> list[dict]:
    import csv

    import yaml

    from ..errors import require_file

    try:
        with open(require_file(path, "points CSV"), newline="", encoding="utf-8") as fh:
            rows = list(csv.reader(fh))
    except (UnicodeDecodeError, csv.Error) as exc:  # a binary file, a NUL byte
        raise UserError(f"points CSV {str(path)!r} is not a text CSV ({str(exc).splitlines()[0]})") from None
    if not rows or not any(rows[0]):
        raise UserError(f"points CSV {str(path)!r} has no header row of keys")
    keys = [k.strip() for k in rows[0]]
    points = []
    for n, row in enumerate(rows[1:], start=2):
        if not row:
            continue
        if len(row) != len(keys):
            raise UserError(f"points CSV {str(path)!r} line {n} has {len(row)} cells for {len(keys)} keys")
        try:
            points.append({k: yaml.safe_load(v) if v.strip() else None for k, v in zip(keys, row)})
        except yaml.YAMLError as exc:  # a cell such as `[1,` or a control character
            first = str(exc).splitlines()[0]
            raise UserError(
                f"points CSV {str(path)!r} line {n} holds a cell that is not a YAML value ({first})"
            ) from None
    return points


def expand_points(spec: StudySpec, base_dir: Path) -> list[Point]:
    """Every point of the study, in order: product (last key fastest) x zip rows x CSV rows."""
    import itertools

    pts = spec.points
    blocks: list[list[dict]] = []
    for key, choices in pts.product.items():
        if not choices:
            raise UserError(f"points.product.{key} is an empty list; give at least one value")
        blocks.append([{key: v} for v in choices])
    if pts.zip:
        lengths = {k: len(v) for k, v in pts.zip.items()}
        if len(set(lengths.values())) != 1:
            raise UserError(f"points.zip lists must have one length; they have {lengths}")
        n = next(iter(lengths.values()))
        blocks.append([{k: v[i] for k, v in pts.zip.items()} for i in range(n)])
    if pts.csv is not None:
        blocks.append(_csv_points(base_dir / pts.csv))
    if not blocks:
        raise UserError("the study has no points: give points.product, points.zip or points.csv")
    keys = [k for block in blocks for k in (block[0] if block else {})]
    seen = [k for k in keys if keys.count(k) > 1]
    if seen:
        raise UserError(f"{seen[0]} is set by two blocks of points; set each key in one block")
    for key in keys:
        if key.startswith(("+", "~")) or not key.replace(".", "").replace("_", "").replace("-", "").isalnum():
            raise UserError(f"points key {key!r} is not a config key (write model, hardware.peak_tflops.bf16, ...)")
    points: list[Point] = []
    ids: dict[str, dict] = {}
    for combo in itertools.product(*blocks):
        values = {k: v for part in combo for k, v in part.items()}
        pid = point_id(values)
        if pid in ids:
            raise UserError(f"the point {json.dumps(values, default=str)} is given twice; give each point once")
        ids[pid] = values
        points.append(Point(pid, values))
    return points
