"""Hydra composition at the edge: overrides in, a validated RunConfig out, errors as one sentence.

Every config node comes from Hydra's ConfigStore, built here from the YAML files and the pydantic
specs (`schema.py`): models/NAME.yaml -> group `model`, hardware/NAME.yaml -> `hardware`,
conf/workload/, conf/grid/ and conf/engine/ -> `workload`, `grid`, `engine`, conf/config.yaml -> the primary `config`.
Each node is the spec's defaults with the file's values on top, so every spec field exists and can
be overridden by name; the same nodes serve the Compose API here and `@hydra.main` multirun.
User folders ($PARALLMELISM_CONFIG_PATH, then --config-dir) add or replace options by file name.
"""

from __future__ import annotations

import itertools
import math
import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import UserError, format_validation_error, require_dir
from .paths import GROUP_DIRS, data_root, option_files, user_config_dirs
from .schema import resolve_efficiency, resolve_overheads, with_defaults

GROUPS = ("model", "hardware", "workload", "grid", "engine", "stack")
_registered: tuple | None = None
_PACKAGE = re.compile(r"^#\s*@package\s+(\S+)")


def _yaml_loader():
    """A safe YAML loader (libyaml where present) that reads 1e9 and .5 as floats, as OmegaConf does."""
    import yaml

    # libyaml's loader where present: chosen at run time, so typed Any (PyYAML ships no stubs)
    base: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class Loader(base):
        def construct_mapping(self, node, deep=False):
            seen = set()
            for key_node, _ in node.value:  # a key given twice is a mistake, not "the last one wins"
                key = self.construct_object(key_node, deep=deep)
                if isinstance(key, str) and key in seen:
                    raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
                seen.add(key)
            return super().construct_mapping(node, deep)

    float_re = re.compile(
        r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
                          |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
                          |\.[0-9_]+(?:[eE][-+]?[0-9]+)?
                          |[-+]?\.(?:inf|Inf|INF)
                          |\.(?:nan|NaN|NAN))$""",
        re.X,
    )
    Loader.yaml_implicit_resolvers = {k: list(v) for k, v in base.yaml_implicit_resolvers.items()}
    for first in list("-+0123456789."):
        Loader.yaml_implicit_resolvers[first] = [
            (tag, regexp)
            for tag, regexp in Loader.yaml_implicit_resolvers.get(first, [])
            if tag != "tag:yaml.org,2002:float"
        ]
    Loader.add_implicit_resolver("tag:yaml.org,2002:float", float_re, list("-+0123456789."))
    return Loader


_LOADER = None


def _read_mapping(path: Path) -> tuple[dict, str | None]:
    """A YAML file's mapping (interpolations left as text) and its `# @package` header, if any."""
    import yaml

    global _LOADER
    _LOADER = _LOADER or _yaml_loader()
    try:
        text = path.read_text(encoding="utf-8")
        data = yaml.load(text, Loader=_LOADER)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise UserError(f"{path}: not valid YAML ({_first_line(exc)})") from None
    if not isinstance(data, dict) or not all(isinstance(k, str) for k in data):
        raise UserError(f"{path}: expected a mapping of keys to values")
    package = None
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        m = _PACKAGE.match(line)
        if m:
            package = m.group(1)
    return data, package


def option_node(group: str, name: str, raw: Mapping[str, dict], where: dict[str, str]) -> dict:
    """The config node of one option: its spec's defaults, the file's values, efficiency and overheads
    `from:` resolved."""
    values = dict(raw[name])
    if group in ("model", "hardware", "engine", "stack"):
        given = values.setdefault("name", name)
        if given != name:  # the file name is what model=/hardware= picks; its rows must say so too
            raise UserError(
                f"{where.get(name, name)}: name: {given!r} differs from the file name {name!r}; "
                f"{group}={name} picks this file and its rows would say {given!r}: make them the same"
            )
    if group == "hardware":
        if "kernels" in values:
            values["kernels"] = measured_on_this_file(table_beside_file(values["kernels"], Path(where[name])), values)
        values["efficiency"] = resolve_efficiency(name, raw, where)
        overheads = resolve_overheads(name, raw, where)
        if overheads is not None:
            values["overheads"] = overheads
    return with_defaults(group, values)


def measured_on_this_file(kernels, values: dict):
    """`kernels:` with the physics its table was measured on pinned to the file's own peak FLOP/s and
    HBM bandwidth (unless the file states them): the table's residuals are measured/physics on that
    part, so an override of `hardware.peak_tflops.*` or `hardware.hbm_bandwidth_gbps` (a what-if,
    a co-design point) scales the kernel times it governs instead of being divided out again."""
    if not isinstance(kernels, dict) or not kernels.get("table"):
        return kernels
    out = dict(kernels)
    if out.get("measured_peak_tflops") is None and isinstance(values.get("peak_tflops"), dict):
        # at the clock the part sustains under its power cap (specs AcceleratorSpec.sustained_clock_fraction):
        # the physics its kernels were timed on; 1 for every part without a stated fraction
        fraction = values.get("sustained_clock_fraction", 1.0)
        peaks = values["peak_tflops"]
        out["measured_peak_tflops"] = dict(peaks) if fraction == 1.0 else {k: v * fraction for k, v in peaks.items()}
    if out.get("measured_hbm_bandwidth_gbps") is None and values.get("hbm_bandwidth_gbps") is not None:
        out["measured_hbm_bandwidth_gbps"] = values["hbm_bandwidth_gbps"]
    return out


def table_beside_file(kernels, yaml_path: Path):
    """`kernels:` of hardware/NAME.yaml with a relative `table` read from the YAML's own folder where
    the file is there (as `profile` writes it: kernels/NAME.csv beside NAME.yaml, so a profiled
    folder can be moved or shared); otherwise unchanged (config.kernel_tables.resolve_table's search)."""
    if not isinstance(kernels, dict) or not isinstance(kernels.get("table"), str):
        return kernels
    table = Path(kernels["table"]).expanduser()
    beside = yaml_path.parent / table
    if table.is_absolute() or not beside.is_file():
        return kernels
    return {**kernels, "table": str(beside.resolve())}


def _global_node(group: str, values: dict) -> dict:
    """A `# @package _global_` workload/grid file: defaults apply to its `workload:`/`grid:` key."""
    out = dict(values)
    if isinstance(values.get(group), dict):
        out[group] = with_defaults(group, values[group])
    return out


class _OptionFiles(Mapping):
    """name -> (mapping, `# @package` header) of a group's option files, each read on first use: an
    option's node reads its own file and those its `from:` names, never the rest of the folder."""

    def __init__(self, files: dict[str, Path]) -> None:
        self.files = files
        self._read: dict[str, tuple[dict, str | None]] = {}

    def __getitem__(self, name: str) -> tuple[dict, str | None]:
        if name not in self._read:
            self._read[name] = _read_mapping(self.files[name])
        return self._read[name]

    def __iter__(self):
        return iter(self.files)

    def __len__(self) -> int:
        return len(self.files)


class _Values(Mapping):
    """The mappings of an _OptionFiles (what resolve_efficiency's `from:` reads), read on first use."""

    def __init__(self, options: _OptionFiles) -> None:
        self.options = options

    def __getitem__(self, name: str) -> dict:
        return self.options[name][0]

    def __iter__(self):
        return iter(self.options)

    def __len__(self) -> int:
        return len(self.options)


# group -> option name -> the sentence its file gave (not valid YAML, a bad `name:`, a `from:` to a
# broken file): such an option is left out of the ConfigStore, and only a run that picks it fails,
# with that sentence (`_broken_choice`); a broken file a run never reads does not stop it.
_broken: dict[str, dict[str, str]] = {}


def register_option_files(user_dirs: list[Path]) -> dict[str, dict[str, Path]]:
    """Put every option (shipped, then user folders) and the primary config into Hydra's ConfigStore.
    An option whose file cannot be read is left out and its sentence kept in `_broken`."""
    global _registered
    from hydra.core.config_store import ConfigStore

    files = {group: option_files(group, user_dirs) for group in GROUPS}
    primary = data_root() / "conf" / "config.yaml"
    key = tuple(
        (g, n, str(p), p.stat().st_mtime_ns, p.stat().st_size)
        for g, f in [*files.items(), ("config", {"config": primary})]
        for n, p in sorted(f.items())
    )
    if key == _registered:
        return files
    cs = ConfigStore.instance()
    _registered = None  # a refused primary config leaves no half store
    _broken.clear()
    for group in GROUPS:  # options of earlier user folders (same process) must not linger
        cs.repo.pop(group, None)
    for group in GROUPS:
        read = _OptionFiles(files[group])
        where = {n: str(p) for n, p in files[group].items()}
        for name in files[group]:
            try:
                values, package = read[name]
                if package == "_global_":
                    cs.store(group=group, name=name, node=_global_node(group, values), package="_global_")
                else:
                    cs.store(group=group, name=name, node=option_node(group, name, _Values(read), where))
            except UserError as exc:
                _broken.setdefault(group, {})[name] = str(exc)
    values, _ = _read_mapping(primary)
    cs.store(name="config", node=with_defaults("config", values))
    _registered = key
    return files


def _broken_choice(exc: Exception) -> str | None:
    """The sentence of the broken file behind Hydra's "cannot find group/name", if that is what it is."""
    from hydra.errors import MissingConfigException

    if not isinstance(exc, MissingConfigException):
        return None
    group, _, name = (exc.missing_cfg_file or "").rpartition("/")
    return _broken.get(group, {}).get(name)


def _first_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _check_dirs(user_dirs: list[Path]) -> None:
    for d in user_dirs:
        require_dir(d, "config dir")


def compose(overrides: list[str], config_dirs: list[str] | None = None):
    """Compose the config for one set of overrides (no sweep syntax). Returns a DictConfig."""
    from hydra import compose as hydra_compose
    from hydra import initialize
    from hydra.core.global_hydra import GlobalHydra

    user_dirs = user_config_dirs(config_dirs)
    _check_dirs(user_dirs)
    files = register_option_files(user_dirs)
    _note_checkout_edits(user_dirs)
    GlobalHydra.instance().clear()
    try:
        with initialize(config_path=None, version_base=None):
            return hydra_compose("config", overrides=list(overrides))
    except UserError:
        raise
    except Exception as exc:
        raise UserError(_broken_choice(exc) or explain_hydra_error(exc, overrides, files)) from None
    finally:
        GlobalHydra.instance().clear()


_noted = False


def _note_checkout_edits(user_dirs: list[Path]) -> None:
    """Once per process: say so when the current folder is a checkout whose option files the installed
    copy does not have (README "Your own models and hardware")."""
    global _noted
    if _noted:
        return
    _noted = True
    from .paths import checkout_differences

    cwd = Path.cwd()
    if any(d == cwd.resolve() for d in user_dirs):
        return
    changed = checkout_differences(cwd, data_root())
    if changed:
        import sys

        shown = ", ".join(changed[:4]) + (f" and {len(changed) - 4} more" if len(changed) > 4 else "")
        print(
            f"note: {shown} in this folder differ from the installed copy in {data_root()}, which is what "
            f"runs; pass -cd . to use this folder's files",
            file=sys.stderr,
        )


LAUNCHER_PACKAGES = {
    "joblib": "hydra-joblib-launcher",
    "submitit_local": "hydra-submitit-launcher",
    "submitit_slurm": "hydra-submitit-launcher",
    "ray": "hydra-ray-launcher",
    "rq": "hydra-rq-launcher",
}
LAUNCHER_EXTRAS = {
    "hydra-joblib-launcher": "joblib",
    "hydra-submitit-launcher": "submitit",
    "hydra-ray-launcher": "ray",
}


def explain_hydra_error(exc: Exception, overrides, files) -> str:
    """One sentence for a Hydra composition or parse error, chosen by the exception's type and fields."""
    from hydra.errors import ConfigCompositionException, MissingConfigException, OverrideParseException
    from omegaconf.errors import ConfigAttributeError, ConfigKeyError, OmegaConfBaseException

    if isinstance(exc, OverrideParseException):
        key, eq, value = str(exc.override).partition("=")
        if eq and (any(ch in value for ch in "() ") or not value.isascii()):  # not Hydra syntax: a quoting slip
            return (
                f"Hydra's override grammar cannot read {exc.override!r} unquoted; quote the value: "
                f"'{key}=\"{value}\"' (for output paths, --out PATH takes any name)"
            )
        name = key.lstrip("+~")
        if eq and name and ("" in name.split(".") or any(ch.isspace() for ch in name)):  # the key is the slip
            return (
                f"malformed override {exc.override!r}: the key {key!r} has an empty part or a space; "
                f"a key is dotted names, e.g. grid.tp=8"
            )
        if eq and key.strip():  # key=value in form: the value is what Hydra's grammar cannot read
            return (
                f"malformed override {exc.override!r}: Hydra cannot read the value {value!r}; write a list "
                f"as {key}=[a,b], a sweep as {key}=a,b, and quote a value holding = , [ ] or quotes: "
                f"'{key}=\"...\"'"
            )
        return f"malformed override {exc.override!r}; expected key=value"
    if isinstance(exc, MissingConfigException):
        group, _, name = (exc.missing_cfg_file or "").rpartition("/")
        if group == "hydra/launcher":
            pkg = LAUNCHER_PACKAGES.get(name)
            if pkg:
                extra = LAUNCHER_EXTRAS.get(pkg)
                hint = f"pip install {pkg}" + (f' (or pip install "parallmelism[{extra}]")' if extra else "")
                return f"launcher {name!r} is not installed; {hint}"
        if group in files:
            return f"unknown {group} {name!r}; available: {', '.join(sorted(files[group]))}" + _cwd_hint(group, name)
        options = ", ".join(exc.options or [])
        return f"unknown {group or 'config'} {name!r}" + (f"; available: {options}" if options else "")
    if isinstance(exc, ConfigCompositionException):
        cause = exc.__cause__
        if isinstance(cause, (ConfigAttributeError, ConfigKeyError)):
            key = cause.full_key or cause.key
            near = _nearest_key(cause, str(key))
            if near:
                return f"unknown key {key!r}; did you mean {near}`parallmelism sweep --cfg job` lists every setting)"
            return f"unknown key {key!r} (no such setting; see `parallmelism sweep --cfg job`)"
        if isinstance(cause, OmegaConfBaseException):
            return f"bad override {cause.full_key or ''}: {_first_line(cause)}".replace(" :", ":")
        adds = [o for o in overrides if o.startswith("+") and not o.startswith("++")]
        if cause is None and len(adds) == 1:
            return f"key {adds[0][1:].split('=')[0]!r} already exists; drop the leading '+'"
    return f"could not compose the configuration: {_first_line(exc)}"


def _nearest_key(cause, key: str) -> str:
    """'workload.seq_len?': the closest sibling of a mistyped key (difflib), or, for a plan command's
    short form given to another command, its section ('workload.input_len? (input_len= alone is the
    plan commands' short form)'); '' when nothing is near."""
    import difflib

    from .plan_shorthands import PLAN_ALIASES, PLAN_SHORT, WORKLOAD_SHORT

    short = f"? ({key}= alone is the plan commands' short form; "
    if "." not in key and key in WORKLOAD_SHORT:
        return f"workload.{key}{short}"
    if "." not in key and (key in PLAN_SHORT or key in PLAN_ALIASES):
        return f"plan.{PLAN_ALIASES.get(key, key)}{short}"
    section, _, leaf = key.rpartition(".")
    if section == "workload":  # a setting of the other workload kind (workload.input_len on train)
        from ..specs.workload import InferenceWorkload, TrainWorkload

        for kind, spec in (("inference", InferenceWorkload), ("train", TrainWorkload)):
            if leaf in spec.model_fields:
                return f"workload={kind}, where {key} is a setting? ("
    try:
        siblings = [str(k) for k in cause.parent_node.keys()]
    except Exception:  # noqa: BLE001 - no parent to look in: no suggestion
        return ""
    near = difflib.get_close_matches(leaf, siblings, n=1)
    return f"{section + '.' if section else ''}{near[0]}? (" if near else ""


def _cwd_hint(group: str, name: str) -> str:
    """A file of that name in ./models or ./hardware is not read unless the folder is a config dir."""
    for sub in (f"{group}s", group):
        if (Path.cwd() / sub / f"{name}.yaml").is_file():
            return f" ({sub}/{name}.yaml in the current folder is read only with -cd . or {_env()}=.)"
    return ""


def _env() -> str:
    from .paths import ENV_CONFIG_PATH

    return "$" + ENV_CONFIG_PATH


# The most points one command line sweeps (jobs of a multirun, runs of a sweep): each is composed
# and validated (~0.2 s uncached); design spaces beyond it are a study's (parallmelism/study/).
MAX_SWEEP_POINTS = 100_000


def expand_sweeps(overrides: list[str]) -> list[list[str]]:
    """Expand Hydra sweep syntax (`model=a,b`, `x=range(..)`, `choice(..)`) into override lists.

    The public override API: each discrete sweep becomes its values (`Override.sweep_string_iterator`),
    the cross product of all sweeps is the job list; a later override of the same key replaces an
    earlier one, as in Hydra's basic sweeper.
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    for item in overrides:
        if item.startswith("-"):
            raise UserError(f"unknown option {item!r} (see --help; a config folder is -cd/--config-dir DIR)")
    try:
        parsed = OverridesParser.create().parse_overrides(list(overrides))
    except HydraException as exc:
        raise UserError(explain_hydra_error(exc, overrides, {})) from None
    from hydra.core.override_parser.types import Glob

    choices: dict[str, list[str]] = {}
    for override in parsed:
        key = override.get_key_element()
        if not key.lstrip("+~"):  # `=1`: Hydra reads a group named '' and says "Got int"
            raise UserError(f"malformed override {override.input_line!r}; expected key=value")
        if isinstance(override.value(), Glob):  # its expansion needs Hydra's config loader: was a traceback
            raise UserError(
                f"{override.input_line!r}: glob() is not expanded here; name the options as a sweep, "
                f"{key}=a,b (`parallmelism list models|hardware|engines` lists them)"
            )
        if override.is_sweep_override():
            if not override.is_discrete_sweep():
                raise UserError(
                    f"{override.input_line!r} is a continuous interval; a sweep needs a list "
                    f"(a,b), range(...) or choice(...)"
                )
            # at most MAX_SWEEP_POINTS values are read: range(8,1e30) was an endless expansion
            values = list(itertools.islice(override.sweep_string_iterator(), MAX_SWEEP_POINTS + 1))
            if not values:  # range(8,8): the product was empty and the command ran as if it were not given
                raise UserError(f"{override.input_line!r} sweeps no value; give at least one")
            choices[key] = [f"{key}={value}" for value in values]
        else:
            values = [override.get_value_element_as_str()]
            choices[key] = [f"{key}={values[0]}"]
        _check_group_choice(override, values)
        if math.prod(len(c) for c in choices.values()) > MAX_SWEEP_POINTS:
            raise UserError(
                f"the sweep has more than {MAX_SWEEP_POINTS:,} points (at {override.input_line!r}); narrow it, "
                "or name design points in a study file (`parallmelism study run`)"
            )
    return [list(job) for job in itertools.product(*choices.values())] or [[]]


def _check_group_choice(override, values: list[str]) -> None:
    """`model=NAME` (hardware, workload, grid) picks an option by name: a path there is refused in
    one sentence (Hydra would read it as a group `model/../x` and name a group that does not exist).
    `values`: the override's value, or its sweep's values."""
    key = override.get_key_element().lstrip("+~")
    if key not in GROUPS:
        return
    for value in values:
        if "/" in value or "\\" in value:
            raise UserError(
                f"{key}={value!r} is a path; give an option name ({key} files go in a folder of your "
                f"own: -cd DIR with {GROUP_DIRS[key]}/NAME.yaml inside, then {key}=NAME)"
            )


def to_run_config(cfg):
    """Validate a composed DictConfig into a RunConfig (one-line error on bad values)."""
    from omegaconf import OmegaConf

    try:
        data = OmegaConf.to_container(cfg, resolve=True)
    except Exception as exc:
        raise UserError(f"bad configuration: {_first_line(exc)}") from None
    if not isinstance(data, dict):
        raise UserError(f"bad configuration: the top level is a {type(data).__name__}, not a mapping of sections")
    data.pop("hydra", None)
    return _validated_run(data)


def _validated_run(data: dict):
    """A RunConfig from a plain mapping, checked as every composed config is: magnitudes, no
    true/false where a number belongs, the specs' validators, and derived sizes that fit the array math."""
    from pydantic import ValidationError

    from ..specs import RunConfig

    _check_magnitudes(data)
    _check_no_bool_numbers(RunConfig, data)
    try:
        run = RunConfig.model_validate(data)
    except ValidationError as exc:
        raise UserError(format_validation_error(exc)) from None
    _check_derived_sizes(run)
    return run


def _check_derived_sizes(run) -> None:
    """Sizes derived from valid inputs must fit the int64/float64 array math too: the parameter
    count (bytes are 18 per parameter) and one layer's activation elements of a step (s·B·h) stay
    below 2**53 / 64, so every product the cost model forms is exact."""
    from ..cost.params import total_params

    limit = MAX_INT // 64
    model = run.model
    params = total_params(model)
    if params > limit:
        raise UserError(
            f"model {model.name} has {float(params):.3g} parameters (hidden={model.hidden}, "
            f"layers={model.layers}); sizes beyond {float(limit):.3g} are not modelled"
        )
    wl = run.workload
    tokens = getattr(wl, "seq_len", getattr(wl, "input_len", 1)) * getattr(wl, "global_batch", getattr(wl, "batch", 1))
    if tokens * model.hidden > limit:
        raise UserError(
            f"one layer of a step holds {float(tokens * model.hidden):.3g} activation elements "
            f"(tokens x hidden); sizes beyond {float(limit):.3g} are not modelled"
        )


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


def _leaf_types(annotation) -> set:
    """The types a field annotation admits, through Optional/Union, list/tuple/dict and Annotated."""
    import typing

    args = typing.get_args(annotation)
    if not args:
        return {annotation}
    if typing.get_origin(annotation) is typing.Annotated:
        return _leaf_types(args[0])
    if typing.get_origin(annotation) is typing.Literal:
        return {type(a) for a in args}
    return set().union(*(_leaf_types(a) for a in args))


def _check_no_bool_numbers(spec, data, prefix: str = "") -> None:
    """One sentence for true/false where a number belongs (grid.ngpus=[true]): pydantic would read
    it as 1 or 0."""
    from pydantic import BaseModel

    if not isinstance(data, dict):
        return
    for name, field in spec.model_fields.items():
        if name not in data:
            continue
        value, key = data[name], f"{prefix}{name}"
        kinds = _leaf_types(field.annotation)
        for sub in (t for t in kinds if isinstance(t, type) and issubclass(t, BaseModel)):
            _check_no_bool_numbers(sub, value, key + ".")
        values = value if isinstance(value, list) else list(value.values()) if isinstance(value, dict) else [value]
        if bool not in kinds and kinds & {int, float} and any(isinstance(v, bool) for v in values):
            raise UserError(f"{key}={str(value).lower()}: a number belongs here, not true/false")


def load_run_configs(overrides: list[str], config_dirs: list[str] | None = None):
    """All RunConfigs for a command line (one per point of any Hydra sweep), with their overrides.

    A command line composed before, with the same config files, comes from the composition cache
    (config/cache.py) without importing Hydra."""
    from . import cache

    user_dirs = user_config_dirs(config_dirs)
    _check_dirs(user_dirs)
    _note_checkout_edits(user_dirs)
    key = cache.cache_key(list(overrides), user_dirs)
    hit = cache.load(key)
    if hit is not None:
        return hit
    jobs = expand_sweeps(overrides)
    results = []
    for i, job in enumerate(jobs):
        started = time.perf_counter()
        results.append((job, to_run_config(compose(job, config_dirs))))
        if i == 1:  # the first point also pays for Hydra's start-up: the second is the rate
            _note_long_sweep(jobs, time.perf_counter() - started)
    cache.store(key, results)
    return results


# A sweep whose points would take longer than this to compose is announced before it starts: a
# 12,500-value range() ran ~40 min (0.13-0.23 s a point on a loaded 2-core machine) without a word.
ANNOUNCE_SWEEP_S = 10.0


def _note_long_sweep(jobs: list[list[str]], seconds_per_point: float) -> None:
    """A note on stderr naming the swept keys, the number of points and the time composing them will
    take at the rate of the point just composed, with the way to one run over a grid key's values."""
    estimate = seconds_per_point * len(jobs)
    if estimate < ANNOUNCE_SWEEP_S:
        return
    import sys

    swept = [
        f"{jobs[0][i].split('=', 1)[0]} ({len(values):,} values)"
        for i, values in enumerate(dict.fromkeys(job[i] for job in jobs) for i in range(len(jobs[0])))
        if len(values) > 1
    ]
    took = f"{estimate / 60:.0f} min" if estimate >= 90 else f"{estimate:.0f} s"
    grid_only = all(item.split("=", 1)[0].lstrip("+").startswith("grid.") for item in swept)
    narrow = (
        "a grid key's values given as one list (grid.ngpus=[8,16,...]) are one run, composed once"
        if grid_only
        else "narrow it, or name the design points in a study file (`parallmelism study run`)"
    )
    print(
        f"note: the sweep over {', '.join(swept)} has {len(jobs):,} points, each composed apart "
        f"(~{seconds_per_point:.2f} s): ~{took} before the first layout is evaluated; {narrow}",
        file=sys.stderr,
        flush=True,
    )


def _load_option(group: str, name: str, files: dict[str, Path]):
    """Load and validate one option of a group (files: name -> path, as option_files gives)."""
    from pydantic import BaseModel, ValidationError

    from ..specs import AcceleratorSpec, EngineSpec, ModelSpec, StackSpec

    # efficiency `from:` may name any other accelerator: read are this file and those it names
    data = option_node(group, name, _Values(_OptionFiles(files)), {n: str(p) for n, p in files.items()})
    classes: dict[str, type[BaseModel]] = {
        "model": ModelSpec,
        "hardware": AcceleratorSpec,
        "engine": EngineSpec,
        "stack": StackSpec,
    }
    cls = classes[group]
    try:
        return cls.model_validate(_resolved(data, files[name]))
    except ValidationError as exc:
        raise UserError(f"{files[name]}: " + format_validation_error(exc, prefix=group)) from None


def _resolved(data: dict, path: Path) -> dict:
    """Interpolations (${...}) of one option file resolved; a file without any is read as it is
    (OmegaConf costs ~0.1-0.3 s to import: every `show` and `best` reads the reference accelerator
    of the kernel tables this way)."""
    if not _has_interpolation(data):
        return data
    from omegaconf import OmegaConf

    try:
        resolved = OmegaConf.to_container(OmegaConf.create(data), resolve=True)
        assert isinstance(resolved, dict)  # created from a dict
        return resolved
    except Exception as exc:
        raise UserError(f"{path}: {_first_line(exc)}") from None


def _has_interpolation(node) -> bool:
    """Whether a text anywhere in a YAML mapping holds `${` (an OmegaConf interpolation)."""
    if isinstance(node, str):
        return "${" in node
    if isinstance(node, dict):
        return any(_has_interpolation(k) or _has_interpolation(v) for k, v in node.items())
    if isinstance(node, (list, tuple)):
        return any(_has_interpolation(v) for v in node)
    return False


def load_option(group: str, name: str, config_dirs: list[str] | None = None):
    """A shipped or user model/hardware/engine/stack by name, validated."""
    files = option_files(group, user_config_dirs(config_dirs))
    if name not in files:
        raise UserError(f"unknown {group} {name!r}; available: {', '.join(sorted(files))}")
    return _load_option(group, name, files)


def run_with_fields(run, fields: dict[str, Any]):
    """`run` with dotted fields set (`{"hardware.peak_tflops.bf16": 900}`), validated as a composed
    config is (magnitudes, no true/false for numbers, the specs' own rules, derived sizes). The same
    RunConfig that composing `key=value` overrides gives, without Hydra: a study composes each base
    once and sets its points' fields here (0.2 ms against 0.2 s). Values interpolated from a set
    field in the option file (`${...}`) are not recomputed; a key that is not a field of the
    composed config is a KeyError (the caller composes instead, for Hydra's own message)."""
    data = run.model_dump()
    for key, value in fields.items():
        node, parts = data, key.split(".")
        for part in parts[:-1]:
            node = node.get(part) if isinstance(node, dict) else None
        if not isinstance(node, dict) or parts[-1] not in node:
            raise KeyError(key)
        node[parts[-1]] = value
    return _validated_run(data)
