"""`parallmelism profile`: micro-benchmarks with PyTorch write an accelerator file usable at once."""

import sys

import numpy as np
import pandas as pd
import pytest

from conftest import invoke

torch = pytest.importorskip("torch", reason="profile needs the optional torch extra")


@pytest.fixture(scope="module")
def profiled(tmp_path_factory):
    out = tmp_path_factory.mktemp("prof")
    code, text = invoke("profile", "--device", "cpu", "--quick", "--quiet", "--out", str(out), "--name", "cpu-test")
    assert code == 0, text
    return out, text


def test_cpu_profile_writes_a_yaml_and_a_kernel_table(profiled):
    out, text = profiled
    yaml = out / "hardware" / "cpu-test.yaml"
    table = out / "hardware" / "kernels" / "cpu-test.csv"
    assert yaml.is_file() and table.is_file()
    assert "wrote" in text and "--config-dir" in text
    df = pd.read_csv(table, comment="#")
    assert set(df.family) == {"gemm", "attention", "hbm"}
    assert (df.measured_s > 0).all()
    head = table.read_text().splitlines()[0]
    assert "PyTorch" in head and "profile" in head


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
    from parallmelism.cost.kernels import KernelModel

    hw = load_option("hardware", "cpu-test", [str(out)])
    km = KernelModel(hw)
    df = pd.read_csv(out / "hardware" / "kernels" / "cpu-test.csv", comment="#")
    g = df[df.family == "gemm"]
    pred = np.array([float(km.gemm_s(r.m, r.k, r.n, r.dtype)) for r in g.itertuples()])
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


def test_bad_device_is_exit_2(tmp_path):
    code, text = invoke("profile", "--device", "tpu", "--out", str(tmp_path))
    assert code == 2 and "--device" in text
