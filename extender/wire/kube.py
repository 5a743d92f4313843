"""kube-scheduler's extender wire format (k8s.io/kube-scheduler/extender/v1): decode, encode.

The Go types carry no json tags, so keys are the capitalised field names:
``ExtenderArgs{Pod, Nodes, NodeNames}``, ``ExtenderFilterResult{Nodes,
NodeNames, FailedNodes, FailedAndUnresolvableNodes, Error}``,
``HostPriorityList [{Host, Score}]`` with scores 0..MaxExtenderPriority (10),
``ExtenderBindingArgs{PodName, PodNamespace, PodUID, Node}`` and
``ExtenderBindingResult{Error}``.

With ``nodeCacheCapable: false`` the scheduler sends full nodes and reads only
``Nodes`` back; with ``true`` it sends and reads ``NodeNames``. A filter answer
names only nodes the request named (the scheduler rejects anything else).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from extender.errors import BadRequest
from extender.model import NodeGpus, PodInfo, Verdict
from extender.wire.node_labels import gpus_from_node

MAX_EXTENDER_PRIORITY = 10
MAX_NAME_CHARS = 253
MAX_NODE_VERSIONS = 1 << 16  # node layouts remembered by (name, uid, resourceVersion)
_LAYOUT_BY_VERSION: dict[tuple[Any, Any, Any], NodeGpus] = {}


@dataclass(frozen=True)
class ExtenderArgs:
    pod: PodInfo
    nodes: dict[str, NodeGpus | None]  # None: names mode, layout from the node watcher
    node_items: list[dict[str, Any]] | None  # full-nodes mode: echoed back by filter


@dataclass(frozen=True)
class BindingArgs:
    pod_name: str
    pod_namespace: str
    pod_uid: str
    node: str


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


def decode_node(node: Any, where: str) -> tuple[str, NodeGpus]:
    """A v1.Node object -> (name, GPU layout). A node seen before at the same
    (uid, resourceVersion) is not parsed again: the API server gives every change to
    the object a new resourceVersion, and kube-scheduler resends the same nodes."""
    known = _known_layout(node)
    if known is not None:
        return known
    node = require_object(node, where)
    meta = require_object(node.get("metadata"), f"{where}.metadata")
    name = require_name(meta.get("name"), f"{where}.metadata.name")
    version = (name, meta.get("uid"), meta.get("resourceVersion"))
    labels = meta.get("labels") or {}
    status = node.get("status") or {}
    allocatable = status.get("allocatable") or {} if isinstance(status, dict) else {}
    if not isinstance(labels, dict) or not isinstance(allocatable, dict):
        raise BadRequest(f"{where}: labels and status.allocatable must be objects")
    layout = gpus_from_node(labels, allocatable)
    if _is_version(version):
        if len(_LAYOUT_BY_VERSION) >= MAX_NODE_VERSIONS:
            _LAYOUT_BY_VERSION.pop(next(iter(_LAYOUT_BY_VERSION)))
        _LAYOUT_BY_VERSION[version] = layout
    return name, layout


def _known_layout(node: Any) -> tuple[str, NodeGpus] | None:
    """The layout remembered for this node version (only validated ones are remembered)."""
    meta = node.get("metadata") if isinstance(node, dict) else None
    if not isinstance(meta, dict):
        return None
    version = (meta.get("name"), meta.get("uid"), meta.get("resourceVersion"))
    try:
        layout = _LAYOUT_BY_VERSION.get(version)
    except TypeError:  # an unhashable (so invalid) value: the full decode reports it
        return None
    return None if layout is None else (version[0], layout)


def _is_version(version: tuple[str, Any, Any]) -> bool:
    _, uid, resource_version = version
    return (isinstance(uid, str) and isinstance(resource_version, str)
            and 0 < len(uid) <= MAX_NAME_CHARS and 0 < len(resource_version) <= MAX_NAME_CHARS)


def decode_args(body: Any) -> ExtenderArgs:
    """ExtenderArgs for filter and prioritize, in either nodeCacheCapable mode."""
    body = require_object(body, "body")
    pod = decode_pod(body.get("Pod"))
    nodes_obj, names = body.get("Nodes"), body.get("NodeNames")
    if nodes_obj is not None:
        items = require_object(nodes_obj, "Nodes").get("items") or []
        if not isinstance(items, list):
            raise BadRequest("Nodes.items must be a list")
        decoded = [decode_node(item, f"Nodes.items[{i}]") for i, item in enumerate(items)]
        return ExtenderArgs(pod, dict(decoded), items)
    if names is None:
        raise BadRequest("one of Nodes or NodeNames is required")
    if not isinstance(names, list):
        raise BadRequest("NodeNames must be a list of strings")
    return ExtenderArgs(pod, {require_name(n, "NodeNames[]"): None for n in names}, None)


def decode_binding(body: Any) -> BindingArgs:
    body = require_object(body, "body")
    return BindingArgs(
        pod_name=require_name(body.get("PodName"), "PodName"),
        pod_namespace=require_name(body.get("PodNamespace"), "PodNamespace", required=False) or "default",
        pod_uid=require_name(body.get("PodUID"), "PodUID"),
        node=require_name(body.get("Node"), "Node"),
    )


def encode_filter(args: ExtenderArgs, verdicts: Mapping[str, Verdict]) -> dict[str, Any]:
    """ExtenderFilterResult; only nodes of the request appear in it."""
    passing = [n for n in args.nodes if verdicts[n].fits]
    failed = {n: v.reason for n, v in verdicts.items() if not v.fits and not v.unresolvable}
    unresolvable = {n: v.reason for n, v in verdicts.items() if not v.fits and v.unresolvable}
    result: dict[str, Any] = {"FailedNodes": failed, "FailedAndUnresolvableNodes": unresolvable,
                              "Error": ""}
    if args.node_items is not None:
        keep = set(passing)
        items = [i for i in args.node_items if i["metadata"]["name"] in keep]
        result.update({"Nodes": {"items": items}, "NodeNames": None})
    else:
        result.update({"Nodes": None, "NodeNames": passing})
    return result


def encode_priorities(scores: Mapping[str, float]) -> list[dict[str, Any]]:
    """HostPriorityList: [0, 1] scores scaled to integers 0..10."""
    return [{"Host": n, "Score": int(round(MAX_EXTENDER_PRIORITY * min(1.0, max(0.0, s))))}
            for n, s in scores.items()]  # fmt: skip


def encode_filter_error(message: str) -> dict[str, Any]:
    return {"Nodes": None, "NodeNames": None, "FailedNodes": {},
            "FailedAndUnresolvableNodes": {}, "Error": message}


def encode_bind(error: str = "") -> dict[str, str]:
    return {"Error": error}
