"""Run case files through the cost model: one row per (case, quantity) with a signed error.

error_pct = 100·(predicted − measured)/measured. Case kinds are recognised by their columns;
each kind maps its `quantity` to one of our output columns.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

from ..errors import UserError, require_file
from ..report.writer import check_csv_complete
from .cases import evaluate_one


def shipped_case_files() -> list[Path]:
    folder = resources.files("parallmelism") / "cases"
    return sorted(Path(str(p)) for p in folder.iterdir() if p.name.endswith(".csv"))


_evaluate_one = evaluate_one  # the name tests and benchmarks/fit_serving_overhead.py use


def _check_measured(row, path: Path, number: int, measured: list[str], blank_ok: bool) -> None:
    """A measured value that is text, blank, NaN, inf or <= 0 is one sentence naming the file,
    column, row and value (an error against it would be meaningless: inf %, a sign flip). A measured
    column the file does not have is an optional one of its kind (the kind's identifying columns are
    checked before)."""
    from ..report.writer import positive_number

    for col in measured:
        if col not in row.columns:
            continue
        value = row[col].iloc[0]
        if value is None and blank_ok:
            continue
        positive_number(path, col, value, number)


def _context(overrides, config_dirs):
    from ..config import option_files, user_config_dirs
    from ..config.compose import _load_option, compose, to_run_config

    user_dirs = user_config_dirs(config_dirs)
    model_files = option_files("model", user_dirs)
    models = {n: _load_option("model", n, model_files) for n in model_files}

    # validate builds the model, workload and layout of every case from its row; an override may
    # change the accelerators (hardware.*: efficiencies, links), the serving engines (engine.*:
    # overheads) or the training stacks (stack.*: fitted overheads, kernels), applied to each case's
    hw_overrides = [o for o in overrides if o.lstrip("+~").startswith("hardware.")]
    # engine=NAME: the engine of rows without an engine column; engine.*: every engine's fields
    engine_choice = [o for o in overrides if o.lstrip("+~").split("=")[0] == "engine"]
    engine_overrides = [o for o in overrides if o.lstrip("+~").startswith("engine.")]
    stack_overrides = [o for o in overrides if o.lstrip("+~").startswith("stack.")]
    other = [o for o in overrides if o not in hw_overrides + engine_choice + engine_overrides + stack_overrides]
    if other:
        raise UserError(
            f"validate takes hardware.*, engine=NAME, engine.* and stack.* overrides only (each case row sets "
            f"its model, workload, layout and stack); not {other[0]!r}"
        )

    def option_of(group: str, group_overrides: list[str], what: str):
        """name -> the case's `group` option (its file, or composed with the group.* overrides as a sweep
        would), loaded once per name; an unknown name is one sentence naming the case file's column."""
        files, loaded = option_files(group, user_dirs), {}

        def of(name):
            if name not in files:
                raise UserError(f"unknown {what} {name!r} in case file; available: {', '.join(sorted(files))}")
            if name not in loaded:
                loaded[name] = (
                    getattr(to_run_config(compose([f"{group}={name}", *group_overrides], config_dirs)), group)
                    if group_overrides
                    else _load_option(group, name, files)
                )
            return loaded[name]

        return of

    # the case's software stack (its `stack` column; blank: megatron-te) and accelerator
    stack_of = option_of("stack", stack_overrides, "stack")
    hardware_of = option_of("hardware", hw_overrides, "accelerator")
    named_engine = option_of("engine", engine_overrides, "engine")

    base = to_run_config(compose(hw_overrides + engine_choice + engine_overrides + stack_overrides, config_dirs))

    def engine_of(name):
        """The case's serving engine; None (a row without an engine) the composed default's (conf/config.yaml)."""
        return base.engine if name is None else named_engine(name)

    return models, hardware_of, base.output, engine_of, stack_of


NON_FINITE = {"nan", "inf", "+inf", "-inf", "infinity", "+infinity", "-infinity"}


def _check_finite(row) -> None:
    """A NaN or infinite value anywhere in a case row is one sentence naming the case and column."""
    for col, v in row.iloc[0].items():
        if isinstance(v, str) and v.strip().lower() in NON_FINITE:
            raise UserError(f"column {col}={v!r} is not a finite number")


def _check_unique_cases(df, path: Path, seen: dict) -> None:
    """Each case name once across the case files: a row given twice would count twice in every
    statistic (mean, median, --max-error), so a repeated name is one sentence naming both places."""
    if "case" not in df.columns:
        return
    for i, name in enumerate(df["case"], start=1):
        if name is None:
            continue
        if name in seen:
            first, row = seen[name]
            raise UserError(
                f"case {name!r} appears twice ({first.name} row {row} and {path.name} row {i}); "
                "each case is counted once: give every row its own name"
            )
        seen[name] = (path, i)


def serving_case_info(df, default_engine: str) -> list[dict]:
    """Per serving case row: its engine (the `engine` column, blank = the default engine), which
    sample it belongs to (`sample`: independent | aiconfigurator | a held-out sample of
    engine_report.HELD_OUT_SAMPLES; blank = independent) and its closed-loop concurrency (blank = 1),
    for the per-engine report (validate/engine_report.py)."""
    out = []
    for row in df.to_dict("records"):
        out.append(
            {
                "case": row["case"],
                "engine": str(row.get("engine") or default_engine).lower(),
                "sample": str(row.get("sample") or "independent"),
                "concurrency": float(row.get("concurrency") or 1),
            }
        )
    return out


def run_validation(case_files, overrides, config_dirs):
    import pandas as pd

    from .kinds import CASE_KINDS

    files = list(case_files or shipped_case_files())
    ctx = _context(overrides, config_dirs)
    out, failed, serving = [], [], []
    stacks: dict = {}  # step-time case -> the software stack it ran (its `stack` column; blank: megatron-te)
    seen: dict = {}  # case name -> (file, row) where it first appears
    files = [require_file(f, "case file") for f in files]
    for i, f in enumerate(files):
        for g in files[:i]:
            if os.path.samefile(f, g):
                raise UserError(f"case file {str(f)!r} is given twice; each case is counted once")
    for f in files:
        check_csv_complete(f)  # a file cut short is refused as compare and merge refuse it
        try:
            df = pd.read_csv(f, dtype=str, keep_default_na=False)
        except Exception as exc:
            raise UserError(f"cannot read case file {str(f)!r}: {str(exc).splitlines()[0]}") from None
        df = df.replace({"": None})
        _check_unique_cases(df, f, seen)
        for kind, (cols, handler, measured, blank_ok) in CASE_KINDS.items():
            if all(c in df.columns for c in cols):
                if kind == "step_time":
                    from .cases import DEFAULT_STACK

                    named = df["stack"] if "stack" in df.columns else [None] * len(df)
                    stacks.update((c, s or DEFAULT_STACK) for c, s in zip(df["case"], named))
                for i in range(len(df)):  # every row: one that cannot be built is reported, not fatal
                    row = df.iloc[[i]].reset_index(drop=True)
                    try:
                        _check_measured(row, f, i + 1, measured, blank_ok)
                        _check_finite(row)
                        out += handler(row, ctx)
                    except UserError as exc:
                        failed.append({"case": str(row["case"].iloc[0]), "file": f.name, "reason": str(exc)})
                if kind == "inference":
                    serving += serving_case_info(df, ctx[3](None).name)
                break
        else:
            known = "; ".join(f"{k}: {', '.join(c)}" for k, (c, *_) in CASE_KINDS.items())
            raise UserError(f"case file {str(f)!r} has none of the known column sets ({known})")
    table = pd.DataFrame(out)
    if len(table) == 0:
        if failed:
            raise UserError(f"no case could be built; the first: {failed[0]['case']}: {failed[0]['reason']}")
        raise UserError("the case files hold no cases")
    table["error_pct"] = 100.0 * (table["predicted"] - table["measured"]) / table["measured"]
    table = table[["case", "quantity", "unit", "measured", "predicted", "error_pct", "source"]]
    table.attrs["failed"] = failed  # rows that could not be built: (case, file, reason)
    table.attrs["stack"] = {c: s for c, s in stacks.items() if c in set(table["case"])}
    table.attrs["serving"] = serving  # serving cases' engine, sample and concurrency (engine_report.py)
    return table


def summary(table) -> list[str]:
    lines = []
    for q, part in list(table.groupby("quantity", sort=False)) + [("all", table)]:
        e = part["error_pct"].abs()
        lines.append(
            f"{q}: {len(part)} cases, |error| mean {e.mean():.2f}%, median {e.median():.2f}%, "
            f"max {e.max():.2f}% ({part.loc[e.idxmax(), 'case']})"
        )
    return lines + stack_summary(table)


def stack_summary(table) -> list[str]:
    """One line per software stack of the step-time cases (table.attrs["stack"]) where the cases ran
    more than one: mean |error|, max and mean signed error (issue 32's bars are per stack)."""
    stacks = table.attrs.get("stack") or {}
    if len(set(stacks.values())) < 2:
        return []
    lines = []
    for name, part in per_stack(table):
        e = part["error_pct"]
        lines.append(
            f"  stack {name}: {len(part)} step-time cases, |error| mean {e.abs().mean():.2f}%, "
            f"max {e.abs().max():.2f}% ({part.loc[e.abs().idxmax(), 'case']}), mean signed {e.mean():+.2f}%"
        )
    return lines


def per_stack(table):
    """[(stack, its step-time rows of `table`)] in name order (table.attrs["stack"])."""
    stacks = table.attrs.get("stack") or {}
    named = table[table["case"].isin(set(stacks))]
    key = named["case"].map(stacks)
    return [(name, named[key == name]) for name in sorted(set(key))]
