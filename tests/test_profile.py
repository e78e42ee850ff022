"""`parallmelism profile`: micro-benchmarks with PyTorch write an accelerator file usable at once."""

import sys

import numpy as np
import pandas as pd
import pytest

from conftest import invoke, shared_reference

torch = pytest.importorskip("torch", reason="profile needs the optional torch extra")


@pytest.fixture(scope="module")
def profiled(tmp_path_factory):
    out = tmp_path_factory.mktemp("prof")
    # not --quiet: what a script sees of a run without a terminal (no progress bar: it drew nothing
    # there and left a blank line ahead of the report)
    code, text = invoke("profile", "--device", "cpu", "--quick", "--out", str(out), "--name", "cpu-test")
    assert code == 0, text
    assert not text.startswith("\n") and "\n\n" not in text.split("collectives over")[0], repr(text[:200])
    return out, text


def test_cpu_profile_writes_a_yaml_and_a_kernel_table(profiled):
    out, text = profiled
    yaml = out / "hardware" / "cpu-test.yaml"
    table = out / "hardware" / "kernels" / "cpu-test.csv"
    assert yaml.is_file() and table.is_file()
    assert "wrote" in text and "--config-dir" in text
    df = pd.read_csv(table, comment="#")
    assert set(df.family) == {"gemm", "attention", "hbm"}
    assert set(df[df.family == "gemm"].part) == {"fwd", "dgrad", "wgrad"}  # the three GEMMs of a linear layer
    blocks = df[df.part.str.endswith("_block")]  # the non-causal block of a ring step: seq/2 keys
    assert set(blocks.part) == {"fwd_block", "bwd_block"} and (blocks.kv_seq == blocks.seq // 2).all()
    assert (df.measured_s > 0).all()
    head = table.read_text().splitlines()[0]
    assert "PyTorch" in head and "profile" in head


def test_a_profiled_folder_works_after_it_moves(profiled, tmp_path):
    """profile writes the table's path relative to the YAML (kernels/NAME.csv), and a relative
    path is read from the YAML's own folder: a copy of the folder elsewhere runs as it is."""
    import shutil

    out, _ = profiled
    assert "table: kernels/cpu-test.csv" in (out / "hardware" / "cpu-test.yaml").read_text()
    moved = tmp_path / "moved"
    shutil.copytree(out, moved)
    from parallmelism.config.compose import load_option

    hw = load_option("hardware", "cpu-test", [str(moved)])
    assert hw.kernels.table == str((moved / "hardware" / "kernels" / "cpu-test.csv").resolve())


def test_profiled_accelerator_is_usable_at_once(profiled):
    """`--config-dir OUT hardware=NAME` evaluates with the new file, and the kernel model gives the
    profiled GEMMs back (they are its table)."""
    out, _ = profiled
    code, text = invoke(
        "best",
        "--config-dir",
        str(out),
        "hardware=cpu-test",
        "model=llama3.1-8b",
        "workload.global_batch=8",
        "workload.seq_len=1024",
        "grid.ngpus=[8]",
    )
    assert code == 0, text
    from parallmelism.config.compose import load_option
    from parallmelism.config.kernel_tables import kernel_model

    hw = load_option("hardware", "cpu-test", [str(out)])
    km = kernel_model(hw)
    df = pd.read_csv(out / "hardware" / "kernels" / "cpu-test.csv", comment="#")
    g = df[df.family == "gemm"]
    pred = np.array([float(km.gemm_s(r.m, r.k, r.n, r.dtype, r.part)) for r in g.itertuples()])
    assert np.allclose(pred, g.measured_s, rtol=0.05)


def test_no_cuda_is_one_sentence_and_exit_2(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    code, text = invoke("profile", "--device", "cuda", "--quick", "--out", str(tmp_path))
    assert code == 2 and "no CUDA accelerator" in text and "Traceback" not in text
    assert not (tmp_path / "hardware").exists()


def test_no_torch_is_one_sentence_and_exit_2(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch raises ImportError
    code, text = invoke("profile", "--device", "cpu", "--out", str(tmp_path))
    assert code == 2 and "needs PyTorch" in text


def test_profile_without_out_reads_its_default_folder(tmp_path, monkeypatch):
    """profile's --out defaults to the current folder, and click hands that default (a Path) to the
    option's parser, which called .strip() on it: every profile without --out was an AttributeError
    traceback (exit 1) before any check ran."""
    monkeypatch.setitem(sys.modules, "torch", None)  # stops right after the options are read
    monkeypatch.chdir(tmp_path)
    code, text = invoke("profile", "--device", "cpu")
    assert code == 2 and "needs PyTorch" in text and "Traceback" not in text, text
    code, text = invoke("profile", "--name", "a/b")
    assert code == 2 and "--name 'a/b': use letters, digits" in text, text


KINDS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")


def test_busbw_follows_the_nccl_tests_factor():
    """nccl-tests PERFORMANCE.md: algbw = S / t; busbw = algbw · 2(n−1)/n for all_reduce and
    algbw · (n−1)/n for all_gather, reduce_scatter, all_to_all. A synthetic timing, no torch."""
    from parallmelism.profiling.collectives import bandwidths

    S, t = 2**26, 1.6e-3  # 64 MiB in 1.6 ms: algbw 41.94304 GB/s
    for n in (2, 4, 8, 16):
        for kind in KINDS:
            alg, bus = bandwidths(kind, n, S, t)
            assert alg == pytest.approx(41.94304, rel=1e-12)
            factor = 2 * (n - 1) / n if kind == "all_reduce" else (n - 1) / n
            assert bus == pytest.approx(41.94304 * factor, rel=1e-12)


def _synthetic(alpha_us, beta_gbps, n, sizes):
    """Times the cost model's ring gives (cost/collectives.py), every collective at every size."""
    from parallmelism.cost.collectives import collective_time_s

    kinds = [k for k in KINDS for _ in sizes]
    nbytes = [s for _ in KINDS for s in sizes]
    times = [float(collective_time_s(k, s, n, beta_gbps, alpha_us)) for k, s in zip(kinds, nbytes)]
    return kinds, nbytes, np.array(times)


def test_fit_recovers_known_alpha_and_beta():
    """Points made by the cost model's own α–β ring give its α and β back; with ±5 % noise on
    every point, within a few per cent."""
    from parallmelism.profiling.collectives import fit_link

    sizes = [2**k for k in range(10, 31, 2)]
    kinds, nbytes, t = _synthetic(3.5, 360.0, 8, sizes)
    fit = fit_link(kinds, 8, nbytes, t)
    assert fit.alpha_us == pytest.approx(3.5, rel=1e-9)
    assert fit.beta_gbps == pytest.approx(360.0, rel=1e-9)
    assert fit.rms_rel_err < 1e-9 and fit.points == len(t)
    noise = 1 + 0.05 * np.where(np.arange(len(t)) % 2, 1.0, -1.0)  # alternating ±5 %
    fit = fit_link(kinds, 8, nbytes, t * noise)
    assert fit.alpha_us == pytest.approx(3.5, rel=0.05)
    assert fit.beta_gbps == pytest.approx(360.0, rel=0.05)
    assert fit.rms_rel_err == pytest.approx(0.05, rel=0.1)


def test_fit_of_latency_bound_points_keeps_alpha_and_bounds_beta():
    """Sizes far below alpha·beta cannot tell β: α is still recovered, β never comes out negative
    or infinite (at least the best busbw seen)."""
    from parallmelism.profiling.collectives import bandwidths, fit_link

    kinds, nbytes, t = _synthetic(20.0, 1e9, 4, [8, 64, 512])
    fit = fit_link(kinds, 4, nbytes, t)
    assert fit.alpha_us == pytest.approx(20.0, rel=1e-3)
    best = max(float(bandwidths(k, 4, s, x)[1]) for k, s, x in zip(kinds, nbytes, t))
    assert best <= fit.beta_gbps < float("inf")


def test_message_sizes_split_evenly_over_the_ranks():
    from parallmelism.profiling.collectives import message_bytes

    assert message_bytes(2**20, 8) == 2**20
    assert message_bytes(1000, 3) == 996  # 83 fp32 elements per rank
    assert message_bytes(8, 4) == 16  # at least one element per rank


def test_collectives_ran_over_two_gloo_ranks_in_the_case_file_format(profiled):
    """--device cpu runs the collectives with gloo over 2 ranks (the default) and writes them in
    the columns of shared/reference/collectives_measured.csv; busbw is the nccl-tests busbw of the
    written time."""
    from parallmelism.profiling.writer import CASE_COLUMNS

    out, text = profiled
    path = out / "hardware" / "kernels" / "cpu-test.collectives.csv"
    df = pd.read_csv(path, comment="#")
    assert tuple(df.columns) == CASE_COLUMNS
    reference = shared_reference("collectives_measured.csv")
    assert tuple(pd.read_csv(reference, comment="#").columns) == CASE_COLUMNS
    assert set(df.collective) == set(KINDS) and (df.ranks == 2).all() and (df.nodes == 1).all()
    assert df.case.is_unique and (df.accelerator == "cpu-test").all()
    assert (df.message_bytes % (2 * 4) == 0).all() and (df.time_us > 0).all()
    factor = np.where(df.collective == "all_reduce", 2 * (2 - 1) / 2, (2 - 1) / 2)
    assert np.allclose(df.busbw_gbps, df.message_bytes / (df.time_us * 1e-6) / 1e9 * factor, rtol=1e-4)
    assert "gloo" in path.read_text().splitlines()[0]
    assert "collectives over 2 ranks (gloo), busbw (algbw)" in text and "scale_up fitted" in text


def test_profiled_scale_up_link_is_the_fit_of_the_written_points(profiled):
    """`hardware=cpu-test -cd OUT` loads the file, and its scale-up link is the α–β fit of the
    points in the case file, in the keys and units the cost model reads."""
    from parallmelism.config.compose import load_option
    from parallmelism.cost.collectives import group_link
    from parallmelism.profiling.collectives import fit_link

    out, _ = profiled
    code, text = invoke(
        "show", "-cd", str(out), "hardware=cpu-test", "model=llama3.1-8b", "grid.ngpus=[8]", "grid.tp=2"
    )
    assert code == 0, text
    df = pd.read_csv(out / "hardware" / "kernels" / "cpu-test.collectives.csv", comment="#")
    fit = fit_link(df.collective, df.ranks, df.message_bytes, df.time_us * 1e-6)
    hw = load_option("hardware", "cpu-test", [str(out)])
    assert hw.scale_up.latency_us == pytest.approx(fit.alpha_us, rel=1e-3)
    assert hw.scale_up.bandwidth_gbps == pytest.approx(fit.beta_gbps, rel=1e-3)
    assert hw.scale_up.domain_size == 2 and hw.efficiency.scale_up == 1.0
    bw, lat = group_link(hw, 2, 1)  # what the cost model uses for a TP2 group
    assert float(bw) == pytest.approx(fit.beta_gbps, rel=1e-3) and float(lat) == pytest.approx(fit.alpha_us, rel=1e-3)
    base = load_option("hardware", "h100-sxm-80gb")
    assert hw.scale_out == base.scale_out  # not measured: copied, and the header says so
    assert "Copied from h100-sxm-80gb" in (out / "hardware" / "cpu-test.yaml").read_text()


def test_ranks_1_skips_the_collectives_and_keeps_the_base_links(profiled, tmp_path):
    """--ranks 1: one note, the links of --base, and no stale points from an earlier run beside them."""
    import shutil

    from parallmelism.config.compose import load_option

    out = tmp_path / "again"
    shutil.copytree(profiled[0], out)
    code, text = invoke(
        "profile", "--device", "cpu", "--quick", "-q", "--ranks", "1", "--out", out, "--name", "cpu-test"
    )
    assert code == 0, text
    assert "note: collectives skipped (--ranks 1); the links come from h100-sxm-80gb" in text
    assert not (out / "hardware" / "kernels" / "cpu-test.collectives.csv").exists()
    hw, base = load_option("hardware", "cpu-test", [str(out)]), load_option("hardware", "h100-sxm-80gb")
    assert hw.scale_up == base.scale_up and hw.efficiency.scale_up == base.efficiency.scale_up


@pytest.mark.parametrize("ranks", ["0", "-1"])
def test_ranks_below_one_is_one_sentence_and_exit_2(tmp_path, ranks):
    code, text = invoke("profile", "--device", "cpu", "--ranks", ranks, "--out", str(tmp_path))
    assert code == 2 and f"--ranks {ranks}" in text and "Traceback" not in text
    assert len(text.strip().splitlines()) == 1
    assert not (tmp_path / "hardware").exists()


def test_more_ranks_than_gpus_is_one_sentence_and_exit_2(tmp_path, monkeypatch):
    """On CUDA each rank needs its own GPU: asking for more is refused before anything runs."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    code, text = invoke("profile", "--device", "cuda", "--ranks", "3", "--out", str(tmp_path))
    assert code == 2 and "--ranks 3" in text and "only 2 CUDA device(s)" in text and "Traceback" not in text
    assert not (tmp_path / "hardware").exists()


def test_one_gpu_skips_the_collectives_with_a_note(monkeypatch):
    from parallmelism.cli.profile_cmd import _ranks, _why_no_collectives

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert _ranks(torch, "cuda", None) == 1
    note = _why_no_collectives(torch, "cuda", 1, "h100-sxm-80gb")
    assert "one GPU is visible" in note and "h100-sxm-80gb" in note and "\n" not in note
    assert _ranks(torch, "cpu", None) == 2 and _why_no_collectives(torch, "cpu", 2, "x") is None
    assert "--ranks 1" in _why_no_collectives(torch, "cpu", 1, "x")


def test_bad_device_is_exit_2(tmp_path):
    code, text = invoke("profile", "--device", "tpu", "--out", str(tmp_path))
    assert code == 2 and "--device" in text


def test_passes_fold_into_the_fastest_time_per_kernel():
    """Each point is timed once per pass; the table keeps the smaller median (a slow pass on one
    point does not survive), one row per kernel, in the order first measured."""
    from parallmelism.profiling.bench import _row, fastest_of_passes

    first = [
        _row(family="gemm", dtype="bf16", part="fwd", m=16, k=64, n=64, measured_s=5e-6),
        _row(family="gemm", dtype="fp8", part="fwd", m=16, k=64, n=64, measured_s=9e-6, cast_input_s=2e-6),
        _row(family="hbm", dtype="bf16", part="hbm_elementwise", bytes=4096.0, measured_s=1e-6),
    ]
    second = [dict(r) for r in first]
    second[0]["measured_s"] = 4e-6  # faster in pass 2
    second[1]["measured_s"] = 90e-6  # a slow pass: the first time stays
    second[1]["cast_input_s"] = 1e-6
    rows = fastest_of_passes(first + second)
    assert [(r["family"], r["dtype"]) for r in rows] == [("gemm", "bf16"), ("gemm", "fp8"), ("hbm", "bf16")]
    assert [r["measured_s"] for r in rows] == [4e-6, 9e-6, 1e-6]
    assert rows[1]["cast_input_s"] == 1e-6
    assert first[0]["measured_s"] == 5e-6  # the input rows are not changed
