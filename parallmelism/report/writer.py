"""Atomic table writers: write to a temporary file beside the target, then rename.

A failed or interrupted run never leaves a partial file at the target path. CSV goes through
pyarrow's writer (about 10x faster than pandas `to_csv`); Parquet through pyarrow too. Both
carry the tool and schema version (a `# parallmelism ...` first line is NOT used for CSV, which
must stay plain: the versions are in the Parquet metadata and in the CSV columns
`tool_version`/`schema_version`).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Iterator

from .. import SCHEMA_VERSION, __version__
from ..errors import UserError
from ..stop import note_target, raise_if_stopped


def arrow_table(df):
    """The Arrow table written for df: the frame plus tool_version and schema_version columns
    and the versions in the schema metadata. `df` may be a `Records` table (report/records.py)."""
    import pyarrow as pa

    from .records import as_frame

    df = as_frame(df).copy()
    df["tool_version"] = __version__
    df["schema_version"] = SCHEMA_VERSION
    table = _small_strings(pa.Table.from_pandas(df, preserve_index=False))
    meta = dict(table.schema.metadata or {})
    meta.update(
        {b"parallmelism_version": __version__.encode(), b"parallmelism_schema_version": str(SCHEMA_VERSION).encode()}
    )
    return table.replace_schema_metadata(meta)


def versioned_columns(columns: list, rows: int):
    """The Arrow table `arrow_table` writes, built from Arrow columns without pandas: `columns`
    is [(name, pyarrow array, categorical info or None)] in order; the version columns and the
    schema metadata (the description of the frame `pyarrow.Table.from_pandas` stores, then the
    versions) are added as `arrow_table` adds them, so the files written either way are the same
    bytes (tests/test_search_stream.py checks both against each other)."""
    import numpy as np
    import pyarrow as pa

    from .arrow import numpy_to_arrow, string_array

    version = pa.DictionaryArray.from_arrays(numpy_to_arrow(np.zeros(rows, np.int8)), string_array([__version__]))
    columns = [
        *columns,
        ("tool_version", version.cast(pa.string()), None),
        ("schema_version", numpy_to_arrow(np.full(rows, SCHEMA_VERSION, dtype=np.int64)), None),
    ]
    versions = {
        b"parallmelism_version": __version__.encode(),
        b"parallmelism_schema_version": str(SCHEMA_VERSION).encode(),
    }
    return described_table(columns, versions)


def described_table(columns: list, metadata: dict | None = None):
    """Arrow table of `columns` ([(name, pyarrow array, categorical info or None)], in order) with
    the `pandas` schema metadata `pyarrow.Table.from_pandas(df, preserve_index=False)` stores for
    such a frame, then `metadata`: a frame's table built without pandas."""
    import pyarrow as pa

    meta = {b"pandas": _pandas_metadata(columns), **(metadata or {})}
    schema = pa.schema([pa.field(name, array.type) for name, array, _ in columns], metadata=meta)
    return pa.Table.from_arrays([array for _, array, _ in columns], schema=schema)


def pandas_text_type():
    """The Arrow type `pyarrow.Table.from_pandas` gives a text column: large_string from pandas 3
    (its `str` dtype), string before."""
    import pyarrow as pa

    return pa.large_string() if int(_pandas_version().split(".")[0]) >= 3 else pa.string()


@functools.cache
def _pandas_version() -> str:
    """The installed pandas' version, read once: importlib.metadata parses the package's METADATA
    file on every call (~2 ms, paid per chunk by a sweep: ~1 s of a 10^7-row Parquet sweep)."""
    from importlib.metadata import version

    return version("pandas")


def _pandas_metadata(columns: list) -> bytes:
    """The `pandas` schema metadata `pyarrow.Table.from_pandas(df, preserve_index=False)` stores
    for a frame of these columns (numbers, booleans, categoricals and the text version column),
    so a reader restores the same dtypes. Mirrors pyarrow's `pandas_compat.construct_metadata`."""
    import json

    import pyarrow as pa

    pandas_version = _pandas_version()
    text = ("object", "str") if int(pandas_version.split(".")[0]) >= 3 else ("unicode", "object")
    described = []
    for name, array, categorical in columns:
        t = array.type
        if pa.types.is_dictionary(t):
            kinds = ("categorical", str(t.index_type))
        elif pa.types.is_string(t) or pa.types.is_large_string(t):
            kinds = text
        elif pa.types.is_boolean(t) or pa.types.is_integer(t) or pa.types.is_floating(t):
            kinds = (str(t.to_pandas_dtype().__name__),) * 2
        else:
            raise TypeError(f"no pandas description for column {name!r} of type {t}")
        described.append(
            {"name": name, "field_name": name, "pandas_type": kinds[0], "numpy_type": kinds[1], "metadata": categorical}
        )
    return json.dumps(
        {
            "index_columns": [],
            "column_indexes": [],
            "columns": described,
            "attributes": {},
            "creator": {"library": "pyarrow", "version": pa.__version__},
            "pandas_version": pandas_version,
        }
    ).encode("utf8")


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
    check_writable_target(path)
    return path, TABLE_SUFFIXES[suffix]


# What a temporary beside a target adds to its name (temp_beside): "." + ".<pid>.<8 hex>.tmp", and
# ".parts" for the parallel writers' folder beside it (search/sinks.py TableSink.parts).
TEMP_NAME_EXTRA = 1 + 1 + 10 + 1 + 8 + 4 + 6
PATH_MAX = 4096  # Linux's limit on a whole path (bytes, with its terminating NUL)


def check_writable_target(path: Path, folder_target: bool = False) -> None:
    """A target we may write (a file, or a folder when `folder_target`), checked before any
    computation: every name in the path, and the temporary's beside it, fits the file system's
    limit; an existing target is of that kind, never a device, pipe or socket (a rename onto it
    would replace it); the nearest existing folder is a writable folder."""
    name_max = 255  # NAME_MAX of Linux, macOS and Windows file systems
    if not folder_target:  # a file renamed into place; an interrupt after it says so (stop.written_targets)
        note_target(path)  # (a folder target may be a container others write into: a sweep dir)
    short = f"{str(path)[:60]!r}" + ("..." if len(str(path)) > 60 else "")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in str(path)):  # a newline, tab or escape in a name
        raise UserError(f"output path {short} holds a control character (newline, tab, ...); give a plain name")
    if any(len(os.fsencode(part)) > name_max for part in path.parts):
        raise UserError(f"cannot write {short}: a name in the path is longer than {name_max} bytes")
    if len(os.fsencode(str(path.absolute()))) + TEMP_NAME_EXTRA >= PATH_MAX:  # was the OS's "File name too long"
        raise UserError(f"cannot write {short}: the path is longer than the {PATH_MAX} bytes a file system takes")
    if len(os.fsencode(path.name)) + TEMP_NAME_EXTRA > name_max:
        raise UserError(
            f"cannot write {short}: its name must be at most {name_max - TEMP_NAME_EXTRA} bytes "
            "(the temporary written beside it adds a prefix and a suffix)"
        )
    if path.exists():  # (a dangling link is replaced like a missing file; a link's target never)
        kind_ok = path.is_dir() if folder_target else path.is_file()
        if not kind_ok:
            what = "folder" if folder_target else "file"
            found = "a file" if path.is_file() else "a folder" if path.is_dir() else "a device, pipe or socket"
            raise UserError(f"output path {str(path)!r} is {found}; give a {what} name")
        # the rename would replace a read-only file as readily as any other (it needs only the
        # folder's permission, and root's access check always passes): its mode bits are the owner's word
        if not folder_target and (not path.stat().st_mode & 0o222 or not os.access(path, os.W_OK)):
            raise UserError(f"output path {str(path)!r} is a read-only file; make it writable or give another name")
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise UserError(f"cannot write {str(path)!r}: {str(folder)!r} is a file, not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UserError(f"cannot write {str(path)!r}: {str(folder)!r} is not writable")


def check_not_an_input(out: str | Path, inputs, option: str = "--out") -> None:
    """An output path that is one of the command's input files (the same file by inode: through a
    link, a relative path or another spelling) is refused before anything is read or written:
    writing the result there would replace the input (`validate --cases F --out F`)."""
    out = Path(out)
    for given in inputs:
        try:
            same = os.path.samefile(out, given)
        except (OSError, ValueError):  # either is missing (a new output cannot be an input)
            continue
        if same:
            raise UserError(
                f"{option} {str(out)!r} is the input file {str(given)!r}; writing there would replace it, "
                "give another output path"
            )


def check_dataset_folder(path: str | Path) -> Path:
    """--full-output: a folder we may replace. It is new, empty, or a dataset this tool wrote
    (only `model=NAME` folders in it): replacing it never deletes anything else."""
    path = Path(path)
    check_writable_target(path, folder_target=True)
    note_target(path)  # renamed into place whole, as a file is
    if path.is_dir():
        entries = list(path.iterdir())
        if any(not (e.is_dir() and e.name.startswith("model=")) for e in entries):
            raise UserError(
                f"--full-output {str(path)!r} is a folder that holds other files; give a new folder "
                "(an existing one is replaced only when it is empty or a dataset this tool wrote)"
            )
    return path


def temp_beside(path: Path) -> Path:
    """The name of a new temporary beside `path` (`.NAME.<pid>.<random>.tmp`). Only a name: a
    writer records it first and creates it second, so an interrupt at any moment after the
    creation finds it recorded and removes it."""
    import secrets  # here, not at the top: hmac and _hashlib are ~3 ms of every command's start-up

    return path.parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"


# temp_beside's names (and the parallel writers' `.parts` folder beside one): what a run killed
# outright (SIGKILL, power loss) leaves behind, and what the next run into that folder removes
TEMP_NAME = re.compile(r"^\.(?P<name>.+)\.(?P<pid>[0-9]+)\.[0-9a-f]{8}\.tmp(?:\.parts)?$")
STALE_TEMP_S = 3600  # untouched this long: no writer is streaming into it (they write chunk by chunk)


def _pid_alive(pid: int) -> bool:
    """Whether a process `pid` runs on this machine (True, so kept, where that cannot be told)."""
    if pid <= 0:  # no writer's pid (kill would signal a process group)
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):  # another user's process, or no pid we could have had: keep
        return True
    return True


def _newest_mtime(path: Path) -> float:
    newest = path.lstat().st_mtime
    if path.is_dir() and not path.is_symlink():
        for dirpath, dirnames, filenames in os.walk(path):
            for n in dirnames + filenames:
                try:
                    newest = max(newest, os.lstat(os.path.join(dirpath, n)).st_mtime)
                except OSError:
                    continue
    return newest


def remove_stale_temps(folder: Path) -> list[Path]:
    """Remove the temporaries that killed runs left in `folder`: only names temp_beside makes
    (TEMP_NAME), whose writing process is gone from this machine and which nothing has touched
    for STALE_TEMP_S (a writer on another node sharing the folder keeps its temporary fresh).
    Anything else, a user's file above all, is never touched. Returns what was removed."""
    import time

    removed: list[Path] = []
    try:
        names = os.listdir(folder)
    except OSError:
        return removed
    now = time.time()
    for name in names:
        m = TEMP_NAME.match(name)
        if m is None or _pid_alive(int(m.group("pid"))):
            continue
        path = folder / name
        try:
            if path.is_symlink() or now - _newest_mtime(path) < STALE_TEMP_S:  # ours are never links
                continue
        except OSError:
            continue
        remove_temp(path)
        removed.append(path)
    return removed


# Folders this process has swept already: a study writes thousands of partitions into one data/ folder,
# and listing it again for each (27,732 points at 10^10 layouts: ~4 * 10^8 names matched) would cost more
# than the points; a killed run's temporaries are still removed by the first write of each later process.
_SWEPT_FOLDERS: set[str] = set()


def create_temp(tmp: Path, folder: bool = False) -> None:
    """Create the temporary file (or folder) with the permissions the umask allows (0666 / 0777
    minus the umask, as any new file); never an existing one. Stale temporaries of killed runs
    in that folder go first (remove_stale_temps, once per folder and process)."""
    swept = os.fspath(tmp.parent)
    if swept not in _SWEPT_FOLDERS:
        remove_stale_temps(tmp.parent)
        _SWEPT_FOLDERS.add(swept)
    if folder:
        tmp.mkdir(mode=0o777)
    else:
        os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))


def remove_temp(tmp: Path) -> None:
    """Remove a temporary file or folder, if it is there."""
    try:
        if tmp.is_dir():
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            tmp.unlink(missing_ok=True)
    except OSError:  # a read-only folder, where it could not have been created anyway
        pass


@contextmanager
def atomic_write(path: str | Path, what: str = "file") -> Iterator[Path]:
    """Yield a temporary path beside `path` to write; on success it is renamed onto `path`, on
    any failure or interrupt (SIGINT, and SIGTERM/SIGHUP raised as SystemExit by the CLI) it is
    removed and `path` is left as it was. A failed write is one sentence (UserError)."""
    path = Path(path)
    check_writable_target(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(
            f"cannot write {str(path)!r}: cannot create the folder {str(path.parent)!r}: {write_error_reason(exc)}"
        ) from None
    tmp = temp_beside(path)
    try:
        try:
            create_temp(tmp)
        except OSError as exc:
            import errno

            # a folder that exists yet refuses a new file as missing: a kernel file system (/proc, /sys)
            why = "it takes no new files" if exc.errno == errno.ENOENT and path.parent.is_dir() else None
            raise UserError(f"cannot write to {str(path.parent)!r}: {why or write_error_reason(exc)}") from None
        yield tmp
        raise_if_stopped()  # a stop signal whose exception Python swallowed still stops the commit
        os.replace(tmp, path)
    except OSError as exc:  # disk full, quota, read-only target, ...: the old file stays as it was
        remove_temp(tmp)
        raise UserError(
            f"cannot write {str(path)!r}: {write_error_reason(exc)}; nothing was written "
            f"(an existing {what} there is unchanged)"
        ) from None
    except BaseException:
        remove_temp(tmp)
        raise


@contextmanager
def atomic_writes(paths: list) -> Iterator[list[Path]]:
    """`atomic_write` for files that belong together (a table and its summary, an accelerator file
    and its kernel table): every temporary is written before any is renamed, so a failure or an
    interrupt while writing leaves none of the targets changed (the renames follow one another
    right after)."""
    with ExitStack() as stack:
        temps = [stack.enter_context(atomic_write(p)) for p in paths]
        yield temps
    # each atomic_write renamed its temporary on the way out, after every one had been written


def write_table(df, path: str | Path, fmt: str | None = None) -> Path:
    """Write df to path (csv or parquet, from fmt or the suffix) atomically. Returns the path."""
    path = Path(path)
    with atomic_write(path) as tmp:
        _write_table_into(df, tmp, fmt or _format_of(path))
    return path


def write_table_and_text(df, path: str | Path, text: str, text_path: str | Path) -> None:
    """A table and the text that goes with it (a plan and its summary), both or neither."""
    path = Path(path)
    with atomic_writes([path, Path(text_path)]) as (tmp, text_tmp):
        _write_table_into(df, tmp, _format_of(path))
        text_tmp.write_text(text, encoding="utf-8")


def _format_of(path: Path) -> str:
    return TABLE_SUFFIXES.get(path.suffix.lower(), "csv")


def _write_table_into(df, tmp: Path, fmt: str) -> None:
    table = arrow_table(df)
    if fmt == "parquet":
        import pyarrow.parquet as pq

        pq.write_table(table, tmp)
    else:
        import pyarrow.csv as pacsv

        pacsv.write_csv(plain_strings(table), tmp)


def write_text(text: str, path: str | Path) -> Path:
    """Write a text file atomically (UTF-8). Returns the path."""
    with atomic_write(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def write_texts(texts: dict) -> None:
    """Text files (path -> text) that belong together, all or none (`atomic_writes`)."""
    paths = list(texts)
    with atomic_writes(paths) as temps:
        for path, tmp in zip(paths, temps):
            tmp.write_text(texts[path], encoding="utf-8")


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
        check_csv_complete(path)
    try:
        df = pd.read_parquet(path) if path.suffix.lower() == ".parquet" else pd.read_csv(path)
    except Exception as exc:
        raise UserError(f"cannot read {str(path)!r}: {str(exc).splitlines()[0]}") from None
    _check_numeric_columns(df, path)
    return df


# Columns whose names say they hold a quantity (a unit or a count): text there is an edited or
# corrupt file, never a value to compare or merge.
NUMERIC_PREFIXES = ("time_", "mem_", "params_", "link_", "flops_", "hbm_")
TEXT_COLUMNS = {"mem_stage"}  # which pipeline stage the memory columns report: first | second | last


def quantity_columns(df) -> list[str]:
    """The columns of df whose names say they hold a quantity (NUMERIC_PREFIXES)."""
    return [c for c in df.columns if c not in TEXT_COLUMNS and str(c).startswith(NUMERIC_PREFIXES)]


def _check_numeric_columns(df, path: Path) -> None:
    import pandas as pd

    for col in quantity_columns(df):
        if not pd.api.types.is_numeric_dtype(df[col].dtype):
            values = df[col]
            bad = values[pd.to_numeric(values, errors="coerce").isna() & values.notna()]
            if len(bad):
                raise not_a_number(path, col, bad.iloc[0], int(bad.index[0]) + 1)


def not_a_number(path: str | Path, col: str, value, row: int, what: str = "a number") -> UserError:
    """The one sentence for a value that is not the number its column holds: file, column, value
    and row (1 = the first row under the header)."""
    value = value.item() if hasattr(value, "item") else value  # numpy scalar: nan, not np.float64(nan)
    holds = "is blank" if value is None or (isinstance(value, str) and not value.strip()) else f"holds {value!r}"
    return UserError(f"{str(path)!r}: column {col} {holds} (row {row}) where {what} belongs")


# The largest measured value a case file may state, in any of its units (GiB, s, ms, tokens/s):
# no measurement of one run comes near it, and past ~1e306 the error 100·(p − m)/m overflows to inf.
MEASURED_MAX = 1e12


def positive_number(path: str | Path, col: str, value, row: int, largest: float = MEASURED_MAX) -> float:
    """value as a finite number in (0, largest] (a measurement, a quantity), else not_a_number's
    sentence."""
    import math

    try:
        number = float(value)
    except (TypeError, ValueError):
        raise not_a_number(path, col, value, row) from None
    if not (math.isfinite(number) and number > 0):
        raise not_a_number(path, col, value, row, "a finite number > 0")
    if number > largest:  # finite, but past any measurement (and 1e308 overflows the error to inf)
        raise not_a_number(path, col, value, row, f"a number > 0 and at most {largest:g}")
    return number


def check_csv_complete(path: Path) -> None:
    """A CSV ends with a line break and its last row has the header's field count; else one
    sentence naming the file and the line (a copy cut short, a run killed mid-write)."""
    import csv

    with open(path, "rb") as fh:
        head = fh.read(65536)
        if b"\0" in head or not _is_text(head):  # an image, an archive, a Parquet file named .csv
            raise UserError(f"{str(path)!r} is not a text file (UTF-8 CSV); give a .csv table")
        fh.seek(0)
        header = b""
        for header in fh:  # blank lines before the header are skipped, as the CSV reader skips them
            if header.strip():
                break
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


def _is_text(head: bytes) -> bool:
    """Whether a file's first bytes decode as UTF-8 (a multi-byte character cut at the end allowed)."""
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start >= len(head) - 3 and len(head) == 65536
    return True


def _line_count(path: Path) -> int:
    """Lines in a file (the last one counted with or without its line break), for error messages."""
    with open(path, "rb") as fh:
        return sum(1 for _ in fh)


def table_kind(df) -> str:
    """training | serving | unrecognised: which cost model wrote a table (by its defining columns)."""
    if "tpot_ms" in df.columns:
        return "serving"
    if "time_step_s" in df.columns or "mem_activations_gib" in df.columns:
        return "training"
    return "unrecognised"
