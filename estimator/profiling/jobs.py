"""Measure jobs on a real NVIDIA GPU: peak memory and run time (the slowdown when
collocated: `estimator.profiling.collocation`).

The paper's method (IV-B): while a job runs, `nvidia-smi` samples the GPU's used memory;
the peak above what the GPU used before the job's process touched CUDA (so the CUDA
context counts, footnote 1) is the job's requirement. `torch.cuda.max_memory_reserved`
is recorded beside it. Run time is timed over a number of steps after a warm-up and
scaled to one epoch (training) or divided per request (inference).

Several jobs of one model run in one process, one after the other: between jobs the
model, optimizer and inputs are dropped and the allocator's cache (and cuBLAS'
workspaces) emptied, so a job's peak is its own plus the context (which may hold a few
more lazily loaded kernels than a fresh process would). Offline tool: torch is imported
only inside the functions that run jobs.
"""

from __future__ import annotations

import copy
import gc
import logging
import math
import shutil
import subprocess
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from estimator.catalogue import CATALOGUE, CHARACTERISTICS, GpuType, characteristics, gpu_for_product
from estimator.feature_table import check_job, upsert
from estimator.roofline import EPOCH_SAMPLES
from estimator.zoo import get_spec

log = logging.getLogger(__name__)

SAMPLE_INTERVAL_MS = 100
CIFAR10_TRAIN_IMAGES = EPOCH_SAMPLES  # an epoch of the time targets' unit
WARM_UP_STEPS = 3
KEY_COLUMNS = ("model", "task", "batch", "gpu")


class ProfileError(RuntimeError):
    """Profiling cannot go on; the message says why and what to do."""


@dataclass(frozen=True)
class SmiGpu:
    """One GPU as `nvidia-smi --query-gpu` reports it (MiB)."""

    index: int
    name: str
    memory_total_mib: int
    memory_used_mib: int
    driver: str


@dataclass(frozen=True)
class Measurement:
    """One profiled job: a row of profiles/measurements.csv."""

    model: str
    task: str
    batch: int
    gpu: str
    peak_mib: float
    torch_reserved_mib: float
    context_mib: float  # the process's CUDA context before its first job
    seconds: float  # per epoch (train) or per request (inference)
    steps: int  # steps in the epoch, or requests timed
    timed_steps: int
    samples: int
    gpu_product: str
    driver: str
    torch: str
    cuda: str
    measured_at: str


def parse_query(text: str) -> list[SmiGpu]:
    """Rows of `nvidia-smi --query-gpu=index,name,memory.total,memory.used,driver_version
    --format=csv,noheader,nounits`."""
    gpus = []
    for line in filter(None, (raw.strip() for raw in text.splitlines())):
        fields = [f.strip() for f in line.split(",")]
        try:
            index, name, total, used, driver = fields
            gpus.append(SmiGpu(int(index), name, int(total), int(used), driver))
        except ValueError as exc:
            raise ProfileError(f"unexpected nvidia-smi output line {line!r}") from exc
    return gpus


def parse_used_mib(line: str) -> int | None:
    """One line of the sampling loop (`memory.used`, no units): MiB, or None if it is not
    a number (nvidia-smi prints "[N/A]" or an error line now and then)."""
    text = line.strip()
    return int(text) if text.isdigit() else None


def catalogue_gpu(name: str) -> GpuType:
    """The catalogue entry for an nvidia-smi name ("NVIDIA H100 80GB HBM3" -> H100-80GB)."""
    gpu = gpu_for_product(name)
    if gpu is None:
        raise ProfileError(f"GPU {name!r} is not in the catalogue ({', '.join(CATALOGUE)}); "
                           "add it to estimator/catalogue.py with its characteristics first")
    return gpu


def query_gpu(index: int, smi: str = "nvidia-smi") -> SmiGpu:
    fields = "index,name,memory.total,memory.used,driver_version"
    out = _run_smi([smi, f"--query-gpu={fields}", "--format=csv,noheader,nounits"])
    gpus = {g.index: g for g in parse_query(out)}
    if index not in gpus:
        raise ProfileError(f"no GPU {index}; nvidia-smi lists {sorted(gpus) or 'none'}")
    return gpus[index]


def _run_smi(command: list[str]) -> str:
    if shutil.which(command[0]) is None:
        raise ProfileError(f"{command[0]} not found: profiling needs an NVIDIA GPU and driver")
    done = subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)
    if done.returncode != 0:
        raise ProfileError(f"nvidia-smi failed ({done.returncode}): {done.stderr.strip()[:300]}")
    return done.stdout


class MemorySampler:
    """`nvidia-smi -lms` on one GPU in the background; `peak_mib` is the largest used
    memory seen since start."""

    def __init__(self, index: int, smi: str = "nvidia-smi",
                 interval_ms: int = SAMPLE_INTERVAL_MS) -> None:
        self.command = [smi, "--query-gpu=memory.used", "--format=csv,noheader,nounits",
                        "-i", str(index), f"-lms={interval_ms}"]
        self.interval_s = interval_ms / 1000
        self.peak_mib = 0
        self.samples = 0
        self._process: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None

    def __enter__(self) -> MemorySampler:
        if shutil.which(self.command[0]) is None:
            raise ProfileError(f"{self.command[0]} not found")
        self._process = subprocess.Popen(self.command, stdout=subprocess.PIPE,
                                         stderr=subprocess.DEVNULL, text=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        return self

    def _read(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        for line in self._process.stdout:
            used = parse_used_mib(line)
            if used is not None:
                self.samples += 1
                self.peak_mib = max(self.peak_mib, used)

    def __exit__(self, *exc: object) -> None:
        time.sleep(self.interval_s)  # one more sample after the job's end
        if self._process is not None:
            self._process.terminate()
            self._process.wait(timeout=10)
        if self._reader is not None:
            self._reader.join(timeout=10)


@dataclass
class _Job:
    """One job's model, optimizer and batch on a device."""

    model: Any
    optimizer: Any
    inputs: Any
    labels: Any
    task: str

    def step(self) -> None:
        from estimator.simulation.features import run_step  # noqa: PLC0415  (torch only here)

        run_step(self.model, self.optimizer, self.inputs, self.labels, self.task)


def _place(model_name: str, task: str, batch: int, device: str, built: Any = None) -> _Job:
    """The job on `device`; `built` is a CPU model to copy instead of building one."""
    import torch  # noqa: PLC0415

    from estimator.simulation.features import example_input  # noqa: PLC0415

    spec = get_spec(model_name)
    model = (copy.deepcopy(built) if built is not None else spec.build()).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    return _Job(model, optimizer, example_input(spec, batch).to(device),
                torch.randint(0, spec.num_classes, (batch,), device=device), task)


def run_job(model_name: str, task: str, batch: int, units: int, device: str,
            timed_steps: int | None = None, built: Any = None) -> tuple[float, int, int]:
    """Run one training epoch of `units` samples, or `units` inference requests, on
    `device`: returns (seconds per epoch or per request, steps of the epoch or requests,
    steps timed). With `timed_steps`, training times only that many steps (after a
    warm-up) and scales the epoch's time from them."""
    job = _place(model_name, task, batch, device, built)
    steps = math.ceil(units / batch) if task == "train" else units
    timed = min(steps, timed_steps) if timed_steps and task == "train" else steps
    for _ in range(WARM_UP_STEPS if timed_steps else 1):  # cuDNN choices, allocator
        job.step()
    _synchronize(device)
    started = time.perf_counter()
    for _ in range(timed):
        job.step()
    _synchronize(device)
    per_step = (time.perf_counter() - started) / timed
    return (per_step * steps if task == "train" else per_step), steps, timed


def _synchronize(device: str) -> None:
    if device.startswith("cuda"):
        import torch  # noqa: PLC0415

        torch.cuda.synchronize(device)


def _require_cuda() -> None:
    import torch  # noqa: PLC0415

    if not torch.cuda.is_available():
        raise ProfileError("torch sees no CUDA device (this is the CPU build of torch, or no "
                           "driver); install a CUDA build of torch on the GPU machine")


def _release(device: str) -> None:
    """Return every cached block of the jobs before to the driver."""
    import torch  # noqa: PLC0415

    gc.collect()
    torch.cuda.synchronize(device)
    torch.cuda.empty_cache()
    clear_workspaces = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)
    if clear_workspaces is not None:
        clear_workspaces()
    torch.cuda.reset_peak_memory_stats(device)


def profile(model: str, jobs: Iterable[tuple[str, int]], index: int = 0,
            samples: int = CIFAR10_TRAIN_IMAGES, requests: int = 1000,
            timed_steps: int | None = None, smi: str = "nvidia-smi",
            device: str | None = None) -> Iterator[Measurement]:
    """Profile (task, batch) jobs of one model on GPU `index` (torch's `device`, default
    cuda:index), one after the other in this process. Each peak counts from the GPU's
    used memory before this process touched CUDA."""
    import torch  # noqa: PLC0415

    before = query_gpu(index, smi)  # before the context exists
    _require_cuda()
    gpu, device = catalogue_gpu(before.name), device or f"cuda:{index}"
    torch.cuda.init()
    torch.zeros(1, device=device)
    context = query_gpu(index, smi).memory_used_mib - before.memory_used_mib
    built = get_spec(model).build()
    for task, batch in jobs:
        check_job(task, batch)
        _release(device)
        with MemorySampler(index, smi) as sampler:
            try:
                seconds, steps, timed = run_job(model, task, batch,
                                                samples if task == "train" else requests,
                                                device, timed_steps, built)
            except torch.cuda.OutOfMemoryError:
                log.warning("%s %s b%d does not fit on %s: skipped", model, task, batch, gpu.name)
                continue
            at_end = query_gpu(index, smi).memory_used_mib  # the cache holds the peak still
        yield Measurement(
            model=model, task=task, batch=batch, gpu=gpu.name,
            peak_mib=float(max(0, max(sampler.peak_mib, at_end) - before.memory_used_mib)),
            torch_reserved_mib=round(torch.cuda.max_memory_reserved(device) / 2**20, 1),
            context_mib=float(context), seconds=seconds, steps=steps, timed_steps=timed,
            samples=sampler.samples, gpu_product=before.name, driver=before.driver,
            torch=torch.__version__, cuda=str(torch.version.cuda),
            measured_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        )  # fmt: skip


def record(measurements: Iterable[Measurement], path: Path) -> None:
    """Upsert rows by (model, task, batch, gpu), each with its GPU's characteristics and
    memory as the catalogue has them: a job profiled again replaces its row."""
    upsert(path, KEY_COLUMNS, [
        {**asdict(m), "seconds": f"{m.seconds:.6g}", **_gpu_columns(CATALOGUE[m.gpu])}
        for m in measurements])  # fmt: skip  (six digits: a request can take 0.0008 s)


def _gpu_columns(gpu: GpuType) -> dict[str, float]:
    return {**dict(zip(CHARACTERISTICS, characteristics(gpu), strict=True)),
            "memory_mib": float(gpu.memory_mib)}
