"""The profiler (`estimator.profiling.jobs`, `schedtune profile`) without a GPU: nvidia-smi
parsing, the sampler, the job loop and the collocation windows on the CPU, and the rows it
records (read back by the estimator's data loader)."""

import os
import re
import stat
import sys
import time
from dataclasses import replace

import pytest

from estimator.profiling import collocation as collocation_profiling
from estimator.profiling import jobs as profile_gpu
from estimator.profiling.jobs import Measurement, MemorySampler, ProfileError
from estimator.reference import tables as data
from scripts import profile_gpu as profile_cli

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
        waited = time.monotonic() + 10  # a loaded machine: let the stand-in print them all
        while sampler.samples < 3 and time.monotonic() < waited:
            time.sleep(0.01)
    assert (sampler.peak_mib, sampler.samples) == (5200, 3)


def test_missing_nvidia_smi_is_a_clear_error(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ProfileError, match="nvidia-smi not found"):
        profile_gpu.query_gpu(0)


def test_job_loop_runs_an_epoch_or_requests() -> None:
    seconds, steps, timed = profile_gpu.run_job("squeezenet1_1", "train", 2, 5, "cpu")
    assert (steps, timed) == (3, 3) and seconds > 0  # ceil(5 samples / batch 2)
    per_request, steps, timed = profile_gpu.run_job("squeezenet1_1", "inference", 1, 2, "cpu")
    assert (steps, timed) == (2, 2) and 0 < per_request < seconds * 10
    scaled, steps, timed = profile_gpu.run_job("squeezenet1_1", "train", 2, 400, "cpu",
                                               timed_steps=2)
    assert (steps, timed) == (200, 2) and scaled > 0  # two steps timed, scaled to 200


def test_profile_measures_each_job_from_the_memory_before_cuda(stand_in_smi, monkeypatch,
                                                               tmp_path) -> None:
    """The whole loop on the CPU: torch.cuda's bookkeeping stood in, nvidia-smi stood in
    (4 MiB used before, samples up to 5200): peaks count from before the context."""
    import torch

    for name in ("init", "synchronize", "empty_cache", "reset_peak_memory_stats"):
        monkeypatch.setattr(torch.cuda, name, lambda *a, **k: None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "max_memory_reserved", lambda *a: 300 * 2**20)
    rows = list(profile_gpu.profile("squeezenet1_1", [("train", 2), ("inference", 4)],
                                    samples=6, requests=2, timed_steps=1, device="cpu"))
    assert [(r.task, r.batch, r.steps, r.timed_steps) for r in rows] == [
        ("train", 2, 3, 1), ("inference", 4, 2, 2)]
    assert {(r.gpu, r.peak_mib, r.torch_reserved_mib, r.context_mib) for r in rows} == {
        ("H100-80GB", 5196.0, 300.0, 0.0)}
    out = tmp_path / "m.csv"
    profile_gpu.record(rows, out)
    assert "context_mib" in out.read_text().splitlines()[0]


def test_collocated_jobs_report_their_speed_against_their_rate_alone() -> None:
    rows = collocation_profiling.collocate([("squeezenet1_1", "inference", 1)] * 2, "cpu",
                                           window_s=0.5)
    assert [r.k for r in rows] == [2, 2]
    assert rows[0].alone_steps_per_s == rows[1].alone_steps_per_s > 0  # measured once
    assert all(0 < r.speed for r in rows)


def test_rows_are_upserted_and_read_back_as_profiled_data(tmp_path) -> None:
    out = tmp_path / "measurements.csv"
    row = Measurement(model="resnet50", task="train", batch=32, gpu="H100-80GB", peak_mib=5400.0,
                      torch_reserved_mib=4100.0, context_mib=520.0, seconds=61.5, steps=1563,
                      timed_steps=1563, samples=250, gpu_product="NVIDIA H100 80GB HBM3",
                      driver="550.54.15", torch="2.13.0", cuda="12.8",
                      measured_at="2026-11-21T00:00:00+00:00")  # fmt: skip
    inference = replace(row, model="bert_base", task="inference", batch=1, peak_mib=1900.0,
                        seconds=0.004)
    profile_gpu.record([row, inference], out)
    profile_gpu.record([replace(row, peak_mib=5500.0)], out)  # profiled again: replaced
    assert "cuda_cores,tensor_cores,mem_bandwidth_gbs,sm_count,mem_clock_mhz,memory_mib" in (
        out.read_text().splitlines()[0])
    mem = data.read_measurements("train-mem", out)
    assert mem[["model", "batch", "gpu", "y", "source"]].values.tolist() == [
        ["resnet50", 32, "H100-80GB", 5500.0, "profiled"]]
    assert data.read_measurements("train-time", out)["y"].tolist() == [61.5]
    assert data.read_measurements("infer-time", out)["y"].tolist() == [pytest.approx(4.0)]  # ms


def test_cli_without_cuda_says_so_and_refuses_bad_jobs(capsys) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    assert profile_cli.main(["resnet18", "--batch", "8"]) == 2
    assert re.search("no CUDA device|nvidia-smi not found", capsys.readouterr().err)
    assert profile_cli.main(["--collocate", "resnet18:train:8"]) == 2
    assert re.search("no CUDA device|nvidia-smi not found", capsys.readouterr().err)
    for bad in (["resnet18", "--batch", "0"], ["--collocate", "resnet18:train"],
                ["--collocate", "resnet18:fly:8"], ["--collocate", "resnet18:train:8",
                                                    "--window", "0"],
                ["resnet18", "--steps", "0"], ["resnet18", "--deadline-s", "nan"], [],
                ["--collocate", "resnet18:train:8", "vgg16"], ["vgg16", "--all-models"],
                ["vgg16", "--task", "inference", "--steps", "3"]):
        with pytest.raises(SystemExit):
            profile_cli.main(bad)
        assert "error:" in capsys.readouterr().err


def test_collocated_rows_are_upserted_per_group_and_member(tmp_path) -> None:
    from estimator.profiling.collocation import Collocated, record_collocation
    from estimator.profiling.jobs import SmiGpu

    gpu = SmiGpu(0, "NVIDIA H200", 143771, 0, "580.159.04")
    pair = [Collocated("resnet50", "train", 32, 2, 40.0, 25.0),
            Collocated("vgg16", "train", 32, 2, 38.0, 17.0)]
    out = tmp_path / "collocation.csv"
    record_collocation(pair, out, gpu, "2.11.0")
    record_collocation([Collocated("resnet50", "train", 32, 2, 40.0, 20.0), pair[1]], out, gpu,
                       "2.11.0")  # the same group again: replaced
    lines = out.read_text().splitlines()
    assert len(lines) == 3 and lines[0].startswith("gpu,group,member,model")
    assert lines[1].startswith("H200,resnet50:train:32+vgg16:train:32,0,resnet50,train,32,2,")
    assert ",0.5000," in lines[1] and ",0.4474," in lines[2]
