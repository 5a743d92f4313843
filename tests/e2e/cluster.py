"""The whole tier as one object, and what a test does to it: GPU nodes as Node objects
(GPU Feature Discovery's labels), pods for our scheduler, the kubelet's part (a pod's
status written through the API), waits on what the scheduler did."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import orjson
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from extender.model import LABEL_PRODUCT, JobRecord
from extender.state.connection import redis_client
from extender.state.keys import NODES_KEY
from extender.state.store import RedisStore
from extender.wire.builders import gfd_node, pod_object
from tests.e2e.control_plane import ControlPlane
from tests.e2e.deployment import Deployment
from tests.e2e.processes import Supervisor

SCHEDULER = "schedtune-scheduler"
NODE_RESOURCES = {"cpu": "64", "memory": "512Gi", "pods": "110"}
T = TypeVar("T")


def wait_for(what: str, probe: Callable[[], T | None], timeout_s: float = 30.0,
             every_s: float = 0.02) -> T:
    """`probe()`'s first truthy answer; AssertionError naming `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        answer = probe()
        if answer:
            return answer
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(every_s)


@dataclass
class Cluster:
    supervisor: Supervisor
    control_plane: ControlPlane
    deployment: Deployment
    startup_s: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.api = client.CoreV1Api(self.control_plane.api_client())
        self.objects = client.CustomObjectsApi(self.control_plane.api_client())
        self.redis = redis_client(self.deployment.redis_url, decode_responses=True)
        self.store = RedisStore.from_url(self.deployment.redis_url, timeout_s=5.0)

    # ----- nodes
    def add_gpu_node(self, name: str, product: str, count: int, memory_mib: int,
                     replicas: int | None = None, labels: Mapping[str, str] | None = None,
                     annotations: Mapping[str, str] | None = None) -> None:
        """A GPU node; `replicas`: the device plugin's time-slicing replicas per GPU."""
        node = gfd_node(name, product, count, memory_mib, replicas, labels=labels,
                        resources=NODE_RESOURCES, metadata={"annotations": dict(annotations or {})})
        node["status"]["capacity"] = dict(node["status"]["allocatable"])
        node["status"]["conditions"] = [{"type": "Ready", "status": "True",
                                         "reason": "KubeletReady", "message": "e2e"}]
        self.api.create_node(node)

    def delete_node(self, name: str) -> None:
        try:
            self.api.delete_node(name)
        except ApiException as exc:
            if exc.status != 404:
                raise

    def gpu_product(self, name: str) -> str:
        return self.api.read_node(name).metadata.labels[LABEL_PRODUCT]

    def layout_known(self, name: str) -> bool:
        """The node watcher has written the node's GPU layout into Redis."""
        return self.redis.hexists(NODES_KEY, name)

    # ----- pods
    def new_pod(self, namespace: str, *, name: str | None = None,
                node_selector: Mapping[str, str] | None = None, gpus: int | None = 1,
                scheduler: str = SCHEDULER, **annotations: Any) -> dict[str, Any]:
        """A pod of our scheduler (`model`, `batch`, ... as `pod_object` takes them)."""
        pod = pod_object(name or f"p-{uuid.uuid4().hex[:8]}", namespace, "", gpus=gpus,
                         scheduler_name=scheduler, image="registry.invalid/trainer:1",
                         **annotations)
        del pod["metadata"]["uid"]
        if node_selector:
            pod["spec"]["nodeSelector"] = dict(node_selector)
        pod["spec"]["terminationGracePeriodSeconds"] = 0
        return pod

    def create(self, pod: dict[str, Any]) -> dict[str, Any]:
        meta = pod["metadata"]
        created = self.api.create_namespaced_pod(meta["namespace"], pod, _preload_content=False)
        return orjson.loads(created.data)

    def read(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            answer = self.api.read_namespaced_pod(name, namespace, _preload_content=False)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return orjson.loads(answer.data)

    def pods(self, namespace: str) -> list[dict[str, Any]]:
        answer = self.api.list_namespaced_pod(namespace, _preload_content=False)
        return orjson.loads(answer.data)["items"]

    def bound_node(self, namespace: str, name: str) -> str | None:
        pod = self.read(namespace, name) or {}
        return (pod.get("spec") or {}).get("nodeName") or None

    def wait_bound(self, namespace: str, name: str, timeout_s: float = 30.0) -> str:
        return wait_for(f"{namespace}/{name} bound",
                        lambda: self.bound_node(namespace, name), timeout_s)

    def scheduled_condition(self, namespace: str, name: str) -> dict[str, Any] | None:
        pod = self.read(namespace, name) or {}
        for condition in (pod.get("status") or {}).get("conditions") or ():
            if condition.get("type") == "PodScheduled":
                return condition
        return None

    def delete_pod(self, namespace: str, name: str) -> None:
        try:
            self.api.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
        except ApiException as exc:
            if exc.status != 404:
                raise

    def ensure_namespace(self, namespace: str) -> None:
        try:
            self.api.create_namespace({"metadata": {"name": namespace}})
        except ApiException as exc:
            if exc.status != 409:
                raise

    def create_object(self, api_version: str, plural: str, namespace: str,
                      body: dict[str, Any]) -> dict[str, Any]:
        """A namespaced object of an API group (a Workload, a PodGroup)."""
        group, _, version = api_version.partition("/")
        return self.objects.create_namespaced_custom_object(group, version, namespace, plural,
                                                            body)

    def bind(self, namespace: str, name: str, node: str) -> None:
        """Bind a pod as a scheduler that binds itself (Volcano) does."""
        self.api.create_namespaced_binding(namespace, {
            "metadata": {"name": name}, "target": {"kind": "Node", "name": node}},
            _preload_content=False)

    # ----- the kubelet's part
    def set_phase(self, namespace: str, name: str, phase: str,
                  terminated: Mapping[str, Any] | None = None) -> None:
        """Write the pod's status as a kubelet would: Running (container started) or a
        finished phase (the container terminated as `terminated` says, exit 0 by default)."""
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        if phase == "Running":
            state = {"running": {"startedAt": now}}
        else:
            state = {"terminated": {"exitCode": 0 if phase == "Succeeded" else 1,
                                    "reason": "Completed" if phase == "Succeeded" else "Error",
                                    "startedAt": now, "finishedAt": now, **(terminated or {})}}
        status = {"phase": phase, "startTime": now, "containerStatuses": [{
            "name": "main", "image": "registry.invalid/trainer:1", "imageID": "",
            "ready": phase == "Running", "restartCount": 0, "state": state}]}
        self.api.patch_namespaced_pod_status(name, namespace, {"status": status})

    # ----- the extender's own state
    def reservations(self) -> list[JobRecord]:
        """Every reservation in Redis, as the extender's store reads them."""
        return self.store.jobs()

    def log(self, process: str) -> str:
        return self.supervisor.processes[process].log.read_text(errors="replace")
