"""Kubernetes objects inside request bodies (v1.Pod, v1.Node) -> domain types. Pure.

Shared by both wire formats. `NodeLayouts` remembers node layouts by
(name, uid, resourceVersion); each app owns one, bounded, so nothing grows in a
module global.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from extender.errors import BadRequest
from extender.model import NodeGpus, PodInfo
from extender.wire.node_labels import gpus_from_node

MAX_NAME_CHARS = 253
NodeVersion = tuple[Any, Any, Any]


class NodeLayouts:
    """Layouts of node versions seen in requests, least recently used dropped first.

    The API server gives every change to an object a new resourceVersion and
    kube-scheduler resends the same nodes, so a version is parsed once.
    """

    def __init__(self, max_entries: int = 1 << 16) -> None:
        self.max_entries = max_entries
        self._layouts: OrderedDict[NodeVersion, NodeGpus] = OrderedDict()

    def __len__(self) -> int:
        return len(self._layouts)

    def get(self, version: NodeVersion) -> NodeGpus | None:
        try:
            layout = self._layouts.get(version)
        except TypeError:  # an unhashable (so invalid) value: the full decode reports it
            return None
        if layout is not None:
            self._layouts.move_to_end(version)
        return layout

    def put(self, version: NodeVersion, layout: NodeGpus) -> None:
        self._layouts[version] = layout
        self._layouts.move_to_end(version)
        while len(self._layouts) > self.max_entries:
            self._layouts.popitem(last=False)


def require_object(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):  # orjson decodes every JSON object to a dict
        raise BadRequest(f"{what} must be a JSON object")
    return value


def require_name(value: Any, what: str, required: bool = True) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, str) or not value or len(value) > MAX_NAME_CHARS:
        raise BadRequest(f"{what} must be a non-empty string of at most {MAX_NAME_CHARS} chars")
    return value


def decode_pod(pod: Any) -> PodInfo:
    meta = require_object(require_object(pod, "Pod").get("metadata"), "Pod.metadata")
    annotations = meta.get("annotations") or {}
    if not isinstance(annotations, dict):
        raise BadRequest("Pod.metadata.annotations must be an object")
    return PodInfo(
        uid=require_name(meta.get("uid"), "Pod.metadata.uid"),
        name=require_name(meta.get("name"), "Pod.metadata.name"),
        namespace=require_name(meta.get("namespace"), "Pod.metadata.namespace", required=False)
        or "default",
        annotations=annotations,
    )


def decode_node(node: Any, where: str, layouts: NodeLayouts | None = None) -> tuple[str, NodeGpus]:
    """A v1.Node object -> (name, GPU layout); a version `layouts` knows is not parsed again."""
    meta = node.get("metadata") if isinstance(node, dict) else None
    if layouts is not None and isinstance(meta, dict):
        version = (meta.get("name"), meta.get("uid"), meta.get("resourceVersion"))
        known = layouts.get(version)
        if known is not None:
            return version[0], known
    node = require_object(node, where)
    meta = require_object(node.get("metadata"), f"{where}.metadata")
    name = require_name(meta.get("name"), f"{where}.metadata.name")
    labels = meta.get("labels") or {}
    status = node.get("status") or {}
    allocatable = status.get("allocatable") or {} if isinstance(status, dict) else {}
    if not isinstance(labels, dict) or not isinstance(allocatable, dict):
        raise BadRequest(f"{where}: labels and status.allocatable must be objects")
    layout = gpus_from_node(labels, allocatable)
    version = (name, meta.get("uid"), meta.get("resourceVersion"))
    if layouts is not None and _is_version(version):
        layouts.put(version, layout)
    return name, layout


def _is_version(version: NodeVersion) -> bool:
    _, uid, resource_version = version
    return (isinstance(uid, str) and isinstance(resource_version, str)
            and 0 < len(uid) <= MAX_NAME_CHARS and 0 < len(resource_version) <= MAX_NAME_CHARS)
