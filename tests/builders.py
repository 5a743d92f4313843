"""Keyword builders for request objects (never paste JSON blobs into tests).

Thin names over the wire layer's builders and request encoders
(`extender.wire.builders`, `extender.wire.kube`, `extender.wire.volcano`), with the
defaults these tests lean on: a resnet50 pod with a random uid, an RTX-3090 node.
"""

from __future__ import annotations

import copy
import uuid
from pathlib import Path
from typing import Any

from extender.wire.builders import gfd_node, pod_object
from extender.wire.kube import encode_binding_args, encode_extender_args
from extender.wire.volcano import encode_node_info, encode_task_info

FIXTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures"


def make_pod(name: str = "job", namespace: str = "default", uid: str | None = None,
             model: str | None = "resnet50", task: str | None = None, batch: Any = None,
             epochs: Any = None, requests: Any = None, gpus: int | None = 1,
             **extra: str) -> dict[str, Any]:
    """`extra`: more annotations, written before the ``schedtune.io/*`` ones; `gpus`: the
    container's ``nvidia.com/gpu`` limit."""
    return pod_object(name, namespace, uid or str(uuid.uuid4()), model=model, task=task,
                      batch=batch, epochs=epochs, requests=requests, annotations=extra,
                      image="trainer:latest", gpus=gpus)


def make_node(name: str, product: str | None = "NVIDIA-GeForce-RTX-3090", count: Any = 1,
              memory_mib: Any = None, replicas: Any = None,
              allocatable: dict[str, str] | None = None) -> dict[str, Any]:
    return gfd_node(name, product, count, memory_mib, replicas, resources={"cpu": "32"},
                    allocatable=allocatable or None)


def filter_args(pod: dict[str, Any], nodes: list[dict[str, Any]],
                names_only: bool = False) -> dict[str, Any]:
    if names_only:
        return encode_extender_args(pod, node_names=[n["metadata"]["name"] for n in nodes])
    return encode_extender_args(pod, nodes)


def passed_nodes(filter_result: dict[str, Any]) -> list[str]:
    """The node names a full-nodes filter answer passed, in order."""
    return [n["metadata"]["name"] for n in (filter_result["Nodes"] or {}).get("items", [])]


def bind_args(pod: dict[str, Any], node: str) -> dict[str, str]:
    return encode_binding_args(pod, node)


def bound(pod: dict[str, Any], node: str, annotations: dict[str, str],
          scheduler: str = "schedtune-scheduler") -> dict[str, Any]:
    """`pod` as the API server reports it after our bind: on `node`, placed by `scheduler`,
    with the `annotations` bind wrote (a `RecordingBinder` call's last item)."""
    pod = copy.deepcopy(pod)
    pod["metadata"]["annotations"].update(annotations)
    pod["spec"].update(nodeName=node, schedulerName=scheduler)
    return pod


def volcano_task(pod: dict[str, Any], node_name: str = "") -> dict[str, Any]:
    return encode_task_info(pod, node_name)


def volcano_node(node: dict[str, Any]) -> dict[str, Any]:
    return encode_node_info(node)
