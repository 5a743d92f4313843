"""Learning from an OOM kill: a job type killed once never gets the same reservation again.

When the monitor sees a container of a pod we reserved for OOM-killed, it raises the
floor of that (model, task, batch, GPU type) to the reservation plus a step
(`next_floor`), in Redis, so every replica reserves at least that from its next
request on (`apply_floors`). A floor only ever rises; retraining with the monitor's
observations is what corrects the estimator itself. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from extender.model import Need, PodDemand, job_type

STEP = 0.25  # a killed job's next reservation: 25 % more ...
MIN_STEP_MIB = 1024.0  # ... and at least 1 GiB more


def next_floor(reserved_mib: float) -> float:
    return round(max(reserved_mib * (1.0 + STEP), reserved_mib + MIN_STEP_MIB), 1)


def apply_floors(demand: PodDemand, needs: Mapping[str, Need],
                 floors: Mapping[str, float]) -> dict[str, Need]:
    """`needs` with each GPU type's padded memory raised to its floor, when one is set."""
    if not floors:
        return dict(needs)
    out = {}
    for gpu_type, need in needs.items():
        floor = floors.get(job_type(demand.model, demand.task, demand.batch, gpu_type), 0.0)
        out[gpu_type] = need if floor <= need.padded_mib else replace(
            need, padded_mib=floor, oom_floor=True)
    return out
