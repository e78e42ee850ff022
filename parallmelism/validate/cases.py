"""Read case files (`shared/reference/*_measured.csv` format) into RunConfigs.

One row is one published case: configuration columns, then measured values. How a row becomes
a configuration, stated once:
- model: the `model` column names a shipped model; else `model_desc` matching a shipped model's
  display name (e.g. "Llama 3.1 405B") when the architecture columns the row gives agree with
  it; else the architecture columns (hidden, layers, heads,
  kv_heads [= heads], ffn, mlp [gelu when ffn = 4·hidden, the GPT convention, else swiglu],
  vocab). GELU models are built GPT-style: LayerNorm, biases, learned positions, dropout, tied.
  Two optional columns where a model is not that: `position_embedding` (rope | learned; blank = the
  style's: learned for GELU, rope else; a learned table has `seq_len` rows) for the rotary GELU
  models (GPT-J, Falcon), and `head_dim` (blank = hidden / heads) for attention wider than the
  residual stream (Qwen3-32B: 64 heads of 128 over hidden 5120).
  With `experts` (and `top_k`, default 1) every layer's MLP is a dropless MoE of that many
  experts of size `ffn` (Mixtral/Grok-1 style).
- hardware: `accelerator`; empty means h100-sxm-80gb (only `fits` depends on it for memory).
- `recompute` / `sequence_parallel` of `any` (or empty) mean none / false; empty `cp`, `ep`,
  `vpp` mean 1; empty `global_batch` means dp·micro_batch; empty `micro_batch` means 1.
- `dp_sharding`: the column; blank means NO_OP. No value is read from the free-text `notes`.
- `flash_attention`: the column; else false (the published Megatron cases predate it). The
  shipped copies of the case files carry the column explicitly.
"""

from __future__ import annotations

import math
import re
from typing import Any, Callable, NamedTuple

from ..errors import UserError
from ..specs import DP_SHARDING
from ..specs.run import DEFAULT_STACK


class CaseKind(NamedTuple):
    """One kind of case file (validate/kinds.py lists them): the columns that identify it, the
    handler turning its rows into (case, quantity, measured, predicted) records, the columns
    holding the published values (each a finite number > 0), and whether those may be blank
    (the row is then skipped)."""

    columns: list[str]
    handler: Callable[[Any, Any], list[dict]]
    measured: list[str]
    blank_ok: bool = False


def evaluate_one(run):
    """The one row a case's pinned layout evaluates to (a case layout that is not valid is one sentence)."""
    from ..search import evaluate_table

    df, res = evaluate_table(run)
    if len(df) == 0:
        raise UserError(f"case layout is not valid: {res.explain_empty()}")
    return df.iloc[0]


DEFAULT_HARDWARE = "h100-sxm-80gb"
# rows without a `stack` value ran the default stack: megatron-te, whose overheads were fitted on them


def _blank(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v)) or (isinstance(v, str) and v.strip() == "")


def get(row: dict, key: str, default=None):
    v = row.get(key)
    return default if _blank(v) else v


def result_row(row: dict, quantity: str, unit: str, measured, predicted) -> dict:
    """One line of validate's table: the case, what is compared (unit), measured vs predicted, its source."""
    return {
        "case": row["case"],
        "quantity": quantity,
        "unit": unit,
        "measured": float(measured),
        "predicted": float(predicted),
        "source": get(row, "source", ""),
    }


def as_int(row, key, default=None):
    v = get(row, key, default)
    if v is None:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise UserError(f"case {row.get('case')!r}: column {key}={v!r} is not a number") from None
    if not f.is_integer():
        raise UserError(f"case {row.get('case')!r}: column {key}={v!r} is not a whole number")
    if abs(f) >= 2**53:
        raise UserError(f"case {row.get('case')!r}: column {key}={v!r} is absurdly large (limit 2**53)")
    return int(f)


def as_bool(row, key, default=False):
    v = get(row, key, None)
    if v is None or str(v).lower() == "any":
        return default
    s = str(v).strip().lower()
    if s in ("true", "1", "yes"):
        return True
    if s in ("false", "0", "no"):
        return False
    raise UserError(f"case {row.get('case')!r}: column {key}={v!r} is not true/false")


def overlap_of(row) -> bool | None:
    """A serving row's optional overlap_scheduler column: true/false where the engine version that
    ran differs from the engine file's engine.overlap_scheduler (the reason in the row's notes);
    blank: None (the engine file's). Anything else is refused in one sentence."""
    v = get(row, "overlap_scheduler")
    if v is None:
        return None
    text = str(v).strip().lower()
    if text not in ("true", "false"):
        raise UserError(f"case {row.get('case')!r}: overlap_scheduler={v!r} is not true or false")
    return text == "true"


def require(row, keys, kind: str):
    missing = [k for k in keys if k not in row]
    if missing:
        raise UserError(f"{kind} case file is missing column(s) {', '.join(missing)}")


def sharding_of(row) -> str:
    v = get(row, "dp_sharding")
    if v is not None:
        if v not in DP_SHARDING:
            raise UserError(f"case {row.get('case')!r}: dp_sharding={v!r} is not one of {', '.join(DP_SHARDING)}")
        return v
    return "NO_OP"


def _alias_key(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", str(text).lower())


ARCHITECTURE_COLUMNS = {
    "hidden": "hidden",
    "layers": "layers",
    "heads": "heads",
    "kv_heads": "g",  # the spec's KV heads, heads where it leaves them out (MHA, MLA)
    "ffn": "ffn_hidden",
    "vocab": "vocab",
}


def _architecture_agrees(row, spec) -> bool:
    """Every architecture column the row gives equals the shipped model's value."""
    for col, attr in ARCHITECTURE_COLUMNS.items():
        v = get(row, col)
        if v is not None and as_int(row, col) != getattr(spec, attr):
            return False
    if get(row, "experts") is not None:
        if not spec.is_moe or as_int(row, "experts") != spec.moe.num_experts:
            return False
        if get(row, "top_k") is not None and as_int(row, "top_k") != spec.moe.top_k:
            return False
    return True


def model_of(row, shipped_models: dict):
    """ModelSpec for a case row (see module docstring)."""
    from ..specs import ModelSpec

    name = get(row, "model")
    if name is not None:
        if name not in shipped_models:
            raise UserError(f"case {row.get('case')!r}: unknown model {name!r}")
        return shipped_models[name]
    desc = str(get(row, "model_desc", "")).strip().lower()
    for spec in shipped_models.values():
        # the name, unless the row's own architecture columns say otherwise (a 405B "proxy" with
        # 8 of its layers is not the shipped 126-layer model)
        if spec.display_name and spec.display_name.lower() == desc and _architecture_agrees(row, spec):
            return spec
    # an alias: the shipped name or display name at the start of the description ("Grok-1 314B" is
    # grok-1), accepted when the row's architecture columns, where given, agree with that model
    key = _alias_key(desc)
    for spec in shipped_models.values():
        aliases = {_alias_key(spec.name), _alias_key(spec.display_name or "")} - {""}
        if key and any(key.startswith(a) for a in aliases) and _architecture_agrees(row, spec):
            return spec
    # the architecture columns of a shipped model (its MoE and attention details come with it)
    for spec in shipped_models.values():
        if (
            all(get(row, c) is not None for c in ("hidden", "layers", "heads", "vocab"))
            and _architecture_agrees(row, spec)
            and (get(row, "experts") is None or spec.is_moe)
        ):
            return spec
    require(row, ["hidden", "layers", "heads", "ffn", "vocab"], "this")
    blank = [k for k in ("hidden", "layers", "heads", "ffn", "vocab") if get(row, k) is None]
    if blank:  # a model that is not shipped is built from these columns: each needs a value
        raise UserError(
            f"case {row.get('case')!r}: column {blank[0]} is blank; a row that names no shipped model "
            "needs hidden, layers, heads, ffn and vocab"
        )
    h, ffn = as_int(row, "hidden"), as_int(row, "ffn")
    heads = as_int(row, "heads")
    mlp = get(row, "mlp") or ("gelu" if ffn == 4 * h else "swiglu")
    gpt = mlp == "gelu"
    position = str(get(row, "position_embedding") or ("learned" if gpt else "rope")).lower()
    from pydantic import ValidationError

    from ..errors import format_validation_error

    try:
        moe = None
        if get(row, "experts") is not None:  # a MoE of the row's own architecture: every layer routed
            from ..specs.model import MoESpec

            moe = MoESpec(num_experts=as_int(row, "experts"), top_k=as_int(row, "top_k", 1), ffn_hidden=ffn)
        return ModelSpec(
            name=str(get(row, "case", "case")),
            display_name=get(row, "model_desc"),
            hidden=h,
            layers=as_int(row, "layers"),
            heads=heads,
            kv_heads=as_int(row, "kv_heads", heads),
            ffn_hidden=ffn,
            mlp=mlp,
            norm="layernorm" if gpt else "rmsnorm",
            vocab=as_int(row, "vocab"),
            tie_embeddings=gpt,
            bias=gpt,
            dropout=gpt,
            position_embedding=position,
            max_position=as_int(row, "seq_len") if position == "learned" else None,
            head_dim=as_int(row, "head_dim"),
            moe=moe,
        )
    except ValidationError as exc:
        raise UserError(
            f"case {row.get('case')!r}: bad architecture: {format_validation_error(exc, 'model')}"
        ) from None
    except (TypeError, ValueError) as exc:
        raise UserError(f"case {row.get('case')!r}: bad architecture ({str(exc).splitlines()[-1].strip()})") from None


def data_parallel_size(row) -> int:
    """The row's DP size as its grid takes it: gpus / (tp·pp·cp) (Megatron's DP; EP lives inside
    it), or the `dp` column where `gpus` is blank; 0 where a size is not positive (the row's own
    checks then name the bad value)."""
    model_parallel = as_int(row, "tp", 1) * as_int(row, "pp", 1) * as_int(row, "cp", 1)
    if model_parallel < 1:
        return 0
    return as_int(row, "gpus", model_parallel * as_int(row, "dp", 1)) // model_parallel


def train_run_of(row, shipped_models: dict, hardware_of, base_output, stack_of):
    """RunConfig with a fully pinned training grid for one case row, under the row's `stack` (blank:
    the default, megatron-te; stack_of: name -> StackSpec, validate/runner.py)."""
    from pydantic import ValidationError

    from ..errors import format_validation_error
    from ..specs import GridSpec, RunConfig, TrainWorkload

    model = model_of(row, shipped_models)
    hw = hardware_of(get(row, "accelerator", DEFAULT_HARDWARE))
    tp, pp = as_int(row, "tp", 1), as_int(row, "pp", 1)
    cp, ep, dp = as_int(row, "cp", 1), as_int(row, "ep", 1), as_int(row, "dp", 1)
    mb = as_int(row, "micro_batch", 1)
    gpus = as_int(row, "gpus", tp * pp * cp * dp)
    stated = get(row, "dp") is not None and get(row, "gpus") is not None
    if stated and min(tp, pp, cp) >= 1 and gpus != tp * pp * cp * dp:  # tp, pp, cp < 1: GridSpec names them
        raise UserError(
            f"case {row.get('case')!r}: gpus={gpus} is not tp·pp·cp·dp = {tp}·{pp}·{cp}·{dp} = {tp * pp * cp * dp}"
        )
    rc = get(row, "recompute", "none")
    rc = "none" if str(rc).lower() == "any" else str(rc).lower()
    precision = str(get(row, "precision", "bf16")).lower()
    try:
        wl = TrainWorkload(
            seq_len=as_int(row, "seq_len"),
            global_batch=as_int(row, "global_batch", dp * mb),
            precision=precision,
            flash_attention=as_bool(row, "flash_attention", False),
        )
        grid = GridSpec(
            ngpus=[gpus],
            tp=[tp],
            pp=[pp],
            cp=[cp],
            ep=[ep],
            micro_batch=[mb],
            vpp=[as_int(row, "vpp", 1)],
            dp_sharding=[sharding_of(row)],
            recompute=[rc],
            sequence_parallel=[as_bool(row, "sequence_parallel", False)],
            cross_node_tp=True,  # a published run's layout ran: a tp beyond the domain is kept, not refused
        )
        stack = stack_of(get(row, "stack", DEFAULT_STACK))
        return RunConfig(model=model, hardware=hw, workload=wl, grid=grid, output=base_output, stack=stack)
    except ValidationError as exc:
        raise UserError(f"case {row.get('case')!r}: " + format_validation_error(exc)) from None
