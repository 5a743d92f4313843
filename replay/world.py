"""The world a replay runs in: what jobs really use and how long they really take.

Fixed before any policy runs and printed with every result. Distinct from what
the estimator predicts:

* true peak memory: the authors' measured profiles (training) and reconstructed
  inference memory; where the data has no point (other GPUs or models), the
  committed predictor's unpadded estimate times a fixed per-job-type noise;
* true run time: the reconstructed time data (seconds per epoch, ms per
  request; *not measurements*), else the predictor, times per-job noise;
* a start-up overhead per job, and the collocation slowdown 1/(1 + alpha (k-1))
  fitted from Gavel's measured pairs (profiles/interference.json).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from estimator.catalogue import CATALOGUE, PAPER_GPUS_BY_CUDA_CORES, PAPER_GPUS_BY_LABEL
from estimator.data import PAPER_DIR
from estimator.predict import Estimator, Job

ROOT = Path(__file__).resolve().parent.parent
INTERFERENCE = ROOT / "profiles" / "interference.json"


@dataclass(frozen=True)
class SimJob:
    id: int
    arrival_s: float
    model: str
    task: str  # train | inference
    batch: int
    units: int  # epochs or requests


def _noise(key: str, sigma: float) -> float:
    """A deterministic lognormal factor per key (same world for every policy)."""
    digest = hashlib.sha256(key.encode()).digest()
    u1, u2 = (int.from_bytes(digest[i:i + 8], "big") / 2**64 for i in (0, 8))
    z = math.sqrt(-2 * math.log(max(u1, 1e-12))) * math.cos(2 * math.pi * u2)
    return math.exp(sigma * z)


@dataclass
class World:
    name: str
    startup_s: float = 10.0
    alpha: float = field(default_factory=lambda: json.loads(INTERFERENCE.read_text())["alpha"])
    time_noise: float = 0.05
    memory_noise: float = 0.03
    measured_mib: dict[tuple[str, str, int, str], float] = field(default_factory=dict)
    measured_unit_s: dict[tuple[str, str, int, str], float] = field(default_factory=dict)
    estimator: Estimator = field(default_factory=Estimator.load)

    @classmethod
    def load(cls, data_dir: Path | None, startup_s: float = 10.0) -> World:
        """The reference data's world when `data_dir` holds it, else the predictors' world."""
        paper = Path(data_dir) / PAPER_DIR if data_dir else None
        if paper is None or not paper.is_dir():
            return cls("predicted: committed predictors (unpadded) + noise; no reference data",
                       startup_s=startup_s)
        world = cls("reference: measured training memory, reconstructed (not measured) run "
                    "times and inference memory, + noise", startup_s=startup_s)
        stats = pd.read_csv(paper / "model_stats.csv")
        for model, batch, cores, peak in zip(stats["model"], stats["batchsize"],
                                             stats["Pipelines/CUDA cores"], stats["peak mem usage"],
                                             strict=True):  # fmt: skip
            gpu = PAPER_GPUS_BY_CUDA_CORES[cores]
            world.measured_mib[model, "train", int(batch), gpu] = float(peak)
        times = pd.read_csv(paper / "reconstructed_train_time.csv")
        for model, batch, gpu, secs in zip(times["model"], times["batchsize"], times["gpu"],
                                           times["train_time_s_reconstructed"], strict=True):
            key = (model, "train", int(batch), PAPER_GPUS_BY_LABEL[gpu])
            world.measured_unit_s[key] = float(secs)
        infer = pd.read_csv(paper / "reconstructed_inference.csv")
        for model, gpu, mib, ms in zip(infer["model"], infer["gpu"],
                                       infer["infer_peak_mem_mb_reconstructed"],
                                       infer["infer_time_reconstructed"], strict=True):
            key = (model, "inference", 1, PAPER_GPUS_BY_LABEL[gpu])
            world.measured_mib[key] = float(mib)
            world.measured_unit_s[key] = float(ms) / 1000.0
        return world

    def peak_mib(self, job: SimJob, gpu: str) -> float:
        key = (job.model, job.task, job.batch, gpu)
        if key in self.measured_mib:
            return self.measured_mib[key]
        estimate = self.estimator.estimate(Job(job.model, job.task, job.batch, job.units),
                                           gpus=[gpu])[gpu]
        return estimate.predicted_mib * _noise(f"mem:{key}", self.memory_noise)

    def reference_s(self, job: SimJob, gpu: str) -> float:
        """Seconds alone on `gpu` by the reference profile (no per-job noise)."""
        key = (job.model, job.task, job.batch, gpu)
        if key in self.measured_unit_s:
            return self.measured_unit_s[key] * job.units
        return self.estimator.estimate(Job(job.model, job.task, job.batch, job.units),
                                       gpus=[gpu])[gpu].predicted_s

    def run_s(self, job: SimJob, gpu: str) -> float:
        """Seconds alone on `gpu` for this job (start-up overhead excluded)."""
        return self.reference_s(job, gpu) * _noise(f"time:{job.id}:{gpu}", self.time_noise)

    def speed(self, jobs_on_gpu: int) -> float:
        return 1.0 / (1.0 + self.alpha * max(0, jobs_on_gpu - 1))

    def describe(self) -> dict:
        return {"world": self.name, "startup_s": self.startup_s, "alpha": self.alpha,
                "time_noise_sigma": self.time_noise, "oom_rule": "a job whose true peak "
                "does not fit the memory left on its GPU fails after 30 % of its run",
                "gpus_known": len(CATALOGUE)}
