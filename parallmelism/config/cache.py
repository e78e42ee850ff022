"""Composition cache: the validated RunConfigs of a command line, keyed on everything they derive from.

Hydra composition costs ~80 ms per point and importing Hydra ~0.2 s: most of a pinned `show`.
What composition produces is a pure function of
  - the override strings and the config folders given ($PARALLMELISM_CONFIG_PATH, --config-dir),
  - every file under the shipped conf/, models/, hardware/ and under each user folder's models/,
    model/, hardware/, workload/ and grid/ (path and
    content; ~300 KB shipped, hashed in about a millisecond),
  - the parallmelism version (specs, defaults and validation rules) and the current folder,
so the RunConfigs (as JSON, validated again on load: ~50 µs per point) are cached under that key
in the subfolder `compose/` of $PARALLMELISM_CACHE_DIR (default: $XDG_CACHE_HOME/parallmelism or
~/.cache/parallmelism), one `<64 hex digits>.json` file per key.
Failures are never cached. PARALLMELISM_CACHE=0 turns the cache off; an unwritable cache folder
only means no cache. At most MAX_ENTRIES entries are kept (oldest removed). The cache owns only
what it wrote: pruning looks in its own subfolder and at its own names (an entry, or a temporary
`.entry.*.tmp` of a killed run), so a cache variable pointed at a folder of the user's own files
(JSON included) never removes one of them.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import time
from pathlib import Path

from .paths import data_root

FORMAT = 2  # 2: output.format defaults to None (the extension), no longer csv
USER_SUBFOLDERS = ("models", "model", "hardware", "workload", "grid")
MAX_ENTRIES = 256
MAX_ENTRY_BYTES = 8 << 20  # a sweep of thousands of points is composed, not cached


SUBFOLDER = "compose"  # the cache's own folder inside the cache directory
ENTRY_NAME = re.compile(r"^[0-9a-f]{64}\.json$")  # a key (sha256 hex) and .json: what store() writes
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


def _tree_signature(root: Path, digest) -> None:
    """Every file under root: relative path and content (size and mtime for very large files)."""
    if not root.is_dir():
        digest.update(f"missing:{root}\n".encode())
        return
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            path = os.path.join(dirpath, name)
            try:
                st = os.stat(path)
                digest.update(f"{os.path.relpath(path, root)}\0{st.st_size}\0".encode())
                if st.st_size > LARGE_FILE_BYTES:
                    digest.update(f"{st.st_mtime_ns}".encode())
                else:
                    with open(path, "rb") as fh:
                        digest.update(fh.read())
            except OSError:
                continue


def cache_key(overrides: list[str], user_dirs: list[Path]) -> str | None:
    """The key of a command line's RunConfigs, or None when caching is off."""
    if cache_dir() is None:
        return None
    from .. import __version__

    digest = hashlib.sha256()
    digest.update(json.dumps([FORMAT, __version__, list(overrides), [str(d) for d in user_dirs]]).encode())
    digest.update(os.getcwd().encode())
    root = data_root()
    for sub in ("conf", "models", "hardware"):
        _tree_signature(root / sub, digest)
    for d in user_dirs:  # only the folders composition reads (a user folder may be a whole checkout)
        for sub in USER_SUBFOLDERS:
            _tree_signature(d / sub, digest)
    return digest.hexdigest()


def load(key: str | None):
    """[(job overrides, RunConfig)] stored under key, or None (absent, unreadable, or stale format)."""
    folder = cache_dir()
    if key is None or folder is None:
        return None
    try:
        data = json.loads((folder / f"{key}.json").read_text())
        from ..specs import RunConfig

        return [(job, RunConfig.model_validate(run)) for job, run in zip(data["jobs"], data["runs"])]
    except Exception:  # noqa: BLE001 - a cache entry that cannot be used is composed again
        return None


def store(key: str | None, results: list) -> None:
    """Write the entry atomically; any failure (read-only home, full disk) only means no cache."""
    folder = cache_dir()
    if key is None or folder is None:
        return
    text = json.dumps({"jobs": [job for job, _ in results], "runs": [rc.model_dump(mode="json") for _, rc in results]})
    if len(text) > MAX_ENTRY_BYTES:
        return
    tmp = None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".entry.", suffix=".tmp", dir=folder)
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, folder / f"{key}.json")
        tmp = None
        _prune(folder)
    except OSError:
        pass
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)


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
