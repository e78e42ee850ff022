"""Composition cache: the validated RunConfigs of a command line, keyed on everything they derive from.

Hydra composition costs ~80 ms per point and importing Hydra ~0.2 s: most of a pinned `show`.
What composition produces is a pure function of
  - the override strings and the config folders given ($PARALLMELISM_CONFIG_PATH, --config-dir),
  - every file under the shipped conf/, models/, hardware/ and under each user folder's models/,
    model/, hardware/, workload/, grid/, engine/ and stack/: the path of each, and the content of
    the YAML files, which are all that composition reads (~150 KB shipped; of any other file, such
    as a kernel table CSV, composition reads only whether it is there: `table_beside_file`. The
    tables' contents key their own entries, `kernel_table` below),
  - the parallmelism version and the source of the code that composes and validates (config/ and
    specs/: defaults, validation rules and the specs' fields), the current folder, and the folder the
    shipped configs are in (entries hold absolute paths under it: a second install or checkout of the
    same files, since deleted, must not hand its paths to this one),
so the RunConfigs are cached under that key in the subfolder `compose/` of $PARALLMELISM_CACHE_DIR
(default: $XDG_CACHE_HOME/parallmelism or ~/.cache/parallmelism), one `<64 hex digits>.pickle` file
per key. An entry holds the validated specs themselves (pickled: ~0.1 ms to load) rather than
their JSON: validating JSON again builds every spec's pydantic validator first (~16 ms, the specs
defer that build until a spec is validated), and the key already covers every input validation
read. Loading accepts only the spec classes of parallmelism.specs (a restricted unpickler), so an
entry cannot name any other code; anything else in it means the entry is composed again.
Failures are never cached. PARALLMELISM_CACHE=0 turns the cache off; an unwritable cache folder
only means no cache. At most MAX_ENTRIES entries are kept (oldest removed). The cache owns only
what it wrote: pruning looks in its own subfolder and at its own names (an entry, or a temporary
`.entry.*.tmp` of a killed run), so a cache variable pointed at a folder of the user's own files
(JSON included) never removes one of them.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import os
import pickle
import re
import tempfile
import time
from pathlib import Path

from .paths import data_root

FORMAT = 3  # 2: output.format defaults to None (the extension), no longer csv; 3: pickled specs
USER_SUBFOLDERS = ("models", "model", "hardware", "workload", "grid", "engine", "stack")
MAX_ENTRIES = 256
MAX_ENTRY_BYTES = 8 << 20  # a sweep of thousands of points is composed, not cached


SUBFOLDER = "compose"  # the cache's own folder inside the cache directory
SUFFIX = ".pickle"
# a key (sha256 hex) and .pickle: what store() writes (.json: format 2's entries, pruned as they age)
ENTRY_NAME = re.compile(r"^[0-9a-f]{64}\.(pickle|json)$")
TEMP_NAME = re.compile(r"^\.entry\.[A-Za-z0-9_]+\.tmp$")  # store()'s temporary (tempfile.mkstemp)
STALE_TEMP_S = 600  # a temporary this old is a killed run's (a store takes milliseconds)


def cache_dir() -> Path | None:
    """The folder holding the cache's entries (its own subfolder of the cache directory), or None."""
    if os.environ.get("PARALLMELISM_CACHE", "1") == "0":
        return None
    given = os.environ.get("PARALLMELISM_CACHE_DIR")
    if given:
        return Path(given).expanduser() / SUBFOLDER
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "parallmelism" / SUBFOLDER


LARGE_FILE_BYTES = 4 << 20  # bigger files are identified by size and modification time
COMPOSED_SUFFIXES = (".yaml", ".yml")  # the files composition reads (config/paths.py option_files, conf/)


def _tree_signature(root: Path, digest, suffix: str = "", read=COMPOSED_SUFFIXES) -> None:
    """Every file under root (whose name ends with suffix): its relative path, and the size and
    content of those whose names end with one of `read` (size and mtime for very large files).
    Of any other file only the path counts: composition reads whether it is there, not what it
    holds (a kernel table beside its hardware YAML, compose.py `table_beside_file`)."""
    if not root.is_dir():
        digest.update(f"missing:{root}\n".encode())
        return
    top = str(root)
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")  # compiled code: not read
        folder = dirpath[len(top) :].lstrip(os.sep)  # os.path.relpath's answer, without its abspath calls
        for name in sorted(n for n in filenames if n.endswith(suffix)):
            path = os.path.join(dirpath, name)
            rel = os.path.join(folder, name) if folder else name
            if not name.endswith(read):
                digest.update(f"{rel}\0-\0".encode())
                continue
            try:
                st = os.stat(path)
                digest.update(f"{rel}\0{st.st_size}\0".encode())
                if st.st_size > LARGE_FILE_BYTES:
                    digest.update(f"{st.st_mtime_ns}".encode())
                else:
                    with open(path, "rb") as fh:
                        digest.update(fh.read())
            except OSError:
                continue


@functools.lru_cache(maxsize=1)
def _code_signature() -> bytes:
    """The source of the code that composes and validates (config/ and specs/): a changed rule
    validates again. Read once per process (a command keys its command line and the kernel tables'
    reference accelerator): the code running is the code this process imported."""
    digest = hashlib.sha256()
    package = Path(__file__).resolve().parent.parent
    for sub in ("config", "specs"):
        _tree_signature(package / sub, digest, suffix=".py", read=(".py",))
    return digest.digest()


def cache_key(overrides: list[str], user_dirs: list[Path]) -> str | None:
    """The key of a command line's RunConfigs, or None when caching is off."""
    if cache_dir() is None:
        return None
    from .. import __version__

    digest = hashlib.sha256()
    digest.update(json.dumps([FORMAT, __version__, list(overrides), [str(d) for d in user_dirs]]).encode())
    digest.update(os.getcwd().encode())
    digest.update(_code_signature())
    root = data_root()
    # where the shipped configs are: an entry holds absolute paths under it (kernel tables beside
    # their hardware YAML), so another install or checkout of the same files keys its own entries
    digest.update(f"root:{root}\n".encode())
    for sub in ("conf", "models", "hardware"):
        _tree_signature(root / sub, digest)
    for d in user_dirs:  # only the folders composition reads (a user folder may be a whole checkout)
        for sub in USER_SUBFOLDERS:
            _tree_signature(d / sub, digest)
    return digest.hexdigest()


class _SpecUnpickler(pickle.Unpickler):
    """Unpickles the spec classes of parallmelism.specs and nothing else (no other class or
    function can be named by an entry)."""

    def find_class(self, module: str, name: str):
        if module.startswith("parallmelism.specs.") and "." not in name:
            import importlib
            from enum import Enum

            from pydantic import BaseModel

            found = getattr(importlib.import_module(module), name, None)
            if isinstance(found, type) and issubclass(found, (BaseModel, Enum)) and found.__module__ == module:
                return found
        raise pickle.UnpicklingError(f"{module}.{name} is not a spec class")


class _TableUnpickler(pickle.Unpickler):
    """Unpickles a kernel table's parts (`kernel_table`) and nothing else: the classes defined in
    parallmelism.cost.kernels and numpy arrays as numpy pickles them (from a buffer, with a dtype)."""

    NUMPY = {("numpy", "dtype"), ("numpy", "ndarray"), ("numpy._core.numeric", "_frombuffer")}
    NUMPY |= {("numpy.core.numeric", "_frombuffer"), ("numpy._core.multiarray", "_reconstruct")}

    def find_class(self, module: str, name: str):
        import importlib

        if (module, name) in self.NUMPY:
            return getattr(importlib.import_module(module), name)
        if module == "parallmelism.cost.kernels" and "." not in name:
            found = getattr(importlib.import_module(module), name, None)
            if isinstance(found, type) and found.__module__ == module:
                return found
        raise pickle.UnpicklingError(f"{module}.{name} is not part of a kernel table")


def _read(key: str | None, unpickler: type[pickle.Unpickler] = _SpecUnpickler):
    """The entry stored under key (a dict of FORMAT), or None (off, absent, unreadable, stale)."""
    folder = cache_dir()
    if key is None or folder is None:
        return None
    try:
        data = unpickler(io.BytesIO((folder / f"{key}{SUFFIX}").read_bytes())).load()
    except Exception:  # noqa: BLE001 - a cache entry that cannot be used is composed again
        return None
    return data if isinstance(data, dict) and data.get("format") == FORMAT else None


def _write(key: str | None, data: dict) -> None:
    """Write the entry atomically; any failure (read-only home, full disk) only means no cache."""
    folder = cache_dir()
    if key is None or folder is None:
        return
    blob = pickle.dumps({"format": FORMAT, **data}, protocol=pickle.HIGHEST_PROTOCOL)
    if len(blob) > MAX_ENTRY_BYTES:
        return
    tmp = None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".entry.", suffix=".tmp", dir=folder)
        with os.fdopen(fd, "wb") as fh:
            fh.write(blob)
        os.replace(tmp, folder / f"{key}{SUFFIX}")
        tmp = None
        _prune(folder)
    except OSError:
        pass
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)


def load(key: str | None):
    """[(job overrides, RunConfig)] stored under key, or None (absent, unreadable, or stale format)."""
    from ..specs import RunConfig

    data = _read(key)
    try:
        if data is None or not all(isinstance(rc, RunConfig) for rc in data["runs"]):
            return None
        return [(list(job), rc) for job, rc in zip(data["jobs"], data["runs"], strict=True)]
    except (KeyError, TypeError, ValueError):
        return None


def store(key: str | None, results: list) -> None:
    """Store a command line's [(job overrides, RunConfig)] under key."""
    _write(key, {"jobs": [list(job) for job, _ in results], "runs": [rc for _, rc in results]})


def option(group: str, name: str, user_dirs: list[Path], load_it):
    """A validated model or hardware option by name: from the cache, or load_it() (then stored).
    Keyed as a command line is (the files, the code, the user folders), under its own kind."""
    from pydantic import BaseModel

    key = cache_key([f"option:{group}={name}"], user_dirs)
    data = _read(key)
    if data is not None and isinstance(data.get("option"), BaseModel):
        return data["option"]
    spec = load_it()
    _write(key, {"option": spec})
    return spec


def kernel_table(path: Path, params: tuple, build):
    """A kernel table file's cost.kernels.KernelTable on the physics `params` (peaks, HBM
    bandwidth, SMs, completeness; what config/kernel_tables.py builds it from): from the cache, or
    build() (then stored). Reading and fitting the H100 table's ~1,000 rows costs ~14 ms per
    command, loading it ~0.2 ms. Keyed on the file's content, `params`, and the source of the code
    that builds it (cost/kernels.py, config/kernel_tables.py); `path` is set on the loaded table
    (it is not stored: a message names the file where it is now)."""
    folder = cache_dir()
    package = Path(__file__).resolve().parent.parent
    try:
        digest = hashlib.sha256(json.dumps(["kernel-table", FORMAT, repr(params)]).encode())
        for source in (Path(path), package / "cost" / "kernels.py", package / "config" / "kernel_tables.py"):
            digest.update(source.read_bytes())
        key = digest.hexdigest() if folder is not None else None
    except OSError:  # the table itself unreadable: build() says so
        key = None
    data = _read(key, _TableUnpickler)
    state = data.get("kernel_table") if data is not None else None
    if isinstance(state, dict):
        from ..cost.kernels import KernelTable

        table = KernelTable.__new__(KernelTable)
        table.__dict__.update(state, path=path)
        return table
    table = build()
    _write(key, {"kernel_table": {k: v for k, v in vars(table).items() if k != "path"}})
    return table


def _prune(folder: Path) -> None:
    """Keep the newest MAX_ENTRIES entries and remove stale temporaries: only files whose names
    are the cache's own (ENTRY_NAME, TEMP_NAME), never anything else in the folder."""
    entries, now = [], time.time()
    for p in folder.iterdir():
        try:
            if ENTRY_NAME.match(p.name) and p.is_file():
                entries.append((p.stat().st_mtime, p))
            elif TEMP_NAME.match(p.name) and p.is_file() and now - p.stat().st_mtime > STALE_TEMP_S:
                p.unlink(missing_ok=True)
        except OSError:  # removed meanwhile by another run
            continue
    entries.sort()
    for _, old in entries[:-MAX_ENTRIES]:
        old.unlink(missing_ok=True)
