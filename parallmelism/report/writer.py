"""Atomic table writers: write to a temporary file beside the target, then rename.

A failed or interrupted run never leaves a partial file at the target path. CSV goes through
pyarrow's writer (about 10x faster than pandas `to_csv`); Parquet through pyarrow too. Both
carry the tool and schema version (a `# parallmelism ...` first line is NOT used for CSV, which
must stay plain: the versions are in the Parquet metadata and in the CSV columns
`tool_version`/`schema_version`).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from .. import SCHEMA_VERSION, __version__
from ..errors import UserError


def arrow_table(df):
    """The Arrow table written for df: the frame plus tool_version and schema_version columns
    and the versions in the schema metadata."""
    import pyarrow as pa

    df = df.copy()
    df["tool_version"] = __version__
    df["schema_version"] = SCHEMA_VERSION
    table = _small_strings(pa.Table.from_pandas(df, preserve_index=False))
    meta = dict(table.schema.metadata or {})
    meta.update(
        {b"parallmelism_version": __version__.encode(), b"parallmelism_schema_version": str(SCHEMA_VERSION).encode()}
    )
    return table.replace_schema_metadata(meta)


def _small_strings(table):
    """Text columns as `string`, never `large_string` (pandas' string dtype becomes large_string):
    one Arrow type for text whichever way a table was built, so a Parquet file written chunk by
    chunk, or assembled from worker parts read back, has the same schema and bytes."""
    import pyarrow as pa

    def small(t):
        if pa.types.is_large_string(t):
            return pa.string()
        if pa.types.is_dictionary(t) and pa.types.is_large_string(t.value_type):
            return pa.dictionary(t.index_type, pa.string(), t.ordered)
        return t

    fields = [pa.field(f.name, small(f.type), f.nullable, f.metadata) for f in table.schema]
    if all(f.type == g.type for f, g in zip(fields, table.schema)):
        return table
    return table.cast(pa.schema(fields, metadata=table.schema.metadata))


TABLE_SUFFIXES = {".csv": "csv", ".parquet": "parquet"}


def check_output_path(path: str | Path, fmt: str | None = None) -> tuple[Path, str]:
    """(path, format) of a table to write, checked before any computation.

    The format comes from the extension (.csv or .parquet; anything else is an error, never CSV
    text under another name); a `fmt` that disagrees with the extension is an error; the target
    must not be a folder, and its folder must be creatable and writable."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in TABLE_SUFFIXES:
        raise UserError(f"output path {str(path)!r} must end in .csv or .parquet (the format follows the extension)")
    if fmt is not None and fmt != TABLE_SUFFIXES[suffix]:
        raise UserError(
            f"output.format={fmt} disagrees with the output path {str(path)!r}; the extension sets the format"
        )
    if path.is_dir():
        raise UserError(f"output path {str(path)!r} is a folder; give a file name")
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise UserError(f"cannot write {str(path)!r}: {str(folder)!r} is a file, not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UserError(f"cannot write {str(path)!r}: {str(folder)!r} is not writable")
    return path, TABLE_SUFFIXES[suffix]


def write_table(df, path: str | Path, fmt: str | None = None) -> Path:
    """Write df to path (csv or parquet, from fmt or the suffix) atomically. Returns the path."""
    path = Path(path)
    fmt = fmt or ("parquet" if path.suffix == ".parquet" else "csv")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create output folder {str(path.parent)!r}: {exc.strerror}") from None
    if path.is_dir():
        raise UserError(f"output path {str(path)!r} is a folder; give a file name")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise UserError(f"cannot write to {str(path.parent)!r}: {exc.strerror}") from None
    os.close(fd)
    honour_umask(tmp, 0o666)  # mkstemp makes 0600; give the file the usual permissions
    try:
        table = arrow_table(df)
        if fmt == "parquet":
            import pyarrow.parquet as pq

            pq.write_table(table, tmp)
        else:
            import pyarrow.csv as pacsv

            table = plain_strings(table)
            pacsv.write_csv(table, tmp)
        os.replace(tmp, path)
    except OSError as exc:  # disk full, quota, read-only target, ...: the old file stays as it was
        Path(tmp).unlink(missing_ok=True)
        raise UserError(
            f"cannot write {str(path)!r}: {write_error_reason(exc)}; nothing was written "
            "(an existing file there is unchanged)"
        ) from None
    except BaseException:  # includes SIGINT, and SIGTERM/SIGHUP (raised as SystemExit by the CLI)
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_error_reason(exc: OSError) -> str:
    """The OS's reason for a failed write, in words (pyarrow raises OSError without an errno)."""
    import errno

    names = {
        errno.ENOSPC: "no space left on the device",
        errno.EDQUOT: "disk quota exceeded",
        errno.EROFS: "read-only file system",
        errno.EACCES: "permission denied",
        errno.EPERM: "permission denied",
    }
    if exc.errno in names:
        return names[exc.errno]
    text = (exc.strerror or str(exc)).splitlines()[0] if (exc.strerror or str(exc)) else type(exc).__name__
    return text


def honour_umask(path: str | Path, mode: int = 0o777) -> None:
    """Give a file or folder made by mkstemp/mkdtemp (0600/0700) the permissions the umask allows."""
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(path, mode & ~umask)


def plain_strings(table):
    """Categorical (dictionary) columns as their plain values: what CSV holds."""
    import pyarrow as pa

    fields = [pa.field(f.name, f.type.value_type) if pa.types.is_dictionary(f.type) else f for f in table.schema]
    return table.cast(pa.schema(fields, metadata=table.schema.metadata))


def read_table(path: str | Path):
    """Read a CSV or Parquet file written by write_table (or any tidy table) into pandas.

    A CSV must be complete: it ends with a line break and its last row has as many fields as the
    header (a run killed mid-write by something other than our own writer, a copy cut short);
    otherwise it is an error naming the file and the line, never a row of NaNs."""
    import pandas as pd

    path = Path(path)
    if path.is_dir():
        raise UserError(f"{str(path)!r} is a folder; give a .csv or .parquet file")
    if not path.is_file():
        raise UserError(f"file {str(path)!r} does not exist")
    if path.suffix.lower() not in TABLE_SUFFIXES:
        raise UserError(f"{str(path)!r} is neither .csv nor .parquet")
    if path.suffix.lower() == ".csv":
        _check_csv_complete(path)
    try:
        if path.suffix.lower() == ".parquet":
            return pd.read_parquet(path)
        return pd.read_csv(path)
    except Exception as exc:
        raise UserError(f"cannot read {str(path)!r}: {str(exc).splitlines()[0]}") from None


def _check_csv_complete(path: Path) -> None:
    import csv

    with open(path, "rb") as fh:
        header = fh.readline()
        if not header.strip():
            raise UserError(f"{str(path)!r} is empty")
        size = fh.seek(0, os.SEEK_END)
        fh.seek(max(0, size - 65536))
        tail = fh.read()
    if not tail.endswith(b"\n"):
        raise UserError(
            f"{str(path)!r} is truncated: line {_line_count(path)}, its last, ends without a line "
            "break; re-create the file"
        )
    last = tail.rstrip(b"\r\n").rsplit(b"\n", 1)[-1].decode("utf-8", "replace")
    n_header = len(next(csv.reader([header.decode("utf-8", "replace").rstrip("\r\n")])))
    n_last = len(next(csv.reader([last]))) if last else n_header
    if n_last != n_header:
        raise UserError(
            f"{str(path)!r} is truncated: line {_line_count(path)} has {n_last} of the header's "
            f"{n_header} fields; re-create the file"
        )


def _line_count(path: Path) -> int:
    """Lines in a file (the last one counted with or without its line break), for error messages."""
    with open(path, "rb") as fh:
        return sum(1 for _ in fh)


def table_kind(df) -> str:
    """training | serving | other: which cost model wrote a table (by its defining columns)."""
    if "tpot_ms" in df.columns:
        return "serving"
    if "time_step_s" in df.columns or "mem_activations_gib" in df.columns:
        return "training"
    return "other"
