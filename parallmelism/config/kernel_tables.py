"""Kernel tables read at the config edge and handed to the cost model (cost/kernels.py reads no file).

`kernel_model(hw)` is the accelerator's KernelModel: its own table (`kernels.table` in
hardware/NAME.yaml: absolute, else relative to the shipped hardware/ folder or a user config folder)
when it has one, and the reference table (the H100's, REFERENCE_TABLE, on the reference accelerator's
physics) that the rule for accelerators without a table, and the families a table lacks, read.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

REFERENCE_TABLE = "kernels/h100-sxm-80gb.csv"
REFERENCE_ACCELERATOR = "h100-sxm-80gb"


def resolve_table(name: str) -> Path:
    """A kernel table path from hardware/NAME.yaml: absolute, else relative to the shipped
    hardware/ folder or a user config folder ($PARALLMELISM_CONFIG_PATH) holding hardware/."""
    from ..errors import UserError
    from .paths import data_root, user_config_dirs

    p = Path(name).expanduser()
    if p.is_absolute():
        candidates = [p]
    else:
        roots = [data_root()] + user_config_dirs()
        candidates = [r / "hardware" / p for r in roots] + [r / p for r in roots]
    for c in candidates:
        if c.is_file():
            return c
    folders = [c for c in candidates if c.is_dir()]
    if folders:
        raise UserError(f"kernel table {name!r} is a folder ({folders[0]}), not a CSV file")
    raise UserError(f"kernel table {name!r} not found (looked in: {', '.join(str(c.parent) for c in candidates)})")


def read_rows(path) -> list[dict]:
    """The rows of a kernel table file ({column: text}; lines starting with # are comments)."""
    import csv
    import io

    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    reader = csv.DictReader(line for line in io.StringIO(text) if not line.startswith("#"))
    rows = list(reader)
    # a copy cut short (a killed download, a full disk) would price kernels on the rows it kept
    if text.strip() and not text.endswith("\n"):
        raise ValueError("truncated: its last line ends without a line break; re-create the file")
    fields = list(reader.fieldnames or [])
    for row in rows:
        # a row short of fields has None in its last column(s); one with more, a None key of extras
        if None in row or (fields and row[fields[-1]] is None):
            n = sum(v is not None for k, v in row.items() if k is not None) + len(row.get(None) or [])
            shown = ",".join(str(v) for k, v in row.items() if k is not None and v is not None)[:60]
            raise ValueError(f"a row has {n} fields for the header's {len(fields)} ({shown}...); re-create the file")
    return rows


@lru_cache(maxsize=16)
def _table(path: str, peak_items: tuple, hbm_gbps: float, sms: int, require_all: bool = True):
    """Once per process, and across processes through the composition cache (config/cache.py)."""
    from ..cost.kernels import KernelTable
    from . import cache

    def build():
        return KernelTable(read_rows(path), dict(peak_items), hbm_gbps, sms, require_all, path=Path(path))

    return cache.kernel_table(Path(path), (peak_items, hbm_gbps, sms, require_all), build)


def load_table(path, peak_tflops: dict, hbm_gbps: float, sms: int, require_all: bool = True):
    """The KernelTable of a table file measured on an accelerator with these peaks, HBM bandwidth and SMs."""
    return _table(str(path), tuple(sorted(peak_tflops.items())), float(hbm_gbps), int(sms), require_all)


@lru_cache(maxsize=1)
def reference_accelerator():
    """The reference accelerator's spec (through the composition cache: no YAML read once cached)."""
    from . import cache
    from .compose import load_option
    from .paths import user_config_dirs

    return cache.option(
        "hardware",
        REFERENCE_ACCELERATOR,
        user_config_dirs(None),
        lambda: load_option("hardware", REFERENCE_ACCELERATOR),
    )


def reference_table():
    """The reference H100 table on the reference accelerator's physics."""
    from ..cost.kernels import REFERENCE_SM_COUNT

    ref = reference_accelerator()
    return load_table(resolve_table(REFERENCE_TABLE), ref.peak_tflops, ref.hbm_bandwidth_gbps, REFERENCE_SM_COUNT)


def kernel_tables(hw):
    """cost.kernels.KernelTables of an accelerator: its own table (or None) and the reference.
    A table other than the reference may lack families (the model completes them from the reference)."""
    from ..cost.kernels import REFERENCE_SM_COUNT, KernelTables
    from ..errors import UserError

    spec = getattr(hw, "kernels", None)
    name = getattr(spec, "table", None)
    path = resolve_table(name) if name else resolve_table(REFERENCE_TABLE)
    try:
        reference = reference_table()
        own = None
        if name:
            sms = int(getattr(spec, "sm_count", None) or REFERENCE_SM_COUNT)
            # residuals against the part the table was measured on (specs Kernels.measured_*), so that an
            # override of this accelerator's peaks or HBM bandwidth moves the kernel times it governs
            peaks = getattr(spec, "measured_peak_tflops", None) or hw.peak_tflops
            hbm = getattr(spec, "measured_hbm_bandwidth_gbps", None) or hw.hbm_bandwidth_gbps
            own = load_table(path, peaks, hbm, sms, path == resolve_table(REFERENCE_TABLE))
    except (OSError, ValueError, KeyError) as exc:
        raise UserError(f"kernel table {path}: unreadable ({exc})") from None
    return KernelTables(own, reference)


def sustained(hw):
    """`hw` with its peaks at the clock it sustains under its power cap (specs AcceleratorSpec.
    sustained_clock_fraction): the physics a kernel time is taken on. Unchanged at fraction 1 (every
    uncapped part). A table measured on this part is pinned at this clock when composed
    (compose.measured_on_this_file); one measured on another part states that part's."""
    fraction = getattr(hw, "sustained_clock_fraction", 1.0)
    return hw if fraction == 1.0 else hw.model_copy(update={"peak_tflops": hw.sustained_peak_tflops()})


def kernel_model(hw):
    """The accelerator's cost.kernels.KernelModel over the tables `kernel_tables` reads."""
    from ..cost.kernels import KernelModel
    from ..errors import UserError

    tables = kernel_tables(hw)
    try:
        return KernelModel(sustained(hw), tables)
    except (ValueError, KeyError) as exc:
        raise UserError(
            f"kernel table {tables.own.path if tables.own else REFERENCE_TABLE}: unreadable ({exc})"
        ) from None


@lru_cache(maxsize=8)
def _fused_moe(path: str):
    from ..cost.fused_moe import FusedMoeTable

    return FusedMoeTable(_engine_rows(path, FusedMoeTable.COLUMNS), source=path)


def _engine_table_path(engine, field: str, hw) -> str | None:
    """The table an engine names for this accelerator in `field` (conf/engine/NAME.yaml: accelerator
    name -> table path, resolved as kernel tables are), or None when it names none."""
    name = (getattr(engine, field, None) or {}).get(hw.name)
    return str(resolve_table(name)) if name else None


def _engine_rows(path: str, columns: tuple[str, ...]) -> list[dict]:
    """An engine table's rows (read_rows), refused when it has none (an empty file, a header alone, an
    unrelated file) or lacks one of `columns`: a table the engine names would otherwise price nothing."""
    rows = read_rows(path)
    if not rows:
        raise ValueError("no rows: an empty file, a header alone or not a table")
    missing = [c for c in columns if c not in rows[0]]
    if missing:
        raise ValueError(f"no column {', '.join(missing)}: not this kind of table")
    return rows


def _read_engine_table(read, path: str, what: str):
    """`read(path)`, a table that cannot be read or parsed refused in one sentence."""
    from ..errors import UserError

    try:
        return read(path)
    except (OSError, ValueError, KeyError) as exc:
        raise UserError(f"{what} {path}: unreadable ({exc})") from None


def fused_moe_table(engine, hw):
    """The engine's measured fused-MoE table on this accelerator (cost.fused_moe.FusedMoeTable;
    `fused_moe_tables` in conf/engine/NAME.yaml, accelerator name -> table path as for kernel tables),
    or None when the engine names none for it."""
    path = _engine_table_path(engine, "fused_moe_tables", hw)
    return None if path is None else _read_engine_table(_fused_moe, path, "fused-MoE table")


@lru_cache(maxsize=8)
def _mla_context(path: str):
    from ..cost.mla_context import MlaContextTable

    return MlaContextTable(_engine_rows(path, MlaContextTable.COLUMNS), source=path)


def mla_context_table(engine, hw):
    """The engine's measured MLA prefill attention module table on this accelerator
    (cost.mla_context.MlaContextTable; `mla_context_tables` in conf/engine/NAME.yaml, accelerator name ->
    table path as for kernel tables), or None when the engine names none for it."""
    path = _engine_table_path(engine, "mla_context_tables", hw)
    return None if path is None else _read_engine_table(_mla_context, path, "MLA module table")


@lru_cache(maxsize=8)
def _engine_gemm(path: str):
    from ..cost.engine_gemm import EngineGemmTable

    return EngineGemmTable(_engine_rows(path, EngineGemmTable.COLUMNS), source=path)


def engine_gemm_table(engine, hw):
    """The engine's measured GEMM table on this accelerator (cost.engine_gemm.EngineGemmTable;
    `gemm_tables` in conf/engine/NAME.yaml, accelerator name -> table path as for kernel tables),
    or None when the engine names none for it. Read at its first use (_LazyGemmTable)."""
    path = _engine_table_path(engine, "gemm_tables", hw)
    return None if path is None else _LazyGemmTable(path)


class _LazyGemmTable:
    """An engine GEMM table read at its first use (its ~24,000 rows take ~0.4 s to parse, which a run
    whose model has no fp8 block-scaled checkpoint never needs: cost.inference.engine_gemm_times asks
    for the scheme first); the methods of cost.engine_gemm.EngineGemmTable."""

    def __init__(self, path: str):
        self.path = path

    def _table(self):
        return _read_engine_table(_engine_gemm, self.path, "GEMM table")

    def covers(self, dtype: str, fp8_block: int) -> bool:
        return self._table().covers(dtype, fp8_block)

    def gemm_s(self, m, k, n, dtype: str, fp8_block: int):
        return self._table().gemm_s(m, k, n, dtype, fp8_block)


def serving_kernel_model(hw, engine):
    """kernel_model(hw) with the kernels `engine` runs in place of the model's own where it names
    measured ones on this accelerator (its fused-MoE table: KernelModel.fused_moe; its GEMM table:
    KernelModel.engine_gemm; its MLA prefill module table: KernelModel.mla_context)."""
    km = kernel_model(hw)
    km.fused_moe = fused_moe_table(engine, hw)
    km.engine_gemm = engine_gemm_table(engine, hw)
    km.mla_context = mla_context_table(engine, hw)
    return km


def _shown_path(path: Path) -> str:
    """A table path as a user finds it: relative to the shipped folder, else as it is."""
    from .paths import data_root

    try:
        return str(Path(path).resolve().relative_to(data_root().resolve()))
    except ValueError:
        return str(path)


def _taken_from_reference(own, hw) -> list[str]:
    """The kernel families an own table lacks, which the model takes from the reference table
    (cost.kernels.KernelModel._completed)."""
    from ..cost.kernels import ATTENTION_PARTS

    parts = {p for _, p in own.attention}
    if not own.gemm:
        missing = ["GEMMs"]
    elif set(own.gemm) - {"fp32"}:
        missing = [f"{d} GEMMs" for d in ("bf16", "fp8", "fp4") if d in hw.peak_tflops and d not in own.gemm]
    else:
        missing = []
    names = {"fwd": "attention forward", "bwd": "attention backward"}
    missing += [names[p] for p in ("fwd", "bwd") if p not in parts]
    if not {"fwd_block", "bwd_block"} <= parts and set(ATTENTION_PARTS) - parts:
        missing.append("non-causal attention blocks (its causal ratios plus the H100's block saving)")
    if not own.has_hbm:
        missing.append("HBM transfers")
    return missing


def kernel_source(hw) -> str:
    """One sentence: where a training layout's compute times come from on `hw` (issue 32 item 5):
    its measured kernel table, with what overrides of the peaks or HBM bandwidth scale in it, or the
    H100 table scaled by spec; and the sustained clock of a power-capped part."""
    spec = getattr(hw, "kernels", None)
    tables = kernel_tables(hw)
    ref = reference_accelerator()
    if tables.own is not None:
        text = f"compute times from measured kernel table {_shown_path(tables.own.path)}"
        measured = getattr(spec, "measured_peak_tflops", None) or hw.peak_tflops
        physics = sustained(hw).peak_tflops  # what the kernel model runs this part at
        scaled = [
            f"{k} {measured[k]:,.6g} -> {v:,.6g} TFLOP/s (x{v / measured[k]:.2f})"
            for k, v in sorted(physics.items())
            if k in measured and abs(v / measured[k] - 1.0) > 1e-9
        ]
        hbm = getattr(spec, "measured_hbm_bandwidth_gbps", None) or hw.hbm_bandwidth_gbps
        if hbm != hw.hbm_bandwidth_gbps:
            scaled.append(f"HBM {hbm:,.6g} -> {hw.hbm_bandwidth_gbps:,.6g} GB/s (x{hw.hbm_bandwidth_gbps / hbm:.2f})")
        text += (
            f" (scaled from the physics it was measured on: {', '.join(scaled)})"
            if scaled
            else " (at the peaks and HBM bandwidth it was measured on)"
        )
        lacking = _taken_from_reference(tables.own, hw)
        if lacking:
            text += f"; {', '.join(lacking)} from the H100 table hardware/{REFERENCE_TABLE} by rule"
    else:
        from ..cost.kernels import REFERENCE_SM_COUNT

        sms = int(getattr(spec, "sm_count", None) or REFERENCE_SM_COUNT)
        text = (
            f"compute times scaled from the H100 table hardware/{REFERENCE_TABLE} by spec (no measured table for "
            f"{hw.name}: bf16 {hw.peak_tflops['bf16']:,.6g} vs {ref.peak_tflops['bf16']:,.6g} TFLOP/s, "
            f"HBM {hw.hbm_bandwidth_gbps:,.6g} vs {ref.hbm_bandwidth_gbps:,.6g} GB/s, {sms} vs {REFERENCE_SM_COUNT} SMs)"
        )
    fraction = getattr(hw, "sustained_clock_fraction", 1.0)
    if fraction != 1.0:
        text += f"; at the sustained clock under the {hw.tdp_w:g} W cap ({fraction:g} of the datasheet peak)"
    return text
