"""What the monitor reads from a pod as the API server serialises it (JSON dicts). Pure.

`pod_facts` reads a pod once into `PodFacts`: identity, annotations, node,
scheduler, phase, whether it is being deleted, when its containers ran and
which were OOM-killed; `outcome_of` names how a finished pod ended.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from extender.model import GPU_MEMORY, MODEL
from extender.wire.objects import controller_of, gpus_requested

FINISHED_PHASES = ("Succeeded", "Failed")


@dataclass(frozen=True)
class PodFacts:
    """What the monitor needs from a pod (the API's JSON), read once."""

    uid: str
    name: str
    namespace: str
    annotations: Mapping[str, Any]
    node: str
    phase: str
    reason: str
    created_at: float
    running_since: float  # 0 until a container runs
    finished_at: float  # 0 until every container terminated
    oom_events: tuple[str, ...]  # one id per OOM-killed container instance
    scheduler: str = ""  # spec.schedulerName
    deleting: bool = False  # metadata.deletionTimestamp set: the pod is going
    gpus: int = 0  # nvidia.com/gpu its containers request
    owner: str = ""  # kind/name of its controller


def _instant(text: Any) -> float:
    if not isinstance(text, str) or not text:
        return 0.0
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def pod_uid(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") if isinstance(pod, Mapping) else None
    return str(meta.get("uid") or "") if isinstance(meta, Mapping) else ""


def pod_facts(pod: Mapping[str, Any]) -> PodFacts | None:
    """None for pods that are not ours (neither ``schedtune.io/model`` nor
    ``schedtune.io/gpu-memory``) or not readable."""
    meta = pod.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    if (not isinstance(annotations, Mapping) or not meta.get("uid")
            or (MODEL not in annotations and GPU_MEMORY not in annotations)):
        return None
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    statuses = status.get("containerStatuses") or []
    started, finished, ooms = [], [], []
    for container in statuses:
        state = container.get("state") or {}
        if "running" in state:
            started.append(_instant((state["running"] or {}).get("startedAt")))
        terminated = state.get("terminated")
        if terminated:
            started.append(_instant(terminated.get("startedAt")))
            finished.append(_instant(terminated.get("finishedAt")))
        for term in (terminated, (container.get("lastState") or {}).get("terminated")):
            if term and term.get("reason") == "OOMKilled":
                instance = term.get("containerID") or f"{term.get('finishedAt')}"
                ooms.append(f"{meta['uid']}/{container.get('name')}/{instance}")
    all_done = bool(statuses) and len(finished) == len(statuses)
    return PodFacts(
        uid=meta["uid"], name=meta.get("name", ""), namespace=meta.get("namespace", "default"),
        annotations=annotations, node=spec.get("nodeName") or "",
        phase=status.get("phase", ""), reason=status.get("reason", ""),
        created_at=_instant(meta.get("creationTimestamp")),
        running_since=min((t for t in started if t > 0), default=0.0),
        finished_at=max(finished) if all_done else 0.0, oom_events=tuple(dict.fromkeys(ooms)),
        scheduler=str(spec.get("schedulerName") or ""),
        deleting=bool(meta.get("deletionTimestamp")),
        gpus=_gpus(spec), owner=controller_of(meta),
    )  # fmt: skip


def _gpus(spec: Any) -> int:
    try:
        return gpus_requested(spec)
    except ValueError:
        return 0  # the API server admitted it: count it as sharing one GPU


def outcome_of(facts: PodFacts) -> str:
    if facts.reason == "Evicted":
        return "evicted"
    if facts.oom_events and facts.phase == "Failed":
        return "oom"
    return facts.phase.lower()
