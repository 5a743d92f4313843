"""scripts/profile_gpu.py without a GPU: nvidia-smi parsing, the sampler, the job loop on
the CPU, and the rows it records (read back by the estimator's data loader)."""

import os
import stat
import sys
from dataclasses import replace

import pytest

from estimator import data
from scripts import profile_gpu
from scripts.profile_gpu import Measurement, MemorySampler, ProfileError

QUERY = "0, NVIDIA H100 80GB HBM3, 81559, 4, 550.54.15\n1, Tesla T4, 15360, 0, 550.54.15\n"
STAND_IN = f"""#!{sys.executable}
import sys, time
if any(a == "--query-gpu=memory.used" for a in sys.argv):
    for line in ("1000", "[N/A]", "5200", "3000"):
        print(line, flush=True)
        time.sleep(0.01)
    time.sleep(30)  # nvidia-smi -lms keeps going until it is stopped
else:
    sys.stdout.write({QUERY!r})
"""


@pytest.fixture
def stand_in_smi(tmp_path, monkeypatch):
    """An executable named nvidia-smi that prints what the real one prints."""
    path = tmp_path / "bin" / "nvidia-smi"
    path.parent.mkdir()
    path.write_text(STAND_IN)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{path.parent}{os.pathsep}{os.environ['PATH']}")
    return path


def test_query_output_and_names_map_to_the_catalogue(stand_in_smi) -> None:
    h100, t4 = profile_gpu.parse_query(QUERY)
    assert (h100.index, h100.memory_total_mib, h100.memory_used_mib) == (0, 81559, 4)
    assert profile_gpu.catalogue_gpu(h100.name).name == "H100-80GB"
    assert profile_gpu.catalogue_gpu(t4.name).name == "T4"
    assert profile_gpu.catalogue_gpu("NVIDIA GeForce RTX 3090").name == "RTX-3090"
    assert profile_gpu.query_gpu(1).name == "Tesla T4"
    with pytest.raises(ProfileError, match="not in the catalogue"):
        profile_gpu.catalogue_gpu("NVIDIA B300")
    with pytest.raises(ProfileError, match="no GPU 7"):
        profile_gpu.query_gpu(7)
    with pytest.raises(ProfileError, match="unexpected nvidia-smi output"):
        profile_gpu.parse_query("0, only two\n")


def test_sampler_keeps_the_peak_and_skips_junk_lines(stand_in_smi) -> None:
    with MemorySampler(0) as sampler:
        pass
    assert (sampler.peak_mib, sampler.samples) == (5200, 3)


def test_missing_nvidia_smi_is_a_clear_error(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ProfileError, match="nvidia-smi not found"):
        profile_gpu.query_gpu(0)


def test_job_loop_runs_an_epoch_or_requests() -> None:
    seconds, steps = profile_gpu.run_job("squeezenet1_1", "train", 2, 5, "cpu")
    assert steps == 3 and seconds > 0  # ceil(5 samples / batch 2)
    per_request, steps = profile_gpu.run_job("squeezenet1_1", "inference", 1, 2, "cpu")
    assert steps == 2 and 0 < per_request < seconds * 10


def test_rows_are_upserted_and_read_back_as_profiled_data(tmp_path, monkeypatch) -> None:
    out = tmp_path / "measurements.csv"
    row = Measurement(model="resnet50", task="train", batch=32, gpu="H100-80GB", peak_mib=5400.0,
                      torch_reserved_mib=4100.0, seconds=61.5, steps=1563, samples=250,
                      gpu_product="NVIDIA H100 80GB HBM3", driver="550.54.15", torch="2.13.0",
                      measured_at="2026-11-21T00:00:00+00:00")  # fmt: skip
    inference = replace(row, model="bert_base", task="inference", batch=1, peak_mib=1900.0,
                        seconds=0.004)
    profile_gpu.record([row, inference], out)
    profile_gpu.record([replace(row, peak_mib=5500.0)], out)  # profiled again: replaced
    assert "cuda_cores,tensor_cores,mem_bandwidth_gbs,sm_count,mem_clock_mhz,memory_mib" in (
        out.read_text().splitlines()[0])
    monkeypatch.setattr(data, "MEASUREMENTS_FILE", out)
    mem = data._read_measurements("train-mem")
    assert mem[["model", "batch", "gpu", "y", "source"]].values.tolist() == [
        ["resnet50", 32, "H100-80GB", 5500.0, "profiled"]]
    assert data._read_measurements("train-time")["y"].tolist() == [61.5]
    assert data._read_measurements("infer-time")["y"].tolist() == [pytest.approx(4.0)]  # ms


def test_cli_without_cuda_says_so_and_refuses_bad_jobs(capsys) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    assert profile_gpu.main(["resnet18", "--batch", "8"]) == 2
    assert "no CUDA device" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        profile_gpu.main(["resnet18", "--batch", "0"])
    assert "batch size must be" in capsys.readouterr().err
