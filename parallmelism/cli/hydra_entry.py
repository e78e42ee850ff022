"""`@hydra.main` entry for `parallmelism sweep -m ...`: Hydra multirun and its launcher plugins.

Each job of the sweep evaluates one configuration and writes its own part file (in the job's
output folder unless output.path is set); `parallmelism merge` (later) or pandas concatenates them.
"""

from __future__ import annotations

import sys
from pathlib import Path


def _task(cfg) -> None:
    from hydra.core.hydra_config import HydraConfig

    from ..config.compose import to_run_config
    from ..engine import evaluate
    from ..errors import UserError
    from ..report.writer import write_table

    try:
        run = to_run_config(cfg)
        df, grid = evaluate(run)
        if len(df) == 0:
            raise UserError(grid.explain_empty())
        out_dir = Path(HydraConfig.get().runtime.output_dir)
        path = Path(run.output.path) if run.output.path else out_dir / f"part.{run.output.format}"
        write_table(df, path, run.output.format)
        print(f"wrote {len(df):,} rows to {path}")
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2)


def run_multirun(overrides: list[str], config_dirs=None) -> None:
    import hydra

    from ..config.compose import register_option_files, search_path_override
    from ..config.paths import data_root, user_config_dirs

    user_dirs = user_config_dirs(config_dirs)
    register_option_files(user_dirs)
    main = hydra.main(config_path=str(data_root() / "conf"), config_name="config", version_base=None)(_task)
    argv = sys.argv
    sys.argv = [argv[0], "--multirun", *search_path_override(user_dirs), *overrides]
    try:
        main()
    finally:
        sys.argv = argv
