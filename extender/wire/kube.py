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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson

from extender.by_node import passing_names, refused_items, score_array
from extender.errors import BadRequest
from extender.model import NodeGpus, PodInfo, Verdict
from extender.wire.objects import (
    DNS_LABEL, POD_UID, NodeLayouts, decode_node, decode_pod, require_name, require_names,
    require_object,
)  # fmt: skip

MAX_EXTENDER_PRIORITY = 10


@dataclass(frozen=True)
class ExtenderArgs:
    pod: PodInfo
    nodes: Mapping[str, NodeGpus | None]  # None: names mode, layout from the node watcher
    node_items: list[dict[str, Any]] | None  # full-nodes mode: echoed back by filter


@dataclass(frozen=True)
class BindingArgs:
    pod_name: str
    pod_namespace: str
    pod_uid: str
    node: str


def decode_args(body: Any, layouts: NodeLayouts | None = None) -> ExtenderArgs:
    """ExtenderArgs for filter and prioritize, in either nodeCacheCapable mode; `layouts`
    remembers node versions already parsed."""
    body = require_object(body, "body")
    pod = decode_pod(body.get("Pod"))
    nodes_obj, names = body.get("Nodes"), body.get("NodeNames")
    if nodes_obj is not None:
        items = require_object(nodes_obj, "Nodes").get("items") or []
        if not isinstance(items, list):
            raise BadRequest("Nodes.items must be a list")
        decoded = layouts.known(items) if layouts is not None else None
        if decoded is None:
            decoded = [decode_node(item, f"Nodes.items[{i}]", layouts)
                       for i, item in enumerate(items)]
        nodes = dict(decoded)
        if len(nodes) != len(decoded):  # two objects, one name: which one to judge and echo?
            seen: set[str] = set()
            twice = next(name for name, _ in decoded if name in seen or seen.add(name))
            raise BadRequest(f"Nodes.items names node {twice!r} more than once")
        return ExtenderArgs(pod, nodes, items)
    if names is None:
        raise BadRequest("one of Nodes or NodeNames is required")
    if not isinstance(names, list):
        raise BadRequest("NodeNames must be a list of strings")
    nodes = (layouts.names(names, "NodeNames[]") if layouts is not None
             else dict.fromkeys(require_names(names, "NodeNames[]")))
    return ExtenderArgs(pod, nodes, None)


def decode_binding(body: Any) -> BindingArgs:
    body = require_object(body, "body")
    return BindingArgs(
        pod_name=require_name(body.get("PodName"), "PodName"),
        pod_namespace=require_name(body.get("PodNamespace"), "PodNamespace", DNS_LABEL,
                                   required=False) or "default",
        pod_uid=require_name(body.get("PodUID"), "PodUID", POD_UID),
        node=require_name(body.get("Node"), "Node"),
    )


def encode_filter(args: ExtenderArgs, verdicts: Mapping[str, Verdict]) -> dict[str, Any]:
    """ExtenderFilterResult; only nodes of the request appear in it."""
    refused = refused_items(verdicts)  # thousands of nodes: their arrays, not a dict walk
    passing = passing_names(verdicts) if refused else list(args.nodes)
    failed = {n: v.reason for n, v in refused if not v.unresolvable}
    unresolvable = {n: v.reason for n, v in refused if v.unresolvable}
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
    """HostPriorityList: [0, 1] scores scaled to integers 0..10 (rounded half to even, as
    Python's `round`; anything not above 0, NaN included, is 0)."""
    points = _points(scores).tolist()
    return [{"Host": n, "Score": p} for n, p in zip(list(scores), points, strict=True)]


def encode_priorities_json(scores: Mapping[str, float]) -> bytes:
    """`encode_priorities` as the JSON bytes orjson writes for it, joined from per-host
    pieces kept between requests (kube-scheduler names the same nodes pod after pod):
    thousands of hosts without building a dict each."""
    if not scores:
        return b"[]"
    parts: list[bytes | None] = [None] * (2 * len(scores))
    parts[::2] = map(_HOST_HEADS.get, scores)  # a NodeScores iterates its names list
    if None in parts[::2]:
        parts[::2] = map(_host_head, scores)
    parts[1::2] = _SCORE_TAILS[_points(scores)].tolist()
    return b"[" + b"".join(parts)[:-1] + b"]"  # type: ignore[arg-type]


def _points(scores: Mapping[str, float]) -> np.ndarray:
    values = score_array(scores)
    values = np.where(values > 0.0, values, 0.0)
    values = np.where(values < 1.0, values, 1.0)
    return np.rint(MAX_EXTENDER_PRIORITY * values).astype(np.int64)


_SCORE_TAILS = np.array([b'"Score":%d},' % p for p in range(MAX_EXTENDER_PRIORITY + 1)],
                        dtype=object)
_HOST_HEADS: dict[str, bytes] = {}
_MAX_HOST_HEADS = 1 << 17  # names remembered (a large cluster's nodes); past it, start again


def _host_head(name: str) -> bytes:
    head = _HOST_HEADS.get(name)
    if head is None:
        if len(_HOST_HEADS) >= _MAX_HOST_HEADS:
            _HOST_HEADS.clear()
        head = _HOST_HEADS[name] = b'{"Host":' + orjson.dumps(name) + b","
    return head


def encode_filter_error(message: str) -> dict[str, Any]:
    return {"Nodes": None, "NodeNames": None, "FailedNodes": {},
            "FailedAndUnresolvableNodes": {}, "Error": message}


def encode_bind(error: str = "") -> dict[str, str]:
    return {"Error": error}


# --- request encoders (what the scheduler sends) --------------------------------------------


def encode_extender_args(pod: Mapping[str, Any], nodes: Sequence[Mapping[str, Any]] | None = None,
                         *, node_names: Sequence[str] | None = None) -> dict[str, Any]:
    """ExtenderArgs as kube-scheduler sends it to filter and prioritize: the v1.Pod and
    either the v1.NodeList of `nodes` (``nodeCacheCapable: false``) or only `node_names`
    (``true``). Raises ValueError unless exactly one of the two is given."""
    if (nodes is None) == (node_names is None):
        raise ValueError("ExtenderArgs carries nodes or node_names: exactly one")
    if node_names is not None:
        return {"Pod": pod, "Nodes": None, "NodeNames": list(node_names)}
    return {"Pod": pod, "Nodes": {"metadata": {}, "items": list(nodes or ())}, "NodeNames": None}


def encode_binding_args(pod: Mapping[str, Any], node: str) -> dict[str, str]:
    """ExtenderBindingArgs: bind the v1.Pod `pod` (its name, namespace and uid) to `node`."""
    meta = pod["metadata"]
    return {"PodName": meta["name"], "PodNamespace": meta["namespace"], "PodUID": meta["uid"],
            "Node": node}
