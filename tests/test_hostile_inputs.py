"""Hostile inputs of issue 28: nothing lost, no number infinite, nothing silently wrong.

Every case is one sentence on stderr and exit 2, with no traceback, no output file and every input
file as it was (by content): an output path that is an input (by inode: a link, another spelling),
numbers beyond any physical range, names given twice, a model file named otherwise inside, binary
and blank-line case files, a multirun launcher that cannot start. The cases found by trying the
commands and options added since the last round follow (plan, pareto, import-hf, profile, merge,
compare, validate, fp8 and serving options); the ones that already held stay as regression tests.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from conftest import REPO, run_cli
from parallmelism.cli.app import app
from parallmelism.config.paths import data_root
from tests.golden.cases import golden_path
from tests.test_import_hf import LLAMA

GOLDEN = golden_path("mixtral-8x7b_h100_64")
ROOT = data_root()
KERNELS = ROOT / "hardware" / "kernels" / "a100-sxm-80gb.csv"  # a shipped kernel table (an input of sweeps)
M8 = "model=llama3.1-8b"
G8 = "grid.ngpus=[8]"


def _shipped_case(name: str) -> Path:
    import parallmelism

    return Path(parallmelism.__file__).parent / "cases" / name


@pytest.fixture(scope="module")
def d(tmp_path_factory):
    """The user's files: case files (good and broken), a golden copy, an HF config, a folder with a
    model file whose name: differs from its file name."""
    d = tmp_path_factory.mktemp("hostile")
    mem = pd.read_csv(_shipped_case("memory_measured.csv"))
    mem.to_csv(d / "cases.csv", index=False)
    (d / "link.csv").symlink_to(d / "cases.csv")
    mem.head(1).assign(measured_gib=1e308).to_csv(d / "huge_measured.csv", index=False)
    pd.concat([mem.head(2), mem.head(1)]).to_csv(d / "duplicate_cases.csv", index=False)
    mem.head(1).assign(model_desc="Mystery", hidden=None).to_csv(d / "blank_hidden.csv", index=False)
    (d / "binary.csv").write_bytes(bytes(range(256)) * 8)
    (d / "golden.csv").write_bytes(GOLDEN.read_bytes())
    (d / "hf.json").write_text(json.dumps(dict(model_type="llama", **LLAMA["llama3.1-8b"])))
    (d / "hf.yaml").write_text((d / "hf.json").read_text())  # JSON under a .yaml name
    (d / "nolink" / "hardware").mkdir(parents=True)  # an accelerator without a scale-out link
    hw = yaml.safe_load((ROOT / "hardware" / "h100-sxm-80gb.yaml").read_text())
    hw.pop("scale_out")
    (d / "nolink" / "hardware" / "h100-nolink.yaml").write_text(yaml.safe_dump({**hw, "name": "h100-nolink"}))
    (d / "misnamed" / "models").mkdir(parents=True)
    text = (ROOT / "models" / "llama3.1-8b.yaml").read_text()
    assert "name: llama3.1-8b" in text
    (d / "misnamed" / "models" / "my8b.yaml").write_text(text.replace("name: llama3.1-8b", "name: llama3.1-70b"))
    return d


def _fingerprint(d: Path) -> dict:
    """Every file under d (and the shipped inputs the cases aim at) by content: nothing lost."""
    files = [p for p in d.rglob("*") if p.is_file() and not p.is_symlink()]
    files += [KERNELS, _shipped_case("memory_measured.csv"), _shipped_case("training_measured.csv")]
    files += [ROOT / "hardware" / "h100-sxm-80gb.yaml"]
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


# (id, args); {d} is the folder of the user's files, {out} an output path that must not appear.
ISSUE_CASES = [
    # data loss: an input file as the output, by path identity
    ("validate-out-is-the-case-file", ["validate", "--cases", "{d}/cases.csv", "--out", "{d}/cases.csv"]),
    ("validate-out-is-a-link-to-it", ["validate", "--cases", "{d}/cases.csv", "--out", "{d}/link.csv"]),
    ("validate-out-is-it-by-another-path", ["validate", "--cases", "{d}/cases.csv", "--out", "{d}/../{dn}/cases.csv"]),
    ("validate-out-is-a-shipped-case-file", ["validate", "--out", str(_shipped_case("training_measured.csv"))]),
    ("merge-out-is-a-part", ["merge", "{d}/golden.csv", "--out", "{d}/golden.csv"]),
    ("merge-output-path-is-a-part", ["merge", "{d}/golden.csv", "output.path={d}/golden.csv"]),
    ("import-hf-out-is-the-config", ["import-hf", "{d}/hf.yaml", "--out", "{d}/hf.yaml"]),
    ("best-out-is-a-kernel-table", ["best", M8, G8, "--out", str(KERNELS)]),
    ("pareto-out-is-a-kernel-table", ["pareto", M8, G8, "--out", str(KERNELS)]),
    ("sweep-output-path-is-a-kernel-table", ["sweep", M8, G8, f"output.path={KERNELS}"]),
    ("multirun-output-path-is-a-kernel-table", ["sweep", "-m", M8, G8, f"output.path={KERNELS}"]),
    (
        "plan-out-is-its-own-kernel-table",
        ["plan", "serve", "qps=5", "--out", "{d}/golden.csv", "hardware.kernels.table={d}/golden.csv"],
    ),
    (
        "profile-over-its-base",
        ["profile", "--device", "cpu", "--quick", "-q", "--out", str(ROOT), "--name", "h100-sxm-80gb"],
    ),
    # infinite numbers
    ("case-measured-1e308", ["validate", "--cases", "{d}/huge_measured.csv"]),
    ("layer-launch-1e308", ["sweep", M8, G8, "stack.overheads.h100-sxm-80gb.layer_launch_us=1e308"]),
    (
        "validate-layer-launch-1e308",
        ["validate", "--cases", "{d}/cases.csv", "stack.overheads.h100-sxm-80gb.layer_launch_us=1e308"],
    ),
    # silent wrong results
    ("model-file-named-otherwise", ["sweep", "-cd", "{d}/misnamed", "model=my8b", G8]),
    ("duplicate-case-names", ["validate", "--cases", "{d}/duplicate_cases.csv"]),
    ("one-case-file-twice", ["validate", "--cases", "{d}/cases.csv", "--cases", "{d}/link.csv"]),
    ("itl-and-tpot-together", ["plan", "serve", "qps=5", "itl_ms=30", "tpot_ms=40"]),
    # tracebacks
    ("plan-serve-qps-1e308", ["plan", "serve", "qps=1e308"]),
    (
        "joblib-n-jobs-zero",
        ["sweep", "-m", M8, G8, "hydra/launcher=joblib", "hydra.launcher.n_jobs=0", "hydra.sweep.dir={d}/mr"],
    ),
    ("case-row-with-blank-hidden", ["validate", "--cases", "{d}/blank_hidden.csv"]),
    # misleading messages
    ("binary-case-file", ["validate", "--cases", "{d}/binary.csv"]),
    ("binary-table-to-compare", ["compare", "{d}/binary.csv", str(GOLDEN)]),
]

# Found by trying the commands and options added since the last round; (id, args).
NEW_CASES = [
    ("plan-serve-qps-twice", ["plan", "serve", "qps=5", "qps=6"]),
    ("plan-train-days-two-spellings", ["plan", "train", M8, "tokens=1e12", "days=3", "plan.days=4"]),
    ("plan-budget-two-spellings", ["plan", "train", M8, "tokens=1e12", "budget=3", "budget_usd=4"]),
    ("plan-tokens-1e300", ["plan", "train", M8, "tokens=1e300"]),
    ("plan-tokens-per-s-1e300", ["plan", "serve", "tokens_per_s=1e300"]),
    ("plan-serve-qps-nan", ["plan", "serve", "qps=nan"]),
    ("plan-serve-itl-nan", ["plan", "serve", "qps=5", "itl_ms=nan"]),
    ("plan-serve-load-above-one", ["plan", "serve", "qps=5", "load=1.5"]),
    ("plan-serve-half-a-split", ["plan", "serve", "qps=5", "prefill_gpus=8"]),
    ("plan-train-pue-below-one", ["plan", "train", M8, "tokens=1e12", "pue=0.5"]),
    ("compare-rtol-inf", ["compare", str(GOLDEN), str(GOLDEN), "--rtol", "inf"]),
    ("compare-atol-nan", ["compare", str(GOLDEN), str(GOLDEN), "--atol", "nan"]),
    ("hbm-bandwidth-1e-300", ["sweep", M8, G8, "hardware.hbm_bandwidth_gbps=1e-300"]),
    ("peak-1e308", ["sweep", M8, G8, "hardware.peak_tflops.bf16=1e308"]),
    ("price-1e308", ["best", M8, G8, "hardware.cost_per_gpu_hour_usd=1e308"]),
    ("scale-up-latency-1e308", ["sweep", M8, G8, "hardware.scale_up.latency_us=1e308"]),
    ("step-fixed-1e308", ["pareto", M8, G8, "stack.overheads.h100-sxm-80gb.step_fixed_ms=1e308"]),
    ("import-hf-name-disagrees-with-out", ["import-hf", "{d}/hf.json", "--name", "y", "--out", "{d}/models/x.yaml"]),
    ("import-hf-hidden-1e308", ["import-hf", "{d}/huge_hf.json"]),
    ("import-hf-a-list", ["import-hf", "{d}/list.json"]),
    ("profile-device-unknown", ["profile", "--device", "tpu", "--out", "{d}/prof"]),
    ("profile-base-unknown", ["profile", "--device", "cpu", "--quick", "--base", "nosuch", "--out", "{d}/prof"]),
    ("merge-a-part-twice", ["merge", "{d}/golden.csv", "{d}/golden.csv", "--out", "{out}"]),
    ("validate-non-hardware-override", ["validate", "--cases", "{d}/cases.csv", M8]),
    ("validate-case-file-is-a-folder", ["validate", "--cases", "{d}"]),
    ("low-precision-gemms-unknown", ["sweep", M8, G8, "workload.low_precision_gemms=bogus"]),
    ("fp8-on-a100", ["sweep", M8, G8, "workload.precision=fp8", "hardware=a100-sxm-80gb"]),
    ("attention-backend-unknown", ["sweep", M8, G8, "hardware.kernels.attention_backend=nosuch"]),
    ("spec-method-mtp-without-heads", ["sweep", M8, "workload=inference", "workload.spec_method=mtp"]),
    ("spec-tokens-zero", ["sweep", M8, "workload=inference", "workload.spec_tokens=0"]),
    ("prefix-cache-hit-one", ["sweep", M8, "workload=inference", "workload.prefix_cache_hit=1"]),
    ("output-format-disagrees", ["sweep", M8, G8, "output.format=parquet"]),
    ("pareto-front-unknown", ["pareto", M8, G8, "--front", "time_step_s,bogus"]),
    (
        "best-n-jobs-zero",
        ["best", "-m", M8, G8, "hydra/launcher=joblib", "hydra.launcher.n_jobs=0", "hydra.sweep.dir={d}/mr"],
    ),
    ("moe-imbalance-past-the-experts", ["sweep", "model=mixtral-8x7b", "grid.ngpus=[64]", "workload.moe_imbalance=5"]),
    ("dp-bucket-below-one-parameter", ["sweep", M8, G8, "workload.dp_bucket_params=1e-300"]),
    (
        "study-out-is-a-folder-of-user-files",
        ["study", "run", "{d}/study.yaml", "--engine", "local", "--out", "{d}/misnamed"],
    ),
    ("study-out-is-the-study-file", ["study", "run", "{d}/study.yaml", "--engine", "local", "--out", "{d}/study.yaml"]),
    (
        "pd-split-without-a-scale-out-link",
        ["plan", "serve", "-cd", "{d}/nolink", "hardware=h100-nolink", M8, "qps=5", "prefill_gpus=8", "decode_gpus=8"],
    ),
]


def _args(args, d, out):
    args = [a.replace("{d}", str(d)).replace("{dn}", d.name).replace("{out}", str(out)) for a in args]
    if args[0] == "sweep" and "-m" not in args and not any(a.startswith("output.path") for a in args):
        args.append(f"output.path={out}")
    return args


def _check(code, stderr, stdout, out):
    assert code == 2, (code, stdout, stderr)
    assert "Traceback" not in stderr + stdout
    lines = [ln for ln in stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    assert not out.exists()


@pytest.fixture(scope="module")
def extra(d):
    hf = json.loads((d / "hf.json").read_text())
    (d / "huge_hf.json").write_text(json.dumps({**hf, "hidden_size": 1e308}))
    (d / "list.json").write_text("[1, 2]")
    (d / "study.yaml").write_text((REPO / "examples" / "studies" / "codesign.yaml").read_text())
    return d


@pytest.mark.parametrize("name,args", ISSUE_CASES + NEW_CASES, ids=[c[0] for c in ISSUE_CASES + NEW_CASES])
def test_hostile_input_is_one_sentence_and_loses_nothing(name, args, extra, tmp_path):
    d = extra
    before = _fingerprint(d)
    out = tmp_path / "out.csv"
    result = CliRunner().invoke(app, _args(args, d, out))
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    _check(result.exit_code, result.stderr, result.stdout, out)
    assert _fingerprint(d) == before, "an input file changed"
    assert not (d / "mr").exists(), "a refused multirun left its folder (multirun.yaml) behind"
    assert not (d / "models").exists() and not (d / "prof").exists()
    assert not [p for p in d.rglob(".*") if p.name.endswith(".tmp")]


def test_corpus_size():
    assert len(ISSUE_CASES) >= 20 and len(NEW_CASES) >= 25
    assert len({n for n, _ in ISSUE_CASES + NEW_CASES}) == len(ISSUE_CASES + NEW_CASES)


@pytest.mark.parametrize("name", ["validate-out-is-the-case-file", "itl-and-tpot-together", "joblib-n-jobs-zero"])
def test_a_sample_as_real_processes(name, extra, tmp_path):
    args = dict(ISSUE_CASES)[name]
    before = _fingerprint(extra)
    r = run_cli(*_args(args, extra, tmp_path / "out.csv"))
    _check(r.returncode, r.stderr, r.stdout, tmp_path / "out.csv")
    assert _fingerprint(extra) == before


def test_same_file_by_a_relative_path(d, tmp_path):
    """--out given relative to the current folder, the case file absolute: the same inode."""
    r = run_cli("validate", "--cases", d / "cases.csv", "--out", "cases.csv", cwd=d)
    _check(r.returncode, r.stderr, r.stdout, tmp_path / "none.csv")
    assert "is the input file" in r.stderr


def test_validate_with_unbuildable_rows_writes_no_table(d, tmp_path):
    """A failing exit leaves no complete-looking table: the rows that built are printed, --out is
    not written, and the last line says so."""
    cases = tmp_path / "some_bad.csv"
    mem = pd.read_csv(d / "cases.csv")
    pd.concat([mem.head(2), mem.iloc[[2]].assign(seq_len=-1)]).to_csv(cases, index=False)
    out = tmp_path / "v.csv"
    code, text = _invoke("validate", "--cases", cases, "--out", out)
    assert code == 2, text
    assert not out.exists() and not list(tmp_path.glob(".*.tmp"))
    assert f"nothing was written to {str(out)!r}" in text
    assert "korthikanti-22b-states" in text  # the rows that did build are shown


def test_case_file_with_blank_lines_reads_every_row(d, tmp_path):
    """Blank lines (before the header, between rows, at the end) are skipped as the CSV reader
    skips them: the same table as without them (was: "is empty")."""
    lines = (d / "cases.csv").read_text().splitlines()
    blank = tmp_path / "blank.csv"
    blank.write_text("\n\n" + lines[0] + "\n" + "\n\n".join(lines[1:4]) + "\n\n")
    plain = tmp_path / "plain.csv"
    plain.write_text("\n".join(lines[:4]) + "\n")
    outs = []
    for f in (blank, plain):
        out = tmp_path / f"{f.stem}.out.csv"
        code, text = _invoke("validate", "--cases", f, "--out", out)
        assert code == 0, text
        outs.append(pd.read_csv(out))
    assert len(outs[0]) == 3
    pd.testing.assert_frame_equal(outs[0], outs[1])


def test_binary_table_is_not_called_truncated(d):
    code, text = _invoke("merge", d / "binary.csv", "--out", d / "never.csv")
    assert code == 2 and "not a text file" in text and "truncated" not in text


def test_compare_nan_in_both_is_unchanged_and_in_one_is_stated(tmp_path):
    g = pd.read_csv(GOLDEN)
    a = g.copy()
    a.loc[0, "mem_total_gib"] = np.nan
    a.to_csv(tmp_path / "a.csv", index=False)
    a.to_csv(tmp_path / "b.csv", index=False)
    code, text = _invoke("compare", tmp_path / "a.csv", tmp_path / "b.csv")
    assert code == 0, text
    code, text = _invoke("compare", GOLDEN, tmp_path / "a.csv")
    assert code == 1 and "now NaN" in text and "1 moved value is NaN on one side only" in text
    code, text = _invoke("compare", tmp_path / "a.csv", GOLDEN)
    assert code == 1 and "was NaN" in text


def test_check_finite_names_the_column():
    """The safety net behind the physical ranges: a non-finite cost column is one sentence."""
    from types import SimpleNamespace

    from parallmelism.errors import UserError
    from parallmelism.search.chunks import check_finite

    run = SimpleNamespace(model=SimpleNamespace(name="m"), hardware=SimpleNamespace(name="h"))
    cols = {"tp": np.array([1, 2]), "time_step_s": np.array([1.0, np.inf])}
    with pytest.raises(UserError, match="time_step_s comes out infinite for 1 of 2 layouts of m on h"):
        check_finite(cols, run)
    assert check_finite({"time_step_s": np.array([1.0, 2.0])}, run)


def test_stale_temporaries_of_a_killed_run_are_removed_by_the_next(tmp_path):
    """SIGKILL leaves the writer's hidden temporary (no handler runs); the next run writing into
    that folder removes it once its writer is gone and it is stale, and touches nothing else."""
    import signal

    from parallmelism.report import writer
    from tests.test_signals import _run_until_temp

    proc = _run_until_temp(["sweep", "-q", "output.path=big.parquet"], tmp_path)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    (left,) = [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    old = time.time() - writer.STALE_TEMP_S - 60
    for p in [left, *left.rglob("*")] if left.is_dir() else [left]:
        os.utime(p, (old, old))
    # beside it: a fresh temporary of a dead writer, one of a live writer, and user files alike
    dead = _dead_pid()
    fresh = tmp_path / f".other.csv.{dead}.0123abcd.tmp"
    fresh.write_text("being written on another node")
    live = tmp_path / f".mine.csv.{os.getpid()}.0123abcd.tmp"
    live.write_text("x")
    users = [tmp_path / ".notes.tmp", tmp_path / f".a.{dead}.tmp", tmp_path / f"a.{dead}.0123abcd.tmp"]
    for p in [live, *users]:
        p.write_text("x")
        os.utime(p, (old, old))
    code, text = _invoke("best", M8, G8, "-q", "--out", tmp_path / "next.csv")
    assert code == 0, text
    assert not left.exists()
    assert fresh.exists() and live.exists() and all(p.exists() for p in users)
    assert (tmp_path / "next.csv").exists()


def _dead_pid() -> int:
    import subprocess
    import sys

    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def _invoke(*args):
    result = CliRunner().invoke(app, [str(a) for a in args])
    return result.exit_code, result.output


def test_compare_a_table_with_its_csv_copy(tmp_path):
    """best's winner has an empty loses_on: "" in Parquet, an empty field in CSV that reads back as
    NaN. The same table in the two formats is unchanged (it was one moved value, exit 1)."""
    for ext in ("csv", "parquet"):
        code, text = _invoke("best", M8, G8, "-q", "--out", tmp_path / f"b.{ext}")
        assert code == 0, text
    for a, b in (("csv", "parquet"), ("parquet", "csv")):
        code, text = _invoke("compare", tmp_path / f"b.{a}", tmp_path / f"b.{b}")
        assert code == 0 and "within tolerance" in text, text


def test_no_infinite_ttft_without_a_scale_out_link(d):
    """The disaggregated comparison on an accelerator with no scale-out link printed 'TTFT inf ms
    (KV transfer inf ms)'; it now says why it is not planned."""
    code, text = _invoke("plan", "serve", "-cd", d / "nolink", "hardware=h100-nolink", M8, "qps=5")
    assert code == 0, text
    assert "inf ms" not in text and "disaggregated prefill/decode: not planned, h100-nolink has no scale-out" in text


@pytest.mark.parametrize("kind", ["spaces-line", "crlf", "bom"])
def test_case_files_from_other_editors_read_as_the_plain_file(d, tmp_path, kind):
    """A line of spaces, Windows line ends and Excel's UTF-8 byte-order mark give the same cases."""
    lines = (d / "cases.csv").read_text().splitlines()[:3]
    f = tmp_path / f"{kind}.csv"
    if kind == "spaces-line":
        f.write_text(lines[0] + "\n" + lines[1] + "\n   \n" + lines[2] + "\n")
    elif kind == "crlf":
        f.write_bytes(("\r\n".join(lines) + "\r\n").encode())
    else:
        f.write_bytes(("\n".join(lines) + "\n").encode("utf-8-sig"))
    plain = tmp_path / "plain.csv"
    plain.write_text("\n".join(lines) + "\n")
    tables = []
    for g in (f, plain):
        code, text = _invoke("validate", "--cases", g, "--out", tmp_path / f"{g.stem}.out.csv")
        assert code == 0, text
        tables.append(pd.read_csv(tmp_path / f"{g.stem}.out.csv"))
    pd.testing.assert_frame_equal(tables[0], tables[1])


def test_a_folder_is_swept_for_stale_temporaries_once_per_process(tmp_path, monkeypatch):
    """A study writes one partition after another into data/: the folder is listed for a killed
    run's temporaries at the first write of a process, not at every one (quadratic in the points)."""
    from parallmelism.report import writer

    swept = []
    monkeypatch.setattr(writer, "remove_stale_temps", lambda folder: swept.append(folder) or [])
    for i in range(5):
        writer.create_temp(writer.temp_beside(tmp_path / f"point={i}"), folder=True)
    (tmp_path / "sub").mkdir()
    writer.create_temp(writer.temp_beside(tmp_path / "sub" / "x.csv"))
    assert swept == [tmp_path, tmp_path / "sub"]


# Found by the session-17 audit (every command with unknown names, out-of-range numbers, malformed
# overrides, hostile output paths and broken files); (id, args, what the one sentence says). Each of
# these was a traceback, a second line, an OS error's words or a silently replaced file before.
AUDIT_CASES = [
    (
        "plan-pue-beyond-any-data-centre",
        ["plan", "train", M8, "tokens=1e12", "pue=1e30"],
        "pue=1e+30: Input should be less than or equal to 3",
    ),
    ("override-without-a-key", ["show", "=1"], "malformed override '=1'; expected key=value"),
    (  # was "Hydra cannot read the value '1'": the value was fine, the key was not
        "override-key-with-an-empty-part",
        ["show", "grid..tp=1"],
        "malformed override 'grid..tp=1': the key 'grid..tp' has an empty part or a space",
    ),
    ("sweep-default-folder-is-a-file", ["sweep", M8, G8, "output.dir={d}/golden.csv"], "is a file, not a folder"),
    (
        "export-out-a-device-before-any-note",
        ["export", "--pinned", M8, G8, "grid.tp=1", "grid.pp=1", "--out", "/dev/null"],
        "is a device, pipe or socket",
    ),
    (
        "stack-fit-value-names-the-key-once",
        ["show", M8, G8, "stack.overheads.h100-sxm-80gb.layer_launch_us=nan"],
        "stack.overheads.h100-sxm-80gb.layer_launch_us=nan: Input should be a finite number",
    ),
    ("out-onto-a-read-only-file", ["sweep", M8, G8, "--out", "{d}/read_only.csv"], "is a read-only file"),
    ("export-onto-a-read-only-file", ["export", "--pinned", M8, G8, "--out", "{d}/read_only.csv"], "read-only"),
    ("study-file-binary", ["study", "run", "{d}/binary.csv", "--out", "{d}/st"], "is not UTF-8 text"),
    ("study-points-csv-binary", ["study", "run", "{d}/binary_points.yaml", "--out", "{d}/st"], "is not a text CSV"),
    (
        "study-points-csv-cell-not-yaml",
        ["study", "run", "{d}/bracket_points.yaml", "--out", "{d}/st"],
        "line 2 holds a cell that is not a YAML value",
    ),
    (
        "kernel-table-cut-mid-line",
        ["show", "-cd", "{d}/cut_kernels", "hardware=h100-cut", M8, G8],
        "unreadable (truncated: its last line ends without a line break",
    ),
    (
        "kernel-table-row-short-of-fields",
        ["show", "-cd", "{d}/short_kernels", "hardware=h100-short", M8, G8],
        "fields for the header's",
    ),
    ("export-from-a-table-cut-short", ["export", "{d}/cut_golden.csv", "--where", "tp == 1"], "is truncated"),
    (
        "out-path-past-path-max",
        ["sweep", M8, G8, "--out", "{d}/" + "/".join(["d" * 200] * 21) + "/x.csv"],
        "the path is longer than the 4096 bytes",
    ),
    (
        "engine-request-overhead-1e30",
        ["show", M8, G8, "workload=inference", "engine.request_overhead_ms=1e30"],
        "engine.request_overhead_ms=1e+30: Input should be less than or equal to 10000",
    ),
    (
        "engine-moe-layer-overhead-1e30",
        ["plan", "serve", M8, "qps=5", "engine.moe_layer_overhead_us=1e30"],
        "engine.moe_layer_overhead_us=1e+30",
    ),
    ("study-without-a-folder", ["study", "run", "{d}/no_out.yaml"], "give out: DIR in the study file or --out DIR"),
    # session-20 audit (a new user's pass over the README and every command): each said something else
    (  # was "expected key=value" for what is key=value: the value is what Hydra cannot read
        "override-value-hydra-cannot-read",
        ["show", M8, "grid.tp=["],
        "Hydra cannot read the value '['; write a list as grid.tp=[a,b]",
    ),
    ("sweep-value-with-an-empty-item", ["sweep", "-m", "model=llama3.1-8b,"], "a sweep as model=a,b"),
    (  # was "adir holds a table of kind unrecognised but golden.csv one of kind training"
        "merge-an-empty-folder-beside-a-part",
        ["merge", "{d}/golden.csv", "{d}/empty_folder", "--out", "{d}/never.csv"],
        "is a folder with no .parquet file",
    ),
    (  # was pyarrow's "Parquet file size is 3 bytes, smaller than the minimum file footer"
        "merge-a-folder-of-other-files",
        ["merge", "{d}/text_folder", "--out", "{d}/never.csv"],
        "is a folder with no .parquet file",
    ),
    (  # was a plan of any fleet size: plan serve reads no gpus=
        "plan-serve-given-a-train-setting",
        ["plan", "serve", M8, "qps=5", "gpus=8", "--out", "{d}/never.csv"],
        "gpus= is a `plan train` setting that plan serve does not read",
    ),
    (  # was the usual plan, the limit unread
        "plan-train-given-a-serve-setting",
        ["plan", "train", M8, "tokens=1e12", "plan.ttft_ms=5", "--out", "{d}/never.csv"],
        "plan.ttft_ms= is a `plan serve` setting that plan train does not read",
    ),
    (  # was exit 0 and the framework's defaults (tp 1, pp 1, ...) as if a layout had been read
        "import-run-a-file-with-no-setting",
        ["import-run", "{d}/notes.txt", "--from", "megatron"],
        "holds none of megatron's settings (e.g. --tensor-model-parallel-size)",
    ),
    (  # was "--to 'bogus' is not a target": export's option, not this command's
        "import-run-from-unknown",
        ["import-run", "{d}/notes.txt", "--from", "bogus"],
        "--from 'bogus' is not a target",
    ),
    (  # was Hydra's "ConfigLoader is not set" traceback (glob lists a group's options)
        "sweep-glob",
        ["sweep", "-m", "model=glob(llama*)", G8, "hydra.sweep.dir={d}/mr"],
        "glob() is not expanded here; name the options as a sweep, model=a,b",
    ),
    (  # was an endless expansion (range over floats up to 1e30)
        "sweep-range-without-end",
        ["sweep", M8, "grid.ngpus=range(8,1e30)"],
        "the sweep has more than 100,000 points",
    ),
    (  # was an empty product: the command ran the default grid as if the sweep were not there
        "sweep-range-of-nothing",
        ["sweep", M8, "grid.ngpus=range(8,8)", "--out", "{d}/never.csv"],
        "'grid.ngpus=range(8,8)' sweeps no value",
    ),
    (  # was "no such setting" alone: a typo in a key now names the key it is nearest
        "override-key-typo",
        ["show", M8, G8, "workload.seq_lenn=4096"],
        "unknown key 'workload.seq_lenn'; did you mean workload.seq_len?",
    ),
    (  # a serving setting on a training run: the key exists, on the other workload kind
        "inference-setting-on-train",
        ["sweep", M8, G8, "workload.input_len=4000", "--out", "{d}/never.csv"],
        "did you mean workload=inference, where workload.input_len is a setting?",
    ),
    (  # export takes the search's overrides; plan's short forms are plan's alone
        "plan-short-form-given-to-export",
        ["export", "--pinned", M8, G8, "input_len=1024", "--out", "{d}/never.sh"],
        "did you mean workload.input_len? (input_len= alone is the plan commands' short form",
    ),
    (  # said what was wrong, not that hbm_usable_gib (what decides the fit) is a field of its own
        "hbm-capacity-below-usable",
        ["best", M8, G8, "hardware.hbm_capacity_gib=64", "--out", "{d}/never.csv"],
        "exceeds hbm_capacity_gib=64.0; set hardware.hbm_usable_gib with it",
    ),
    (  # was "'utf-8' codec can't decode byte ..."
        "import-hf-binary-config",
        ["import-hf", "{d}/binary.csv", "--out", "{d}/never.yaml"],
        "is not UTF-8 text; give a Hugging Face config.json",
    ),
]


@pytest.fixture(scope="module")
def audit(extra):
    d = extra
    (d / "read_only.csv").write_text("a user's finished table\n")
    (d / "read_only.csv").chmod(0o444)
    for name, points in (("binary_points", "binary.csv"), ("bracket_points", "bracket.csv")):
        study = {"command": "best", "out": str(d / "st"), "overrides": [M8, G8], "points": {"csv": points}}
        (d / f"{name}.yaml").write_text(yaml.safe_dump(study))
    (d / "bracket.csv").write_text("grid.tp\n[1\n")
    (d / "empty_folder").mkdir()
    (d / "notes.txt").write_text("notes from the last run: it was slow\n")
    (d / "text_folder").mkdir()
    (d / "text_folder" / "notes.txt").write_text("hi\n")
    (d / "cut_golden.csv").write_bytes(GOLDEN.read_bytes()[:-50])
    h100 = yaml.safe_load((ROOT / "hardware" / "h100-sxm-80gb.yaml").read_text())
    table = (ROOT / "hardware" / "kernels" / "h100-sxm-80gb.csv").read_text()
    last = table.rstrip("\n").rsplit("\n", 1)[-1]
    for kind, text in (("cut", table[: len(table) // 2]), ("short", table + last.rsplit(",", 2)[0] + "\n")):
        (d / f"{kind}_kernels" / "hardware").mkdir(parents=True)
        (d / f"{kind}_kernels" / f"{kind}.csv").write_text(text)
        hw = {
            **h100,
            "name": f"h100-{kind}",
            "kernels": {**h100["kernels"], "table": str(d / f"{kind}_kernels" / f"{kind}.csv")},
        }
        (d / f"{kind}_kernels" / "hardware" / f"h100-{kind}.yaml").write_text(yaml.safe_dump(hw))
    study = {"command": "best", "overrides": [M8, G8], "points": {"product": {"grid.tp": [1]}}}
    (d / "no_out.yaml").write_text(yaml.safe_dump({**study, "engine": {"kind": "local", "workers": 1}}))
    return d


@pytest.mark.parametrize("name,args,words", AUDIT_CASES, ids=[c[0] for c in AUDIT_CASES])
def test_audit_case_is_the_one_sentence_it_should_be(name, args, words, audit, tmp_path):
    before = _fingerprint(audit)
    args = [a.replace("{d}", str(audit)) for a in args]
    result = CliRunner().invoke(app, args)
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    _check(result.exit_code, result.stderr, result.stdout, tmp_path / "never.csv")
    assert words in result.stderr, result.stderr
    assert "Overheads" not in result.stderr and ".str:" not in result.stderr  # no pydantic union member names
    assert _fingerprint(audit) == before, "an input file changed"
    assert not (audit / "st").exists() and not (audit / "results").exists()
    assert not [p for p in audit.rglob(".*") if p.name.endswith(".tmp")]


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
def test_a_folder_that_takes_no_files_is_not_called_missing(tmp_path):
    """/proc exists but refuses a new file with ENOENT: was "cannot write to '/proc': No such file or
    directory" for a folder that is there."""
    result = CliRunner().invoke(app, ["best", M8, G8, "-q", "--out", "/proc/never.csv"])
    assert result.exit_code == 2 and "cannot write to '/proc': it takes no new files" in result.stderr, result.stderr
    assert not Path("/proc/never.csv").exists()


def test_a_study_file_without_out_runs_into_the_out_option(audit, tmp_path):
    """--out DIR replaces the file's out:, so a file without one runs (was: "out: Field required")."""
    result = CliRunner().invoke(app, ["study", "run", str(audit / "no_out.yaml"), "--out", str(tmp_path / "st"), "-q"])
    assert result.exit_code == 0, result.output
    assert "1 of 1 points complete" in result.stdout and (tmp_path / "st" / "manifest.json").is_file()


def test_a_kernel_table_path_that_is_a_folder_is_called_a_folder(tmp_path):
    """hardware kernels: a path naming a folder gets that sentence, not 'not found' (the audit's misleading message)."""
    from parallmelism.config.kernel_tables import resolve_table
    from parallmelism.errors import UserError

    with pytest.raises(UserError, match="is a folder .*, not a CSV file"):
        resolve_table(str(tmp_path))
    with pytest.raises(UserError, match="not found"):
        resolve_table(str(tmp_path / "missing.csv"))


ENGINE_TABLES = [
    ("fused_moe_tables", "sglang", "fused-MoE table"),
    ("mla_context_tables", "sglang", "MLA module table"),
    ("gemm_tables", "trtllm", "GEMM table"),
]
NOT_TABLES = [
    ("empty", "", "no rows"),
    ("header-alone", "dtype,time_s\n", "no rows"),
    ("a-hostname", "some-host\n", "no rows"),
    ("unrelated", "a,b\n1,2\n", "no column"),
]


@pytest.mark.parametrize("field,engine,what", ENGINE_TABLES, ids=[t[0] for t in ENGINE_TABLES])
@pytest.mark.parametrize("kind,text,words", NOT_TABLES, ids=[t[0] for t in NOT_TABLES])
def test_an_engine_table_with_no_usable_rows_is_one_sentence(field, engine, what, kind, text, words, tmp_path):
    """An engine table that is empty, a header alone or another file (its rows lack the table's
    columns) priced nothing and the run went on silently; now one sentence, exit 2."""
    bad = tmp_path / f"{kind}.csv"
    bad.write_text(text)
    args = ["show", "model=deepseek-v3", "hardware=h200-sxm-141gb", f"engine={engine}", "workload=inference"]
    args += ["workload.precision=fp8", f"engine.{field}.h200-sxm-141gb={bad}"]
    result = CliRunner().invoke(app, args)
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    _check(result.exit_code, result.stderr, result.stdout, tmp_path / "never.csv")
    assert f"{what} {bad}: unreadable ({words}" in result.stderr, result.stderr
