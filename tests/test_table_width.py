"""Tables at a fixed terminal width (issue 28): names and categorical values are never cut; a narrow
terminal leaves whole columns out and names them; `best` spells out the winner's whole layout and
gives `why` lines of its own; `--wide` shows every column.

Each CLI test runs the command in-process with the command's console replaced by a rich Console
of a fixed width (what a terminal of that many columns gets)."""

from __future__ import annotations

import re

import pandas as pd
import pytest
from rich.cells import cell_len
from rich.console import Console
from typer.testing import CliRunner

from conftest import REPO
from parallmelism.report.table import fit_table, frame_table
from parallmelism.schema import LAYOUT_AXES

ELLIPSIS = "…"
SHIPPED_HARDWARE = ["h100-sxm-80gb", "h100-sxm-80gb-profiled", "a100-sxm-40gb", "gb200-nvl72", "mi300x-192gb"]
SHIPPED_MODELS = ["llama3.1-405b", "llama3.1-70b", "llama3.1-8b", "mixtral-8x22b", "mixtral-8x7b", "deepseek-v3"]


def at_width(monkeypatch, width: int, *args) -> tuple[int, str]:
    """Run `parallmelism ARGS` with a terminal of `width` columns; (exit code, output)."""
    import parallmelism.cli.common as common
    import parallmelism.cli.console as console_module
    from parallmelism.cli.app import app

    def terminal(stderr=False):
        return Console(stderr=stderr, width=width, color_system=None, highlight=False)

    monkeypatch.setattr(common, "console", terminal)
    monkeypatch.setattr(console_module, "stdout_console", terminal)  # show's (a PlainConsole on pipes)
    res = CliRunner().invoke(app, [str(a) for a in args])
    return res.exit_code, res.output


def cells_of(text: str) -> list[str]:
    """Every table cell's text (│-separated), stripped."""
    return [c.strip() for line in text.splitlines() for c in re.split(r"[│┃]", line)]


def assert_fits(text: str, width: int):
    assert ELLIPSIS not in text, text
    too_wide = [line for line in text.splitlines() if cell_len(line) > width]
    assert not too_wide, "\n".join(too_wide)


def shown_or_named(text: str, columns) -> None:
    """Each column is a header of the table or named in its 'not shown' caption."""
    flat = " ".join(text.split())
    caption = flat.split("not shown at this width:", 1)[1] if "not shown at this width:" in flat else ""
    for c in columns:
        assert c in cells_of(text) or c in caption, f"{c} neither shown nor named\n{text}"


# ---- list -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("width", [80, 100, 120])
def test_list_hardware_never_cuts_a_name(monkeypatch, width):
    code, out = at_width(monkeypatch, width, "list", "hardware")
    assert code == 0, out
    assert_fits(out, width)
    cells = cells_of(out)
    for name in SHIPPED_HARDWARE:  # h100-sxm-80gb and h100-sxm-80gb-profiled told apart
        assert name in cells, out
    shown_or_named(out, ["name", "bf16 TFLOP/s", "HBM GiB", "from", "file"])


@pytest.mark.parametrize("width", [40, 60, 80, 100, 120])
def test_list_models_never_cuts_a_name(monkeypatch, width):
    code, out = at_width(monkeypatch, width, "list", "models")
    assert code == 0, out
    assert_fits(out, width)
    for name in SHIPPED_MODELS:
        assert name in cells_of(out), out
    shown_or_named(out, ["name", "params", "hidden", "layers", "experts", "from", "file"])


def test_list_wide_shows_every_column_at_40(monkeypatch):
    code, out = at_width(monkeypatch, 40, "list", "models", "--wide")
    assert code == 0 and "not shown" not in out
    for c in ("name", "params", "experts", "from", "file"):
        assert c in cells_of(out)
    assert str(REPO / "models" / "llama3.1-8b.yaml") in out  # the path, whole


def _user_models(tmp_path, names):
    folder = tmp_path / "mine" / "models"
    folder.mkdir(parents=True)
    text = (REPO / "models" / "llama3.1-8b.yaml").read_text()
    for n in names:
        (folder / f"{n}.yaml").write_text(text.replace("name: llama3.1-8b", f"name: {n}"))
    return tmp_path / "mine"


@pytest.mark.parametrize("width", [40, 80])
def test_list_a_user_model_name_longer_than_the_terminal_is_listed_whole(monkeypatch, tmp_path, width):
    """73 characters: at 80 columns the table keeps the name column alone (the others named); at 40
    no column can hold it and the rows are listed as column=value groups, each whole."""
    name = "my-organisation-llama3.1-8b-finetuned-for-long-context-v2-experiment-0042"
    code, out = at_width(monkeypatch, width, "list", "models", "-cd", _user_models(tmp_path, [name]))
    assert code == 0, out
    assert ELLIPSIS not in out
    if width == 80:
        assert name in cells_of(out) and "llama3.1-8b" in cells_of(out)
        shown_or_named(out, ["params", "hidden", "from", "file"])
    else:
        assert f"name={name}" in out and "name=llama3.1-8b" in out  # the shipped ones too


def test_list_unicode_and_wide_character_names_whole(monkeypatch, tmp_path):
    names = ["лама-8б-тест", "模型-八十亿-测试", "café-ünïcode-model"]
    code, out = at_width(monkeypatch, 60, "list", "models", "-cd", _user_models(tmp_path, names))
    assert code == 0, out
    assert_fits(out, 60)  # double-width characters counted as two cells
    for n in names:
        assert n in cells_of(out), out


def test_list_many_user_models_in_one_table(monkeypatch, tmp_path):
    names = [f"user-model-{i:02d}-with-a-fairly-long-name" for i in range(30)]
    code, out = at_width(monkeypatch, 80, "list", "models", "-cd", _user_models(tmp_path, names))
    assert code == 0, out
    assert_fits(out, 80)
    assert all(n in cells_of(out) for n in names + SHIPPED_MODELS)
    shown_or_named(out, ["params", "from", "file"])  # "user folder <its long path>" is left out whole


# ---- best -------------------------------------------------------------------------------------------

BEST = ("best", "model=llama3.1-70b", "grid.ngpus=[256]", "grid.dp_sharding=[OPTIMIZER_STATES_AND_GRADS,FULLY_SHARD]")


@pytest.fixture(scope="module")
def best_file(tmp_path_factory):
    from conftest import invoke

    out = tmp_path_factory.mktemp("best") / "best.csv"
    code, text = invoke(*BEST, "--quiet", "--out", out)
    assert code == 0, text
    return pd.read_csv(out)


@pytest.mark.parametrize("width", [80, 100, 120])
def test_best_shows_the_winners_whole_layout_and_why_on_lines_of_its_own(monkeypatch, tmp_path, best_file, width):
    code, out = at_width(monkeypatch, width, *BEST, "--out", tmp_path / "b.csv")
    assert code == 0, out
    assert_fits(out, width)
    winner = best_file[best_file["rank"] == 1].iloc[0]
    flat = " ".join(out.split())
    layout = " ".join(f"{c}={winner[c]}" for c in LAYOUT_AXES)
    shown, _ = _columns_of_table(out)
    if not all(c in shown for c in LAYOUT_AXES):  # layout columns left out: the winner is spelt out
        assert f"winner at 256 GPUs: {layout}" in flat, out
    assert "why, row by row:" in out
    for why in best_file["why"]:  # every reason, whole (near misses: the margin note once, below)
        short = re.sub(r"; near misses within .* are listed\)$", ")", why)
        assert short in flat, (short, out)
    lines = out.splitlines()
    start = lines.index("why, row by row:")
    assert len([x for x in lines[start + 1 :] if x.startswith("  ")]) == len(best_file)
    assert sum(1 for x in lines[start + 1 :] if not x.startswith(("  ", "(", "wrote"))) <= len(best_file)  # wraps


def _columns_of_table(out: str):
    header = next(line for line in out.splitlines() if line.startswith("┃") and "ngpus" in line)
    return [c.strip() for c in header.strip("┃").split("┃")], header


def test_best_at_80_columns_keeps_the_categorical_columns_whole(monkeypatch, tmp_path, best_file):
    code, out = at_width(monkeypatch, 80, *BEST, "--out", tmp_path / "b.csv")
    assert code == 0
    winner = best_file[best_file["rank"] == 1].iloc[0]
    flat = " ".join(out.split())
    for c in ("dp_sharding", "recompute", "dp", "sequence_parallel"):  # the winner's, whole
        assert f"{c}={winner[c]}" in flat or winner[c] in cells_of(out)
    shown_or_named(out, ["ngpus", "rank", *LAYOUT_AXES, "time_step_s", "mfu", "mem_total_gib"])


def test_best_wide_keeps_why_in_the_table(monkeypatch, tmp_path, best_file):
    code, out = at_width(monkeypatch, 80, *BEST, "--wide", "--out", tmp_path / "b.csv")
    assert code == 0, out
    shown, _ = _columns_of_table(out)
    assert shown == ["ngpus", "rank", *LAYOUT_AXES, "time_step_s", "mfu", "mem_total_gib", "why"]
    assert "not shown" not in out and "why, row by row" not in out
    assert best_file["why"].iloc[0] in out


def test_best_writes_the_full_why_text(best_file):
    near = best_file[best_file["rank"] == 0]
    assert len(near) and near["why"].str.contains("near misses within").all()  # the file keeps it all


# ---- compare ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def optimizer_pair(tmp_path_factory):
    """Rows that differ only in OPTIMIZER_STATES vs OPTIMIZER_STATES_AND_GRADS, each moved."""
    folder = tmp_path_factory.mktemp("cmp")
    df = pd.read_csv(REPO / "tests" / "golden" / "llama3.1-70b_h100_64-512.csv")
    df = df[df.dp_sharding == "OPTIMIZER_STATES"].head(3)
    base = pd.concat([df, df.assign(dp_sharding="OPTIMIZER_STATES_AND_GRADS")])
    base.to_csv(folder / "base.csv", index=False)
    base.assign(time_step_s=base.time_step_s * [1.1, 1.2, 1.3, 1.4, 1.5, 1.6]).to_csv(folder / "new.csv", index=False)
    return folder / "base.csv", folder / "new.csv"


@pytest.mark.parametrize("width", [40, 60, 80, 100, 120])
def test_compare_tells_the_two_optimizer_strategies_apart(monkeypatch, optimizer_pair, width):
    code, out = at_width(monkeypatch, width, "compare", *optimizer_pair)
    assert code == 1, out
    assert ELLIPSIS not in out
    tokens = re.findall(r"dp_sharding=(\w+)", out)
    assert sorted(set(tokens)) == ["OPTIMIZER_STATES", "OPTIMIZER_STATES_AND_GRADS"], out
    assert tokens.count("OPTIMIZER_STATES") == 3 and tokens.count("OPTIMIZER_STATES_AND_GRADS") == 3


def test_compare_at_80_shows_the_change_and_names_what_it_leaves_out(monkeypatch, optimizer_pair):
    code, out = at_width(monkeypatch, 80, "compare", *optimizer_pair)
    assert_fits(out, 80)
    assert "+60%" in out and "time_step_s" in out
    shown_or_named(out, ["row", "column", "old", "new", "rel change"])


# ---- sweep, show, plan, pareto, validate ------------------------------------------------------------


@pytest.mark.parametrize("width", [40, 60, 80, 120])
def test_sweep_drops_whole_columns_and_names_them(monkeypatch, tmp_path, width):
    from parallmelism.report.table import DEFAULT_COLUMNS

    args = ("sweep", "model=llama3.1-8b", "grid.ngpus=[8]", "grid.dp_sharding=[OPTIMIZER_STATES_AND_GRADS]")
    code, out = at_width(monkeypatch, width, *args, "--out", tmp_path / "s.csv")
    assert code == 0, out
    assert_fits(out, width)
    shown_or_named(out.split("best layouts", 1)[1], DEFAULT_COLUMNS)
    assert "--wide shows all" in " ".join(out.split()) or width >= 120


def test_sweep_wide_shows_every_value_at_40(monkeypatch, tmp_path):
    args = ("sweep", "model=llama3.1-8b", "grid.ngpus=[8]", "grid.dp_sharding=[OPTIMIZER_STATES_AND_GRADS]", "--wide")
    code, out = at_width(monkeypatch, 40, *args, "--out", tmp_path / "s.csv")
    assert code == 0 and "not shown" not in out.split("best layouts", 1)[1]
    assert "OPTIMIZER_STATES_AND_GRADS" in cells_of(out)


@pytest.mark.parametrize("width", [40, 80])
def test_show_keeps_names_and_categorical_values_whole(monkeypatch, width):
    args = ("show", "model=llama3.1-8b", "grid.ngpus=[8]", "grid.tp=2", "grid.pp=1")
    code, out = at_width(monkeypatch, width, *args, "grid.dp_sharding=OPTIMIZER_STATES_AND_GRADS")
    assert code == 0, out
    assert ELLIPSIS not in out
    for value in ("llama3.1-8b", "h100-sxm-80gb", "OPTIMIZER_STATES_AND_GRADS", "mem_activations_gib"):
        assert re.search(rf"(^|[\s│=]){re.escape(value)}($|[\s│])", out, re.M), value


def test_show_inference_breakdown_at_60(monkeypatch):
    code, out = at_width(monkeypatch, 60, "show", "model=llama3.1-8b", "workload=inference", "grid.ngpus=[1]")
    assert code == 0, out
    assert_fits(out, 60)
    assert "per-op breakdown" in out and "bound" in out


def test_validate_at_80_keeps_case_names_and_the_error(monkeypatch):
    cases = REPO / "parallmelism" / "cases" / "memory_measured.csv"
    code, out = at_width(monkeypatch, 80, "validate", "--cases", cases)
    assert code == 0, out
    assert_fits(out, 80)
    names = pd.read_csv(cases, comment="#")["case"]
    assert all(n in cells_of(out) for n in names)
    assert "error_pct" in cells_of(out) and "predicted" in cells_of(out)


def test_plan_train_and_pareto_fit_60_columns(monkeypatch, tmp_path):
    code, out = at_width(
        monkeypatch,
        60,
        "plan",
        "train",
        "model=llama3.1-8b",
        "tokens=15e12",
        "plan.ngpus=[8,16]",
        "--out",
        tmp_path / "p.csv",
    )
    assert code == 0, out
    assert ELLIPSIS not in out
    code, out = at_width(monkeypatch, 60, "pareto", "model=llama3.1-8b", "grid.ngpus=[8]", "--out", tmp_path / "f.csv")
    assert code == 0, out
    assert_fits(out, 60)


# ---- fit_table / frame_table directly ---------------------------------------------------------------


def test_fit_table_drops_columns_before_it_cuts_a_value():
    cells = {"name": ["alpha", "a-much-longer-name"], "x": ["1", "22"], "kind": ["OPTIMIZER_STATES_AND_GRADS", "NO_OP"]}
    kinds = {"name": "value", "x": "number", "kind": "value"}
    console = Console(width=40, color_system=None, record=True)
    console.print(fit_table(list(cells), cells, kinds, 40, keep=("name",)), crop=False)
    out = console.export_text()
    assert "a-much-longer-name" in out and ELLIPSIS not in out
    assert "OPTIMIZER_STATES" not in out and "not shown at this width: kind" in " ".join(out.split())


def test_fit_table_lists_rows_when_the_name_cannot_fit():
    name = "x" * 70
    cells = {"name": [name], "value": ["OPTIMIZER_STATES_AND_GRADS"]}
    console = Console(width=40, color_system=None, record=True)
    console.print(fit_table(list(cells), cells, {"name": "value", "value": "value"}, 40, keep=("name",)), crop=False)
    out = console.export_text()
    assert f"name={name}" in out and "value=OPTIMIZER_STATES_AND_GRADS" in out


def test_fit_table_text_wraps_between_words_and_tokens_stay_whole():
    cells = {"row": ["tp=8 dp_sharding=OPTIMIZER_STATES_AND_GRADS recompute=selective"], "why": ["a " * 40]}
    console = Console(width=60, color_system=None, record=True)
    console.print(fit_table(list(cells), cells, {"row": "tokens", "why": "text"}, 60), crop=False)
    out = console.export_text()
    assert "dp_sharding=OPTIMIZER_STATES_AND_GRADS" in out and ELLIPSIS not in out
    assert max(cell_len(x) for x in out.splitlines()) <= 60


def test_frame_table_model_and_hardware_lead_and_stay_whole():
    df = pd.DataFrame(
        {
            "model": ["a-very-long-user-model-name-0001", "b"],
            "hardware": ["h100-sxm-80gb-profiled", "h100-sxm-80gb"],
            "ngpus": [8, 8],
            "time_step_s": [1.0, 2.0],
            "dp_sharding": ["OPTIMIZER_STATES_AND_GRADS", "OPTIMIZER_STATES"],
        }
    )
    console = Console(width=80, color_system=None, record=True)
    console.print(frame_table(df, columns=list(df.columns), width=80, lead=["model", "hardware"]), crop=False)
    out = console.export_text()
    cells = cells_of(out)
    for v in ("a-very-long-user-model-name-0001", "h100-sxm-80gb-profiled", "h100-sxm-80gb"):
        assert v in cells
    shown_or_named(out, df.columns)
    assert ELLIPSIS not in out


def test_frame_table_without_width_is_unchanged_by_fitting():
    df = pd.DataFrame({"ngpus": [8], "dp_sharding": ["OPTIMIZER_STATES_AND_GRADS"], "why": ["fastest that fits"]})
    console = Console(width=400, color_system=None, record=True)
    console.print(frame_table(df, columns=list(df.columns)))
    assert "OPTIMIZER_STATES_AND_GRADS" in cells_of(console.export_text())
