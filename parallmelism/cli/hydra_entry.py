"""`@hydra.main` entry for `parallmelism sweep -m ...`: Hydra multirun and its launcher plugins.

Each job of the sweep streams one configuration through the evaluation driver into its own part file (in the job's
output folder unless output.path is set); `parallmelism merge` (later) or pandas concatenates them.
"""

from __future__ import annotations

import sys
from pathlib import Path


def _task(cfg) -> None:
    from hydra.core.hydra_config import HydraConfig

    from ..config.compose import to_run_config
    from ..errors import UserError
    from ..search import TableSink, stream_runs

    try:
        run = to_run_config(cfg)
        out_dir = Path(HydraConfig.get().runtime.output_dir)
        path = Path(run.output.path) if run.output.path else out_dir / f"part.{run.output.format}"
        sink = TableSink(path, run.output.format, [run])  # streamed: memory bounded by the chunk size
        res = stream_runs([run], [sink], workers=1, derive=False)
        if res.evaluated == 0:
            raise UserError(res.explain_empty())
        print(f"wrote {res.kept[0]:,} rows to {path}")
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2)


def _check_points(overrides: list[str], config_dirs) -> None:
    """Compose and validate the sweep before Hydra starts, so any failure is one sentence and exit 2.

    Every value of every swept key is tried once (on the first value of the other keys): unknown
    options, launchers that are not installed and bad values surface here, not as a Hydra traceback.
    """
    from ..config.compose import compose, expand_sweeps, to_run_config

    jobs = expand_sweeps(overrides)
    base = jobs[0]
    seen = set()
    for job in jobs:
        for i, item in enumerate(job):
            if item in seen:
                continue
            seen.add(item)
            point = base[:i] + [item] + base[i + 1 :]
            to_run_config(compose(point, config_dirs))


def _hydra_main(flags: list[str], overrides: list[str], config_dirs, task=None) -> None:
    """Run Hydra's own command line (`@hydra.main`) on the nodes compose.py put into the ConfigStore."""
    import hydra

    from ..config.compose import register_option_files
    from ..config.paths import user_config_dirs

    register_option_files(user_config_dirs(config_dirs))
    main = hydra.main(config_path=None, config_name="config", version_base=None)(task or _task)
    argv = sys.argv
    sys.argv = [argv[0], *flags, *overrides]  # hydra.main's public input is the command line
    try:
        main()
    finally:
        sys.argv = argv


def run_multirun(overrides: list[str], config_dirs=None) -> None:
    """`sweep -m`: validate every point (one sentence, exit 2), then Hydra multirun and its launcher."""
    _check_points(overrides, config_dirs)
    _hydra_main(["--multirun"], overrides, config_dirs)


def _print_only(cfg) -> None:  # pragma: no cover - Hydra answers --cfg/--info before calling the task
    pass


def run_hydra_flags(flags: list[str], overrides: list[str], config_dirs=None) -> None:
    """Hydra's own `--cfg hydra|all [--resolve]` for one composed point (checked by the caller)."""
    _hydra_main(flags, overrides, config_dirs, task=_print_only)


def run_hydra_info(mode: str, overrides: list[str], config_dirs=None) -> None:
    """Hydra's `--info MODE` for this command line (after checking it composes)."""
    from ..config.compose import compose, expand_sweeps

    job = expand_sweeps(overrides)[0]
    compose(job, config_dirs)
    _hydra_main(["--info", mode], job, config_dirs, task=_print_only)
