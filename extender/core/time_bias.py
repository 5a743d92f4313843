"""How far the time estimate is off per GPU type and job class, learned from observed runs.
Pure.

The estimator's times come from five consumer cards of 2019-2020; on another card, and
for inference (whose reference times are barely model-dependent), a job can take several
times what is predicted, and a long job placed on the card that looks fast enough ends
the whole workload late. Every succeeded single-GPU run the monitor observed gives

    r = ln(seconds it took / seconds predicted alone) - ln(1 + alpha x)

where x is its company (the mean number of other jobs on its GPU while it ran) and alpha
its GPU type's collocation slowdown (`extender.core.interference`): what is left is the
estimate's own error there. The bias of a class is a shrunk mean of its runs' r (each
clipped `MAX_LOG_ERROR` from their median): per GPU type and task, shrunk toward 0 by
`PRIOR_RUNS` runs' weight, and per GPU type, task and model, shrunk toward its type's and
task's. A decision multiplies the job's predicted seconds on that type by exp(bias): the
model's, else its task's (`correct`). The reservation keeps the factor it applied, so the
observation records the prediction before it (no feedback on its own correction).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import replace

import numpy as np

from extender.core.interference import MAX_LOG_ERROR, ObservedRun, company
from extender.model import Need

PRIOR_RUNS = 2.0  # pseudo-runs of "no bias" (class) and of the class's bias (model)
MAX_BIAS = math.log(20.0)  # a factor beyond 20x either way is not a correction we apply
BIAS_PREFIX = "bias|"  # its fields in the learned-state hash beside the alphas


def bias_key(gpu_type: str, task: str, model: str = "") -> str:
    return f"{gpu_type}|{task}" + (f"|{model}" if model else "")


def learn_time_biases(runs: list[ObservedRun], alpha_of: Callable[[str], float],
                      company_x: np.ndarray | None = None) -> dict[str, tuple[float, int]]:
    """`bias_key` -> (log bias, runs it rests on), for every class with a usable run
    (`company_x`: the runs' `company` where the caller has it)."""
    x = company(runs) if company_x is None else company_x
    residual: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    for i, run in enumerate(runs):
        task, _, model = run.job.partition("|")
        if run.predicted_s <= 0 or not run.gpu_type or not task:
            continue
        seconds = run.ended_at - run.started_at
        alpha = alpha_of(run.gpu_type)
        r = math.log(seconds / run.predicted_s) - math.log1p(alpha * x[i])
        residual[run.gpu_type, task, model].append(r)
    by_class: dict[tuple[str, str], list[float]] = defaultdict(list)
    for (gpu_type, task, _), values in residual.items():
        by_class[gpu_type, task].extend(values)
    out: dict[str, tuple[float, int]] = {}
    for (gpu_type, task), values in by_class.items():
        class_bias = _shrunk(values, 0.0)
        out[bias_key(gpu_type, task)] = (class_bias, len(values))
        for (t, k, model), own in residual.items():
            if (t, k) == (gpu_type, task) and model:
                out[bias_key(gpu_type, task, model)] = (_shrunk(own, class_bias), len(own))
    return out


def _shrunk(values: list[float], toward: float) -> float:
    y = np.asarray(values, float)
    middle = float(np.median(y))
    y = np.clip(y, middle - MAX_LOG_ERROR, middle + MAX_LOG_ERROR)
    mean = (float(y.sum()) + PRIOR_RUNS * toward) / (len(y) + PRIOR_RUNS)
    return float(np.clip(mean, -MAX_BIAS, MAX_BIAS))


def correct(needs: Mapping[str, Need], task: str, model: str,
            biases: Mapping[str, float]) -> dict[str, Need]:
    """`needs` with each GPU type's predicted seconds multiplied by its learned bias (the
    model's on that type, else its task's); a type without one is left as predicted."""
    if not biases:
        return dict(needs)
    out = {}
    for gpu_type, need in needs.items():
        bias = biases.get(bias_key(gpu_type, task, model), biases.get(bias_key(gpu_type, task)))
        if bias is None or not need.predicted_s:
            out[gpu_type] = need
            continue
        factor = math.exp(bias)
        out[gpu_type] = replace(need, predicted_s=need.predicted_s * factor,
                                time_factor=need.time_factor * factor)
    return out
