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


def test_bad_device_is_exit_2(tmp_path):
    code, text = invoke("profile", "--device", "tpu", "--out", str(tmp_path))
    assert code == 2 and "--device" in text
