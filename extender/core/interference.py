"""The collocation slowdown per GPU type: learned from observed runs, read by decisions. Pure.

Ours plays a GPU's jobs forward at speed 1 / (1 + alpha (k - 1)) with k jobs on it
(`extender.policies.timeline`). The configured alpha (0.47, fitted on Gavel's V100
pairs) is one number for every card, but sharing gains much less on some cards than on
others (Gavel's K80 pairs: 0.87; a card where alpha is 1 gains nothing: each job just
runs slower), and a policy that prices a shared card as if sharing paid crowds it. So
the monitor refits alpha per GPU type from the runs it observed (`learn_alphas`):

* each succeeded single-GPU run of a known model, predicted to take at least
  `MIN_PREDICTED_S` alone, gives y = ln(seconds it took / seconds predicted alone on that
  GPU type) and x = its company: the mean number of other jobs on its GPU while it ran
  (its overlaps with every run and running job recorded on the same GPU, over its
  duration; `company`);
* per GPU type, y = c + ln(1 + alpha x) + noise, where c absorbs the type's bias of the
  time estimate, so alpha is read off how runs slow down with company and not off a
  wrong estimate;
* alpha is the maximum a posteriori value under a normal prior centred on the
  configured alpha (sd `PRIOR_SD`), on a 0.01 grid over [0, `MAX_ALPHA`]: with few runs,
  or runs that all had the same company, it stays near the prior;
* it is fitted per owner of the runs (`time_bias.owner_key`; runs recorded without one are
  one owner), the median over owners taken, and clipped to the prior +- `TENANT_BOUND` / 2:
  an alpha prices every tenant's pods on that type, so whatever one tenant's runs say, they
  move it by at most `TENANT_BOUND` (0.5) from what it would be without them.

Decisions read the result through `Alphas`: the learned alpha of a GPU type where the
monitor published one, the configured alpha elsewhere.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from extender.model import ClusterSnapshot, JobRecord, NodeGpus, type_of
from extender.settings import Settings

if TYPE_CHECKING:
    from extender.core.gpu_table import GpuTable

PRIOR_SD = 0.35  # how far from the configured alpha a GPU type is expected to be
MAX_ALPHA = 3.0  # > 1: sharing slower than running one job after the other (thrashing)
MIN_RUNS = 8  # usable runs of a GPU type before its alpha is published
TENANT_BOUND = 0.5  # how far one owner's runs may move a GPU type's alpha
# Runs predicted shorter are not timed: pod times have 1 s resolution, so a 1 s inference
# request reads as 1x or 2x at random. (Chosen on the prediction, not on the time taken,
# which would keep the slow runs of a job and drop its fast ones.)
MIN_PREDICTED_S = 60.0
MAX_LOG_ERROR = 1.0  # a run's ln(seconds / predicted) is clipped this far from the median
COMPANY_ROWS = 256  # overlaps computed this many runs at a time (memory: 256 x runs)
GRID = np.round(np.arange(0.0, MAX_ALPHA + 0.005, 0.01), 2)

# The prior a GPU type is priced at until the monitor learned its own alpha, from measured
# hardware: Gavel's pairs for the cards they measured (profiles/interference.json: K80
# 0.87, V100 0.47), the H200's collocated runs (profiles/measured/H200-collocation.csv:
# median 0.90 over 15 runs of 2-4 trainings) for every architecture after Volta, none of
# which is measured otherwise: the slowdown measured on current hardware, and the
# cautious choice (sharing priced dearly shares less; a type where it pays is learned).
MEASURED_ALPHA = {"Kepler": 0.87, "Volta": 0.47, "Hopper": 0.90}
ARCHITECTURE = {
    "K80": "Kepler", "V100-16GB": "Volta", "V100-32GB": "Volta",
    "RTX-2070S": "Turing", "T4": "Turing", "RTX-3070": "Ampere", "RTX-3090": "Ampere",
    "A10": "Ampere", "A40": "Ampere", "RTX-A6000": "Ampere", "A100-40GB": "Ampere",
    "A100-80GB": "Ampere", "L4": "Ada", "L40S": "Ada", "RTX-4090": "Ada",
    "H100-PCIe": "Hopper", "H100-80GB": "Hopper", "H200": "Hopper",
}


def prior_alpha(gpu_type: str, fallback: float) -> float:
    """The prior of a GPU type's architecture (`MEASURED_ALPHA`; after Volta, Hopper's),
    `fallback` for a type the catalogue does not know."""
    architecture = ARCHITECTURE.get(gpu_type)
    if architecture is None:
        return fallback
    return MEASURED_ALPHA.get(architecture, MEASURED_ALPHA["Hopper"])


class ObservedRun(NamedTuple):
    """One job's stay on its GPUs. `predicted_s` > 0 only for a usable sample: a
    succeeded single-GPU run of a model the estimator timed; other runs (failed, declared
    memory, multi-GPU, still running) only keep other runs company."""

    gpu_type: str
    gpus: tuple[tuple[str, int], ...]  # (node, GPU index) it occupied
    started_at: float
    ended_at: float
    predicted_s: float = 0.0
    job: str = ""  # task|model
    batch: int = 0
    owner: str = ""  # `time_bias.owner_key` of the pod that ran (observations since 12-06)


@dataclass(frozen=True)
class AlphaFit:
    gpu_type: str
    alpha: float
    runs: int  # usable runs it was fitted on
    shared_runs: int  # of them, runs that had company for at least a tenth of their time


def runs_from_observations(observations: Iterable[Mapping[str, str]]) -> list[ObservedRun]:
    """The monitor's observation records (`RedisStore.recent_observations`) as runs;
    records without the GPUs and times they ran on (older versions) are left out."""
    runs = []
    for obs in observations:
        try:
            started, seconds = float(obs["started_at"]), float(obs["seconds"])
            node, gpus = obs["node"], tuple(int(i) for i in obs["gpus"].split(","))
            predicted = float(obs.get("predicted_s") or 0.0)
        except (KeyError, TypeError, ValueError):
            continue
        if not (math.isfinite(started) and math.isfinite(seconds) and started > 0
                and seconds >= 0 and node and gpus):  # fmt: skip
            continue
        usable = (obs.get("outcome") == "succeeded" and bool(obs.get("model")) and len(gpus) == 1
                  and math.isfinite(predicted) and predicted >= MIN_PREDICTED_S and seconds > 0)
        batch = str(obs.get("batch", ""))
        runs.append(ObservedRun(obs.get("gpu_type", ""), tuple((node, i) for i in gpus),
                                started, started + seconds, predicted if usable else 0.0,
                                f"{obs.get('task', '')}|{obs.get('model', '')}",
                                int(batch) if batch.isdigit() and len(batch) <= 6 else 0,
                                str(obs.get("owner", ""))))
    return runs


def runs_from_jobs(jobs: Iterable[JobRecord], now: float) -> list[ObservedRun]:
    """Jobs running now, as company for the runs beside them (ending now)."""
    return [ObservedRun(job.gpu_type, tuple((job.node, i) for i in job.gpus), job.started_at,
                        max(now, job.started_at))
            for job in jobs if job.state == "running" and job.started_at > 0]


def company(runs: list[ObservedRun]) -> np.ndarray:
    """Per run, the mean number of other runs on its GPUs while it ran (the largest over
    its GPUs)."""
    out = np.zeros(len(runs))
    on_gpu: dict[tuple[str, int], list[int]] = defaultdict(list)
    for i, run in enumerate(runs):
        for gpu in run.gpus:
            on_gpu[gpu].append(i)
    starts = np.array([r.started_at for r in runs])
    ends = np.array([r.ended_at for r in runs])
    for members in on_gpu.values():
        if len(members) < 2:
            continue
        idx = np.array(members)
        s, e = starts[idx], ends[idx]
        together = np.zeros(len(idx))
        for first in range(0, len(idx), COMPANY_ROWS):  # bounded memory on a busy GPU
            rows = slice(first, first + COMPANY_ROWS)
            overlap = (np.minimum(e[rows, None], e[None, :])
                       - np.maximum(s[rows, None], s[None, :]))
            together[rows] = np.clip(overlap, 0.0, None).sum(axis=1)
        duration = e - s
        together -= np.clip(duration, 0.0, None)  # each run overlaps itself
        mean = np.divide(together, duration, out=np.zeros(len(idx)), where=duration > 0)
        out[idx] = np.maximum(out[idx], mean)
    return out


def fit_alpha(company_x: np.ndarray, log_ratio: np.ndarray, prior: float) -> float:
    """The MAP alpha of y = c + ln(1 + alpha x) + e, e ~ N(0, s^2), alpha ~ N(prior,
    `PRIOR_SD`^2), c free (see the module docstring); s is estimated at the best fit (at
    the prior it would count the prior's own misfit as noise)."""
    x, y = np.asarray(company_x, float), np.asarray(log_ratio, float)
    if len(x) < 3:
        return prior
    middle = float(np.median(y))
    y = np.clip(y, middle - MAX_LOG_ERROR, middle + MAX_LOG_ERROR)
    residual = y[None, :] - np.log1p(GRID[:, None] * x[None, :])
    sse = ((residual - residual.mean(axis=1, keepdims=True)) ** 2).sum(axis=1)
    s2 = max(float(sse.min()) / (len(x) - 2), 0.05 ** 2)
    posterior = sse / s2 + ((GRID - prior) / PRIOR_SD) ** 2
    return float(GRID[int(np.argmin(posterior))])


def learn_alphas(runs: list[ObservedRun], prior: float | Callable[[str], float],
                 company_x: np.ndarray | None = None) -> dict[str, AlphaFit]:
    """Alpha per GPU type with at least `MIN_RUNS` usable runs (see the module docstring);
    `prior`: one for every type, or per type; `company_x`: the runs' `company` where the
    caller has it."""
    prior_of = prior if callable(prior) else (lambda _: prior)
    x = company(runs) if company_x is None else company_x
    by_type: dict[str, list[int]] = defaultdict(list)
    for i, run in enumerate(runs):
        if run.predicted_s > 0 and run.gpu_type:
            by_type[run.gpu_type].append(i)
    fits = {}
    for gpu_type, members in sorted(by_type.items()):
        if len(members) < MIN_RUNS:
            continue
        idx = np.array(members)
        prior = prior_of(gpu_type)
        by_owner: dict[str, list[int]] = defaultdict(list)
        for i in members:
            by_owner[runs[i].owner].append(i)
        alpha = float(np.median([_fit_of(runs, x, own, prior) for own in by_owner.values()]))
        alpha = float(np.clip(alpha, prior - TENANT_BOUND / 2, prior + TENANT_BOUND / 2))
        fits[gpu_type] = AlphaFit(gpu_type, max(0.0, alpha), len(members),
                                  int((x[idx] >= 0.1).sum()))
    return fits


def _fit_of(runs: list[ObservedRun], x: np.ndarray, members: list[int], prior: float) -> float:
    idx = np.array(members)
    seconds = np.array([runs[i].ended_at - runs[i].started_at for i in members])
    predicted = np.array([runs[i].predicted_s for i in members])
    return fit_alpha(x[idx], np.log(seconds / predicted), prior)


@dataclass(frozen=True)
class Alphas:
    """The collocation slowdown a decision plays GPUs forward at: the learned alpha of a GPU
    type where there is one, `default` (the configured alpha) elsewhere."""

    default: float
    learned: Mapping[str, float] = field(default_factory=dict)
    priors: bool = False  # types not learned yet: their architecture's (`prior_alpha`)

    def __hash__(self) -> int:  # decisions kept per alphas (`GpuTable.remember`)
        return hash((self.default, tuple(sorted(self.learned.items())), self.priors))

    def of(self, gpus: NodeGpus | None) -> float:
        if gpus is None or not (self.learned or self.priors):
            return self.default
        return self.of_type(type_of(gpus))

    def of_type(self, gpu_type: str) -> float:
        learned = self.learned.get(gpu_type)
        if learned is not None:
            return learned
        return prior_alpha(gpu_type, self.default) if self.priors else self.default

    def rows(self, table: GpuTable) -> float | np.ndarray:
        """Per GPU row of `table`; the default itself (a float) when nothing is learned and
        no priors apply, so the arithmetic is exactly that of one alpha."""
        if not (self.learned or self.priors):
            return self.default
        return np.array([self.of(layout) for layout in table.layouts],
                        dtype=float)[table.gpu_layout]


def alphas_for(snapshot: ClusterSnapshot, settings: Settings) -> Alphas:
    """What a decision on `snapshot` plays GPUs forward at (`EXTENDER_INTERFERENCE_LEARN`)."""
    return Alphas(settings.interference_alpha,
                  snapshot.alphas if settings.interference_learn else {},
                  settings.interference_priors)
