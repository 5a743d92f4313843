"""Measure how jobs slow each other on one real NVIDIA GPU: each job's rate alone, then
all at once, one process each (`schedtune profile --collocate`). Offline tool, beside
`estimator.profiling.jobs` (whose job runner it uses): torch is imported only inside the
processes that run jobs."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from estimator.feature_table import check_job, upsert
from estimator.profiling.jobs import (
    WARM_UP_STEPS, ProfileError, SmiGpu, _place, _require_cuda, _synchronize, catalogue_gpu,
)  # fmt: skip
from estimator.zoo import get_spec


def steps_per_second(model: str, task: str, batch: int, device: str,
                     wait_for_start: Callable[[], object], seconds: float) -> float:
    """Steps per second of one job over a window that starts when `wait_for_start()`
    returns (after the job's warm-up): the rate a collocated job is compared by."""
    job = _place(model, task, batch, device)
    for _ in range(WARM_UP_STEPS):
        job.step()
    _synchronize(device)
    wait_for_start()
    steps, started = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - started) < seconds:
        job.step()
        _synchronize(device)
        steps += 1
    return steps / elapsed


@dataclass(frozen=True)
class Collocated:
    """One job's rate alone and beside `k - 1` others on the same GPU."""

    model: str
    task: str
    batch: int
    k: int
    alone_steps_per_s: float
    together_steps_per_s: float

    @property
    def speed(self) -> float:
        """Rate together over rate alone (1 = no interference)."""
        return self.together_steps_per_s / self.alone_steps_per_s


def parse_job(text: str) -> tuple[str, str, int]:
    """"resnet50:train:32" -> ("resnet50", "train", 32); `ValueError` names the form."""
    try:
        model, task, batch = text.split(":")
        get_spec(model)
        check_job(task, int(batch))
    except (ValueError, KeyError) as exc:
        raise ValueError(f"{text!r} is not MODEL:TASK:BATCH of a registered model "
                         f"({exc})") from exc
    return model, task, int(batch)


def collocate(jobs: list[tuple[str, str, int]], device: str = "cuda:0",
              window_s: float = 4.0) -> list[Collocated]:
    """Each distinct job's rate alone, then every job's rate while all run at once (one
    process each, windows started together after every job's warm-up)."""
    if device.startswith("cuda"):
        _require_cuda()
    alone = {job: _rates([job], device, window_s)[0] for job in dict.fromkeys(jobs)}
    together = _rates(jobs, device, window_s)
    return [Collocated(*job, len(jobs), alone[job], rate)
            for job, rate in zip(jobs, together, strict=True)]


def record_collocation(rows: list[Collocated], path: Path, gpu: SmiGpu, torch_version: str,
                       measured_at: str | None = None) -> None:
    """Upsert one collocated group's rows by (gpu, group, member): running a group again
    replaces its rows."""
    group = "+".join(f"{r.model}:{r.task}:{r.batch}" for r in rows)
    when = measured_at or datetime.now(UTC).isoformat(timespec="seconds")
    upsert(path, ("gpu", "group", "member"), [
        {"gpu": catalogue_gpu(gpu.name).name, "group": group, "member": n, **asdict(r),
         "speed": round(r.speed, 4), "gpu_product": gpu.name, "driver": gpu.driver,
         "torch": torch_version, "measured_at": when}
        for n, r in enumerate(rows)])  # fmt: skip


def _rates(jobs: list[tuple[str, str, int]], device: str, window_s: float) -> list[float]:
    import multiprocessing  # noqa: PLC0415

    context = multiprocessing.get_context("spawn")  # CUDA cannot be forked
    start, results = context.Barrier(len(jobs) + 1), context.Queue()
    workers = [context.Process(target=_rate_worker,
                               args=(n, job, device, start, window_s, results))
               for n, job in enumerate(jobs)]
    for worker in workers:
        worker.start()
    try:
        start.wait(timeout=600)
        rates = dict(results.get(timeout=window_s + 120) for _ in jobs)
    except threading.BrokenBarrierError as exc:
        raise ProfileError(f"a collocated job failed before its window: {jobs}") from exc
    except queue.Empty as exc:
        raise ProfileError(f"a collocated job failed in its window: {jobs}") from exc
    finally:
        for worker in workers:
            worker.join(timeout=10)
            if worker.is_alive():
                worker.terminate()  # never leave a job on the GPU
    return [rates[n] for n in range(len(jobs))]


def _rate_worker(n: int, job: tuple[str, str, int], device: str, start: Any,
                 window_s: float, results: Any) -> None:
    model, task, batch = job
    try:
        rate = steps_per_second(model, task, batch, device, lambda: start.wait(timeout=600),
                                window_s)
    except BaseException:
        start.abort()  # the others (and the caller) stop waiting
        raise
    results.put((n, rate))
