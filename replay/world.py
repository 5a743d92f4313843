"""The world a replay runs in: what jobs really use and how long they really take.

Fixed before any policy runs and printed with every result. Distinct from what
the estimator predicts:

* true peak memory: the authors' measured profiles (training) and reconstructed
  inference memory; where the data has no point (other GPUs or models), the
  committed predictor's unpadded estimate times a fixed per-job-type noise;
* true run time: the reconstructed time data (seconds per epoch, ms per
  request; *not measurements*), else the predictor, times per-job noise;
* a `Perturbation` (perturbed worlds): a fixed error per (model, task, batch, GPU
  type) on memory and time that no estimator was trained on;
* a start-up overhead per job, and the collocation law (`replay.interference`);
  with `startup_shares` a starting job counts as sharing its GPU and its start-up is
  slowed like work;
* trace pods (`SimJob.from_trace`) bring their own truth: the memory their owner
  declared and the duration the trace recorded.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from estimator.catalogue import CATALOGUE, PAPER_GPUS_BY_CUDA_CORES, PAPER_GPUS_BY_LABEL
from estimator.reference.tables import PAPER_DIR
from estimator.predict import Estimator, Job
from replay.interference import Interference, Uniform, committed_alpha

Key = tuple[str, str, int, str]  # (model, task, batch, GPU type)


@dataclass(frozen=True)
class SimJob:
    """One job of a workload. `attempt` counts resubmissions after an OOM kill (a new pod
    of the same Job). Trace pods have no model: `declared_mib` per GPU and `duration_s`
    are their truth, `gpus` the distinct GPUs of one node they need, `gpu_types` the types
    their node affinity allows."""

    id: int
    arrival_s: float
    model: str
    task: str  # train | inference
    batch: int
    units: int  # epochs or requests
    attempt: int = 0
    gpus: int = 1
    declared_mib: float = 0.0
    duration_s: float = 0.0
    gpu_types: tuple[str, ...] = ()  # the GPU types it may run on (empty: any)

    @property
    def from_trace(self) -> bool:
        return not self.model

    @property
    def shape(self) -> tuple:
        """Jobs of one shape get the same answer from a policy at one instant."""
        return (self.model, self.task, self.batch, self.units, self.gpus, self.declared_mib,
                self.gpu_types)

    def may_run_on(self, gpu_type: str) -> bool:
        return not self.gpu_types or gpu_type in self.gpu_types


def unit_noise(key: str) -> tuple[float, float]:
    """Two deterministic uniforms in [0, 1) per key (the same world for every policy)."""
    digest = hashlib.sha256(key.encode()).digest()
    return tuple(int.from_bytes(digest[i:i + 8], "big") / 2**64 for i in (0, 8))  # type: ignore[return-value]


def lognormal(key: str, sigma: float) -> float:
    u1, u2 = unit_noise(key)
    z = math.sqrt(-2 * math.log(max(u1, 1e-12))) * math.cos(2 * math.pi * u2)
    return math.exp(sigma * z)


@dataclass(frozen=True)
class Perturbation:
    """A fixed, seeded error per (model, task, batch, GPU type): memory x U(low, high),
    time x lognormal(0, sigma). No estimator knows it."""

    seed: int
    memory_range: tuple[float, float] = (0.85, 1.25)
    time_sigma: float = 0.3

    def memory(self, key: Key) -> float:
        low, high = self.memory_range
        return low + (high - low) * unit_noise(f"perturb:{self.seed}:mem:{key}")[0]

    def time(self, key: Key) -> float:
        return lognormal(f"perturb:{self.seed}:time:{key}", self.time_sigma)

    def describe(self) -> str:
        low, high = self.memory_range
        return (f"seed {self.seed}: memory x U({low:g}, {high:g}), time x lognormal(0, "
                f"{self.time_sigma:g}) per (model, task, batch, GPU type)")


@dataclass
class World:
    name: str
    startup_s: float = 10.0
    interference: Interference = field(default_factory=lambda: Uniform(committed_alpha()))
    startup_shares: bool = True
    time_noise: float = 0.05
    memory_noise: float = 0.03
    perturbation: Perturbation | None = None
    measured_mib: dict[Key, float] = field(default_factory=dict)
    measured_unit_s: dict[Key, float] = field(default_factory=dict)
    estimator: Estimator = field(default_factory=Estimator.load)
    _peaks: dict[Key, float] = field(default_factory=dict, init=False, repr=False, compare=False)

    @classmethod
    def load(cls, data_dir: Path | None, startup_s: float = 10.0, **options) -> World:  # type: ignore[no-untyped-def]
        """The reference data's world when `data_dir` holds it, else the predictors' world.
        `options`: the other fields (interference, startup_shares, perturbation)."""
        paper = Path(data_dir) / PAPER_DIR if data_dir else None
        if paper is None or not paper.is_dir():
            return cls("predicted: committed predictors (unpadded) + noise; no reference data",
                       startup_s=startup_s, **options)
        world = cls("reference: measured training memory, reconstructed (not measured) run "
                    "times and inference memory, + noise", startup_s=startup_s, **options)
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
        """True peak memory of `job` on one GPU of type `gpu` (policies that are not
        oracles must not call this)."""
        if job.from_trace:
            return job.declared_mib
        key = (job.model, job.task, job.batch, gpu)
        peak = self._peaks.get(key)
        if peak is None:
            peak = self._peaks[key] = self._true_peak_mib(job, key)
        return peak

    def _true_peak_mib(self, job: SimJob, key: Key) -> float:
        gpu = key[3]
        if key in self.measured_mib:
            base = self.measured_mib[key]
        else:
            estimate = self.estimator.estimate(Job(job.model, job.task, job.batch, job.units),
                                               gpus=[gpu])[gpu]
            base = estimate.predicted_mib * lognormal(f"mem:{key}", self.memory_noise)
        return base * (self.perturbation.memory(key) if self.perturbation else 1.0)

    def reference_s(self, job: SimJob, gpu: str) -> float:
        """Seconds alone on `gpu` by the world's profile (no per-job noise): what an oracle
        or a throughput-profiling scheduler (Gavel) knows."""
        if job.from_trace:
            return job.duration_s
        key = (job.model, job.task, job.batch, gpu)
        if key in self.measured_unit_s:
            base = self.measured_unit_s[key] * job.units
        else:
            base = self.estimator.estimate(Job(job.model, job.task, job.batch, job.units),
                                           gpus=[gpu])[gpu].predicted_s
        return base * (self.perturbation.time(key) if self.perturbation else 1.0)

    def run_s(self, job: SimJob, gpu: str) -> float:
        """Seconds alone on `gpu` for this job (start-up overhead excluded)."""
        if job.from_trace:
            return job.duration_s
        return self.reference_s(job, gpu) * lognormal(f"time:{job.id}:{gpu}", self.time_noise)

    def describe(self) -> dict:
        return {"world": self.name, "startup_s": self.startup_s,
                "interference": self.interference.describe(),
                "startup_shares_gpu": self.startup_shares,
                "perturbation": self.perturbation.describe() if self.perturbation else None,
                "time_noise_sigma": self.time_noise, "oom_rule": "a job whose true peak "
                "does not fit the memory left on its GPU fails after 30 % of its run",
                "gpus_known": len(CATALOGUE)}
