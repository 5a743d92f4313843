"""What operators see of the shared state: the GPU queues and the waiting pods, read from
the store and laid out by the pure reports of `extender.core.queue_report`.

The one assembly behind `schedtune queues` and the /ui status page. Reads only.
"""

from __future__ import annotations

from typing import Any

from extender.core.queue_report import queue_report, waiting_report
from extender.model import Limits
from extender.state.store import RedisStore


def cluster_status(store: RedisStore, limits: Limits, now: float) -> dict[str, Any]:
    """``{"nodes": queue_report(...), "waiting": waiting_report(...), "floors": ...,
    "interference": ...}`` at `now` (epoch s); floors: the least each job type reserves
    after an OOM kill of it; interference: the collocation slowdown the monitor learned
    per GPU type (types absent use the configured alpha).

    Separate reads, not one snapshot: a job bound between them may be missing from its
    GPU while its pod still shows as waiting. Raises `StoreUnavailable` when Redis is down.
    """
    nodes = queue_report(store.node_layouts(), store.jobs(), limits, now)
    return {"nodes": nodes, "waiting": waiting_report(store.waiters(now), now),
            "floors": floors_report(store.floors()),
            "interference": [{"gpu_type": gpu_type, "alpha": alpha}
                             for gpu_type, alpha in sorted(store.learned_alphas().items())]}


def floors_report(floors: dict[str, float]) -> list[dict[str, Any]]:
    """The GPU OOM corrections in force, one per job type (model, task, batch, GPU type)
    and namespace ("*": everyone's)."""
    rows = []
    for key, mib in sorted(floors.items()):
        parts = key.split("|")
        namespace = parts.pop(0) if len(parts) == 5 else "*"
        model, task, batch, gpu_type = (parts + ["", "", "", ""])[:4]
        rows.append({"namespace": namespace, "model": model, "task": task, "batch": batch,
                     "gpu_type": gpu_type, "floor_mib": round(mib, 1)})
    return rows
