"""Hydra's conventions on the command line: -cd/--config-dir, --cfg job|hydra|all, --resolve, --info,
sweeps split with the public override API, and every multirun failure as one sentence with exit 2."""

from __future__ import annotations

import importlib.util
import re

import pytest

from parallmelism.config import expand_sweeps
from parallmelism.errors import UserError
from tests.conftest import REPO, invoke, run_cli

REPO_HW = REPO / "hardware"


def test_sweep_expansion_is_the_cross_product_in_order():
    assert expand_sweeps(["model=a,b", "grid.tp=1,2"]) == [
        ["model=a", "grid.tp=1"],
        ["model=a", "grid.tp=2"],
        ["model=b", "grid.tp=1"],
        ["model=b", "grid.tp=2"],
    ]
    assert expand_sweeps(["grid.tp=range(1,4)"]) == [["grid.tp=1"], ["grid.tp=2"], ["grid.tp=3"]]
    assert expand_sweeps(["model=choice(x,y)", "grid.ngpus=[8,16]"]) == [
        ["model=x", "grid.ngpus=[8,16]"],
        ["model=y", "grid.ngpus=[8,16]"],
    ]
    assert expand_sweeps(["grid.tp=1", "grid.tp=2,4"]) == [["grid.tp=2"], ["grid.tp=4"]]  # the later one wins
    assert expand_sweeps([]) == [[]]


@pytest.mark.parametrize(
    "overrides,message",
    [
        (["x=interval(0,1)"], "continuous interval"),
        (["grid.tp=[1"], "malformed override 'grid.tp=[1'"),
        (["-x"], "unknown option '-x'"),
    ],
)
def test_sweep_expansion_errors(overrides, message):
    with pytest.raises(UserError, match=re.escape(message)):
        expand_sweeps(overrides)


def _one_sentence(r, *expect):
    assert r.returncode == 2, (r.stdout, r.stderr)
    err = r.stderr.strip()
    assert err.startswith("error:") and len(err.splitlines()) == 1 and "Traceback" not in err, err
    for e in expect:
        assert e in err, err


def test_multirun_unknown_option_is_one_sentence(tmp_path):
    r = run_cli("sweep", "-m", "model=nope", f"hydra.sweep.dir={tmp_path}", cwd=tmp_path)
    _one_sentence(r, "unknown model 'nope'", "llama3.1-8b")
    r = run_cli("sweep", "-m", "model=llama3.1-8b,nope", cwd=tmp_path)
    _one_sentence(r, "unknown model 'nope'")
    r = run_cli("sweep", "-m", "model=llama3.1-8b", "grid.ngpus=[8]", "workload.global_batch=0", cwd=tmp_path)
    _one_sentence(r, "global_batch")
    assert not (tmp_path / "multirun").exists()  # nothing launched


@pytest.mark.skipif(
    importlib.util.find_spec("hydra_plugins.hydra_rq_launcher") is not None, reason="the rq launcher is installed here"
)
def test_multirun_missing_launcher_names_its_pip_install(tmp_path):
    r = run_cli("sweep", "-m", "model=llama3.1-8b", "hydra/launcher=rq", cwd=tmp_path)
    _one_sentence(r, "launcher 'rq' is not installed", "pip install hydra-rq-launcher")


def test_cfg_modes_resolve_and_info():
    code, out = invoke("sweep", "--cfg", "job", "workload.overlap_pp_comm=false")
    assert code == 0 and "overlap_pp_comm: false" in out and "hydra:" not in out
    code, out = invoke("sweep", "-c", "model=grok-1")  # bare -c means job, as --cfg
    assert code == 0 and "num_experts: 8" in out
    r = run_cli("sweep", "--cfg", "hydra")
    assert r.returncode == 0 and r.stdout.startswith("hydra:") and "\nmodel:" not in r.stdout
    r = run_cli("sweep", "--cfg", "all", "--resolve", "model=llama3.1-8b")
    assert r.returncode == 0 and "hydra:" in r.stdout and "name: llama3.1-8b" in r.stdout and "${" not in r.stdout
    r = run_cli("show", "--info", "searchpath")
    assert r.returncode == 0 and "structured://" in r.stdout
    r = run_cli("sweep", "--info", "defaults-tree", "model=grok-1")
    assert r.returncode == 0 and "model: grok-1" in r.stdout


@pytest.mark.parametrize(
    "args,message",
    [
        (["sweep", "-c", "/some/folder"], "a config folder is -cd/--config-dir DIR"),
        (["sweep", "--resolve"], "--resolve only applies with --cfg"),
        (["show", "--info", "nonsense"], "--info takes all"),
        (["sweep", "--cfg", "model=nope"], "unknown model 'nope'"),
        (["sweep", "workload.overlap_pp_comm=maybe"], "workload.overlap_pp_comm='maybe'"),  # the name as typed
    ],
)
def test_flag_misuse_is_one_sentence(args, message):
    _one_sentence(run_cli(*args), message)


def test_list_shows_where_each_entry_comes_from(tmp_path):
    (tmp_path / "hardware").mkdir()
    shipped = run_cli("list", "hardware").stdout
    assert "shipped" in shipped and "user folder" not in shipped and "hardware" in shipped
    text = (
        (REPO_HW / "h100-sxm-80gb.yaml").read_text().replace("cost_per_gpu_hour_usd: 2.5", "cost_per_gpu_hour_usd: 1.9")
    )
    (tmp_path / "hardware" / "h100-sxm-80gb.yaml").write_text(text)
    r = run_cli("list", "hardware", "-cd", tmp_path)
    line = next(line for line in r.stdout.splitlines() if "h100-sxm-80gb" in line)
    assert r.returncode == 0 and "user folder" in line
    code, out = invoke("sweep", "-cd", str(tmp_path), "--cfg")
    assert code == 0 and "cost_per_gpu_hour_usd: 1.9" in out


def test_unknown_model_points_at_a_file_in_the_current_folder(tmp_path):
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "mine.yaml").write_text("hidden: 1024\nlayers: 2\nheads: 8\nffn_hidden: 4096\nvocab: 100\n")
    r = run_cli("sweep", "--cfg", "model=mine", cwd=tmp_path)
    _one_sentence(r, "unknown model 'mine'", "-cd .")
    r = run_cli("sweep", "--cfg", "model=mine", "-cd", ".", cwd=tmp_path)
    assert r.returncode == 0 and "hidden: 1024" in r.stdout


def test_checkout_edits_an_installed_copy_does_not_see_are_named(tmp_path):
    from parallmelism.config.paths import checkout_differences

    installed, checkout = tmp_path / "site", tmp_path / "checkout"
    for root in (installed, checkout):
        (root / "conf").mkdir(parents=True)
        (root / "conf" / "config.yaml").write_text("defaults: []\n")
        (root / "hardware").mkdir()
        (root / "hardware" / "gpu.yaml").write_text("cost_per_gpu_hour_usd: 2.5\n")
        (root / "models").mkdir()
    assert checkout_differences(checkout, installed) == []
    (checkout / "hardware" / "gpu.yaml").write_text("cost_per_gpu_hour_usd: 1.9\n")  # edited price
    (checkout / "models" / "new.yaml").write_text("hidden: 8\n")  # a new model
    assert checkout_differences(checkout, installed) == ["models/new.yaml", "hardware/gpu.yaml"]
    assert checkout_differences(installed, installed) == []  # editable install / PYTHONPATH: nothing to say


def test_a_learned_position_table_bounds_the_sequence():
    """GPT-3's learned position table has 2048 rows (Brown et al. 2020: n_ctx = 2048): a longer
    training sequence, or a prompt plus its output past 2048 tokens, has no position to sit at."""
    code, text = invoke(
        "show", "model=gpt3-175b", "grid.ngpus=[1024]", "workload.seq_len=4096", "grid.tp=8", "grid.pp=8"
    )
    assert code == 2 and "workload.seq_len=4096 is longer than model gpt3-175b's learned position table" in text
    code, text = invoke(
        "show", "workload=inference", "model=gpt3-175b", "grid.ngpus=[8]", "grid.tp=[8]", "workload.input_len=2000"
    )
    assert code == 2 and "input_len + workload.output_len = 2256" in text and "(max_position=2048)" in text
    code, _ = invoke("show", "model=gpt3-175b", "grid.ngpus=[1024]", "workload.seq_len=2048", "grid.tp=8", "grid.pp=8")
    assert code == 0


def test_a_rope_models_context_bounds_a_served_request_and_warns_a_longer_training_run():
    """Llama 3.1's checkpoint serves 131,072 positions (config.json max_position_embeddings, its llama3
    rope scaling included) and vLLM refuses a longer max_model_len: a request past it is one sentence,
    exit 2 (was priced silently). Training past it is a context extension: priced, with one warning line."""
    serve = ["show", "workload=inference", "model=llama3.1-8b", "grid.ngpus=[8]", "grid.tp=[8]", "grid.pp=[1]"]
    code, text = invoke(*serve, "grid.sp=[1]", "workload.input_len=131072", "workload.output_len=128")
    assert code == 2 and len(text.strip().splitlines()) == 1, text
    assert "input_len + workload.output_len = 131200 is longer than model llama3.1-8b's context" in text
    assert "(max_position=131072)" in text and "set model.max_position" in text
    code, text = invoke(*serve, "grid.sp=[1]", "workload.input_len=130944", "workload.output_len=128")
    assert code == 0 and "warning" not in text, text
    code, text = invoke(
        *serve, "grid.sp=[1]", "workload.input_len=131072", "workload.output_len=128", "model.max_position=262144"
    )
    assert code == 0, text
    train = ["show", "model=llama3.1-8b", "grid.ngpus=[64]", "grid.tp=8", "grid.pp=1", "grid.cp=8"]
    code, text = invoke(*train, "workload.seq_len=262144")
    assert code == 0 and text.startswith(
        "warning: workload.seq_len=262144 is past model llama3.1-8b's context (max_position=131072)"
    ), text
    code, text = invoke(*train, "workload.seq_len=131072")
    assert code == 0 and "warning" not in text, text


def test_an_option_given_as_a_path_and_a_folder_given_as_a_file(tmp_path):
    """`model=../models/x` picks an option by name, not by path: one sentence pointing at -cd (Hydra
    would report an unknown group 'model/../models'). A folder where a file belongs, or a file
    where a folder belongs, is named as such, not as missing."""
    code, text = invoke("show", "model=../models/llama3.1-8b")
    assert code == 2 and "model='../models/llama3.1-8b' is a path; give an option name" in text
    code, text = invoke("sweep", "model=llama3.1-8b,sub/x", "grid.ngpus=[8]")
    assert code == 2 and "model='sub/x' is a path" in text
    code, text = invoke("validate", "--cases", str(tmp_path))
    assert code == 2 and f"case file {str(tmp_path)!r} is a folder; give a file" in text
    f = tmp_path / "f.txt"
    f.write_text("x")
    code, text = invoke("show", "-cd", str(f))
    assert code == 2 and f"config dir {str(f)!r} is a file; give a folder" in text


def test_a_broken_file_in_a_config_folder_fails_only_the_runs_that_read_it(tmp_path):
    """A -cd folder with a broken option file (not YAML, a `name:` that is not the file's) stopped every
    command, even one that never picks it: only a run that reads it (picks it, picks a file whose
    `from:` names it, or has it as the default it replaces) fails, with one sentence naming the file."""
    (tmp_path / "models").mkdir()
    (tmp_path / "hardware").mkdir()
    (tmp_path / "models" / "broken.yaml").write_text("name: broken\nlayers: [1, 2\n")
    (tmp_path / "models" / "renamed.yaml").write_text("name: other\nhidden: 8\n")
    (tmp_path / "hardware" / "h100-sxm-80gb.yaml").write_text("peak_tflops: {bf16: [\n")  # the default, broken
    (tmp_path / "hardware" / "mine.yaml").write_text("efficiency:\n  from: h100-sxm-80gb\n")
    pinned = ["model=llama3.1-8b", "grid.ngpus=[8]", "grid.tp=8"]
    code, text = invoke("show", *pinned, "hardware=a100-sxm-80gb", "-cd", tmp_path)
    assert code == 0, text
    not_yaml = f"error: {tmp_path / 'hardware' / 'h100-sxm-80gb.yaml'}: not valid YAML ("
    for picks in (["hardware=mine"], []):  # names the broken file through `from:`; is the default
        code, text = invoke("show", *pinned, *picks, "-cd", tmp_path)
        assert code == 2 and text.startswith(not_yaml) and len(text.strip().splitlines()) == 1, text
    code, text = invoke("best", "-q", "model=broken", "hardware=a100-sxm-80gb", "grid.ngpus=[8]", "-cd", tmp_path)
    assert code == 2 and text.startswith(f"error: {tmp_path / 'models' / 'broken.yaml'}: not valid YAML ("), text
    code, text = invoke("show", "model=renamed", "hardware=a100-sxm-80gb", "grid.ngpus=[8]", "-cd", tmp_path)
    assert code == 2 and "name: 'other' differs from the file name 'renamed'" in text


def test_a_long_sweep_says_how_many_points_and_how_long_before_it_starts(monkeypatch, capsys):
    """grid.ngpus=range(8,100008,8) is a sweep of 12,500 points, each composed apart (~0.13-0.23 s):
    it ran ~40 min without a word (with -q, nothing at all). A sweep whose points would take longer
    than ANNOUNCE_SWEEP_S to compose says so on stderr, at the rate of its second point."""
    import importlib

    compose = importlib.import_module("parallmelism.config.compose")  # the module, not its compose()
    jobs = [[f"grid.ngpus={n}", "model=llama3.1-8b"] for n in range(8, 100008, 8)]
    compose._note_long_sweep(jobs, 0.2)
    assert capsys.readouterr().err == (
        "note: the sweep over grid.ngpus (12,500 values) has 12,500 points, each composed apart (~0.20 s): "
        "~42 min before the first layout is evaluated; a grid key's values given as one list "
        "(grid.ngpus=[8,16,...]) are one run, composed once\n"
    )
    compose._note_long_sweep([[f"model={m}", f"workload.seq_len={s}"] for m in "ab" for s in (1, 2)], 4.0)
    assert capsys.readouterr().err.startswith("note: the sweep over model (2 values), workload.seq_len (2 values)")
    compose._note_long_sweep(jobs[:40], 0.2)  # 8 s: no note
    assert capsys.readouterr().err == ""
    monkeypatch.setenv("PARALLMELISM_CACHE", "0")
    monkeypatch.setattr(compose, "ANNOUNCE_SWEEP_S", 0.0)
    runs = compose.load_run_configs(["model=llama3.1-8b", "grid.ngpus=8,16,24"])
    assert [r.grid.ngpus for _, r in runs] == [[8], [16], [24]]
    assert capsys.readouterr().err.startswith("note: the sweep over grid.ngpus (3 values) has 3 points")
