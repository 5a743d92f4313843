"""Profile jobs on a real NVIDIA GPU and record measured rows (the paper's method, IV-B).

    schedtune profile resnet50 --task train --batch 8 16 32 64
    schedtune profile bert_base --task inference --batch 1 --requests 1000
    schedtune profile --all-paper-models --task train --batch 8 16 32 64

While each job runs, `nvidia-smi` samples the GPU's used memory every 250 ms; the peak
above the memory used before the job started (CUDA context included) is the job's
requirement, as in the paper's footnote 1. `torch.cuda.max_memory_reserved` is
recorded beside it. Training runs one epoch of `--samples` random inputs (CIFAR-10's
50,000 images at 224x224 by default, as the paper resized them; no dataset is read);
inference runs `--requests` forward passes of one batch. Rows are upserted per
(model, task, batch, gpu) into profiles/measurements.csv with the GPU's
characteristics; `scripts/train.py` then fits on them beside the reference data, so
profiling one job on a new GPU type calibrates the predictors for it.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path


from estimator.catalogue import (
    CATALOGUE, CHARACTERISTICS, GpuType, characteristics, gpu_for_product,
)
from estimator.data import MEASUREMENTS_FILE
from estimator.feature_table import TASKS, check_job, upsert
from estimator.zoo import MODEL_NAMES, PAPER_MODELS, get_spec

SAMPLE_INTERVAL_MS = 250
CIFAR10_TRAIN_IMAGES = 50_000
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
    seconds: float  # per epoch (train) or per request (inference)
    steps: int
    samples: int
    gpu_product: str
    driver: str
    torch: str
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
    """`nvidia-smi -lms 250` on one GPU in the background; `peak_mib` is the largest used
    memory seen since start."""

    def __init__(self, index: int, smi: str = "nvidia-smi",
                 interval_ms: int = SAMPLE_INTERVAL_MS) -> None:
        self.command = [smi, "--query-gpu=memory.used", "--format=csv,noheader,nounits",
                        "-i", str(index), f"-lms={interval_ms}"]
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
        time.sleep(2 * SAMPLE_INTERVAL_MS / 1000)  # one more sample after the job's end
        if self._process is not None:
            self._process.terminate()
            self._process.wait(timeout=10)
        if self._reader is not None:
            self._reader.join(timeout=10)


def run_job(model_name: str, task: str, batch: int, units: int, device: str) -> tuple[float, int]:
    """Run one training epoch of `units` samples, or `units` inference requests, on
    `device`; returns (seconds per epoch or per request, steps run)."""
    import torch  # noqa: PLC0415  (offline tool: torch only here)

    from estimator.features import example_input, run_step  # noqa: PLC0415

    spec = get_spec(model_name)
    model = spec.build().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    inputs = example_input(spec, batch).to(device)
    labels = torch.randint(0, spec.num_classes, (batch,), device=device)
    steps = math.ceil(units / batch) if task == "train" else units
    run_step(model, optimizer, inputs, labels, task)  # warm-up: cuDNN autotuning, allocator
    _synchronize(device)
    started = time.perf_counter()
    for _ in range(steps):
        run_step(model, optimizer, inputs, labels, task)
    _synchronize(device)
    elapsed = time.perf_counter() - started
    return (elapsed if task == "train" else elapsed / units), steps


def _synchronize(device: str) -> None:
    if device.startswith("cuda"):
        import torch  # noqa: PLC0415

        torch.cuda.synchronize(device)


def profile(model: str, task: str, batch: int, units: int, index: int,
            smi: str = "nvidia-smi") -> Measurement:
    """Profile one job on GPU `index`. Run it in a fresh process (as `main` does): the
    peak counts the CUDA context and the allocator's cache, which a previous job would
    leave behind."""
    import torch  # noqa: PLC0415

    if not torch.cuda.is_available():
        raise ProfileError("torch sees no CUDA device (this is the CPU build of torch, or no "
                           "driver); install a CUDA build of torch==2.13.0 on the GPU machine")
    smi_gpu = query_gpu(index, smi)
    gpu = catalogue_gpu(smi_gpu.name)
    device = f"cuda:{index}"
    with MemorySampler(index, smi) as sampler:
        seconds, steps = run_job(model, task, batch, units, device)
    reserved = torch.cuda.max_memory_reserved(device) / 2**20
    return Measurement(
        model=model, task=task, batch=batch, gpu=gpu.name,
        peak_mib=float(max(0, sampler.peak_mib - smi_gpu.memory_used_mib)),
        torch_reserved_mib=round(reserved, 1), seconds=seconds, steps=steps,
        samples=sampler.samples, gpu_product=smi_gpu.name,
        driver=smi_gpu.driver, torch=torch.__version__,
        measured_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )  # fmt: skip


def record(measurements: list[Measurement], path: Path = MEASUREMENTS_FILE) -> None:
    """Upsert rows by (model, task, batch, gpu), each with its GPU's characteristics and
    memory as the catalogue has them: a job profiled again replaces its row."""
    upsert(path, KEY_COLUMNS, [{**asdict(m), **_gpu_columns(CATALOGUE[m.gpu])}
                               for m in measurements])


def _gpu_columns(gpu: GpuType) -> dict[str, float]:
    return {**dict(zip(CHARACTERISTICS, characteristics(gpu), strict=True)),
            "memory_mib": float(gpu.memory_mib)}


def _jobs(args: argparse.Namespace) -> Iterator[tuple[str, int]]:
    models = list(PAPER_MODELS) if args.all_paper_models else args.models
    for model in models:
        get_spec(model)
        for batch in args.batch:
            check_job(args.task, batch)
            yield model, batch


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="*", help=f"registered names: {', '.join(MODEL_NAMES)}")
    parser.add_argument("--all-paper-models", action="store_true",
                        help="the paper's 12 CNNs")
    parser.add_argument("--task", choices=TASKS, default="train")
    parser.add_argument("--batch", nargs="+", type=int, default=[32])
    parser.add_argument("--samples", type=int, default=CIFAR10_TRAIN_IMAGES,
                        help="training: samples per epoch (default CIFAR-10's 50,000)")
    parser.add_argument("--requests", type=int, default=1000, help="inference: requests to time")
    parser.add_argument("--gpu", type=int, default=0, help="nvidia-smi index of the GPU")
    parser.add_argument("--out", type=Path, default=MEASUREMENTS_FILE)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if not args.models and not args.all_paper_models:
        parser.error("name at least one model, or --all-paper-models")
    if args.samples < 1 or args.requests < 1:
        parser.error("--samples and --requests must be positive")
    try:
        jobs = list(_jobs(args))
    except (KeyError, ValueError) as exc:
        parser.error(exc.args[0] if exc.args else str(exc))
    if len(jobs) > 1:  # one process per job: CUDA context and cached blocks start afresh
        failed = 0
        for model, batch in jobs:
            child = [sys.executable, __file__, model, "--task", args.task, "--batch", str(batch),
                     "--samples", str(args.samples), "--requests", str(args.requests),
                     "--gpu", str(args.gpu), "--out", str(args.out)]
            failed += subprocess.run(child + (["--json"] if args.json else []),
                                     check=False).returncode != 0
        return 2 if failed else 0
    (model, batch), units = jobs[0], args.samples if args.task == "train" else args.requests
    try:
        measurement = profile(model, args.task, batch, units, args.gpu)
    except ProfileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    record([measurement], args.out)
    print(json.dumps(asdict(measurement)) if args.json else
          f"{model} {args.task} b{batch} on {measurement.gpu}: peak {measurement.peak_mib:.0f} MiB "
          f"(torch reserved {measurement.torch_reserved_mib:.0f}), {measurement.seconds:.3f} s "
          f"{'per epoch' if args.task == 'train' else 'per request'}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
