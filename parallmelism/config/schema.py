"""The pydantic specs are the config schema: every config node is the spec's defaults plus the file's values.

A YAML file under models/, hardware/, conf/workload/, conf/grid/ or conf/engine/ holds values only; the keys it
leaves out come from the spec class (`specs/`), so every field is on the composed config and can be
overridden on the command line by its documented name (`workload.overlap_pp_comm=false`,
`engine.request_overhead_ms=5`). Required fields without a default stay absent until a file
sets them (pydantic then names what is missing).

Efficiency blocks are the exception to "defaults from the spec": a calibration is never filled in
silently. An accelerator's `efficiency:` either lists every key of `Efficiency` itself, or starts
with `from: OTHER-ACCELERATOR` and inherits every key of OTHER's (resolved) block, overriding the
keys it lists. Anything else is one sentence naming the missing keys (`efficiency_rule`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

INHERIT_KEY = "from"


def spec_defaults(cls) -> dict[str, Any]:
    """{field: default} of a pydantic model, nested models as dicts; required fields are left out."""
    from pydantic import BaseModel

    out: dict[str, Any] = {}
    for name, field in cls.model_fields.items():
        if field.is_required():
            continue
        value = field.get_default(call_default_factory=True)
        if isinstance(value, BaseModel):
            value = value.model_dump(mode="json")
        out[name] = value
    return out


def group_class(group: str, values: dict):
    """The spec class of one group's node (values: the file's mapping, to pick the workload kind)."""
    from ..specs import AcceleratorSpec, EngineSpec, GridSpec, InferenceWorkload, ModelSpec, StackSpec, TrainWorkload

    if group == "workload":
        return InferenceWorkload if values.get("kind", "train") == "inference" else TrainWorkload
    classes = {
        "model": ModelSpec,
        "hardware": AcceleratorSpec,
        "grid": GridSpec,
        "engine": EngineSpec,
        "stack": StackSpec,
    }
    return classes[group]


SUB_SPECS = {
    "model": ("moe", "mla"),
    "hardware": ("scale_up", "scale_out", "kernels"),
    "stack": ("kernels", "collectives", "layouts"),
}


def _over_defaults(cls, values: dict, keep_out: tuple[str, ...] = ()) -> dict[str, Any]:
    """values over cls's defaults, keys in the spec's field order (unknown keys last, for pydantic to name)."""
    defaults = spec_defaults(cls)
    out: dict[str, Any] = {}
    for name in cls.model_fields:
        if name in values:
            out[name] = values[name]
        elif name in defaults and name not in keep_out:
            out[name] = defaults[name]
    out.update((k, v) for k, v in values.items() if k not in out)
    return out


def with_defaults(group: str, values: dict) -> dict[str, Any]:
    """The file's mapping over its spec's defaults (plain dicts; the file wins).

    Optional sub-specs the file sets (model.moe, model.mla, hardware.scale_up/scale_out) get their
    own defaults too; the hardware efficiency block gets none (see efficiency_rule).
    """
    from ..specs.plan import PlanSpec
    from ..specs.run import OutputSpec

    if group == "config":
        out = dict(values)
        for key, cls in (("output", OutputSpec), ("plan", PlanSpec)):
            out[key] = _over_defaults(cls, values.get(key) or {})
        return out
    cls = group_class(group, values)
    out = _over_defaults(cls, values, keep_out=("efficiency",) if group == "hardware" else ())
    for key in SUB_SPECS.get(group, ()):
        if isinstance(out.get(key), dict):
            sub = cls.model_fields[key].annotation
            sub = next(a for a in getattr(sub, "__args__", (sub,)) if a is not type(None))
            out[key] = _over_defaults(sub, out[key])
    return out


def efficiency_keys() -> list[str]:
    from ..specs import Efficiency

    return list(Efficiency.model_fields)


EFFICIENCY_RULE = (
    "an accelerator's efficiency block lists every key ({keys}) or inherits them with "
    "`from: ACCELERATOR` (e.g. `efficiency: {{from: h100-sxm-80gb}}`)"
)


def resolve_efficiency(name: str, raw: Mapping[str, dict], where: dict[str, str]) -> dict[str, Any]:
    """The effective efficiency block of accelerator `name` (raw: name -> file mapping), `from:` resolved;
    a block without `from:` lists every key of Efficiency."""
    return resolve_inherited("efficiency", name, raw, where, efficiency_keys())


OVERHEADS_MOVED = (
    "{where}: `overheads: {{from: ...}}` is no longer read: training overheads belong to the software stack "
    "(conf/stack/NAME.yaml `overheads:`, keyed by accelerator); drop the block to take the stack's fit (`show` "
    "names it), or state this machine's own terms (layer_launch_us, comm_contention, step_fixed_ms, "
    "straggler_per_doubling) without `from:`, which are honoured over the stack's"
)


def resolve_overheads(name: str, raw: Mapping[str, dict], where: dict[str, str]) -> dict[str, Any] | None:
    """A hardware file's own overheads block (honoured over the stack's fit: specs RunConfig.overheads),
    or None when the file has none (the stack's fit applies). The shipped files have none; a block that
    inherits with `from:` (the rule before the stack group) is one sentence (OVERHEADS_MOVED)."""
    from ..errors import UserError

    block = raw[name].get("overheads")
    if block is None:
        return None
    if isinstance(block, dict) and INHERIT_KEY in block:
        raise UserError(OVERHEADS_MOVED.format(where=where.get(name, name)))
    return resolve_inherited("overheads", name, raw, where, None)


def resolve_inherited(
    key: str, name: str, raw: Mapping[str, dict], where: dict[str, str], required, _seen: tuple[str, ...] = ()
) -> dict[str, Any]:
    """Accelerator `name`'s block `key` with `from:` resolved (raw: name -> file mapping).

    Inheritance is generic: every key of the parent's effective block is copied, then the child's own
    keys (any key, known to the spec or not: pydantic validates them later) replace them. `required`:
    the keys a block without `from:` must list (None: the spec's defaults fill the rest).
    """
    from ..errors import UserError

    if name in _seen:
        raise UserError(f"{where[name]}: {key} `from:` chain loops ({' -> '.join(_seen + (name,))})")
    block = raw[name].get(key)
    if block is None:
        block = {}
    if not isinstance(block, dict):
        raise UserError(f"{where[name]}: {key} must be a mapping of keys to values")
    own = {k: v for k, v in block.items() if k != INHERIT_KEY}
    parent = block.get(INHERIT_KEY)
    if parent is None:
        missing = [k for k in required or () if k not in own]
        if missing:
            raise UserError(
                f"{where[name]}: {key} is missing {', '.join(missing)}; "
                + EFFICIENCY_RULE.format(keys=", ".join(required))
            )
        return own
    if not isinstance(parent, str) or parent not in raw:
        raise UserError(
            f"{where[name]}: {key} from={parent!r} is not a known accelerator; available: {', '.join(sorted(raw))}"
        )
    return {**resolve_inherited(key, parent, raw, where, required, _seen + (name,)), **own}
