"""`plan serve --engine auto`: the serving question planned with every engine file (conf/engine/);
the verdict (which engine is cheapest, which fastest) is search/engine_choice.py's."""

from __future__ import annotations


def auto_engine(choice: str, overrides: list[str], run, config_dir, workers):
    """(the run with the cheapest engine, the verdict lines): `run` planned with every engine file
    (search/engine_choice.py). Only `--engine auto`; engine=/engine.* overrides pick one engine."""
    from ..config import load_option, option_files, user_config_dirs
    from ..errors import UserError
    from ..search import RowsCollector, frame_of_kept
    from ..search.engine_choice import engine_verdict
    from ..search.plan import serve_plan_table
    from .common import stream

    if choice != "auto":  # `--engine vllm` meant engine=vllm; `--engine best` names no engine at all
        names = sorted(option_files("engine", user_config_dirs(config_dir)))
        one = f"engine={choice} instead" if choice in names else f"engine=NAME ({', '.join(names)})"
        raise UserError(f"--engine takes auto (every engine); for one engine give {one}")
    named = [o for o in overrides if o.lstrip("+~").split("=")[0].split(".")[0] == "engine"]
    if named:
        raise UserError(f"--engine auto compares every engine as its file says; drop {named[0]!r}")
    plans, runs = [], {}
    for name in sorted(option_files("engine", user_config_dirs(config_dir))):
        r = run.model_copy(update={"engine": load_option("engine", name, config_dir)})
        res = stream([r], [RowsCollector()], True, label=f"planning {name}", workers=workers)
        rows = frame_of_kept([r], res.kept[0])
        plans.append((name, serve_plan_table(rows, r.workload, r.hardware, r.plan) if len(rows) else rows))
        runs[name] = r
    pick, lines = engine_verdict(plans, prefer=run.serving_engine().name)
    if pick is None:
        raise UserError(lines[0] + "; " + "; ".join(line.strip() for line in lines[1:]))
    return runs[pick], lines
