"""How far the time estimate is off per GPU type and job class, learned from observed runs.
Pure.

The estimator's times come from five consumer cards of 2019-2020; on another card, and
for inference (whose reference times are barely model-dependent), a job can take several
times what is predicted, and a long job placed on the card that looks fast enough ends
the whole workload late. Every succeeded single-GPU run the monitor observed gives

    r = ln(seconds it took / seconds predicted alone) - ln(1 + alpha x)

where x is its company (the mean number of other jobs on its GPU while it ran) and alpha
its GPU type's collocation slowdown (`extender.core.interference`): what is left is the
estimate's own error there. Runs are grouped per GPU type and task (the class), then per
model, then per model and batch (the job type), each level a shrunk mean of its runs' r
(each clipped `MAX_LOG_ERROR` from their median) toward the level above, and learned twice:

* **per owner** (namespace and controller, ``ns/Kind/name``: a Job's retries, a nightly
  fine-tune): from that owner's runs only, the class shrunk toward the shared class.
  A job type that ran 3 times is predicted within a few % of its runs;
* **shared**, for every owner: per level, the median over owners of what each one's runs
  alone say, then clipped to +-`TENANT_BOUND` / 2. Another owner's runs reach a
  prediction only through the shared values, so whatever they are, they move it by at
  most a factor exp(`TENANT_BOUND`) (1.5x), up or down: one tenant cannot teach the
  scheduler that another tenant's jobs are fast or slow beyond that.

A decision multiplies the job's predicted seconds on a type by exp(bias), the most specific
that exists, its owner's before the shared one at each level (`correct`, which also names
the level it applied). The reservation keeps the factor it applied, so the observation
records the prediction before it (no feedback on its own correction).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import replace

import numpy as np

from extender.core.interference import MAX_LOG_ERROR, ObservedRun, company
from extender.model import Need

PRIOR_RUNS = 2.0  # pseudo-runs of the level above (of "no bias" for a shared class)
MAX_BIAS = math.log(20.0)  # a factor beyond 20x either way is not a correction we apply
#: How far, in log, the runs of other owners may move an owner's predicted time (1.5x).
TENANT_BOUND = math.log(1.5)
BIAS_PREFIX = "bias|"  # its fields in the learned-state hash beside the alphas
OWNER_MARK = "@"  # bias_key(...) + "@" + owner: that owner's own value


def owner_key(namespace: str, controller: str) -> str:
    """Whose runs these are: ``namespace/Kind/name`` (``namespace/`` without a controller)."""
    return f"{namespace}/{controller}"


def bias_key(gpu_type: str, task: str, model: str = "", batch: int = 0, owner: str = "") -> str:
    """The level's field: the class (type and task), the model, the job type (model and
    batch); shared, or with `owner` that owner's own."""
    key = f"{gpu_type}|{task}" + (f"|{model}" if model else "")
    key += f"|{batch}" if model and batch else ""
    return key + (f"{OWNER_MARK}{owner}" if owner else "")


def learn_time_biases(runs: list[ObservedRun], alpha_of: Callable[[str], float],
                      company_x: np.ndarray | None = None) -> dict[str, tuple[float, int]]:
    """`bias_key` -> (log bias, runs it rests on), shared and per owner, for every level
    with a usable run (`company_x`: the runs' `company` where the caller has it)."""
    x = company(runs) if company_x is None else company_x
    residual: dict[tuple[str, str, str, int, str], list[float]] = defaultdict(list)
    for i, run in enumerate(runs):
        task, _, model = run.job.partition("|")
        if run.predicted_s <= 0 or not run.gpu_type or not task:
            continue
        seconds = run.ended_at - run.started_at
        alpha = alpha_of(run.gpu_type)
        r = math.log(seconds / run.predicted_s) - math.log1p(alpha * x[i])
        residual[run.gpu_type, task, model, run.batch, run.owner].append(r)
    # Each level's runs per owner: (type, task) -> (model, batch) prefixes.
    levels: dict[tuple[str, ...], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for (gpu_type, task, model, batch, owner), values in residual.items():
        for level in _levels(gpu_type, task, model, batch):
            levels[level][owner].extend(values)
    # Each owner's vote per level (its own runs, shrunk toward its vote a level up, or 0),
    # and the shared value: the median vote, bounded.
    votes: dict[tuple[tuple[str, ...], str], float] = {}
    ordered = sorted(levels, key=len)  # each level after the one above it
    for level in ordered:
        for owner, values in levels[level].items():
            votes[level, owner] = _shrunk(values, votes[level[:-1], owner] if len(level) > 2
                                          else 0.0)
    out: dict[str, tuple[float, int]] = {}
    for level, by_owner in levels.items():
        shared = float(np.median([votes[level, o] for o in by_owner]))
        out[bias_key(*_named(level))] = (_bounded(shared), sum(map(len, by_owner.values())))
    # An owner's own values: its class leans on the shared class, each level below on its own
    # level above. Runs observed before owners were recorded teach shared values only.
    own: dict[tuple[tuple[str, ...], str], float] = {}
    for level in ordered:
        for owner, values in levels[level].items():
            if not owner:
                continue
            above = own[level[:-1], owner] if len(level) > 2 else out[bias_key(*_named(level))][0]
            own[level, owner] = _shrunk(values, above)
            out[bias_key(*_named(level), owner=owner)] = (own[level, owner], len(values))
    return out


def _levels(gpu_type: str, task: str, model: str, batch: int) -> list[tuple[str, ...]]:
    levels = [(gpu_type, task)]
    if model:
        levels.append((gpu_type, task, model))
        if batch:
            levels.append((gpu_type, task, model, str(batch)))
    return levels


def _named(level: tuple[str, ...]) -> tuple[str, str, str, int]:
    gpu_type, task, model, batch = (*level, "", "")[:4]
    return gpu_type, task, model, int(batch or 0)


def _bounded(shared: float) -> float:
    return float(np.clip(shared, -TENANT_BOUND / 2, TENANT_BOUND / 2))


def _shrunk(values: list[float], toward: float) -> float:
    y = np.asarray(values, float)
    middle = float(np.median(y))
    y = np.clip(y, middle - MAX_LOG_ERROR, middle + MAX_LOG_ERROR)
    mean = (float(y.sum()) + PRIOR_RUNS * toward) / (len(y) + PRIOR_RUNS)
    return float(np.clip(mean, -MAX_BIAS, MAX_BIAS))


def correct(needs: Mapping[str, Need], task: str, model: str, biases: Mapping[str, float],
            batch: int = 0, owner: str = "") -> dict[str, Need]:
    """`needs` with each GPU type's predicted seconds multiplied by its learned bias, the
    most specific level that has one (job type, model, class), the owner's own before the
    shared one; `Need.time_correction` names the field applied. A type without one is left
    as predicted."""
    if not biases:
        return dict(needs)
    out = {}
    for gpu_type, need in needs.items():
        levels = ({"model": model, "batch": batch}, {"model": model}, {})
        keys = [key for level in levels
                for key in (bias_key(gpu_type, task, owner=owner, **level) if owner else "",
                            bias_key(gpu_type, task, **level)) if key]
        applied = next((key for key in keys if key in biases), None)
        if applied is None or not need.predicted_s:
            out[gpu_type] = need
            continue
        factor = math.exp(biases[applied])
        out[gpu_type] = replace(need, predicted_s=need.predicted_s * factor,
                                time_factor=need.time_factor * factor, time_correction=applied)
    return out
