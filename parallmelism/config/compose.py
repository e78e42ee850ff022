"""Hydra composition at the edge: overrides in, a validated RunConfig out, errors as one sentence.

Models and hardware are plain YAML files in `models/` and `hardware/`; they are registered in
Hydra's ConfigStore under the groups `model` and `hardware`, so `model=NAME` picks
`models/NAME.yaml` both here (Compose API) and under `@hydra.main` multirun.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

from ..errors import UserError, format_validation_error
from .paths import data_root, option_files, user_config_dirs

_registered: tuple | None = None


def register_option_files(user_dirs: list[Path]) -> dict[str, dict[str, Path]]:
    """Put every model/hardware YAML into Hydra's ConfigStore (user folders win)."""
    global _registered
    from hydra.core.config_store import ConfigStore
    from omegaconf import OmegaConf

    files = {group: option_files(group, user_dirs) for group in ("model", "hardware")}
    key = tuple((g, tuple(sorted((n, str(p)) for n, p in f.items()))) for g, f in files.items())
    if key == _registered:
        return files
    cs = ConfigStore.instance()
    for group, by_name in files.items():
        for name, path in by_name.items():
            try:
                node = OmegaConf.load(path)
            except Exception as exc:  # malformed YAML
                raise UserError(f"{path}: not valid YAML ({_first_line(exc)})") from None
            if not OmegaConf.is_dict(node):
                raise UserError(f"{path}: expected a mapping of keys to values")
            if "name" not in node:
                node["name"] = name
            cs.store(group=group, name=name, node=node)
    _registered = key
    return files


def _first_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def search_path_override(user_dirs: list[Path]) -> list[str]:
    if not user_dirs:
        return []
    return ["hydra.searchpath=[" + ",".join(f"file://{d}" for d in user_dirs) + "]"]


def compose(overrides: list[str], config_dirs: list[str] | None = None):
    """Compose the config for one set of overrides (no sweep syntax). Returns a DictConfig."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    user_dirs = user_config_dirs(config_dirs)
    for d in user_dirs:
        if not d.is_dir():
            raise UserError(f"config dir {str(d)!r} does not exist")
    files = register_option_files(user_dirs)
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(data_root() / "conf"), version_base=None), \
                warnings.catch_warnings():
            # A user folder's hardware/NAME.yaml is both on the search path and in the ConfigStore
            # (registered above); Hydra's schema-matching deprecation warning about that is noise.
            warnings.filterwarnings("ignore", message=r"(?s).*is validated against ConfigStore schema")
            return hydra_compose("config", overrides=list(overrides) + search_path_override(user_dirs))
    except UserError:
        raise
    except Exception as exc:
        raise UserError(explain_hydra_error(exc, overrides, files)) from None
    finally:
        GlobalHydra.instance().clear()


def explain_hydra_error(exc: Exception, overrides, files) -> str:
    """One sentence for a Hydra composition or parse error."""
    text = str(exc)
    m = re.search(r"Could not find '(model|hardware|workload|grid)/([^']+)'", text)
    if m:
        group, name = m.groups()
        if group in files:
            avail = ", ".join(sorted(files[group]))
        else:
            avail = ", ".join(sorted(p.stem for p in (data_root() / "conf" / group).glob("*.yaml")))
        return f"unknown {group} {name!r}; available: {avail}"
    m = re.search(r"Could not override '([^']+)'", text)
    if m:
        return f"unknown key {m.group(1)!r} (no such setting; see `parallmelism sweep --cfg`)"
    m = re.search(r"Could not append to config. An item is already at '([^']+)'", text)
    if m:
        return f"key {m.group(1)!r} already exists; drop the leading '+'"
    if type(exc).__name__ == "OverrideParseException" or "Error parsing override" in text:
        bad = next((o for o in overrides if o in text), None)
        return f"malformed override {bad!r}; expected key=value" if bad else \
            f"malformed override: {_first_line(exc)}"
    if "Error merging override" in text or "Value '" in text:
        return f"bad override: {_first_line(exc)}"
    return f"could not compose the configuration: {_first_line(exc)}"


def expand_sweeps(overrides: list[str]) -> list[list[str]]:
    """Expand Hydra sweep syntax (`model=a,b`, `x=range(..)`, `choice(..)`) into override lists."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        parsed = OverridesParser.create().parse_overrides(list(overrides))
    except Exception as exc:
        raise UserError(explain_hydra_error(exc, overrides, {})) from None
    batches = BasicSweeper.split_arguments(parsed, max_batch_size=None)
    return [list(job) for batch in batches for job in batch] or [[]]


def to_run_config(cfg):
    """Validate a composed DictConfig into a RunConfig (one-line error on bad values)."""
    from omegaconf import OmegaConf
    from pydantic import ValidationError

    from ..specs import RunConfig

    try:
        data = OmegaConf.to_container(cfg, resolve=True)
    except Exception as exc:
        raise UserError(f"bad configuration: {_first_line(exc)}") from None
    data.pop("hydra", None)
    _check_magnitudes(data)
    try:
        return RunConfig.model_validate(data)
    except ValidationError as exc:
        raise UserError(format_validation_error(exc)) from None


# Integers beyond 2**53 are not sizes of anything and overflow the int64 array math downstream.
MAX_INT = 2**53


def _check_magnitudes(data, prefix: str = "") -> None:
    """One sentence for an absurdly large integer anywhere in the config (before validation)."""
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else ()
    for k, v in items:
        key = f"{prefix}.{k}" if prefix else str(k)
        if isinstance(v, (dict, list)):
            _check_magnitudes(v, key)
        elif isinstance(v, int) and not isinstance(v, bool) and abs(v) >= MAX_INT:
            raise UserError(f"{key}={v} is absurdly large (limit 2**53)")


def load_run_configs(overrides: list[str], config_dirs: list[str] | None = None):
    """All RunConfigs for a command line (one per point of any Hydra sweep), with their overrides."""
    jobs = expand_sweeps(overrides)
    return [(job, to_run_config(compose(job, config_dirs))) for job in jobs]


def _load_option(group: str, name: str, path: Path):
    """Load and validate one models/ or hardware/ file (used by `list` and the case runner)."""
    from omegaconf import OmegaConf
    from pydantic import ValidationError

    from ..specs import AcceleratorSpec, ModelSpec

    try:
        data = OmegaConf.to_container(OmegaConf.load(path), resolve=True)
    except Exception as exc:
        raise UserError(f"{path}: not valid YAML ({_first_line(exc)})") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a mapping of keys to values")
    data.setdefault("name", name)
    cls = ModelSpec if group == "model" else AcceleratorSpec
    try:
        return cls.model_validate(data)
    except ValidationError as exc:
        raise UserError(f"{path}: " + format_validation_error(exc, prefix=group)) from None


def load_option(group: str, name: str, config_dirs: list[str] | None = None):
    """A shipped or user model/hardware by name, validated."""
    files = option_files(group, user_config_dirs(config_dirs))
    if name not in files:
        raise UserError(f"unknown {group} {name!r}; available: {', '.join(sorted(files))}")
    return _load_option(group, name, files[name])
