"""Where a Parquet sweep's peak memory goes, at 10^5 and 10^7 rows (issue 29: "flat peak RSS, 10^5 -> 10^7
rows within 1.2x"). Prints figures, asserts nothing.

    python benchmarks/sweep_memory.py            # the 10^5 sweep and the ~9M-row one of bench_cli.py
    python benchmarks/sweep_memory.py --only 1e5

Each sweep runs in a fresh process (`-j 1`, as bench_cli's) with a hook around the driver's cost-model calls
(search/chunks.py `evaluate_chunks`) that records, after each call: its rows, the process's RSS and high-water
mark (/proc/self/status), and glibc's heap (mallinfo2: bytes the arenas hold, bytes in use). Then, apart, the
Parquet writer's footer: pyarrow keeps each row group's metadata in memory until `close` (the file's footer);
its cost per row group is measured by writing row groups of the sweep's own schema and reading glibc's in-use
bytes, which no writer option changes (statistics, dictionary, compression, schema storing all give the same).

What the figures say (2026-11-27, pyarrow 26.0.1): the footer is ~62 KiB a row group (73 columns), so the
~9M-row sweep's 468 row groups (one per chunk: the row groups are part of the bytes the sweeps must keep)
hold ~28 MiB at the end: 14 % of the 10^5 sweep's ~196 MiB peak, before any other growth. The rest of the gap
is the largest cost-model calls (~1.1 KB of temporaries a row, up to EVALUATE_ROWS rows) falling after
pyarrow is loaded, where the 10^5 sweep's one full-size call comes before it, and the previous call's columns
held while its last chunk is written.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_cli import SWEEPS  # noqa: E402  (the same sweeps as the CLI benchmark)

# glibc's heap counters (mallinfo2), for both scripts below
_MALLINFO = r"""
import ctypes

class MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in
                "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]

libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = MallInfo2
"""

_PROBE = (
    _MALLINFO
    + r"""
import json, sys
import parallmelism.search.chunks as chunks

MIB = 2 ** 20

def status_mib(key):
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")

calls = []
evaluate = chunks.evaluate_chunks

def recorded(run, layout_chunks, *args, **kwargs):
    out = evaluate(run, layout_chunks, *args, **kwargs)
    heap = libc.mallinfo2()
    calls.append({
        "rows": sum(len(numbers) for _, numbers in layout_chunks),
        "pyarrow": "pyarrow" in sys.modules,
        "rss": status_mib("VmRSS"), "hwm": status_mib("VmHWM"),
        "heap": (heap.arena + heap.hblkhd) / MIB, "in_use": (heap.uordblks + heap.hblkhd) / MIB,
    })
    return out

chunks.evaluate_chunks = recorded
from parallmelism.cli.app import main
out_path = sys.argv[1]
sys.argv = ["parallmelism", *sys.argv[2:]]
try:
    main()
except SystemExit:
    pass
import pyarrow.parquet as pq
meta = pq.ParquetFile(out_path).metadata
print("PROBE " + json.dumps({"calls": calls, "row_groups": meta.num_row_groups, "columns": meta.num_columns,
                             "rows": meta.num_rows, "hwm": status_mib("VmHWM")}))
"""
)

_FOOTER = (
    _MALLINFO
    + r"""
import sys
import pyarrow.parquet as pq

table = pq.ParquetFile(sys.argv[1]).read_row_group(0)  # the sweep's schema and values, one chunk's rows
writer = pq.ParquetWriter(sys.argv[2], table.schema)
before = libc.mallinfo2().uordblks
for i in range(200):
    writer.write_table(table.slice((100 * i) % max(table.num_rows - 100, 1), 100))
print((libc.mallinfo2().uordblks - before) / 200 / 1024)
writer.close()
"""
)


# the allocator `parallmelism` chooses for Arrow (cli/app.py main), for the footer's process as well
_ENV = {**os.environ, "ARROW_DEFAULT_MEMORY_POOL": os.environ.get("ARROW_DEFAULT_MEMORY_POOL", "jemalloc")}


def probe(size: str, out: Path) -> dict:
    args = [sys.executable, "-c", _PROBE, str(out), "sweep", *SWEEPS[size], "-q", "--out", str(out), "-j", "1"]
    done = subprocess.run(args, cwd=REPO, env=_ENV, capture_output=True, text=True, check=True)
    line = next(x for x in done.stdout.splitlines() if x.startswith("PROBE "))
    return json.loads(line[len("PROBE ") :])


def footer_kib_per_row_group(parquet: Path, scratch: Path) -> float:
    done = subprocess.run(
        [sys.executable, "-c", _FOOTER, str(parquet), str(scratch)],
        cwd=REPO,
        env=_ENV,
        capture_output=True,
        text=True,
        check=True,
    )
    return float(done.stdout.split()[-1])


def main() -> None:
    if not Path("/proc/self/status").exists():
        sys.exit("this benchmark reads /proc and glibc's mallinfo2: Linux only")
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=["1e5", "1e7"], help="one of the two sweeps")
    parser.add_argument("--tmp", default="/tmp", help="folder for the sweeps' Parquet files")
    args = parser.parse_args()
    sizes = [args.only] if args.only else ["1e5", "1e7"]
    tmp = Path(args.tmp)
    results = {}
    for size in sizes:
        out = tmp / f"sweep_memory_{size}.parquet"
        res = probe(size, out)
        per_rg = footer_kib_per_row_group(out, tmp / "sweep_memory_footer.parquet")
        results[size] = res
        calls = res["calls"]
        peak_call = next(i for i, c in enumerate(calls) if c["hwm"] == max(c["hwm"] for c in calls))
        after_arrow = [c["rows"] for c in calls if c["pyarrow"]]
        print(
            f"sweep {size}: {res['rows']:,} rows, {len(calls)} cost-model calls, {res['row_groups']} row groups "
            f"of {res['columns']} columns; peak RSS {res['hwm']:.0f} MiB"
        )
        print(
            f"  largest call {max(c['rows'] for c in calls):,} rows; largest after pyarrow is loaded "
            f"{max(after_arrow, default=0):,} rows; the calls' high-water mark reached "
            f"{calls[peak_call]['hwm']:.0f} MiB at call {peak_call + 1} of {len(calls)}"
        )
        print(
            f"  glibc heap at its largest {max(c['heap'] for c in calls):.0f} MiB, in use after a call up to "
            f"{max(c['in_use'] for c in calls):.0f} MiB"
        )
        print(
            f"  Parquet footer held in memory: {per_rg:.1f} KiB a row group x {res['row_groups']} = "
            f"{per_rg * res['row_groups'] / 1024:.1f} MiB at close"
        )
    if len(results) == 2:
        low, high = results["1e5"]["hwm"], results["1e7"]["hwm"]
        footer = per_rg * results["1e7"]["row_groups"] / 1024
        print(
            f"peak 1e5 -> 1e7: {low:.0f} -> {high:.0f} MiB = {high / low:.2f}x (bar 1.2x: {1.2 * low:.0f} MiB); "
            f"the footer alone is {footer:.0f} of the {1.2 * low - low:.0f} MiB the bar leaves"
        )


if __name__ == "__main__":
    main()
