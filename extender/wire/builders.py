"""v1.Pod and v1.Node objects as the API server serialises them into scheduler requests. Pure.

The objects the request encoders (kube.py, volcano.py) wrap: one pod builder
with SchedTune's annotations and one node builder with NVIDIA GPU Feature
Discovery's labels, used by the replay, the chaos and benchmark scripts and the
tests alike. Callers add the fields their scenario needs (a container's env,
a node's conditions) through the keyword arguments, never by building the
objects by hand. Imports only domain constants (`extender.model`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from extender.model import (
    BATCH, EPOCHS, LABEL_COUNT, LABEL_MEMORY, LABEL_PRODUCT, LABEL_REPLICAS, MODEL, REQUESTS,
    RESOURCE_GPU, TASK,
)  # fmt: skip

LABEL_HOSTNAME = "kubernetes.io/hostname"


def pod_object(name: str, namespace: str, uid: str, *, model: Any = None, task: Any = None,
               batch: Any = None, epochs: Any = None, requests: Any = None,
               annotations: Mapping[str, Any] | None = None, image: str = "trainer",
               gpus: int | None = 1, env: Mapping[str, str] | None = None,
               scheduler_name: str | None = None, created_at: str | None = None,
               phase: str | None = None, cpu: str | None = None) -> dict[str, Any]:
    """A v1.Pod with one container ``main``.

    `model`, `task`, `batch`, `epochs`, `requests` become ``schedtune.io/*``
    annotations after `annotations` (None: absent; an int is written as the
    string Kubernetes stores, anything else as given, so tests can send junk).
    `gpus`: the container's ``nvidia.com/gpu`` limit (None: no resources); `cpu`: its
    CPU request (None: none).
    `created_at` (RFC 3339) and `phase` are left out when None.
    """
    notes: dict[str, Any] = dict(annotations or {})
    for key, value in ((MODEL, model), (TASK, task), (BATCH, batch), (EPOCHS, epochs),
                       (REQUESTS, requests)):
        if value is not None:
            notes[key] = str(value) if isinstance(value, int) else value
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "uid": uid}
    if created_at is not None:
        metadata["creationTimestamp"] = created_at
    metadata["annotations"] = notes
    container: dict[str, Any] = {"name": "main", "image": image}
    if env is not None:
        container["env"] = [{"name": k, "value": v} for k, v in env.items()]
    if gpus is not None:
        container["resources"] = {"limits": {RESOURCE_GPU: str(gpus)}}
    if cpu is not None:
        container.setdefault("resources", {})["requests"] = {"cpu": cpu}
    spec: dict[str, Any] = {"containers": [container]}
    if scheduler_name is not None:
        spec = {"schedulerName": scheduler_name, **spec}
    pod: dict[str, Any] = {"metadata": metadata, "spec": spec}
    if phase is not None:
        pod["status"] = {"phase": phase}
    return pod


def gfd_node(name: str, product: str | None, count: Any = 1, memory_mib: Any = None,
             replicas: Any = None, *, labels: Mapping[str, str] | None = None,
             resources: Mapping[str, str] | None = None,
             allocatable: Mapping[str, Any] | None = None,
             metadata: Mapping[str, Any] | None = None, spec: Mapping[str, Any] | None = None,
             status: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A v1.Node labelled by GPU Feature Discovery.

    Labels: ``kubernetes.io/hostname``, then ``nvidia.com/gpu.product``,
    ``.count``, ``.memory`` (MiB per GPU) and ``.replicas`` for each that is not
    None (written as strings), then `labels`. Allocatable: `allocatable` as
    given, else `resources` plus ``nvidia.com/gpu`` = count x replicas (the
    device plugin's slots under time-slicing). `metadata` and `status` add
    fields beside name/labels and allocatable (uid, resourceVersion, conditions);
    `spec` is left out when None.
    """
    node_labels = {LABEL_HOSTNAME: name}
    for key, value in ((LABEL_PRODUCT, product), (LABEL_COUNT, count),
                       (LABEL_MEMORY, memory_mib), (LABEL_REPLICAS, replicas)):
        if value is not None:
            node_labels[key] = str(value)
    node_labels.update(labels or {})
    if allocatable is None:
        slots = int(count or 1) * int(replicas or 1)
        allocatable = {**(resources or {}), RESOURCE_GPU: str(slots)}
    node: dict[str, Any] = {"metadata": {"name": name, **(metadata or {}), "labels": node_labels}}
    if spec is not None:
        node["spec"] = dict(spec)
    node["status"] = {**(status or {}), "allocatable": dict(allocatable)}
    return node
