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
from ..report.writer import create_temp, remove_temp, temp_beside, write_error_reason
from .collectors import Collector
from .frames import arrow_of_run, dataset_arrow_of_run


def _write_failed(path: Path, exc: OSError, what: str = "file") -> UserError:
    return UserError(
        f"cannot write {str(path)!r}: {write_error_reason(exc)}; nothing was written "
        f"(an existing {what} there is unchanged)"
    )


def _chunk_table(run, cols: dict):
    """Arrow table of one chunk as the whole-table writer writes it (version columns included),
    built from the evaluated arrays (no DataFrame per chunk). CSV takes it as it is: pyarrow's CSV
    writer prints a dictionary column's values, the bytes of the plain-string cast it was given
    before (which cost ~0.6 µs a row)."""
    return arrow_of_run(run, cols)


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
        table = _chunk_table(self.runs[int(cols["_run"][0])], cols)
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


class _OneWriteAhead:
    """Writes run on a thread of their own, one at a time, in the order given; `submit` returns
    once the previous write is done, so at most one chunk is being written while the caller
    evaluates the next (pyarrow's Parquet and CSV encoders release the GIL: on two free cores the
    encoding, ~1.4 µs a row for Parquet and ~5 µs for CSV, overlaps the cost model instead of
    following it). The chunk in flight is the one the driver still holds while it evaluates the
    next, so memory is not raised by a chunk. A failed write raises at the next `submit` or `wait`.
    """

    def __init__(self):
        self._executor = None
        self._pending = None

    def submit(self, fn, *args) -> None:
        self.wait()
        if self._executor is None:  # created at the first write: after the worker pool has forked
            from concurrent.futures import ThreadPoolExecutor

            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="table-sink")
        self._pending = self._executor.submit(fn, *args)

    def wait(self) -> None:
        """Until the write in flight is done; its error, if any, raised here."""
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.result()

    def shutdown(self) -> None:
        """Wait for the write in flight (its error dropped: the caller is already failing) and stop
        the thread."""
        try:
            self.wait()
        except Exception:  # noqa: BLE001 - the caller is aborting and removes what was written
            pass
        finally:
            if self._executor is not None:
                self._executor.shutdown(wait=True)
                self._executor = None


class TableSink(Collector):
    """Every row, streamed to one CSV or Parquet file (schema order, version columns).

    The file is written on a thread of its own, one chunk behind the evaluation (`_OneWriteAhead`);
    what stays in memory across chunks is the Parquet writer's footer (one row group per chunk:
    pyarrow keeps ~60 KB of metadata per row group until `close`, ~30 MB at 10^7 rows)."""

    def __init__(self, path: str | Path, fmt: str, runs: list):
        self.path, self.fmt, self.runs = Path(path), fmt, runs
        self.rows = 0
        self._columns: list[str] | None = None
        self._writer: Any = None  # the open CSV file (pyarrow OSFile) or pyarrow ParquetWriter
        self._thread = _OneWriteAhead()
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
        self._append(_chunk_table(self.runs[int(cols["_run"][0])], cols))

    def _check_columns(self, columns: list[str]) -> None:
        if self._columns is None:
            self._columns = columns
        elif columns != self._columns:
            raise UserError(
                f"cannot write {str(self.path)!r}: the sweep's points produce different columns "
                "(one table per workload kind); sweep them separately or with -m"
            )

    def _open_writer(self, schema) -> None:
        """The CSV file or ParquetWriter, opened at the first chunk (the Parquet schema is its)."""
        if self._writer is not None:
            return
        import pyarrow as pa

        try:
            if self.fmt == "csv":
                self._writer = pa.OSFile(str(self._temp()), "wb")  # written without the GIL
            else:
                import pyarrow.parquet as pq

                self._writer = pq.ParquetWriter(self._temp(), schema)
        except OSError as exc:
            raise _write_failed(self.path, exc) from None

    def _append(self, table, after=None) -> None:
        """Queue one chunk's table for writing; `after()` runs once it is written (a worker's part
        file closed and removed)."""
        self._check_columns(table.column_names)
        self._open_writer(table.schema)
        header = self.rows == 0
        self.rows += table.num_rows
        self._thread.submit(self._write, table, header, after)

    def _write(self, table, header: bool, after) -> None:
        """On the sink's thread: one chunk's rows into the file."""
        try:
            if self.fmt == "csv":
                import pyarrow.csv as pacsv

                pacsv.write_csv(table, self._writer, write_options=pacsv.WriteOptions(include_header=header))
            else:
                self._writer.write_table(table)
        except OSError as exc:
            raise _write_failed(self.path, exc) from None
        if after is not None:
            after()

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
            self._open_writer(None)
            skip_header = self.rows > 0  # the header is written once, with the first part
            self.rows += rows
            self._thread.submit(self._copy_part, part, skip_header)
        else:
            import pyarrow as pa

            source = pa.memory_map(str(part))  # the table's buffers: closed once it is written

            def done() -> None:
                source.close()
                part.unlink()

            self._append(pa.ipc.open_file(source).read_all(), done)

    def _copy_part(self, part: Path, skip_header: bool) -> None:
        """On the sink's thread: a worker's CSV text appended to the file."""
        try:
            with open(part, "rb") as fh:
                if skip_header:
                    fh.readline()
                while block := fh.read(1 << 20):
                    self._writer.write(block)
        except OSError as exc:
            raise _write_failed(self.path, exc) from None
        part.unlink()

    def close(self) -> Path | None:
        """Rename the file into place; with no row at all, write nothing (the caller says why)."""
        if self.rows == 0:
            self.abort()
            return None
        self._thread.wait()
        self._thread.shutdown()
        if self._writer is not None:
            try:
                self._writer.close()
            except OSError as exc:
                raise _write_failed(self.path, exc) from None
            self._writer = None
        shutil.rmtree(self.parts, ignore_errors=True)
        raise_if_stopped()
        os.replace(self._temp(), self.path)
        return self.path

    def abort(self) -> None:
        self._thread.shutdown()
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
    import pyarrow.parquet as pq

    if not cols or len(cols["_row"]) == 0:
        return 0
    run = runs[int(cols["_run"][0])]
    table = dataset_arrow_of_run(run, cols)  # no DataFrame: pandas is not imported for it
    folder = tmp / f"model={run.model.name}" / f"hardware={run.hardware.name}" / f"workload={run.workload.kind}"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, folder / f"part-{_chunk_name(cols)}.parquet")
    except OSError as exc:  # disk full, quota, ...: abort() removes the temporary folder
        raise UserError(
            f"cannot write {str(tmp.parent)!r}: {write_error_reason(exc)}; nothing was written "
            "(an existing dataset there is unchanged)"
        ) from None
    return table.num_rows


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
