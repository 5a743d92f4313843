"""Expected completion time of a job on a GPU (paper Eq. 1-2) and its score. Pure.

Jobs that share a GPU run concurrently, each at speed 1 / (1 + alpha (k - 1))
with k jobs on the GPU (the slowdown fitted on Gavel's measured pair
throughputs; alpha = 1 is plain processor sharing, 0 no interference). The paper's queue delay
(Eq. 1: remaining time of running jobs + predicted time of reserved ones) is
therefore not simply added: `shared_completion_s` plays the GPU forward, so a
short job beside a long one is charged only for the overlap.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

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


def expected_jct_s(gpu: GpuState, work_s: float, now: float, alpha: float | None) -> float:
    """Eq. 2 on one GPU: the new job's completion given the jobs already there.

    With `alpha` None, the paper's form: queue delay (Eq. 1) plus the job's time.
    """
    remaining = [remaining_s(j, now) for j in gpu.jobs]
    if alpha is None:
        return sum(remaining) + work_s
    return shared_completion_s(work_s, remaining, alpha)


def normalise(jct_by_node: Mapping[str, float]) -> dict[str, float]:
    """Scores in [0, 1]: the lowest JCT gets 1, the others min / own (scale-free)."""
    if not jct_by_node:
        return {}
    best = min(jct_by_node.values())
    return {n: (1.0 if j <= 0 else min(1.0, best / j)) for n, j in jct_by_node.items()}
