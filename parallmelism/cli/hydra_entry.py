"""`@hydra.main` entry for `parallmelism sweep -m` and `best -m`: Hydra multirun and its launcher plugins.

Each job of a sweep streams one configuration through the evaluation driver into its own part file (in the job's
output folder unless output.path is set); each job of `best -m` searches its configuration and writes its best
table (winner, runner-ups, near misses per GPU count) as part.csv. `parallmelism merge` (later) or pandas
concatenates them: the jobs' configurations are disjoint, so the merged best tables are the study's.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from ..words import counted


def _task(cfg) -> None:
    from hydra.core.hydra_config import HydraConfig

    from ..config.compose import to_run_config
    from ..errors import UserError
    from ..search import TableSink, stream_runs
    from ..stop import note_target
    from .outputs import output_target

    try:
        run = to_run_config(cfg)
        out_dir = Path(HydraConfig.get().runtime.output_dir)
        path, fmt = (
            output_target(run.output)
            if run.output.path
            else (out_dir / f"part.{run.output.default_format}", run.output.default_format)
        )
        note_target(path)  # a Ctrl-C after this part's rename names it (cli/app.py interrupted_message)
        sink = TableSink(path, fmt, [run])  # streamed: memory bounded by the chunk size
        res = stream_runs([run], [sink], workers=1, derive=False)
        if res.evaluated == 0:
            raise UserError(res.explain_empty())
        print(f"wrote {counted(res.kept[0], 'row')} to {path}")
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2)


def _best_task(cfg, top: int) -> None:
    """One job of `best -m`: the best table of this job's configuration, written as part.csv."""
    from hydra.core.hydra_config import HydraConfig

    from ..config.compose import to_run_config
    from ..errors import UserError
    from ..report.writer import write_table
    from ..search import stream_runs
    from ..search.best import search_best

    try:
        run = to_run_config(cfg)
        path = Path(HydraConfig.get().runtime.output_dir) / "part.csv"
        table, evaluated = search_best([run], top, lambda rs, cs: stream_runs(rs, cs, workers=1))
        write_table(table, path)
        print(f"wrote {counted(len(table), 'row')} ({counted(evaluated, 'layout')} evaluated) to {path}")
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2)


def _check_points(overrides: list[str], config_dirs) -> None:
    """Compose and validate the sweep before Hydra starts, so any failure is one sentence and exit 2.

    Every value of every swept key is tried once (on the first value of the other keys): unknown
    options, launchers that are not installed, bad values and a grid with no valid layout (heads
    not divisible by a pinned tp, ...) surface here, not as a Hydra traceback or a failed job.
    """
    from ..config.compose import compose, expand_sweeps, to_run_config
    from ..errors import UserError
    from ..search.chunks import layout_grid
    from .outputs import check_not_read, output_target

    jobs = expand_sweeps(overrides)
    base = jobs[0]
    seen = set()
    for job in jobs:
        for i, item in enumerate(job):
            if item in seen:
                continue
            seen.add(item)
            point = base[:i] + [item] + base[i + 1 :]
            run = to_run_config(compose(point, config_dirs))
            if run.output.path:  # a job's own output.path: the rules every output path keeps
                check_not_read(output_target(run.output)[0], [run], config_dirs, "output.path")
            grid = layout_grid(run)
            if len(grid) == 0:
                raise UserError(f"{' '.join(point)}: {grid.explain_empty()}")


def refuse_single_outputs(**given) -> None:
    """Options that name one file (--out, --full-output) do not combine with -m: every job writes
    its own part in its job folder (or at its own output.path), and `merge` joins them."""
    from ..errors import UserError

    for option, value in given.items():
        if value is not None:
            flag = "--" + option.replace("_", "-")
            raise UserError(
                f"{flag} names one file and -m runs one job per point, each writing its own part; "
                "leave it out and join the parts with `parallmelism merge`"
            )


def _check_launch(overrides: list[str]) -> Path | None:
    """What Hydra would otherwise find only while launching, with a traceback and a job folder
    left behind: a sweep folder that cannot be written, joblib's n_jobs=0, and SLURM's launcher off
    a SLURM machine. Returns the sweep folder when this call created it."""

    from ..errors import UserError
    from ..report.writer import check_writable_target, write_error_reason

    given = dict(o.split("=", 1) for o in overrides if "=" in o)
    sweep_dir = given.get("hydra.sweep.dir")
    if sweep_dir and "${" not in sweep_dir:
        check_writable_target(Path(sweep_dir), folder_target=True)
    n_jobs = given.get("hydra.launcher.n_jobs")
    if n_jobs is not None:  # joblib's: a count, or -1 for every core (-2 all but one, ...); 0 means nothing
        try:
            ok = int(n_jobs) != 0
        except ValueError:
            ok = False
        if not ok:
            raise UserError(
                f"hydra.launcher.n_jobs={n_jobs}: give a number of parallel jobs (1, 2, ...) or -1 for every core"
            )
    if given.get("hydra/launcher") == "submitit_slurm" and shutil.which("srun") is None:
        raise UserError(
            "hydra/launcher=submitit_slurm submits through SLURM, and this machine has no srun; "
            "run it on a SLURM login node, or use submitit_local or joblib here"
        )
    # the last check, so a refused launch leaves no folder behind
    if sweep_dir and "${" not in sweep_dir:
        created = not Path(sweep_dir).exists()
        try:  # Hydra creates it next, unchecked
            Path(sweep_dir).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UserError(f"cannot create hydra.sweep.dir {sweep_dir!r}: {write_error_reason(exc)}") from None
        return Path(sweep_dir) if created else None
    return None


def _launch(flags: list[str], overrides: list[str], config_dirs, created, task=None) -> None:
    """Hydra's launch: a launcher that fails (a plugin's own check, a bad launcher setting) is one
    sentence, and the sweep folder this run created does not stay behind when no job ran in it
    (only its multirun.yaml)."""
    from ..errors import UserError

    try:
        _hydra_main(flags, overrides, config_dirs, task)
    except Exception as exc:  # noqa: BLE001 - a plugin's error, whatever its class
        if created is not None and {p.name for p in created.iterdir()} <= {"multirun.yaml"}:  # no job ran
            shutil.rmtree(created, ignore_errors=True)
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise UserError(f"Hydra's launcher failed: {first}") from None


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
    _launch(["--multirun"], overrides, config_dirs, _check_launch(overrides))


def run_multirun_best(overrides: list[str], config_dirs, top: int) -> None:
    """`best -m`: validate every point (one sentence, exit 2), then one best search per job."""
    _check_points(overrides, config_dirs)
    created = _check_launch(overrides)

    def best_task(cfg) -> None:  # a function (Hydra reads its module and code), pickled by the launchers
        _best_task(cfg, top)

    _launch(["--multirun"], overrides, config_dirs, created, best_task)


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
