"""Where configs live: the shipped ones (inside the wheel or the checkout) and the user's."""

from __future__ import annotations

import os
import re
from pathlib import Path

ENV_CONFIG_PATH = "PARALLMELISM_CONFIG_PATH"
GROUP_DIRS = {
    "model": "models",
    "hardware": "hardware",
    "workload": "workload",
    "grid": "grid",
    "engine": "engine",
    "stack": "stack",
}
# Shipped workload/, grid/, engine/ and stack/ options live under conf/; models/ and hardware/ at the top (users `ls models/`).
SHIPPED_UNDER = {"model": "", "hardware": "", "workload": "conf", "grid": "conf", "engine": "conf", "stack": "conf"}


# A config option's name (models/NAME.yaml, hardware/NAME.yaml): one file name, never a path.
OPTION_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")


def check_option_name(name: str, flag: str = "--name") -> str:
    """`name` if it can name a config file, else one sentence (UserError)."""
    from ..errors import UserError

    if not OPTION_NAME.fullmatch(name):
        raise UserError(f"{flag} {name!r}: use letters, digits, '-', '_' or '.' (a file name, not a path)")
    return name


def data_root() -> Path:
    """Folder holding conf/, models/ and hardware/.

    A wheel carries them in parallmelism/_data; a source checkout (editable install or
    PYTHONPATH) has them at the top of the repository.
    """
    package = Path(__file__).resolve().parent.parent
    shipped = package / "_data"
    if (shipped / "conf").is_dir():
        return shipped
    return package.parent


def user_config_dirs(extra: list[str] | None = None) -> list[Path]:
    """User folders from $PARALLMELISM_CONFIG_PATH (os.pathsep-separated), then --config-dir."""
    dirs = [p for p in os.environ.get(ENV_CONFIG_PATH, "").split(os.pathsep) if p]
    dirs += list(extra or [])
    return [Path(d).expanduser().resolve() for d in dirs]


def shipped_root(group: str) -> Path:
    return data_root() / SHIPPED_UNDER[group]


def option_files(group: str, user_dirs: list[Path]) -> dict[str, Path]:
    """name -> YAML file for a group (model, hardware, workload, grid, engine); user folders override shipped ones.

    A user folder may hold `models/NAME.yaml` or `model/NAME.yaml` (likewise hardware); workload and
    grid and engine options go in `workload/`, `grid/` and `engine/`.
    """
    roots = [shipped_root(group)] + list(user_dirs)
    found: dict[str, Path] = {}
    for root in roots:
        for sub in dict.fromkeys((GROUP_DIRS[group], group)):
            folder = root / sub
            if folder.is_dir():
                for f in sorted(folder.glob("*.yaml")) + sorted(folder.glob("*.yml")):
                    found[f.stem] = f
    return found


def origin(path: Path, user_dirs: list[Path]) -> str:
    """Where an option file comes from: `shipped` or the user folder that holds it."""
    for d in reversed(user_dirs):
        if d in path.parents:
            return f"user folder {d}"
    return "shipped"


def checkout_differences(folder: Path, root: Path) -> list[str]:
    """Option files of a source checkout at `folder` that the shipped copy at `root` lacks or holds otherwise.

    After `pip install .` the installed copy (root) is what runs; a user editing the checkout's models/
    or hardware/ would otherwise see their edits ignored in silence. Empty when folder is root.
    """
    if folder.resolve() == root.resolve() or not (folder / "conf" / "config.yaml").is_file():
        return []
    out = []
    for group, sub in (("model", "models"), ("hardware", "hardware")):
        for f in sorted((folder / sub).glob("*.yaml")):
            shipped = root / SHIPPED_UNDER[group] / sub / f.name
            try:
                if not shipped.is_file() or shipped.read_bytes() != f.read_bytes():
                    out.append(f"{sub}/{f.name}")
            except OSError:
                continue
    return out
