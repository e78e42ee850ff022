"""Sinks: collectors that stream every row they receive to disk, chunk by chunk.

  TableSink           one .csv or .parquet file (`sweep`): memory bounded by the chunk size
  ParquetDatasetSink  a hive-partitioned Parquet dataset (`--full-output` of the searches)

Both write into a temporary file or folder beside the target and rename it into place at
`close()`; a failed or interrupted run removes it (`abort()`), so nothing half-written is left at
the target. In worker processes, `spawn()` gives a part writer that writes one file per chunk
into the sink's temporary folder (CSV text, or an Arrow IPC file that the sink encodes as Parquet);
the sink appends the parts in partition order (`merge`), which gives the same bytes as a serial run.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from ..errors import UserError
from ..stop import raise_if_stopped
from ..report.writer import create_temp, plain_strings, remove_temp, temp_beside, write_error_reason
from .collectors import Collector
from .frames import arrow_of_run, frame_of_run


def _write_failed(path: Path, exc: OSError, what: str = "file") -> UserError:
    return UserError(
        f"cannot write {str(path)!r}: {write_error_reason(exc)}; nothing was written "
        f"(an existing {what} there is unchanged)"
    )


def _chunk_table(run, cols: dict, fmt: str):
    """Arrow table of one chunk as the whole-table writer writes it (version columns included),
    built from the evaluated arrays (no DataFrame per chunk)."""
    table = arrow_of_run(run, cols)
    return plain_strings(table) if fmt == "csv" else table


def _chunk_name(cols: dict) -> str:
    """run, partition and chunk of a chunk (from its first row number): a stable file name."""
    r = int(cols["_run"][0])
    row = int(cols["_row"][0])
    return f"{r:04d}-{row >> 32:06d}-{row & 0xFFFFFFFF:010d}"


class _PartWriter(Collector):
    """Worker side of a TableSink: one file per chunk in the sink's temporary folder."""

    def __init__(self, folder: Path, runs: list, fmt: str):
        self.folder, self.runs, self.fmt = folder, runs, fmt
        self.paths: list[tuple[str, int, list[str]]] = []

    def update(self, cols: dict) -> None:
        if not cols or len(cols["_row"]) == 0:
            return
        path = self.folder / f"part-{_chunk_name(cols)}.{'csv' if self.fmt == 'csv' else 'arrow'}"
        table = _chunk_table(self.runs[int(cols["_run"][0])], cols, self.fmt)
        try:
            if self.fmt == "csv":  # the text, formatted here in parallel; the sink copies the bytes
                import pyarrow.csv as pacsv

                pacsv.write_csv(table, path)
            else:  # Arrow IPC, not Parquet: the sink encodes Parquet once (it did decode + re-encode)
                import pyarrow as pa

                with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as ipc:
                    ipc.write_table(table)
        except OSError as exc:
            raise _write_failed(path, exc) from None
        self.paths.append((str(path), table.num_rows, table.column_names))

    def result(self):
        return self.paths


class TableSink(Collector):
    """Every row, streamed to one CSV or Parquet file (schema order, version columns)."""

    def __init__(self, path: str | Path, fmt: str, runs: list):
        self.path, self.fmt, self.runs = Path(path), fmt, runs
        self.rows = 0
        self._columns: list[str] | None = None
        self._writer: Any = None  # the open CSV file or pyarrow ParquetWriter
        self.tmp: Path | None = None

    def open(self) -> None:
        self.tmp = temp_beside(self.path)  # recorded before it exists: abort() always finds it
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            create_temp(self.tmp)
        except OSError as exc:
            raise UserError(f"cannot write to {str(self.path.parent)!r}: {write_error_reason(exc)}") from None

    def _temp(self) -> Path:
        assert self.tmp is not None, "open() first"
        return self.tmp

    @property
    def parts(self) -> Path:
        """Folder of the workers' part files, beside the temporary file."""
        return self._temp().with_name(self._temp().name + ".parts")

    # -- serial
    def update(self, cols: dict) -> None:
        if not cols or len(cols["_row"]) == 0:
            return
        self._append(_chunk_table(self.runs[int(cols["_run"][0])], cols, self.fmt))

    def _check_columns(self, columns: list[str]) -> None:
        if self._columns is None:
            self._columns = columns
        elif columns != self._columns:
            raise UserError(
                f"cannot write {str(self.path)!r}: the sweep's points produce different columns "
                "(one table per workload kind); sweep them separately or with -m"
            )

    def _append(self, table) -> None:
        self._check_columns(table.column_names)
        try:
            if self.fmt == "csv":
                import pyarrow.csv as pacsv

                if self._writer is None:
                    self._writer = open(self._temp(), "wb")
                opts = pacsv.WriteOptions(include_header=self.rows == 0)
                pacsv.write_csv(table, self._writer, write_options=opts)
            else:
                import pyarrow.parquet as pq

                if self._writer is None:
                    self._writer = pq.ParquetWriter(self._temp(), table.schema)
                self._writer.write_table(table)
        except OSError as exc:
            raise _write_failed(self.path, exc) from None
        self.rows += table.num_rows

    # -- workers
    def spawn(self) -> Collector:
        try:
            self.parts.mkdir(exist_ok=True)
        except OSError as exc:
            raise UserError(f"cannot write to {str(self.path.parent)!r}: {exc.strerror}") from None
        return _PartWriter(self.parts, self.runs, self.fmt)

    def merge(self, result) -> None:
        for part, rows, columns in result or []:
            self._append_part(Path(part), rows, columns)

    def _append_part(self, part: Path, rows: int, columns: list[str]) -> None:
        if self.fmt == "csv":
            self._check_columns(columns)
            try:
                if self._writer is None:
                    self._writer = open(self._temp(), "wb")
                with open(part, "rb") as fh:
                    if self.rows:
                        fh.readline()  # the header is written once, with the first part
                    shutil.copyfileobj(fh, self._writer)
            except OSError as exc:
                raise _write_failed(self.path, exc) from None
            self.rows += rows
        else:
            import pyarrow as pa

            with pa.memory_map(str(part)) as source:
                self._append(pa.ipc.open_file(source).read_all())
        part.unlink()

    def close(self) -> Path | None:
        """Rename the file into place; with no row at all, write nothing (the caller says why)."""
        if self.rows == 0:
            self.abort()
            return None
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        shutil.rmtree(self.parts, ignore_errors=True)
        raise_if_stopped()
        os.replace(self._temp(), self.path)
        return self.path

    def abort(self) -> None:
        try:
            if self._writer is not None:
                self._writer.close()
        except Exception:  # noqa: BLE001 - the temporary file is removed whatever the writer says
            pass
        self._writer = None
        if self.tmp is not None:
            remove_temp(self.tmp)
            remove_temp(self.parts)

    def result(self):
        return self.rows


class _DatasetPartWriter(Collector):
    """Worker side of a ParquetDatasetSink: writes its chunks straight into the temporary folder."""

    def __init__(self, tmp: Path, runs: list):
        self.tmp, self.runs, self.rows = tmp, runs, 0

    def update(self, cols: dict) -> None:
        self.rows += _write_dataset_chunk(self.tmp, self.runs, cols)

    def result(self):
        return self.rows


def _write_dataset_chunk(tmp: Path, runs: list, cols: dict) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not cols or len(cols["_row"]) == 0:
        return 0
    run = runs[int(cols["_run"][0])]
    df = frame_of_run(run, cols)
    df = df.drop(columns=[c for c in ("model", "hardware", "workload") if c in df.columns])
    folder = tmp / f"model={run.model.name}" / f"hardware={run.hardware.name}" / f"workload={run.workload.kind}"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pandas(df, preserve_index=False), folder / f"part-{_chunk_name(cols)}.parquet")
    except OSError as exc:  # disk full, quota, ...: abort() removes the temporary folder
        raise UserError(
            f"cannot write {str(tmp.parent)!r}: {write_error_reason(exc)}; nothing was written "
            "(an existing dataset there is unchanged)"
        ) from None
    return len(df)


class ParquetDatasetSink(Collector):
    """Full output: every chunk becomes one file of a hive-partitioned Parquet dataset.

    Layout: PATH/model=NAME/hardware=NAME/workload=KIND/part-RUN-PARTITION-ROW.parquet (read it back
    with `pandas.read_parquet(PATH)` or `parallmelism merge PATH --out FILE`)."""

    def __init__(self, path: str | Path, runs: list):
        self.path, self.runs, self.rows = Path(path), runs, 0
        self.tmp: Path | None = None

    def open(self) -> None:
        self.tmp = temp_beside(self.path)  # recorded before it exists: abort() always finds it
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            create_temp(self.tmp, folder=True)
        except OSError as exc:
            raise UserError(f"cannot write to {str(self.path.parent)!r}: {write_error_reason(exc)}") from None

    def _temp(self) -> Path:
        assert self.tmp is not None, "open() first"
        return self.tmp

    def update(self, cols: dict) -> None:
        self.rows += _write_dataset_chunk(self._temp(), self.runs, cols)

    def spawn(self) -> Collector:
        return _DatasetPartWriter(self._temp(), self.runs)

    def merge(self, result) -> None:
        self.rows += int(result or 0)

    def close(self) -> Path:
        raise_if_stopped()
        if self.path.is_symlink() or self.path.is_file():  # a link is replaced, its target never
            self.path.unlink()
        elif self.path.exists():
            shutil.rmtree(self.path)
        os.replace(self._temp(), self.path)
        return self.path

    def abort(self) -> None:
        if self.tmp is not None:
            remove_temp(self.tmp)

    def result(self):
        return self.rows
