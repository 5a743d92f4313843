"""A pod our filter refused (no room) is bound to the GPU a finished or deleted pod
released: the monitor releases the reservation and updates the waiting pod, so
kube-scheduler retries it at once rather than at its 5-minute flush of unschedulable pods.
Timed over 10 releases (the figures are in the terminal summary)."""

from __future__ import annotations

import statistics
import time

from extender.model import GPU_MEMORY
from tests.e2e.cluster import wait_for

RUNS = 10
DECLARED_MIB = 10_000  # of a T4's 15,360: two never share it


def test_a_waiting_pod_is_bound_to_the_released_gpu_soon_after_the_release(
        cluster, namespace, gpu_pool, measured):
    selector = gpu_pool({"T4": 1}, replicas=4)  # slots for 4: only our filter refuses
    declared = {"annotations": {GPU_MEMORY: str(DECLARED_MIB)}}
    running = cluster.new_pod(namespace, node_selector=selector, **declared)
    cluster.create(running)
    cluster.wait_bound(namespace, running["metadata"]["name"])
    delays: dict[str, list[float]] = {"finished": [], "deleted": []}
    for run in range(RUNS):
        how = "finished" if run % 2 == 0 else "deleted"
        waiting = cluster.new_pod(namespace, node_selector=selector, **declared)
        name = waiting["metadata"]["name"]
        cluster.create(waiting)
        refused = wait_for(f"{name} refused",
                           lambda: cluster.scheduled_condition(namespace, name))
        assert "MiB free on GPU 0 (T4)" in refused["message"], refused  # our filter's reason
        assert cluster.bound_node(namespace, name) is None
        time.sleep(0.2)  # settled in the unschedulable queue
        released = time.monotonic()
        if how == "finished":  # the kubelet reports the run's end
            cluster.set_phase(namespace, running["metadata"]["name"], "Succeeded")
        else:  # deleted: kube-scheduler's own retry can come before the monitor's release
            cluster.delete_pod(namespace, running["metadata"]["name"])
        cluster.wait_bound(namespace, name, timeout_s=60)  # the periodic flush: 5 minutes
        delays[how].append(time.monotonic() - released)
        cluster.delete_pod(namespace, running["metadata"]["name"])
        running = waiting
    every = delays["finished"] + delays["deleted"]
    measured("release to bind (s)", {
        "runs": RUNS, "p50": round(statistics.median(every), 3), "max": round(max(every), 3),
        **{f"{how} max": round(max(d), 3) for how, d in delays.items()}})
