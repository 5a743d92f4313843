"""Chainable-free, keyword builders for request objects (never paste JSON blobs into tests)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures"


def make_pod(name: str = "job", namespace: str = "default", uid: str | None = None,
             model: str | None = "resnet50", task: str | None = None, batch: Any = None,
             epochs: Any = None, requests: Any = None, **extra: str) -> dict[str, Any]:
    annotations: dict[str, Any] = dict(extra)
    for key, value in (("model", model), ("task", task), ("batch-size", batch),
                       ("epochs", epochs), ("requests", requests)):
        if value is not None:
            annotations[f"schedtune.io/{key}"] = value if not isinstance(value, int) else str(value)
    return {
        "metadata": {"name": name, "namespace": namespace, "uid": uid or str(uuid.uuid4()),
                     "annotations": annotations},
        "spec": {"containers": [{"name": "main", "image": "trainer:latest",
                                 "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
    }


def make_node(name: str, product: str | None = "NVIDIA-GeForce-RTX-3090", count: Any = 1,
              memory_mib: Any = None, replicas: Any = None,
              allocatable: dict[str, str] | None = None) -> dict[str, Any]:
    labels = {"kubernetes.io/hostname": name}
    if product is not None:
        labels["nvidia.com/gpu.product"] = product
    if count is not None:
        labels["nvidia.com/gpu.count"] = str(count)
    if memory_mib is not None:
        labels["nvidia.com/gpu.memory"] = str(memory_mib)
    if replicas is not None:
        labels["nvidia.com/gpu.replicas"] = str(replicas)
    slots = int(count or 1) * int(replicas or 1)
    return {
        "metadata": {"name": name, "labels": labels},
        "status": {"allocatable": allocatable or {"cpu": "32", "nvidia.com/gpu": str(slots)}},
    }


def filter_args(pod: dict[str, Any], nodes: list[dict[str, Any]],
                names_only: bool = False) -> dict[str, Any]:
    if names_only:
        return {"Pod": pod, "Nodes": None, "NodeNames": [n["metadata"]["name"] for n in nodes]}
    return {"Pod": pod, "Nodes": {"metadata": {}, "items": nodes}, "NodeNames": None}


def bind_args(pod: dict[str, Any], node: str) -> dict[str, str]:
    meta = pod["metadata"]
    return {"PodName": meta["name"], "PodNamespace": meta["namespace"], "PodUID": meta["uid"],
            "Node": node}


def volcano_task(pod: dict[str, Any], node_name: str = "") -> dict[str, Any]:
    meta = pod["metadata"]
    return {"UID": meta["uid"], "Job": "default/job", "Name": meta["name"],
            "Namespace": meta["namespace"], "NodeName": node_name, "Status": 1, "Pod": pod}


def volcano_node(node: dict[str, Any]) -> dict[str, Any]:
    return {"Name": node["metadata"]["name"], "Node": node, "State": {"Phase": "Ready"}}
