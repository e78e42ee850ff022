"""`parallmelism` command line. Heavy imports (pandas, hydra, pydantic) happen inside commands."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},  # inherited by every command
    help="Analytical cost model for LLM parallelism: memory, time and cost of every layout.",
)


def _print_version(value: bool):
    if value:
        from .. import SCHEMA_VERSION, __version__

        typer.echo(f"parallmelism {__version__} (output schema {SCHEMA_VERSION})")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False,
        "--version",
        "-V",
        callback=_print_version,
        is_eager=True,
        help="print the version and the output schema version, then exit",
    ),
):
    """Analytical cost model for LLM parallelism: memory, time and cost of every layout."""


OVERRIDES = typer.Argument(None, help="Hydra overrides, e.g. model=llama3.1-405b grid.ngpus=[1024]")
CONFIG_DIR = typer.Option(
    None,
    "--config-dir",
    "-cd",
    help="user folder with models/, hardware/, workload/, grid/ whose files add to or "
    "replace the shipped ones by name (repeatable; also $PARALLMELISM_CONFIG_PATH)",
)
# As in Hydra: -c/--cfg [job|hydra|all] prints the composed config, --resolve resolves ${...} in it,
# --info [all|config|defaults|defaults-tree|plugins|searchpath] prints Hydra's composition details.
# The mode word is taken from the arguments (it is never an override: overrides hold `=`).
CFG = typer.Option(False, "--cfg", "-c", help="print the composed config and exit; then job (default), hydra or all")
RESOLVE = typer.Option(False, "--resolve", help="with --cfg: resolve ${...} interpolations")
INFO = typer.Option(
    False,
    "--info",
    help="print Hydra's information about the composition and exit; then all "
    "(default), config, defaults, defaults-tree, plugins or searchpath",
)
EXTRA = {"allow_extra_args": True, "ignore_unknown_options": True}
WIDE = typer.Option(False, "--wide", help="show every table column (default: the columns that fit the terminal)")


def _console(stderr: bool = False):
    from rich.console import Console

    console = Console(stderr=stderr, highlight=False)
    if not console.is_terminal:  # pipes and CI: wide enough that tables do not wrap
        console = Console(stderr=stderr, highlight=False, width=max(console.width, 200))
    return console


def _fail(message: str, code: int = 2):
    from rich.markup import escape

    _console(stderr=True).print(f"[bold red]error:[/] {escape(message)}", markup=True, soft_wrap=True)
    raise typer.Exit(code)


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
        typer.echo(OmegaConf.to_yaml(compose(job, config_dirs), resolve=resolve))


def _config_flags(cfg: bool, resolve: bool, info: bool, overrides: list[str], config_dirs) -> bool:
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


def _default_output(runs, fmt: str, folder: str) -> Path:
    names = lambda attr: {getattr(rc, attr).name for _, rc in runs}
    model = names("model").pop() if len(names("model")) == 1 else "multi"
    hw = names("hardware").pop() if len(names("hardware")) == 1 else "multi"
    kinds = {rc.workload.kind for _, rc in runs}
    kind = kinds.pop() if len(kinds) == 1 else "multi"
    return Path(folder) / f"{model}_{hw}_{kind}.{fmt}"


def check_one_output_path(out: Optional[Path], paths: set) -> None:
    """--out and output.path= (Hydra's spelling) name one file: several output.path values (Hydra
    split a comma in it: a sweep) or the two disagreeing is one sentence."""
    from ..errors import UserError

    if len(paths) > 1:
        raise UserError(
            "output.path took several values: Hydra reads a comma as a sweep; quote a path that "
            "holds one, e.g. 'output.path=\"results/a,b.csv\"'"
        )
    given = next((p for p in paths if p), None)
    if out is not None and given and Path(given) != Path(out):
        raise UserError(f"--out {str(out)!r} and output.path={str(given)!r} disagree; give one of them")


def run_sweep(
    overrides: list[str],
    config_dirs,
    quiet: bool = False,
    top: Optional[int] = None,
    wide: bool = False,
    out_path: Optional[Path] = None,
):
    """Evaluate every run of a (possibly swept) command line, write one table, print the best rows."""
    import pandas as pd

    from ..config import load_run_configs
    from ..errors import UserError
    from ..grid import DROP_REASONS, add_drop_counts
    from ..report.rank import rank_rows
    from ..report.table import drop_table, frame_table
    from ..report.writer import check_output_path, write_table

    from .progress import evaluate_runs

    runs = load_run_configs(overrides, config_dirs)
    out = runs[0][1].output
    check_one_output_path(out_path, {rc.output.path for _, rc in runs})
    path = None
    if out_path is not None:  # --out, the spelling every command takes
        out = out.model_copy(update={"path": str(out_path), "write": True})
    if out.write:  # checked before the computation, not after it
        if out.path:
            path, fmt = check_output_path(out.path, out.format if out.format != "csv" else None)
        else:
            path, fmt = _default_output(runs, out.format, out.dir), out.format
    frames, dropped, considered = [], {}, 0
    for df, grid in evaluate_runs([rc for _, rc in runs], quiet):
        frames.append(df)
        considered += grid.considered
        add_drop_counts(dropped, grid.dropped)
    df = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    if len(df) == 0:
        from ..grid import LayoutGrid

        raise UserError(LayoutGrid({}, dropped, considered).explain_empty())
    console = _console()
    if path is not None:
        write_table(df, path, fmt)
    if not quiet:
        console.print(drop_table(dropped, DROP_REASONS, len(df)))
        best = rank_rows(df).head(top or out.top)
        fits = int(df["fits"].sum())
        console.print(
            frame_table(
                best,
                title=f"best layouts ({fits:,} of {len(df):,} fit in memory)",
                width=None if wide else console.width,
            )
        )
    if path is not None:
        console.print(f"wrote {len(df):,} rows to {path}")
    return df, path


@app.command(context_settings=EXTRA)
def sweep(
    overrides: Optional[List[str]] = OVERRIDES,
    cfg: bool = CFG,
    resolve: bool = RESOLVE,
    info: bool = INFO,
    config_dir: Optional[List[str]] = CONFIG_DIR,
    multirun: bool = typer.Option(
        False, "--multirun", "-m", help="hand the sweep to Hydra multirun (launcher plugins, one job per point)"
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no tables, just where it wrote"),
    top: Optional[int] = typer.Option(None, "--top", help="rows in the terminal table"),
    wide: bool = WIDE,
    out_path: Optional[Path] = typer.Option(
        None,
        "--out",
        "-o",
        help="write the table here (.csv or .parquet; "
        "the same as output.path=, which needs quotes around , ( ) and non-ASCII)",
    ),
):
    """Evaluate every valid layout and write a CSV (default: results/<model>_<hardware>_<workload>.csv)."""
    from ..errors import UserError

    overrides = list(overrides or [])
    try:
        if _config_flags(cfg, resolve, info, overrides, config_dir):
            return
        if multirun:
            from .hydra_entry import run_multirun

            return run_multirun(overrides, config_dir)
        run_sweep(overrides, config_dir, quiet=quiet, top=top, wide=wide, out_path=out_path)
    except UserError as exc:
        _fail(str(exc))


@app.command(context_settings=EXTRA)
def show(
    overrides: Optional[List[str]] = OVERRIDES,
    cfg: bool = CFG,
    resolve: bool = RESOLVE,
    info: bool = INFO,
    config_dir: Optional[List[str]] = CONFIG_DIR,
):
    """Explain one layout: pin the grid (grid.ngpus=[64] grid.tp=8 ...); the best match is shown."""
    from ..config import load_run_configs
    from ..engine import evaluate
    from ..errors import UserError
    from ..report.rank import rank_rows
    from ..report.table import record_table
    from ..schema import TRAINING_COLUMNS

    overrides = list(overrides or [])
    try:
        if _config_flags(cfg, resolve, info, overrides, config_dir):
            return
        runs = load_run_configs(overrides, config_dir)
        if len(runs) > 1:
            raise UserError("show explains one configuration; remove the sweep (a,b) from the overrides")
        df, grid = evaluate(runs[0][1])
        if len(df) == 0:
            raise UserError(grid.explain_empty())
        ranked = rank_rows(df)
        row = ranked.iloc[0].to_dict()
        console = _console()
        title = "layout" if len(df) == 1 else f"best of {len(df):,} matching layouts (pin more grid keys to choose)"
        run = runs[0][1]
        row = _fit_first(row)
        _print_fit_line(console, row, run.hardware)
        if run.workload.kind == "inference":
            from ..cost.inference import breakdown_for_row
            from ..report.breakdown import breakdown_table
            from ..schema import INFERENCE_COLUMNS

            console.print(record_table(row, title=title, descriptions=INFERENCE_COLUMNS))
            console.print(breakdown_table(breakdown_for_row(row, run.model, run.hardware, run.workload)))
            return
        console.print(record_table(row, title=title, descriptions=TRAINING_COLUMNS))
        # where the step time goes (cost/breakdown.py); every training row has the time model's columns
        from ..cost.breakdown import training_breakdown
        from ..report.steptime_tables import step_time_tables

        layout = {k: v[[ranked.index[0]]] for k, v in grid.columns.items()}
        for table in step_time_tables(training_breakdown(layout, run.model, run.hardware, run.workload)):
            console.print(table)
    except UserError as exc:
        _fail(str(exc))


FIT_COLUMNS = ("fits", "mem_total_gib", "mem_headroom_gib")


def _fit_first(row: dict) -> dict:
    """show's record with fit and memory headroom first: the first thing to know about a layout."""
    first = {k: row[k] for k in FIT_COLUMNS if k in row}
    return {**first, **{k: v for k, v in row.items() if k not in first}}


def _print_fit_line(console, row: dict, hw) -> None:
    if "fits" not in row or "mem_total_gib" not in row:
        return
    usable = hw.hbm_usable_gib
    need = float(row["mem_total_gib"])
    if bool(row["fits"]):
        console.print(
            f"fits: {need:,.1f} GiB per GPU of {usable:,.1f} GiB usable on {hw.name} "
            f"({usable - need:,.1f} GiB headroom)",
            markup=False,
        )
    else:
        console.print(
            f"warning: this layout does not fit: it needs {need:,.1f} GiB per GPU and {hw.name} has "
            f"{usable:,.1f} GiB usable; its times describe a layout that cannot run",
            style="bold red",
            markup=False,
        )


@app.command("list")
def list_(what: str = typer.Argument(..., help="models | hardware"), config_dir: Optional[List[str]] = CONFIG_DIR):
    """List the models or accelerators available (shipped and from config dirs)."""
    from rich.table import Table

    from ..config import option_files, user_config_dirs
    from ..config.compose import _check_dirs, _load_option
    from ..config.paths import origin
    from ..errors import UserError

    groups = {"models": "model", "model": "model", "hardware": "hardware"}
    try:
        if what not in groups:
            raise UserError(f"cannot list {what!r}; choose models or hardware")
        user_dirs = user_config_dirs(config_dir)
        _check_dirs(user_dirs)
        files = option_files(groups[what], user_dirs)
        table = Table(title=what)
        if groups[what] == "model":
            cols = ["name", "params", "hidden", "layers", "heads", "kv_heads", "ffn", "experts", "from", "file"]
        else:
            cols = [
                "name",
                "bf16 TFLOP/s",
                "HBM GiB",
                "HBM GB/s",
                "scale-up GPUs",
                "scale-up GB/s/dir",
                "scale-out GB/s/dir",
                "from",
                "file",
            ]
        for c in cols:
            table.add_column(c)
        for name, path in sorted(files.items()):
            spec = _load_option(groups[what], name, files)
            source = origin(path, user_dirs)
            if groups[what] == "model":
                from ..cost.params import total_params

                table.add_row(
                    name,
                    f"{total_params(spec) / 1e9:.2f}B",
                    str(spec.hidden),
                    str(spec.layers),
                    str(spec.heads),
                    str(spec.g),
                    str(spec.ffn_hidden),
                    f"{spec.moe.num_experts}x top-{spec.moe.top_k}" if spec.moe else "-",
                    source,
                    str(path),
                )
            else:
                so = spec.scale_out.bandwidth_gbps if spec.scale_out else "-"
                table.add_row(
                    name,
                    f"{spec.peak_tflops['bf16']:g}",
                    f"{spec.hbm_usable_gib:.1f}",
                    f"{spec.hbm_bandwidth_gbps:g}",
                    str(spec.scale_up.domain_size),
                    f"{spec.scale_up.bandwidth_gbps:g}",
                    f"{so}",
                    source,
                    str(path),
                )
        _console().print(table)
    except UserError as exc:
        _fail(str(exc))


@app.command(context_settings=EXTRA)
def validate(
    cases: Optional[List[Path]] = typer.Option(
        None, "--cases", help="case file(s) in the format of shared/reference/*_measured.csv (default: the shipped set)"
    ),
    out: Optional[Path] = typer.Option(None, "--out", help="write the per-case table here (CSV)"),
    max_error: Optional[float] = typer.Option(None, "--max-error", help="exit 1 if any |error| exceeds PCT"),
    overrides: Optional[List[str]] = OVERRIDES,
    config_dir: Optional[List[str]] = CONFIG_DIR,
):
    """Predict published measurements and report the error per case."""
    from ..errors import UserError
    from ..validate.runner import run_validation, summary
    from ..report.table import frame_table
    from ..report.writer import write_table

    try:
        table = run_validation(cases, list(overrides or []), config_dir)
        if out is not None:  # first, so an unwritable path fails before anything is printed
            write_table(table, out, "csv")
        console = _console()
        console.print(
            frame_table(table, columns=["case", "quantity", "measured", "predicted", "error_pct"], title="validation")
        )
        for line in summary(table):
            console.print(line)
        if out is not None:
            console.print(f"wrote {len(table)} rows to {out}")
        failed = table.attrs.get("failed", [])
        if failed:
            err = _console(stderr=True)
            for f in failed:
                err.print(f"could not build case {f['case']} ({f['file']}): {f['reason']}", markup=False)
            err.print(
                f"{len(failed)} case row{'s' if len(failed) > 1 else ''} could not be built; the table above "
                "holds the others",
                markup=False,
            )
            raise typer.Exit(2)
        if max_error is not None and (table["error_pct"].abs() > max_error).any():
            worst = table.loc[table["error_pct"].abs().idxmax()]
            _console(stderr=True).print(
                f"case {worst['case']} ({worst['quantity']}) is off by "
                f"{worst['error_pct']:+.2f}%, above --max-error {max_error}%"
            )
            raise typer.Exit(1)
    except UserError as exc:
        _fail(str(exc))


from .compare_cmd import compare as _compare  # noqa: E402  (CI regression check)

app.command("compare")(_compare)

from .import_hf_cmd import import_hf as _import_hf  # noqa: E402

app.command("import-hf")(_import_hf)

from .profile_cmd import profile as _profile  # noqa: E402

app.command("profile")(_profile)


from . import search_cmds  # noqa: E402,F401  (registers best, pareto, plan, merge, plot)


def _raise_on_termination() -> None:
    """SIGTERM and SIGHUP (what `timeout`, SLURM and `kill` send, and a closed terminal) raise
    SystemExit(128 + signal) instead of killing the process outright, so every writer's cleanup
    runs as it does for Ctrl-C (SIGINT: KeyboardInterrupt): temporary files and folders are
    removed and the target path is left as it was."""
    import signal

    def stop(signum, _frame):
        raise SystemExit(128 + signum)

    for name in ("SIGTERM", "SIGHUP"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), stop)


def main():
    """Console entry: typer app; any UserError escaping a command is one line and exit 2."""
    from ..errors import UserError

    _raise_on_termination()
    try:
        app()
    except KeyboardInterrupt:  # Ctrl-C: the writers have removed their temporaries on the way out
        _console(stderr=True).print("interrupted; nothing was written", markup=False)
        raise SystemExit(130) from None
    except UserError as exc:  # pragma: no cover - commands catch their own
        _fail(str(exc))


if __name__ == "__main__":
    main()
