"""The policies that decide through the extender over HTTP, as kube-scheduler calls it.

`ExtenderPolicy`: filter -> prioritize -> highest score -> bind, as kube-scheduler does
with ``nodeCacheCapable: true`` (k8s/scheduler-config.yaml): `ExtenderArgs` name the nodes
the job's affinity allows, whose GFD-labelled layouts (time-slicing replicas = the node's
collocation limit) are in Redis as the node watcher writes them. Trace pods carry
``schedtune.io/gpu-memory`` (their declared MiB per GPU) and ``nvidia.com/gpu: k``. One app
per estimator, all on one Redis (queues, waiting pods and OOM floors are shared state, as
between replicas): a held-out world routes each job to the app whose artefacts never saw
its model or family. The monitor is fed pod transitions as the API would feed it; a pod
that ran out of GPU memory is reported Failed with PyTorch's error exit in its
termination message, so the monitor raises the job type's floor (for the pod's
namespace), and its Job's next pod (new UID, same annotations) is decided afresh.
The baselines that need no extender live in `replay.baselines`.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import requests
from werkzeug.serving import WSGIRequestHandler, make_server

from estimator.predict import Estimator
from extender.cluster.monitor import Monitor
from extender.model import GPU_MEMORY, job_type
from extender.settings import Settings
from extender.state.store import RedisStore
from extender.web.app import create_app
from extender.wire.builders import gfd_node, pod_object
from extender.wire.kube import encode_binding_args, encode_extender_args
from extender.wire.objects import decode_node
from replay.engine import Choice, Placement, SimNode, Simulator
from replay.world import SimJob

EPOCH = 1_800_000_000.0  # simulated t = 0, as a wall-clock instant
GPU_OOM_MESSAGE = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 512.00 MiB."
logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no access log per request
# OOM kills are the replay's figures (the report lists them), not operator alerts.
logging.getLogger("extender.cluster.monitor").setLevel(logging.CRITICAL)


class Http11Handler(WSGIRequestHandler):
    """HTTP/1.1 requests and responses. (werkzeug's development server still answers
    ``Connection: close``, so each request opens a connection: part of the replay's
    decisions per second is that, where kube-scheduler keeps its connections. The server
    answers on one thread: the replay's client asks one request at a time, and a thread
    started per connection cost a tenth of its decisions per second.)"""

    protocol_version = "HTTP/1.1"


class SimClock:
    def __init__(self) -> None:
        self.now = EPOCH

    def __call__(self) -> float:
        return self.now


def node_object(node: SimNode) -> dict[str, Any]:
    """A v1.Node as kube-scheduler sends it, with GPU Feature Discovery's labels: the GPUs
    time-sliced `node.slots` ways."""
    return gfd_node(node.name, node.product, node.count, node.memory_mib, replicas=node.slots,
                    labels={"nvidia.com/gpu.sharing-strategy": "time-slicing"},
                    resources={"cpu": node.cpu, "memory": "256Gi"})


def _iso(t: float) -> str:
    return datetime.fromtimestamp(EPOCH + t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class ExtenderPolicy:
    """Extender apps served over HTTP on 127.0.0.1, their clock on simulated time.

    `estimators`: one app per entry (None: one app loading the design `settings` names);
    `route(job)` names the entry that decides for a job; `base`: the settings `settings`
    amend (default: every default). `reserves` lists, per OOM kill,
    what was reserved and the floor the monitor set after it."""

    def __init__(self, name: str, nodes: list[SimNode], redis_url: str,
                 estimators: Mapping[str, Estimator] | None = None,
                 route: Callable[[SimJob], str] | None = None, base: Settings | None = None,
                 **settings: Any) -> None:
        self.name = name
        self.oracle = False
        self.clock = SimClock()
        self.store = RedisStore.from_url(redis_url)
        self.store.wipe()  # each policy starts from an empty state
        config = dataclasses.replace(base or Settings(), redis_url=redis_url,
                                     bind_mode="record", node_watch=False,
                                     log_level="ERROR", **settings)  # OOMs: the report's
        self.servers, self.urls = [], {}
        for key, estimator in (estimators or {"": None}).items():
            server = make_server("127.0.0.1", 0,
                                 create_app(config, clock=self.clock, estimator=estimator),
                                 threaded=False, request_handler=Http11Handler)
            threading.Thread(target=server.serve_forever, daemon=True).start()
            self.servers.append(server)
            self.urls[key] = f"http://127.0.0.1:{server.server_port}"
        self.route = route or (lambda job: next(iter(self.urls)))
        self.http = requests.Session()
        self.http.trust_env = False  # 127.0.0.1 only: no proxy look-up per request
        self.monitor = Monitor(self.store, clock=self.clock)
        for n in nodes:  # the node watcher's writes
            self.store.put_node(*decode_node(node_object(n), "node"))
        self.names = [n.name for n in nodes]
        self.gpu_types = {n.name: n.gpu_type for n in nodes}
        self.run_id = uuid.uuid4().hex[:8]
        self.pods: dict[tuple[int, int], dict[str, Any]] = {}
        self.reserves: list[dict[str, Any]] = []
        self.seconds = 0.0  # wall time spent deciding

    def close(self) -> None:
        self.http.close()  # first: a kept connection holds its server's thread
        for server in self.servers:
            server.shutdown()
            server.server_close()

    def _post(self, url: str, verb: str, body: dict[str, Any]) -> Any:
        response = self.http.post(f"{url}/{verb}", json=body, timeout=30)
        response.raise_for_status()
        return response.json()

    def _pod(self, job: SimJob) -> dict[str, Any]:
        key = (job.id, job.attempt)
        if key not in self.pods:
            train = job.task == "train"
            suffix = f"-{job.attempt}" if job.attempt else ""
            name, uid = f"job-{job.id}{suffix}", f"{self.run_id}-{job.id:08d}-{job.attempt}"
            common = {"scheduler_name": "schedtune-scheduler", "phase": "Pending",
                      "created_at": _iso(job.arrival_s), "gpus": job.gpus}
            if job.from_trace:  # its owner declares the memory; no model to estimate
                self.pods[key] = pod_object(name, "replay", uid, **common, annotations={
                    GPU_MEMORY: str(int(job.declared_mib))})
            else:
                self.pods[key] = pod_object(
                    name, "replay", uid, model=job.model, task=job.task, batch=job.batch,
                    epochs=job.units if train else None,
                    requests=None if train else job.units, **common)
        return self.pods[key]

    def place(self, job: SimJob, now: float, sim: Simulator) -> Choice | None:
        self.clock.now = EPOCH + now
        allowed = [n for n in self.names if job.may_run_on(self.gpu_types[n])]
        return self.decide(self._pod(job), allowed, self.urls[self.route(job)])

    def decide(self, pod: dict[str, Any], allowed: list[str], url: str | None = None,
               pick: Callable[[list[dict[str, Any]]], str] | None = None) -> Choice | None:
        """Filter over the `allowed` nodes, prioritize those that passed, bind the first of
        the highest score, as kube-scheduler does (None: no node passed, or bind refused);
        the node and GPUs bind reserved (none for a pod not ours). `url`: the app that
        decides (default: the first); `pick`: the node from prioritize's HostPriorityList
        (default: the first of the highest extender score)."""
        started = time.perf_counter()
        url = url or next(iter(self.urls.values()))
        try:
            result = self._post(url, "filter", encode_extender_args(pod, node_names=allowed))
            if result.get("Error"):
                raise RuntimeError(f"filter error: {result['Error']}")
            passing = result.get("NodeNames") or []
            if not passing:
                return None
            scores = self._post(url, "prioritize", encode_extender_args(pod, node_names=passing))
            best = pick(scores) if pick is not None else \
                max(scores, key=lambda s: s["Score"])["Host"]  # first of the highest
            bound = self._post(url, "bind", encode_binding_args(pod, best))
            if bound.get("Error"):
                return None  # raced to full: retried on the next event, as kube-scheduler does
            record = self.store.job(pod["metadata"]["uid"])
            pod["spec"]["nodeName"] = best
            if record is None:  # not ours: bound as it is, nothing reserved
                return best, ()
            return record.node, tuple(getattr(record, "gpus", (record.gpu_index,)))
        finally:
            self.seconds += time.perf_counter() - started

    def started(self, placement: Placement, now: float) -> None:
        self.clock.now = EPOCH + now
        pod = self.pods[placement.job.id, placement.job.attempt]
        pod["status"] = {"phase": "Running", "containerStatuses": [
            {"name": "main", "restartCount": 0, "state": {"running": {"startedAt": _iso(now)}}}]}
        self.monitor.on_event("MODIFIED", pod)

    def ended(self, placement: Placement, now: float, oom: bool) -> None:
        self.clock.now = EPOCH + now
        job = placement.job
        pod = self.pods.pop((job.id, job.attempt))
        uid = pod["metadata"]["uid"]
        record = self.store.job(uid) if oom else None
        began = pod["status"]["containerStatuses"][0]["state"]["running"]["startedAt"]
        ended = ({"exitCode": 1, "reason": "Error", "message": GPU_OOM_MESSAGE} if oom
                 else {"exitCode": 0, "reason": "Completed"})
        terminated = {**ended, "startedAt": began, "finishedAt": _iso(now),
                      "containerID": f"containerd://{uid}"}
        pod["status"] = {"phase": "Failed" if oom else "Succeeded", "containerStatuses": [
            {"name": "main", "restartCount": 0, "state": {"terminated": terminated}}]}
        self.monitor.on_event("MODIFIED", pod)
        if oom:
            kind = job_type(job.model, job.task, job.batch, self.gpu_types[placement.node])
            self.reserves.append({
                "job_type": kind, "job": job.id, "attempt": job.attempt,
                "reserved_mib": round(record.own_mib, 1) if record else None,
                "true_mib": round(placement.true_mib, 1),
                "floor_after_mib": self.store.floors().get(
                    f"{pod['metadata']['namespace']}|{kind}")})
