"""Volcano's extender-plugin wire format (pkg/scheduler/plugins/extender/argument.go).

Requests carry json tags in lower case, while the embedded ``TaskInfo`` and
``NodeInfo`` have none, so their keys are Go field names (``UID``, ``Name``,
``Namespace``, ``NodeName``, ``Pod``, ``Node``):

* predicate  ``{"task", "node"}`` -> ``{"status": message, "code": int}``; codes follow
  Volcano's status codes: 0 Success, 2 Unschedulable, 3 UnschedulableAndUnresolvable.
* prioritize ``{"task", "nodes"}`` -> ``{"nodeScore": {node: float}, "errorMessage"}``.
* allocateFunc / deallocateFunc ``{"task"}`` (TaskInfo with ``NodeName``): Volcano
  placed or removed the task; we record or release its reservation.
* jobReady ``{"job"}`` (JobInfo: ``Namespace``, ``Name``, the PodGroup's) ->
  ``{"status": bool}``: whether the job may start.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from extender.errors import BadRequest
from extender.model import NodeGpus, PodInfo, Verdict
from extender.wire.objects import (
    DNS_LABEL, POD_UID, NodeLayouts, decode_node, decode_pod, require_name, require_object,
)  # fmt: skip

CODE_SUCCESS = 0
CODE_ERROR = 1
CODE_UNSCHEDULABLE = 2
CODE_UNRESOLVABLE = 3
MAX_NODE_SCORE = 100.0  # Volcano's node-order scores are 0..100


@dataclass(frozen=True)
class TaskArgs:
    pod: PodInfo
    node_name: str


def decode_task(task: Any) -> TaskArgs:
    task = require_object(task, "task")
    pod_obj = task.get("Pod")
    if pod_obj is not None:
        pod = decode_pod(pod_obj)
    else:
        pod = PodInfo(uid=require_name(task.get("UID"), "task.UID", POD_UID),
                      name=require_name(task.get("Name"), "task.Name"),
                      namespace=require_name(task.get("Namespace"), "task.Namespace", DNS_LABEL,
                                             required=False) or "default")  # fmt: skip
    return TaskArgs(pod, require_name(task.get("NodeName"), "task.NodeName", required=False))


def _node_info(info: Any, where: str, layouts: NodeLayouts | None) -> tuple[str, NodeGpus]:
    info = require_object(info, where)
    node = info.get("Node")
    if node is None:
        raise BadRequest(f"{where}.Node (the v1.Node object) is required")
    return decode_node(node, f"{where}.Node", layouts)


def decode_predicate(body: Any, layouts: NodeLayouts | None = None
                     ) -> tuple[PodInfo, dict[str, NodeGpus | None]]:
    body = require_object(body, "body")
    name, gpus = _node_info(body.get("node"), "node", layouts)
    return decode_task(body.get("task")).pod, {name: gpus}


def decode_prioritize(body: Any, layouts: NodeLayouts | None = None
                      ) -> tuple[PodInfo, dict[str, NodeGpus | None]]:
    body = require_object(body, "body")
    nodes = body.get("nodes") or []
    if not isinstance(nodes, list):
        raise BadRequest("nodes must be a list of NodeInfo")
    decoded = dict(_node_info(n, f"nodes[{i}]", layouts) for i, n in enumerate(nodes))
    return decode_task(body.get("task")).pod, dict(decoded)


def decode_event(body: Any) -> TaskArgs:
    args = decode_task(require_object(body, "body").get("task"))
    if not args.node_name:
        raise BadRequest("task.NodeName is required for allocate/deallocate events")
    return args


def encode_predicate(verdict: Verdict) -> dict[str, Any]:
    if verdict.fits:
        return {"status": "", "code": CODE_SUCCESS}
    code = CODE_UNRESOLVABLE if verdict.unresolvable else CODE_UNSCHEDULABLE
    return {"status": verdict.reason, "code": code}


def encode_predicate_error(message: str) -> dict[str, Any]:
    return {"status": message, "code": CODE_ERROR}


def encode_prioritize(scores: Mapping[str, float], error: str = "") -> dict[str, Any]:
    return {"nodeScore": {n: MAX_NODE_SCORE * s for n, s in scores.items()},
            "errorMessage": error}  # fmt: skip


# --- request encoders (what the scheduler sends) --------------------------------------------

TASK_PENDING = 1  # TaskStatus Pending, 1 << 0 in every release (later bits moved: Borrowing)


def encode_task_info(pod: Mapping[str, Any], node_name: str = "", *, job: str | None = None,
                     status: int = TASK_PENDING) -> dict[str, Any]:
    """api.TaskInfo as Volcano marshals it (Go field names): the v1.Pod `pod`, its identity,
    `job` (the JobID, namespace/name; the pod's own by default), `node_name` ("" until
    Volcano allocates it) and the TaskStatus bit `status`. The extender reads only the
    identity, NodeName and Pod."""
    meta = pod["metadata"]
    return {"UID": meta["uid"], "Job": job or f"{meta['namespace']}/{meta['name']}",
            "Name": meta["name"], "Namespace": meta["namespace"], "NodeName": node_name,
            "Status": status, "Pod": pod}


def encode_node_info(node: Mapping[str, Any]) -> dict[str, Any]:
    """api.NodeInfo: the v1.Node `node` under its name, in the Ready phase."""
    return {"Name": node["metadata"]["name"], "Node": node, "State": {"Phase": "Ready"}}


def encode_predicate_request(pod: Mapping[str, Any], node: Mapping[str, Any]) -> dict[str, Any]:
    """PredicateRequest ``{"task", "node"}``: may the pending `pod` run on `node`?"""
    return {"task": encode_task_info(pod), "node": encode_node_info(node)}


def encode_prioritize_request(pod: Mapping[str, Any],
                              nodes: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """PrioritizeRequest ``{"task", "nodes"}``: score `nodes` for the pending `pod`."""
    return {"task": encode_task_info(pod), "nodes": [encode_node_info(n) for n in nodes]}


def encode_event_request(pod: Mapping[str, Any], node_name: str) -> dict[str, Any]:
    """The allocate / deallocate event ``{"task"}``: `pod` placed on (or taken off) `node_name`."""
    return {"task": encode_task_info(pod, node_name)}


def decode_job(body: Any) -> tuple[str, str]:
    """A jobReady request's job: (namespace, name of its PodGroup)."""
    job = require_object(require_object(body, "body").get("job"), "job")
    namespace = require_name(job.get("Namespace"), "job.Namespace", DNS_LABEL, required=False)
    return namespace or "default", require_name(job.get("Name"), "job.Name")


def encode_job_ready(ready: bool) -> dict[str, Any]:
    return {"status": ready}


def encode_job_info(namespace: str, name: str, min_available: int) -> dict[str, Any]:
    """api.JobInfo as a jobReady request carries it (Go field names; the PodGroup's name)."""
    return {"UID": f"{namespace}/{name}", "Name": name, "Namespace": namespace,
            "MinAvailable": min_available}
