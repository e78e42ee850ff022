"""The command line end to end: sweep, show, list, validate, --cfg, config folders, bad input."""

import pandas as pd
import pytest

from tests.conftest import REPO, invoke, run_cli

REQUIRED = (
    "model hardware ngpus tp pp cp ep dp vpp micro_batch num_micro_batches dp_sharding recompute "
    "sequence_parallel params_total params_per_gpu mem_weights_gib mem_grads_gib mem_optimizer_gib "
    "mem_states_gib mem_activations_gib mem_total_gib mem_headroom_gib fits pp_bubble_rate"
).split()
SMALL = ["model=llama3.1-8b", "grid.ngpus=[8]", "workload.global_batch=64"]


def test_default_sweep_no_arguments(tmp_path):
    r = run_cli("sweep", "--quiet", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    out = tmp_path / "results" / "llama3.1-70b_h100-sxm-80gb_train.csv"
    assert out.is_file() and "wrote" in r.stdout
    df = pd.read_csv(out)
    assert set(REQUIRED) <= set(df.columns)
    assert set(df["ngpus"]) == {64, 128, 256, 512}
    assert df["fits"].any() and not df["fits"].all()


def test_a_sweep_of_several_models_names_the_model_of_each_row(tmp_path):
    """Two models ranked in one table: a model column tells their rows apart (there was none); one
    accelerator, so no hardware column. A one-model sweep names it in neither."""
    out = tmp_path / "s.csv"
    args = ["model=llama3.1-8b,mixtral-8x7b", "grid.ngpus=[8]", "workload.global_batch=64"]
    code, text = invoke("sweep", *args, "--top", "3", "--out", out)
    assert code == 0, text
    header = next(line for line in text.splitlines() if "ngpus" in line)
    assert "model" in header and "hardware" not in header, header
    assert "│ llama3.1-8b" in text  # the faster model's rows, named
    code, text = invoke("sweep", *SMALL, "--out", out)
    assert code == 0, text
    header = next(line for line in text.splitlines() if "ngpus" in line)
    assert "model" not in header, header


def test_sweep_output_path_and_parquet(tmp_path):
    code, out = invoke("sweep", *SMALL, f"output.path={tmp_path / 'a.csv'}", "--quiet")
    assert code == 0, out
    code, out = invoke("sweep", *SMALL, "output.format=parquet", f"output.path={tmp_path / 'a.parquet'}", "--quiet")
    assert code == 0, out
    a, b = pd.read_csv(tmp_path / "a.csv"), pd.read_parquet(tmp_path / "a.parquet")
    assert len(a) == len(b) > 0
    assert a["mem_total_gib"].tolist() == pytest.approx(b["mem_total_gib"].tolist())


def test_hydra_sweep_syntax_in_process(tmp_path):
    path = tmp_path / "s.csv"
    code, out = invoke(
        "sweep",
        "model=llama3.1-8b,mixtral-8x7b",
        "grid.ngpus=[8,16]",
        "workload.global_batch=64",
        f"output.path={path}",
        "--quiet",
    )
    assert code == 0, out
    df = pd.read_csv(path)
    assert set(df["model"]) == {"llama3.1-8b", "mixtral-8x7b"} and set(df["ngpus"]) == {8, 16}


def test_table_shows_best_rows_and_drop_counts(tmp_path):
    code, out = invoke("sweep", *SMALL, f"output.path={tmp_path / 'x.csv'}")
    assert code == 0
    assert "best layouts" in out and "kept (valid)" in out and "wrote" in out


def test_show_one_layout():
    code, out = invoke(
        "show",
        "model=llama3.1-405b",
        "grid.ngpus=[8]",
        "grid.tp=1",
        "grid.pp=1",
        "grid.cp=1",
        "grid.micro_batch=1",
        "grid.vpp=1",
        "grid.dp_sharding=FULLY_SHARD",
        "grid.recompute=none",
        "grid.sequence_parallel=false",
        "workload.global_batch=4096",
    )
    assert code == 0, out
    assert "mem_states_gib" in out and "755.9" in out  # seed's FULLY_SHARD value (plus norm weights)


def test_cfg_prints_composed_config():
    code, out = invoke("sweep", "--cfg", "model=grok-1")
    assert code == 0 and "hidden: 6144" in out and "num_experts: 8" in out


@pytest.mark.parametrize(
    "what,expect", [("models", "llama3.1-405b"), ("hardware", "h100-sxm-80gb"), ("engines", "TensorRT-LLM")]
)
def test_list(what, expect):
    code, out = invoke("list", what)
    assert code == 0 and expect in out


def test_user_config_dir_and_env_var(tmp_path):
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "tiny.yaml").write_text(
        "hidden: 1024\nlayers: 8\nheads: 8\nkv_heads: 8\nffn_hidden: 4096\nvocab: 32000\n"
    )
    out = tmp_path / "t.csv"
    code, text = invoke(
        "sweep",
        "-cd",
        str(tmp_path),
        "model=tiny",
        "grid.ngpus=[8]",
        "workload.global_batch=64",
        f"output.path={out}",
        "--quiet",
    )
    assert code == 0, text
    assert set(pd.read_csv(out)["model"]) == {"tiny"}
    r = run_cli("list", "models", env={"PARALLMELISM_CONFIG_PATH": str(tmp_path)})
    assert r.returncode == 0 and "tiny" in r.stdout


def test_validate_out_to_an_unwritable_path_fails_before_printing(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    code, text = invoke(
        "validate",
        "--cases",
        str(REPO / "parallmelism" / "cases" / "memory_measured.csv"),
        "--out",
        str(blocker / "v.csv"),
    )
    assert code == 2
    assert len(text.strip().splitlines()) == 1 and "validation" not in text, text


def test_validate_memory_cases_and_max_error(tmp_path):
    out = tmp_path / "v.csv"
    code, text = invoke(
        "validate", "--cases", str(REPO / "parallmelism" / "cases" / "memory_measured.csv"), "--out", str(out)
    )
    assert code == 0, text
    df = pd.read_csv(out)
    assert {"case", "quantity", "measured", "predicted", "error_pct"} <= set(df.columns)
    assert len(df) == 14
    code, text = invoke(
        "validate", "--cases", str(REPO / "parallmelism" / "cases" / "memory_measured.csv"), "--max-error", "0.01"
    )
    over = df[df.error_pct.abs() > 0.01]
    assert code == 1 and f"{len(over)} case rows are off by more than --max-error 0.01%" in text
    assert all(case in text for case in over.case)  # every one named, not only the worst


# (overrides, fragment of the one-line message). Each must exit 2, print no traceback, write nothing.
BAD = [
    (["model=nope"], "unknown model 'nope'"),
    (["hardware=h999"], "unknown hardware 'h999'"),
    (["workload=weird"], "unknown workload 'weird'"),
    (["grid=weird"], "unknown grid 'weird'"),
    (["engine=tgi"], "unknown engine 'tgi'; available: nim, sglang, trtllm, vllm"),
    (["engine.request_overhead_ms=-1"], "engine.request_overhead_ms"),
    (["grid.ngpus=[0]"], "grid.ngpus"),
    (["grid.ngpus=[-8]"], "grid.ngpus"),
    (["grid.ngpus=[]"], "grid.ngpus"),
    (["grid.ngpus=abc"], "grid.ngpus"),
    (["model.hidden=-5"], "model.hidden"),
    (["model.heads=7"], "heads=7"),
    (["model.layers=0"], "model.layers"),
    (["workload.seq_len=nan"], "seq_len"),
    (["workload.seq_len=0"], "seq_len"),
    (["workload.global_batch=-1"], "global_batch"),
    (["workload.precision=fp3"], "precision"),
    (["grid.dp_sharding=ZERO9"], "dp_sharding"),
    (["grid.recompute=sometimes"], "recompute"),
    (["grid.tp=[3]", "grid.ngpus=[8]"], "tp·pp·cp does not divide ngpus"),
    (["grid.tp=[16]", "grid.ngpus=[64]"], "scale-up"),
    (["grid.foo=1"], "unknown key 'grid.foo'"),
    (["grid.ngpus=[8"], "malformed override"),
    (["+model.hidden=5"], "already exists"),
    (["hardware.hbm_usable_gib=1000"], "hbm_usable_gib"),
    (["model.moe.top_k=3"], "model.moe"),
    (["output.format=xlsx"], "output.format"),
]


@pytest.mark.parametrize("overrides,message", BAD, ids=[" ".join(o) for o, _ in BAD])
def test_bad_input_one_sentence_exit_2(tmp_path, overrides, message):
    target = tmp_path / "out.csv"
    code, out = invoke("sweep", *overrides, f"output.path={target}", "--quiet")
    assert code == 2, out
    assert message in out, out
    assert "Traceback" not in out
    lines = [l for l in out.strip().splitlines() if l.strip()]
    assert len(lines) <= 2 and lines[0].startswith("error:")
    assert not target.exists() and list(tmp_path.iterdir()) == []


def test_bad_input_real_process_exit_code(tmp_path):
    r = run_cli("sweep", "model=nope", cwd=tmp_path)
    assert r.returncode == 2 and "unknown model" in r.stderr and "Traceback" not in r.stderr + r.stdout
    assert not (tmp_path / "results").exists()


def test_unwritable_output_path(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    code, out = invoke("sweep", *SMALL, f"output.path={blocker / 'sub' / 'x.csv'}", "--quiet")
    assert code == 2 and "is a file, not a folder" in out


def test_interrupted_write_leaves_no_file(tmp_path, monkeypatch):
    import pyarrow.csv as pacsv

    from parallmelism.report import writer

    def boom(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(pacsv, "write_csv", boom)
    with pytest.raises(KeyboardInterrupt):
        writer.write_table(pd.DataFrame({"a": [1]}), tmp_path / "x.csv")
    assert list(tmp_path.iterdir()) == []


def test_case_file_missing_columns(tmp_path):
    bad = tmp_path / "cases.csv"
    bad.write_text("case,foo\nx,1\n")
    code, out = invoke("validate", "--cases", str(bad))
    assert code == 2 and "known column sets" in out


@pytest.mark.parametrize("command", ["show", "plan", "list"])
def test_a_command_run_alone_is_the_command_of_the_whole_app(command):
    """main builds the app with only the command it is asked for (start-up, issue 29): that
    command's help is the whole app's, and no other command's module is imported."""
    import subprocess
    import sys

    from parallmelism.cli.app import COMMANDS

    others = [f"parallmelism.cli.{m}" for name, (m, _, _) in COMMANDS.items() if name != command]
    alone = (
        "import sys\n"
        "from parallmelism.cli.app import main\n"
        f"sys.argv = ['parallmelism', {command!r}, '--help']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        f"print('OTHERS', [m for m in {others!r} if m in sys.modules], file=sys.stderr)\n"
    )
    whole = (
        f"from parallmelism.cli.app import build_app\nbuild_app()([{command!r}, '--help'], prog_name='parallmelism')\n"
    )
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "COLUMNS": "100"}
    one, every = (
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO)
        for code in (alone, whole)
    )
    assert "OTHERS []" in one.stderr, one.stderr
    assert one.stdout == every.stdout and f"parallmelism {command}" in one.stdout


def test_the_cli_gives_arrow_jemalloc_on_linux_and_keeps_a_users_choice(tmp_path):
    """main picks Arrow's allocator before pyarrow is imported (issue 29, peak RSS of `sweep`): the
    Parquet a sweep writes goes through jemalloc on Linux, with no warning; a user's
    ARROW_DEFAULT_MEMORY_POOL is kept."""
    import subprocess
    import sys

    from parallmelism.cli.app import _choose_arrow_memory_pool

    kept = {"ARROW_DEFAULT_MEMORY_POOL": "system"}
    _choose_arrow_memory_pool(kept)
    assert kept == {"ARROW_DEFAULT_MEMORY_POOL": "system"}
    if not sys.platform.startswith("linux"):
        pytest.skip("jemalloc is chosen on Linux only")
    code = (
        "import sys\n"
        "from parallmelism.cli.app import main\n"
        f"sys.argv = ['parallmelism', 'sweep', 'model=llama3.1-8b', 'grid.ngpus=[8]', '-q', '--out', {str(tmp_path / 's.parquet')!r}]\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "import pyarrow\n"
        "print('POOL', pyarrow.default_memory_pool().backend_name, file=sys.stderr)\n"
    )
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert "POOL jemalloc" in out.stderr and "Unsupported" not in out.stderr, out.stderr
    assert (tmp_path / "s.parquet").exists()


def test_every_help_text_prints_as_written():
    """typer renders help texts as rich markup: a bracketed word list is a style tag and vanishes
    (`plan train --help` printed "TOKENS (tokens=15e12 )." for "(tokens=15e12 [days=|gpus=|budget=])")."""
    import typer
    from rich.markup import render

    from parallmelism.cli.app import build_app

    def texts(command, path):
        yield path, command.help or ""
        for p in command.params:
            yield f"{path} {p.name}", getattr(p, "help", None) or ""
        for name, sub in getattr(command, "commands", {}).items():
            yield from texts(sub, f"{path} {name}")

    eaten = [
        (where, t) for where, t in texts(typer.main.get_command(build_app()), "parallmelism") if render(t).plain != t
    ]
    assert eaten == []


def test_a_path_with_brackets_is_named_as_written(tmp_path):
    """rich read '[v2]' in "wrote 7 rows to r[v2].csv" as a style tag: the line named r.csv, a file
    that was not written (best, sweep, plan, plot, validate, merge and compare printed so)."""
    out = tmp_path / "r[v2].csv"
    code, text = invoke("best", "-q", "model=llama3.1-8b", "grid.ngpus=[8]", "--out", out)
    assert code == 0 and text.strip() == f"wrote 7 rows to {out}", text
    code, text = invoke("merge", out, "--out", tmp_path / "all[bold].csv")
    assert code == 0 and text.strip() == f"wrote 7 rows from 1 part to {tmp_path / 'all[bold].csv'}", text


def test_an_override_where_the_command_belongs_says_the_command_comes_first():
    """`parallmelism plan model=... tokens=...` (no train or serve) said only "No such command
    'model=llama3.1-8b'"."""
    r = run_cli("plan", "model=llama3.1-8b", "tokens=1e12")
    assert r.returncode == 2 and r.stderr.startswith(
        "error: No such command 'model=llama3.1-8b'; a command comes before its overrides: "
        "`python -m parallmelism plan train|serve model=llama3.1-8b ...`"
    ), r.stderr
    r = run_cli("model=llama3.1-8b")
    assert r.returncode == 2 and "`python -m parallmelism COMMAND model=llama3.1-8b ...`" in r.stderr, r.stderr
    r = run_cli("plan", "training")  # a mistyped command keeps click's own suggestion alone
    assert r.returncode == 2 and "Did you mean 'train'?" in r.stderr and "before its overrides" not in r.stderr
