"""Evaluate runs with a rich progress bar (one step per run x GPU count), same rows as `evaluate`.

`engine.evaluate` enumerates GPU counts in order and concatenates them, so evaluating one GPU
count at a time and concatenating gives the same table, row for row; the bar advances per count.
"""

from __future__ import annotations


def _steps(run) -> list:
    if run.workload.kind != "train":
        return [run]
    return [run.model_copy(update={"grid": run.grid.model_copy(update={"ngpus": [n]})}) for n in run.grid.ngpus]


def evaluate_runs(runs, quiet: bool = False):
    """[(DataFrame, LayoutGrid)] per run, like `engine.evaluate`, with a progress bar on stderr."""
    import pandas as pd

    from ..engine import evaluate
    from ..grid import LayoutGrid, add_drop_counts

    steps = [_steps(rc) for rc in runs]
    total = sum(len(s) for s in steps)
    bar = task = None
    if not quiet and total > 1:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        from .app import _console

        bar = Progress(
            TextColumn("[bold]evaluating"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rows]:,} layouts"),
            TimeElapsedColumn(),
            console=_console(stderr=True),
            transient=True,
        )
        bar.start()
        task = bar.add_task("evaluating", total=total, rows=0)
    results, rows = [], 0
    try:
        for parts in steps:
            frames, dropped, considered = [], {}, 0
            for rc in parts:
                df, grid = evaluate(rc)
                frames.append(df)
                considered += grid.considered
                add_drop_counts(dropped, grid.dropped)
                rows += len(df)
                if bar is not None:
                    bar.update(task, advance=1, rows=rows)
            df = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
            results.append((df, LayoutGrid({}, dropped, considered)))
    finally:
        if bar is not None:
            bar.stop()
    return results
