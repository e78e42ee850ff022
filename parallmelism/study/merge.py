"""Merge a study's partitions into one table, streaming: bounded memory for any number of rows.

Reads the manifest, refuses an incomplete study (unless allow_partial), then copies the partitions
in manifest order record batch by record batch (pyarrow) into one Parquet or CSV file written
beside the target and renamed into place. Columns: `point`, the swept values, then the table's own
columns; every partition is cast to one schema (pyarrow's permissive unification: a column that
is all null in one point takes the type the others give it). Rows are unique by construction:
points are distinct (their ids differ) and a point's rows are distinct layouts.
"""

from __future__ import annotations

from pathlib import Path

from .. import SCHEMA_VERSION
from ..errors import UserError
from . import dataset as ds

BATCH_ROWS = 1 << 16  # rows read at a time: ~70 columns x 64k rows ~ 40 MB in flight


def _plain(t):
    import pyarrow as pa

    if pa.types.is_dictionary(t):
        return t.value_type
    if pa.types.is_large_string(t):
        return pa.string()
    return t


def study_schema(files: list[Path], swept: dict):
    """One schema of every partition file: point, the swept columns, the table's columns."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schemas = []
    for f in files:
        s = pq.read_schema(f)
        version = (s.metadata or {}).get(b"parallmelism_schema_version", b"").decode()
        if version and version != str(SCHEMA_VERSION):
            raise UserError(
                f"{f} has schema version {version}, this parallmelism writes {SCHEMA_VERSION}; re-run that point"
            )
        schemas.append(pa.schema([pa.field(x.name, _plain(x.type)) for x in s]))
    merged = pa.unify_schemas(schemas, promote_options="permissive")
    lead = [pa.field("point", pa.string())] + [merged.field(k) for k in swept if k in merged.names]
    rest = [f for f in merged if f.name not in swept]
    return pa.schema(lead + rest)


def _check_finite(batch, path: Path) -> None:
    import pyarrow as pa
    import pyarrow.compute as pc

    for name, col in zip(batch.schema.names, batch.columns):
        if pa.types.is_floating(col.type):
            bad = pc.invert(pc.is_finite(col))
            if pc.any(bad).as_py():
                from ..report.writer import not_a_number

                i = int(pc.index(bad, True).as_py())
                raise not_a_number(path, name, col[i].as_py(), i + 1, "a finite number")


def merge_study(folder: Path, out: Path, allow_partial: bool = False, part: str = ds.DATA) -> tuple[int, int, int]:
    """Stream the study in `folder` into `out` (.parquet or .csv); (rows, points merged, points missing).
    part: data (what the command writes) or rows (best's every row, full_output)."""
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    from ..report.writer import atomic_write, check_output_path

    _, ctx, points = ds.read_manifest(folder)
    out, fmt = check_output_path(out)
    done = ds.completed(folder)
    missing = [p for p in points if p.id not in done]
    if missing and not allow_partial:
        failed = ds.failures(folder)
        raise UserError(
            f"the study in {str(folder)!r} is incomplete: {len(missing):,} of {len(points):,} points have no "
            f"completed partition ({len(failed):,} failed, records in {folder / ds.FAILURES}); "
            f"`parallmelism study resume {folder}` runs them, or merge with --allow-partial; nothing was written"
        )
    if part == ds.ROWS and not ctx.full_output:
        raise UserError(f"the study in {str(folder)!r} keeps no rows/ (full_output: true keeps every row of best)")
    files = [ds.partition(folder, p.id, part) / "part-0.parquet" for p in points if p.id in done]
    if not files:
        raise UserError(f"the study in {str(folder)!r} has no completed point; nothing was written")
    schema = study_schema(files, ctx.columns)
    rows = 0
    with atomic_write(out, "table") as tmp:
        writer = pq.ParquetWriter(tmp, schema) if fmt == "parquet" else pacsv.CSVWriter(tmp, schema)
        try:
            for f, pid in zip(files, [p.id for p in points if p.id in done]):
                pf = pq.ParquetFile(f)
                for batch in pf.iter_batches(batch_size=BATCH_ROWS):
                    _check_finite(batch, f)
                    cols = []
                    for field in schema:
                        if field.name == "point":
                            cols.append(pa.array([pid] * batch.num_rows, pa.string()))
                        elif field.name in batch.schema.names:
                            cols.append(batch.column(field.name).cast(field.type))
                        else:
                            cols.append(pa.nulls(batch.num_rows, field.type))
                    writer.write_batch(pa.RecordBatch.from_arrays(cols, schema=schema))
                    rows += batch.num_rows
        finally:
            writer.close()
    return rows, len(files), len(missing)
