"""A GPU played forward in time: when the jobs sharing it finish. Pure.

Jobs that share a GPU run concurrently, each at speed 1 / (1 + alpha (k - 1))
with k jobs on the GPU (the slowdown fitted on Gavel's measured pair
throughputs; alpha = 1 is plain processor sharing, 0 no interference). The paper's queue delay
(Eq. 1: remaining time of running jobs + predicted time of reserved ones) is
therefore not simply added: `shared_completion_s` plays the GPU forward, so a
short job beside a long one is charged only for the overlap. The scoring
policies and the starvation guard's holds both read the GPU this way.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from extender.model import GpuState, QueuedJob


def remaining_s(job: QueuedJob, now: float) -> float:
    """Work left, in seconds alone on the GPU: estimate minus elapsed once running."""
    if job.started_at > 0:
        return max(0.0, job.predicted_s - max(0.0, now - job.started_at))
    return job.predicted_s


def speed(jobs_on_gpu: int, alpha: float) -> float:
    return 1.0 / (1.0 + alpha * max(0, jobs_on_gpu - 1))


def shared_completion_s(work_s: float, others_s: Iterable[float], alpha: float) -> float:
    """When a new job of `work_s` (seconds alone) finishes beside jobs with `others_s` left.

    All jobs on the GPU progress at the same rate, so each phase ends when the
    shortest remaining job finishes.
    """
    pending = sorted(w for w in others_s if w > 0)
    left, elapsed = work_s, 0.0
    while pending and pending[0] < left:
        first = pending.pop(0)
        elapsed += first / speed(2 + len(pending), alpha)
        left -= first
        pending = [w - first for w in pending]
    return elapsed + left / speed(1 + len(pending), alpha)


def completion_times_s(works_s: Iterable[float], alpha: float) -> list[float]:
    """When each of jobs with these seconds of work (alone) finishes when they share a GPU
    from now on, shortest first."""
    pending = sorted(w for w in works_s if w > 0)
    done, elapsed, progressed = [], 0.0, 0.0
    while pending:
        step = pending[0] - progressed
        elapsed += step / speed(len(pending), alpha)
        progressed = pending.pop(0)
        done.append(elapsed)
    return done


def marginal_cost_s(work_s: float, others_s: Iterable[float], alpha: float) -> float:
    """The new job's completion plus the delay it adds to the jobs already there: the
    growth of the GPU's total completion time (what a placement costs the cluster)."""
    others = [w for w in others_s if w > 0]
    return sum(completion_times_s([*others, work_s], alpha)) - sum(completion_times_s(others, alpha))


def wait_until_fits_s(gpu: GpuState, need_mib: float, limit: int, now: float,
                      alpha: float) -> float:
    """Seconds until the jobs on `gpu`, ending in completion order, leave room for
    `need_mib` below `limit` jobs (0: room now; inf: the card is too small)."""
    if need_mib > gpu.capacity_mib:
        return math.inf
    free, count = gpu.free_mib, len(gpu.jobs)
    if free >= need_mib and count < limit:
        return 0.0
    left = sorted(((max(remaining_s(j, now), 1e-6), j.reserved_mib) for j in gpu.jobs))
    for (_, mib), ends_s in zip(left, completion_times_s([w for w, _ in left], alpha),
                                strict=True):
        free, count = free + mib, count - 1
        if free >= need_mib and count < limit:
            return ends_s
    return math.inf
