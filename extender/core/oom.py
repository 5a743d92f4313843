"""Learning from a GPU OOM: a job type killed once never gets the same reservation again.

When the monitor sees a container of a pod we reserved run out of GPU memory
(`extender.cluster.pods`: a RAM kill, ``OOMKilled``, teaches nothing here), it raises
the floor of that (model, task, batch, GPU type) for the pod's namespace to the
reservation plus a step (`next_floor`), in Redis, so every replica reserves at least
that for the namespace's next pod of the type (`apply_floors`). What one tenant's kills
may do is bounded (`RedisStore.raise_floor`): never above the largest GPU of the type,
a few raises per window, and everyone's floor only once kills come from two namespaces,
so no namespace can lock a job type out for the others. A floor only ever rises;
retraining with the monitor's observations is what corrects the estimator itself. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from extender.model import Need, PodDemand, job_type

STEP = 0.25  # a killed job's next reservation: 25 % more ...
MIN_STEP_MIB = 1024.0  # ... and at least 1 GiB more


def next_floor(reserved_mib: float) -> float:
    return round(max(reserved_mib * (1.0 + STEP), reserved_mib + MIN_STEP_MIB), 1)


def floor_for(floors: Mapping[str, float], kind: str, namespace: str) -> float:
    """The floor a pod of `namespace` meets for job type `kind`: its namespace's or
    everyone's, the higher (0: none)."""
    return max(floors.get(kind, 0.0), floors.get(f"{namespace}|{kind}", 0.0))


def apply_floors(demand: PodDemand, needs: Mapping[str, Need],
                 floors: Mapping[str, float]) -> dict[str, Need]:
    """`needs` with each GPU type's padded memory raised to the floor the pod's namespace
    meets, when one is set."""
    if not floors:
        return dict(needs)
    out = {}
    for gpu_type, need in needs.items():
        floor = floor_for(floors, job_type(demand.model, demand.task, demand.batch, gpu_type),
                          demand.namespace)
        out[gpu_type] = need if floor <= need.padded_mib else replace(
            need, padded_mib=floor, oom_floor=True)
    return out
