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
    """``{"nodes": queue_report(...), "waiting": waiting_report(...)}`` at `now` (epoch s).

    Three reads, not one snapshot: a job bound between them may be missing from its GPU
    while its pod still shows as waiting. Raises `StoreUnavailable` when Redis is down.
    """
    nodes = queue_report(store.node_layouts(), store.jobs(), limits, now)
    return {"nodes": nodes, "waiting": waiting_report(store.waiters(now), now)}
