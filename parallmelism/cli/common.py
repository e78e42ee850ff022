"""What every command shares: the console, the one-sentence error, the options, --cfg/--info,
loading the runs and the progress bar (where outputs go: cli/outputs.py; the options typer declares:
cli/options.py). No typer here: show's and best's bodies run without it (cli/app.py `plain_call`);
heavy imports happen inside functions."""

from __future__ import annotations

from typing import Any

from .console import console as console, fail as fail, print_error as print_error

EXTRA = {"allow_extra_args": True, "ignore_unknown_options": True}  # commands taking Hydra overrides

# ----------------------------------------------------------------------------- --cfg / --info

CFG_MODES = ("job", "hydra", "all")
INFO_MODES = ("all", "config", "defaults", "defaults-tree", "plugins", "searchpath")


def _mode_word(flag: str, modes: tuple[str, ...], overrides: list[str]) -> str:
    """The mode word after --cfg/--info (taken out of the overrides); the first mode when none is given."""
    from ..errors import UserError

    words = [o for o in overrides if "=" not in o and not o.startswith(("+", "~"))]
    for word in words:
        if word in modes:
            overrides.remove(word)
            return word
    if words:
        hint = "; a config folder is -cd/--config-dir DIR" if flag.startswith("-c") else ""
        raise UserError(f"{flag} takes {', '.join(modes)} (as in Hydra), not {words[0]!r}{hint}")
    return modes[0]


def _print_cfg(mode: str, overrides, config_dirs, resolve: bool = False):
    """Hydra's --cfg: the job config of each point of a sweep; hydra/all are Hydra's own output."""
    from omegaconf import OmegaConf

    from ..config import expand_sweeps
    from ..config.compose import compose

    jobs = expand_sweeps(overrides or [])
    if mode != "job":  # the hydra: node resolves only inside a running Hydra (hydra.runtime, hydra.job)
        from .hydra_entry import run_hydra_flags

        compose(jobs[0], config_dirs)
        return run_hydra_flags(["--cfg", mode] + (["--resolve"] if resolve else []), jobs[0], config_dirs)
    for job in jobs:
        import typer

        typer.echo(OmegaConf.to_yaml(compose(job, config_dirs), resolve=resolve))


def config_flags(cfg: bool, resolve: bool, info: bool, overrides: list[str], config_dirs) -> bool:
    """Handle --cfg/--resolve/--info; True when one of them answered the command."""
    from ..errors import UserError

    if cfg:
        _print_cfg(_mode_word("-c/--cfg", CFG_MODES, overrides), overrides, config_dirs, resolve)
        return True
    if resolve:
        raise UserError("--resolve only applies with --cfg")
    if info:
        from .hydra_entry import run_hydra_info

        run_hydra_info(_mode_word("--info", INFO_MODES, overrides), overrides, config_dirs)
        return True
    return False


# ----------------------------------------------------------------------------- runs


def load_runs(overrides, config_dirs) -> list:
    """The RunConfig of every point of the command line's sweep, in order."""
    from ..config import load_run_configs

    runs = [rc for _, rc in load_run_configs(list(overrides or []), config_dirs)]
    warn_cross_node_tp(runs)
    warn_past_context(runs)
    return runs


def warn_past_context(runs) -> None:
    """One line on stderr for the first training run longer than its RoPE model's context
    (model.max_position): a context extension, priced as asked; the checkpoint was not trained there."""
    from ..specs.run import sequence_length

    for r in runs:
        length, what = sequence_length(r.workload)
        if r.workload.kind == "train" and r.model.max_position is not None and length > r.model.max_position:
            console(stderr=True).print(
                f"warning: {what} is past model {r.model.name}'s context (max_position={r.model.max_position}): "
                f"training there extends the context (RoPE extrapolates), priced as asked",
                markup=False,
                soft_wrap=True,
            )
            return


def warn_cross_node_tp(runs) -> None:
    """One line on stderr for the first run that keeps TP groups spanning scale-up domains
    (grid.cross_node_tp): they are priced, not refused, and an engine rarely picks them."""
    run = next((r for r in runs if r.grid.cross_node_tp and r.hardware.scale_out is not None), None)
    if run is None:
        return
    hw = run.hardware
    console(stderr=True).print(
        f"warning: grid.cross_node_tp=true keeps layouts whose TP group spans scale-up domains of "
        f"{hw.scale_up.domain_size} GPUs; their TP all-reduces cross the scale-out link "
        f"({hw.scale_out.bandwidth_gbps:g} GB/s, {hw.scale_out.latency_us:g} us per step, hierarchical)",
        markup=False,
        soft_wrap=True,
    )


def warn_load_not_simulated(runs, command: str) -> None:
    """One line on stderr when a serving run sets workload.request_rate or length_trace for a
    command that does not simulate the load (sweep, best, pareto rank the fixed-concurrency means)."""
    if any(r.workload.kind == "inference" and (r.workload.request_rate or r.workload.length_trace) for r in runs):
        console(stderr=True).print(
            f"warning: {command} reports the fixed-concurrency means; the load (workload.request_rate, "
            "workload.length_trace) is simulated by show and by plan serve load_percentiles=true",
            markup=False,
            soft_wrap=True,
        )


def fastest_pinned_record(overrides, config_dirs, one_layout: str):
    """The overrides' one run evaluated in this process (numpy columns all the way to the record:
    no pandas) and its fastest layout: (record, its columns as one-row arrays, run, layouts
    evaluated). `one_layout` is the sentence a sweep of several runs is refused with."""
    from ..columns import record_of
    from ..errors import UserError
    from ..report.rank import rank_order
    from ..search import RowsCollector, stream_runs

    runs = load_runs(overrides, config_dirs)
    if len(runs) > 1:
        raise UserError(one_layout)
    run = runs[0]
    res = stream_runs([run], [RowsCollector()], workers=1, derive=False)
    cols = {k: v for k, v in res.kept[0].items() if k not in ("_run", "_row")}
    if not cols:
        raise UserError(res.explain_empty())
    chosen = int(rank_order(cols, run.workload.kind)[0])
    return record_of(cols, chosen, run), {k: v[[chosen]] for k, v in cols.items()}, run, res.evaluated


# ----------------------------------------------------------------------------- progress


class ProgressBar:
    """The driver's progress (search/driver.py `Progress`) as a rich bar on stderr: partitions
    done and layouts evaluated. Started by the driver after its worker processes exist."""

    def __init__(self, label: str):
        self.label, self.rows = label, 0
        self.bar: Any = None  # rich.progress.Progress once started
        self.task: Any = None

    def start(self, total: int) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        # a bar only where someone watches: on a pipe or a file rich draws nothing until it stops,
        # then leaves a lone newline on stderr (a blank line before every note, error or log line)
        if total <= 1 or not console(stderr=True).is_terminal:
            return
        self.bar = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rows]:,} layouts"),
            TimeElapsedColumn(),
            console=console(stderr=True),
            transient=True,
        )
        self.bar.start()
        self.task = self.bar.add_task(self.label, total=total, rows=0)

    def advance(self, partitions: int, rows: int) -> None:
        self.rows += rows
        if self.bar is not None:
            self.bar.update(self.task, advance=partitions, rows=self.rows)

    def stop(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None


def stream(
    runs, collectors, quiet: bool, chunk_rows: int = 1 << 18, label: str = "evaluating", workers=None, derive=True
):
    """The driver (search/driver.py) with a progress bar unless quiet."""
    from ..search import stream_runs

    bar = None if quiet else ProgressBar(label)

    def say(text: str) -> None:
        console(stderr=True).print(f"note: {text}", markup=False)

    return stream_runs(runs, collectors, chunk_rows, progress=bar, workers=workers, derive=derive, say=say)
