"""Placement policies for the replay.

* `WholeGpuPolicy("default")`: stock kube-scheduler with ``nvidia.com/gpu: 1`` per pod: no
  sharing, least-allocated node first, blind to GPU type and memory.
* `WholeGpuPolicy("gavel-like")`: whole GPUs, heterogeneity-aware: the free GPU type with
  the best reference throughput for the job (Gavel's measured-throughput placement); a
  type the reference profile says the job does not fit on has no throughput.
* `ExtenderPolicy`: every decision made by the extender app over HTTP, as kube-scheduler
  calls it (filter -> prioritize -> highest score -> bind, full `ExtenderArgs` bodies with
  GFD-labelled nodes); the monitor is fed pod transitions as the API would feed it.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from datetime import UTC, datetime
from typing import Any

import requests
from werkzeug.serving import make_server

from extender.cluster.monitor import Monitor
from extender.settings import Settings
from extender.state.store import RedisStore
from extender.web.app import create_app
from extender.wire.builders import gfd_node, pod_object
from extender.wire.kube import encode_binding_args, encode_extender_args
from replay.engine import Placement, SimNode, Simulator
from replay.world import SimJob

EPOCH = 1_800_000_000.0  # simulated t = 0, as a wall-clock instant
logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no access log per request


class WholeGpuPolicy:
    def __init__(self, name: str, heterogeneity_aware: bool) -> None:
        self.name = name
        self.aware = heterogeneity_aware

    def place(self, job: SimJob, now: float, sim: Simulator) -> tuple[str, int] | None:
        best, best_key = None, None
        for node in sim.nodes:
            free = [i for i in range(node.count) if not sim.gpus[node.name, i]]
            if not free:
                continue
            allocated = 1 - len(free) / node.count  # least-allocated spreading
            if self.aware:
                if sim.world.peak_mib(job, node.gpu_type) > node.memory_mib:
                    continue  # no measured throughput: it does not run there
                key = (sim.world.reference_s(job, node.gpu_type), allocated)
            else:
                key = (allocated, 0.0)
            if best_key is None or key < best_key:
                best, best_key = (node.name, free[0]), key
        return best

    def started(self, placement: Placement, now: float) -> None: ...

    def ended(self, placement: Placement, now: float, oom: bool) -> None: ...


class SimClock:
    def __init__(self) -> None:
        self.now = EPOCH

    def __call__(self) -> float:
        return self.now


def node_object(node: SimNode) -> dict[str, Any]:
    """A v1.Node as kube-scheduler sends it, with GPU Feature Discovery's labels: the GPUs
    time-sliced four ways."""
    return gfd_node(node.name, node.product, node.count, node.memory_mib, replicas=4,
                    labels={"nvidia.com/gpu.sharing-strategy": "time-slicing"},
                    resources={"cpu": "32", "memory": "256Gi"})


def _iso(t: float) -> str:
    return datetime.fromtimestamp(EPOCH + t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class ExtenderPolicy:
    """One extender app served over HTTP on 127.0.0.1, its clock on simulated time."""

    def __init__(self, name: str, nodes: list[SimNode], redis_url: str, **settings: Any) -> None:
        self.name = name
        self.clock = SimClock()
        self.store = RedisStore.from_url(redis_url)
        self.store.wipe()  # each policy starts from an empty state
        config = Settings(redis_url=redis_url, bind_mode="record", node_watch=False,
                          log_level="WARNING", **settings)
        self.server = make_server("127.0.0.1", 0, create_app(config, clock=self.clock))
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.http = requests.Session()
        self.monitor = Monitor(self.store, clock=self.clock)
        self.items = [node_object(n) for n in nodes]
        self.run_id = uuid.uuid4().hex[:8]
        self.pods: dict[int, dict[str, Any]] = {}
        self.seconds = 0.0  # wall time spent deciding

    def close(self) -> None:
        self.server.shutdown()

    def _post(self, verb: str, body: dict[str, Any]) -> Any:
        response = self.http.post(f"{self.url}/{verb}", json=body, timeout=30)
        response.raise_for_status()
        return response.json()

    def _pod(self, job: SimJob) -> dict[str, Any]:
        if job.id not in self.pods:
            train = job.task == "train"
            self.pods[job.id] = pod_object(
                f"job-{job.id}", "replay", f"{self.run_id}-{job.id:08d}", model=job.model,
                task=job.task, batch=job.batch, epochs=job.units if train else None,
                requests=None if train else job.units, scheduler_name="schedtune-scheduler",
                created_at=_iso(job.arrival_s), phase="Pending")
        return self.pods[job.id]

    def place(self, job: SimJob, now: float, sim: Simulator) -> tuple[str, int] | None:
        started = time.perf_counter()
        self.clock.now = EPOCH + now
        pod = self._pod(job)
        try:
            result = self._post("filter", encode_extender_args(pod, self.items))
            if result.get("Error"):
                raise RuntimeError(f"filter error: {result['Error']}")
            passing = (result.get("Nodes") or {}).get("items") or []
            if not passing:
                return None
            scores = self._post("prioritize", encode_extender_args(pod, passing))
            best = max(scores, key=lambda s: s["Score"])["Host"]  # first of the highest
            bound = self._post("bind", encode_binding_args(pod, best))
            if bound.get("Error"):
                return None  # raced to full: retried on the next event, as kube-scheduler does
            record = self.store.job(pod["metadata"]["uid"])
            pod["spec"]["nodeName"] = best
            return record.node, record.gpu_index
        finally:
            self.seconds += time.perf_counter() - started

    def started(self, placement: Placement, now: float) -> None:
        self.clock.now = EPOCH + now
        pod = self.pods[placement.job.id]
        pod["status"] = {"phase": "Running", "containerStatuses": [
            {"name": "main", "restartCount": 0, "state": {"running": {"startedAt": _iso(now)}}}]}
        self.monitor.on_event("MODIFIED", pod)

    def ended(self, placement: Placement, now: float, oom: bool) -> None:
        self.clock.now = EPOCH + now
        pod = self.pods[placement.job.id]
        began = pod["status"]["containerStatuses"][0]["state"]["running"]["startedAt"]
        terminated = {"exitCode": 137 if oom else 0, "reason": "OOMKilled" if oom else "Completed",
                      "startedAt": began, "finishedAt": _iso(now),
                      "containerID": f"containerd://{pod['metadata']['uid']}"}
        pod["status"] = {"phase": "Failed" if oom else "Succeeded", "containerStatuses": [
            {"name": "main", "restartCount": 0, "state": {"terminated": terminated}}]}
        self.monitor.on_event("MODIFIED", pod)
