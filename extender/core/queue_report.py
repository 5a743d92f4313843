"""What an operator asks of the queues: per node and GPU, who is there, what is free,
and how long a new job would wait. Pure; `extender.status` feeds it from the store for
`schedtune queues` and the /ui status page."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from extender.model import JobRecord, Limits, NodeGpus, QueuedJob, Waiter
from extender.policies.timeline import remaining_s


def queue_report(layouts: Mapping[str, NodeGpus], jobs: Iterable[JobRecord],
                 limits: Limits, now: float) -> list[dict[str, Any]]:
    """One entry per node (sorted by name), each with its GPUs and their jobs.

    Reservations on nodes the node watcher does not know, or on GPU indices its layout
    does not have, are reported under their node and index (``"layout": null``, or no
    capacity for that GPU) rather than dropped.
    """
    by_gpu: dict[tuple[str, int], list[JobRecord]] = defaultdict(list)
    for job in jobs:
        if job.expires_at <= 0 or job.expires_at > now:
            for index in job.gpus:  # a multi-GPU pod holds its MiB on each
                by_gpu[job.node, index].append(job)
    used: dict[str, set[int]] = defaultdict(set)  # node -> GPU indices with jobs on them
    for node, index in by_gpu:
        used[node].add(index)
    names = sorted(set(layouts) | set(used))
    report = []
    for name in names:
        layout = layouts.get(name)
        limit = limits.for_node(layout) if layout else None
        count = layout.count if layout else 0
        gpus = []
        for index in sorted({*range(count), *used.get(name, ())}):
            queue = sorted(by_gpu.get((name, index), []), key=lambda j: j.reserved_at)
            remaining = [remaining_s(QueuedJob(j.uid, j.reserved_mib, j.predicted_s,
                                                       j.started_at), now) for j in queue]
            reserved = sum(j.reserved_mib for j in queue)
            capacity = layout.memory_of(index) if layout and 0 <= index < count else None
            gpus.append({
                "index": index,
                "capacity_mib": capacity,
                "reserved_mib": round(reserved, 1),
                "free_mib": None if capacity is None else round(capacity - reserved, 1),
                "jobs": len(queue), "limit": limit,
                "queue_delay_s": round(sum(remaining), 1),  # Eq. 1
                "queue": [{"pod": f"{j.namespace}/{j.pod}", "uid": j.uid, "model": j.model,
                           "task": j.task, "state": j.state, "reserved_mib": j.reserved_mib,
                           "grown_mib": j.grown_mib, "predicted_s": j.predicted_s,
                           "time_factor": j.time_factor, "time_correction": j.time_correction,
                           "remaining_s": round(left, 1)}
                          for j, left in zip(queue, remaining, strict=True)],
            })  # fmt: skip
        report.append({"node": name, "layout": None if layout is None else {
            "product": layout.product, "gpu_type": layout.gpu_type, "count": layout.count,
            "memory_mib": layout.memory_mib, "share_slots": layout.share_slots,
            "problem": layout.problem}, "gpus": gpus})
    return report


def waiting_report(waiters: Iterable[Waiter], now: float) -> list[dict[str, Any]]:
    """Pods that fit nowhere when last filtered, oldest first, with what they need per type."""
    return [{"pod": w.pod, "uid": w.uid, "waiting_s": round(now - w.since, 1),
             "needs": {t: {"padded_mib": round(mib, 1), "predicted_s": round(s, 1)}
                       for t, (mib, s) in sorted(w.needs.items())}}
            for w in waiters]
