"""Bad input through the CLI: one clear sentence on stderr, exit code 2, no traceback, no output file.

The corpus covers unknown names, zero/negative/NaN/absurd sizes, non-dividing heads, impossible
layouts and empty grids, malformed overrides and YAML, broken case files, unwritable outputs and
baselines from another schema. Most cases run in-process (fast); a sample runs as real processes
to prove the exit code and stderr of the installed entry point.
"""

from __future__ import annotations

import json
import os

import pandas as pd
import pytest
from typer.testing import CliRunner

from conftest import run_cli
from parallmelism.cli.app import app
from tests.golden.cases import golden_path
from tests.test_import_hf import LLAMA

GOLDEN = golden_path("mixtral-8x7b_h100_64")
GOOD_MODEL = "model=llama3.1-8b"


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Broken config folders, case files and baselines shared by the corpus."""
    d = tmp_path_factory.mktemp("bad")
    (d / "brokenyaml" / "models").mkdir(parents=True)
    (d / "brokenyaml" / "models" / "x.yaml").write_text("name: x\nhidden: [1, 2\n")
    (d / "notamap" / "models").mkdir(parents=True)
    (d / "notamap" / "models" / "x.yaml").write_text("- just\n- a list\n")
    (d / "badshape" / "models").mkdir(parents=True)
    (d / "badshape" / "models" / "x.yaml").write_text(
        "name: x\nhidden: 4096\nlayers: 32\nheads: 32\nffn_hidden: 0\nvocab: 100\n"
    )
    (d / "unknownkey" / "models").mkdir(parents=True)
    (d / "unknownkey" / "models" / "x.yaml").write_text(
        "name: x\nhidden: 4096\nlayers: 32\nheads: 32\nffn_hidden: 128\nvocab: 100\nwidth: 3\n"
    )
    (d / "badhw" / "hardware").mkdir(parents=True)
    (d / "badhw" / "hardware" / "y.yaml").write_text("name: y\nhbm_usable_gib: -80\n")
    (d / "cases_missing.csv").write_text("case,model\nc1,llama3.1-8b\n")
    (d / "cases_empty.csv").write_text("")
    mem = pd.read_csv(_shipped_memory_cases())
    mem.head(1).assign(tp="eight").to_csv(d / "cases_badint.csv", index=False)
    mem.head(1).assign(seq_len=-2048).to_csv(d / "cases_negative.csv", index=False)
    mem.head(1).assign(sequence_parallel="perhaps").to_csv(d / "cases_badbool.csv", index=False)
    mem.head(1).assign(dp=0).to_csv(d / "cases_dp_disagrees.csv", index=False)  # gpus != tp·pp·cp·dp
    pd.read_csv(GOLDEN).assign(schema_version=999).to_csv(d / "other_schema.csv", index=False)
    (d / "garbage.parquet").write_bytes(b"not parquet at all")
    (d / "tol.yaml").write_text("mem_total_gib: {rtol: -1}\n")
    (d / "tol_bad.yaml").write_text("mem_total_gib: [1, 2\n")
    (d / "afile").write_text("x")
    os.mkfifo(d / "pipe.csv")  # stands in for /dev/full and other devices: never replaced
    (d / "header_only.csv").write_text(pd.read_csv(GOLDEN, nrows=0).to_csv(index=False))
    edited = pd.read_csv(GOLDEN).astype({"mem_total_gib": object})
    edited.loc[2, "mem_total_gib"] = "abc"
    edited.to_csv(d / "text_in_numbers.csv", index=False)
    (d / "hf.json").write_text(json.dumps(dict(model_type="llama", **LLAMA["llama3.1-8b"])))
    return d


def _shipped_memory_cases():
    from pathlib import Path

    import parallmelism

    return Path(parallmelism.__file__).parent / "cases" / "memory_measured.csv"


S = "sweep"
# (id, args); {d} is the folder of broken files, {out} an output file that must not appear.
CORPUS = [
    ("unknown-model", [S, "model=nosuch"]),
    ("unknown-hardware", [S, "hardware=nosuch"]),
    ("unknown-workload", [S, "workload=nosuch"]),
    ("seq-zero", [S, "workload.seq_len=0"]),
    ("seq-negative", [S, "workload.seq_len=-5"]),
    ("seq-nan", [S, "workload.seq_len=nan"]),
    ("seq-text", [S, "workload.seq_len=abc"]),
    ("seq-absurd", [S, "workload.seq_len=100000000000000000000"]),
    ("vocab-absurd", [S, "model.vocab=100000000000000000000"]),
    ("batch-zero", [S, "workload.global_batch=0"]),
    ("batch-absurd-float", [S, "workload.global_batch=1e30"]),
    ("ngpus-zero", [S, "grid.ngpus=[0]"]),
    ("ngpus-negative", [S, "grid.ngpus=[-8]"]),
    ("ngpus-empty", [S, "grid.ngpus=[]"]),
    ("ngpus-nan", [S, "grid.ngpus=[nan]"]),
    ("ngpus-bool", [S, "grid.ngpus=[true]"]),
    ("seq-bool", [S, "workload.seq_len=true"]),
    ("top-k-bool", [S, "model=mixtral-8x7b", "model.moe.top_k=true"]),
    ("peak-bool", [S, "hardware.peak_tflops.bf16=true"]),
    ("tp-zero", [S, "grid.tp=[0]"]),
    ("tp-negative", [S, "grid.tp=[-2]"]),
    ("vpp-zero", [S, "grid.vpp=[0]"]),
    ("max-micro-batch-zero", [S, "grid.max_micro_batch=0"]),
    ("tp-not-dividing", [S, "grid.tp=[3]", "grid.ngpus=[64]"]),
    ("pp-not-dividing", [S, "grid.pp=[7]", "grid.ngpus=[64]"]),
    ("cp-not-dividing", [S, "grid.cp=[3]", "grid.ngpus=[64]"]),
    ("tp-beyond-nvlink", [S, "grid.tp=[16]", "grid.ngpus=[64]"]),
    ("ep-on-dense", [S, GOOD_MODEL, "grid.ep=[2]", "grid.ngpus=[64]"]),
    ("seq-past-learned-positions", [S, "model=gpt3-175b", "workload.seq_len=4096"]),
    ("cp-with-eager-attention", [S, "grid.cp=[2]", "workload.flash_attention=false", "grid.ngpus=[64]"]),
    ("micro-batch-not-dividing", [S, "grid.micro_batch=[3]"]),
    (
        "empty-grid-heads",
        [S, GOOD_MODEL, "grid.tp=[8]", "grid.ngpus=[8]", "model.heads=36", "model.kv_heads=4", "model.head_dim=128"],
    ),
    ("sharding-unknown", [S, "grid.dp_sharding=[BOGUS]"]),
    ("recompute-unknown", [S, "grid.recompute=[sometimes]"]),
    ("sp-not-bool", [S, "grid.sequence_parallel=[maybe]"]),
    ("heads-not-multiple-of-kv", [S, "model.heads=30"]),
    ("kv-heads-not-dividing", [S, "model.kv_heads=7"]),
    ("hidden-not-divisible-by-heads", [S, GOOD_MODEL, "model.head_dim=null", "model.hidden=4001"]),
    ("hidden-negative", [S, "model.hidden=-1"]),
    ("top-k-above-experts", [S, "model=mixtral-8x7b", "model.moe.top_k=9"]),
    ("precision-unknown", [S, "workload.precision=fp7"]),
    ("schedule-unknown", [S, "workload.schedule=zigzag"]),
    ("imbalance-below-one", [S, "workload.moe_imbalance=0.5"]),
    ("imbalance-nan", [S, "workload.moe_imbalance=nan"]),
    ("tokens-negative", [S, "workload.tokens=-1"]),
    ("hbm-negative", [S, "hardware.hbm_usable_gib=-1"]),
    ("peak-zero", [S, "hardware.peak_tflops.bf16=0"]),
    ("override-unknown-key", [S, "nokey=1"]),
    ("override-unknown-nested-key", [S, "model.nokey=1"]),
    ("override-unclosed-list", [S, "grid.tp=[1"]),
    ("override-only-equals", [S, "=="]),
    ("override-no-value", [S, "model"]),
    ("override-plus-existing", [S, "+model.hidden=5"]),
    ("sweep-with-one-bad-point", [S, "model=llama3.1-8b,nosuch"]),
    ("format-unknown", [S, "output.format=xlsx"]),
    ("output-unwritable", [S, "output.path=/proc/nope/x.csv"]),
    ("output-is-folder", [S, "output.path={d}"]),
    ("output-under-a-file", [S, "output.path={d}/afile/x.csv"]),
    ("config-dir-missing", [S, "-cd", "{d}/nodir"]),
    ("yaml-malformed", [S, "-cd", "{d}/brokenyaml", "model=x"]),
    ("yaml-not-a-mapping", [S, "-cd", "{d}/notamap", "model=x"]),
    ("yaml-bad-value", [S, "-cd", "{d}/badshape", "model=x"]),
    ("yaml-unknown-key", [S, "-cd", "{d}/unknownkey", "model=x"]),
    ("hardware-yaml-bad-value", [S, "-cd", "{d}/badhw", "hardware=y"]),
    ("show-sweep", ["show", "model=llama3.1-8b,llama3.1-70b"]),
    ("show-empty-grid", ["show", GOOD_MODEL, "grid.tp=[3]"]),
    ("list-unknown", ["list", "gpus"]),
    ("list-broken-yaml", ["list", "models", "-cd", "{d}/brokenyaml"]),
    ("cases-missing-columns", ["validate", "--cases", "{d}/cases_missing.csv"]),
    ("cases-empty-file", ["validate", "--cases", "{d}/cases_empty.csv"]),
    ("cases-missing-file", ["validate", "--cases", "{d}/nosuch.csv"]),
    ("cases-not-csv", ["validate", "--cases", "/etc/passwd"]),
    ("cases-non-integer", ["validate", "--cases", "{d}/cases_badint.csv"]),
    ("cases-negative", ["validate", "--cases", "{d}/cases_negative.csv"]),
    ("cases-bad-bool", ["validate", "--cases", "{d}/cases_badbool.csv"]),
    ("cases-dp-disagrees-with-gpus", ["validate", "--cases", "{d}/cases_dp_disagrees.csv"]),
    ("validate-out-unwritable", ["validate", "--cases", "{d}/cases_missing.csv", "--out", "/proc/nope/o.csv"]),
    ("best-unknown-model", ["best", "model=nosuch"]),
    ("pareto-zero-gpus", ["pareto", "grid.ngpus=[0]"]),
    ("plan-train-negative-tokens", ["plan", "train", GOOD_MODEL, "workload.tokens=-5"]),
    ("plan-serve-zero-batch", ["plan", "serve", "workload.batch=0"]),
    ("merge-missing-part", ["merge", "{d}/nosuch.csv", "--out", "{out}"]),
    ("merge-not-a-table", ["merge", "/etc/passwd", "--out", "{out}"]),
    ("import-hf-missing", ["import-hf", "{d}/nosuch.json", "--out", "{out}"]),
    ("import-hf-not-json", ["import-hf", "/etc/passwd", "--out", "{out}"]),
    ("compare-missing-file", ["compare", "{d}/nosuch.csv", str(GOLDEN)]),
    ("compare-not-a-table", ["compare", "/etc/passwd", str(GOLDEN)]),
    ("compare-garbage-parquet", ["compare", "{d}/garbage.parquet", str(GOLDEN)]),
    ("compare-other-schema", ["compare", "{d}/other_schema.csv", str(GOLDEN)]),
    ("compare-unknown-key", ["compare", str(GOLDEN), str(GOLDEN), "--key", "tp,bogus"]),
    ("compare-duplicate-keys", ["compare", str(GOLDEN), str(GOLDEN), "--key", "tp"]),
    ("compare-empty-key", ["compare", str(GOLDEN), str(GOLDEN), "--key", ","]),
    ("compare-negative-rtol", ["compare", str(GOLDEN), str(GOLDEN), "--rtol", "-1"]),
    ("compare-negative-tolerance-file", ["compare", str(GOLDEN), str(GOLDEN), "--tolerances", "{d}/tol.yaml"]),
    ("compare-malformed-tolerance-file", ["compare", str(GOLDEN), str(GOLDEN), "--tolerances", "{d}/tol_bad.yaml"]),
    # hostile output paths: never replaced, never a traceback, checked before the computation
    ("output-is-a-pipe", [S, "output.path={d}/pipe.csv"]),
    ("output-name-too-long", [S, "output.path={d}/" + "x" * 300 + ".csv"]),
    ("output-name-with-a-newline", [S, "--out", "{d}/a\nb.csv"]),
    ("output-name-with-a-tab", ["best", GOOD_MODEL, "grid.ngpus=[8]", "--out", "{d}/a\tb.csv"]),
    ("output-name-leaves-no-room-for-the-temporary", [S, "output.path={d}/" + "x" * 240 + ".csv"]),
    ("full-output-is-a-file", ["best", GOOD_MODEL, "grid.ngpus=[8]", "--full-output", "{d}/afile"]),
    ("full-output-is-a-pipe", ["pareto", GOOD_MODEL, "grid.ngpus=[8]", "--full-output", "{d}/pipe.csv"]),
    ("full-output-foreign-folder", ["best", GOOD_MODEL, "grid.ngpus=[8]", "--full-output", "{d}/brokenyaml"]),
    (
        "full-output-same-as-out",
        ["best", GOOD_MODEL, "grid.ngpus=[8]", "--out", "{d}/same.csv", "--full-output", "{d}/same.csv"],
    ),
    ("plan-summary-name-too-long", ["plan", "train", GOOD_MODEL, "--out", "{d}/" + "p" * 215 + ".csv"]),
    ("merge-out-not-a-table", ["merge", str(GOLDEN), "--out", "{d}/merged.txt"]),
    ("merge-out-is-a-pipe", ["merge", str(GOLDEN), "--out", "{d}/pipe.csv"]),
    ("merge-out-and-output-path-disagree", ["merge", str(GOLDEN), "--out", "{out}", "output.path={d}/other.csv"]),
    ("merge-no-rows", ["merge", "{d}/header_only.csv", "--out", "{out}"]),
    ("merge-text-in-a-number-column", ["merge", "{d}/text_in_numbers.csv", "--out", "{out}"]),
    ("compare-text-in-a-number-column", ["compare", "{d}/text_in_numbers.csv", str(GOLDEN)]),
    ("validate-out-not-a-table", ["validate", "--cases", "{d}/cases_missing.csv", "--out", "{d}/v.txt"]),
    ("import-hf-name-is-a-path", ["import-hf", "{d}/hf.json", "--name", "../../evil", "--out", "{out}"]),
    ("import-hf-name-empty", ["import-hf", "{d}/hf.json", "--name", "", "--out", "{out}"]),
    ("import-hf-out-not-yaml", ["import-hf", "{d}/hf.json", "--out", "{d}/model.txt"]),
    ("profile-out-is-a-file", ["profile", "--device", "cpu", "--quick", "-q", "--out", "{d}/afile"]),
    ("pareto-front-empty", ["pareto", GOOD_MODEL, "grid.ngpus=[8]", "--front", ""]),
    ("multirun-with-out", [S, "-m", GOOD_MODEL, "grid.ngpus=[8]", "--out", "{out}"]),
    ("multirun-output-path-not-a-table", [S, "-m", GOOD_MODEL, "grid.ngpus=[8]", "output.path={d}/part.txt"]),
    ("multirun-empty-grid", [S, "-m", GOOD_MODEL, "grid.ngpus=[8]", "grid.tp=[3]", "hydra.sweep.dir={d}/mr"]),
    ("multirun-sweep-dir-uncreatable", [S, "-m", GOOD_MODEL, "grid.ngpus=[8]", "hydra.sweep.dir={d}/afile/mr"]),
]

# One real subprocess per kind of failure (the rest run in-process).
SUBPROCESS_SAMPLE = {
    "unknown-model",
    "seq-absurd",
    "override-unclosed-list",
    "yaml-malformed",
    "output-unwritable",
    "cases-missing-columns",
    "compare-other-schema",
    "empty-grid-heads",
}


def _args(args, d, out):
    args = [a.replace("{d}", str(d)).replace("{out}", str(out)) for a in args]
    multirun = "-m" in args
    if args[0] in ("sweep", "show") and not multirun and not any(a.startswith("output.path") for a in args):
        args.append(f"output.path={out}")
    return args


def _check(code, stderr, stdout, out, d):
    assert code == 2, (code, stdout, stderr)
    assert "Traceback" not in stderr + stdout
    lines = [ln for ln in stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    assert len(lines[0]) > len("error: ") + 15  # a sentence, not a bare code
    assert not out.exists()
    assert not list(out.parent.glob(".*.tmp")), "partial temporary file left behind"
    # the hostile targets are as they were, and nothing new appeared beside them
    assert (d / "pipe.csv").is_fifo() and (d / "afile").read_text() == "x"
    assert sorted(p.name for p in (d / "brokenyaml").iterdir()) == ["models"]
    new = {"merged.txt", "other.csv", "v.txt", "model.txt", "part.txt", "mr", "evil", "same.csv", "p" * 215 + ".csv"}
    assert not new & {p.name for p in d.iterdir()}


def test_corpus_is_large_enough():
    assert len(CORPUS) >= 40
    assert len({name for name, _ in CORPUS}) == len(CORPUS)


@pytest.mark.parametrize("name,args", CORPUS, ids=[c[0] for c in CORPUS])
def test_bad_input_in_process(name, args, files, tmp_path):
    out = tmp_path / "out.csv"
    result = CliRunner().invoke(app, _args(args, files, out))
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    _check(result.exit_code, result.stderr, result.stdout, out, files)


@pytest.mark.parametrize(
    "name,args",
    [c for c in CORPUS if c[0] in SUBPROCESS_SAMPLE],
    ids=[c[0] for c in CORPUS if c[0] in SUBPROCESS_SAMPLE],
)
def test_bad_input_real_process(name, args, files, tmp_path):
    out = tmp_path / "out.csv"
    r = run_cli(*_args(args, files, out))
    _check(r.returncode, r.stderr, r.stdout, out, files)


# Mistakes the command-line parser finds: the installed entry point makes them one sentence too
# (the in-process runner above is click's standalone mode, which prints a usage box).
USAGE_ERRORS = [
    ("option-not-a-number", ["sweep", "--top", "abc"]),
    ("option-out-of-range", ["best", "--top", "0"]),
    ("argument-missing", ["list"]),
    ("subcommand-unknown", ["plan", "bogus"]),
]


@pytest.mark.parametrize("name,args", USAGE_ERRORS, ids=[c[0] for c in USAGE_ERRORS])
def test_usage_errors_are_one_sentence(name, args, files, tmp_path):
    r = run_cli(*args)
    _check(r.returncode, r.stderr, r.stdout, tmp_path / "out.csv", files)
    assert "--help" in r.stderr  # names where to look


def test_failed_write_leaves_no_partial_file(tmp_path, monkeypatch):
    """A crash in the middle of writing leaves neither the target nor the temporary file."""
    import pyarrow.csv as pacsv

    from parallmelism.report.writer import write_table

    def boom(*a, **k):
        raise RuntimeError("disk full")

    monkeypatch.setattr(pacsv, "write_csv", boom)
    with pytest.raises(RuntimeError):
        write_table(pd.DataFrame({"tp": [1, 2]}), tmp_path / "x.csv")
    assert list(tmp_path.iterdir()) == []


def test_existing_output_survives_a_failed_run(tmp_path):
    """A failed sweep does not truncate or replace a table written earlier at the same path."""
    out = tmp_path / "keep.csv"
    out.write_text("previous results\n")
    r = CliRunner().invoke(app, ["sweep", "model=nosuch", f"output.path={out}"])
    assert r.exit_code == 2
    assert out.read_text() == "previous results\n"


def test_files_written_together_are_all_or_nothing(tmp_path, monkeypatch):
    """A plan and its summary, an accelerator file and its kernel table: when the second cannot be
    written, the first is not left behind either (and an existing pair stays as it was)."""
    from pathlib import Path

    from parallmelism.report.writer import write_table_and_text, write_texts

    (tmp_path / "a.yaml").write_text("old")
    real = Path.write_text

    def full_disk(self, text, *a, **k):
        if self.name.startswith(".b."):
            raise OSError(28, "No space left on device")
        return real(self, text, *a, **k)

    monkeypatch.setattr(Path, "write_text", full_disk)
    with pytest.raises(Exception, match="no space left"):
        write_texts({tmp_path / "a.yaml": "new", tmp_path / "b.csv": "x"})
    with pytest.raises(Exception, match="no space left"):
        write_table_and_text(pd.DataFrame({"tp": [1]}), tmp_path / "plan.csv", "summary", tmp_path / "b.md")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.yaml"]
    assert (tmp_path / "a.yaml").read_text() == "old"


def test_table_formats_follow_the_extension_in_any_case(tmp_path):
    """best --out X.PARQUET writes Parquet (it wrote CSV text there), and a multirun job's
    output.path=x.parquet writes Parquet though output.format keeps its csv default."""
    from conftest import invoke

    code, text = invoke("best", GOOD_MODEL, "grid.ngpus=[8]", "--out", tmp_path / "UP.PARQUET", "-q")
    assert code == 0, text
    assert len(pd.read_parquet(tmp_path / "UP.PARQUET")) > 0
    part = tmp_path / "job.parquet"
    code, text = invoke(
        "sweep", "-m", GOOD_MODEL, "grid.ngpus=[8]", f"output.path={part}", f"hydra.sweep.dir={tmp_path}/mr"
    )
    assert code == 0, text
    assert len(pd.read_parquet(part)) > 0


def test_full_output_replaces_a_link_not_its_target(tmp_path):
    from conftest import invoke

    first = tmp_path / "ds"
    assert invoke("best", GOOD_MODEL, "grid.ngpus=[8]", "--full-output", first, "-q")[0] == 0
    before = sorted(p.relative_to(first) for p in first.rglob("*"))
    link = tmp_path / "link"
    link.symlink_to(first)
    code, text = invoke("best", GOOD_MODEL, "grid.ngpus=[8]", "--full-output", link, "-q")
    assert code == 0, text
    assert link.is_dir() and not link.is_symlink()
    assert sorted(p.relative_to(first) for p in first.rglob("*")) == before
