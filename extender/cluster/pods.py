"""What the monitor reads from a pod as the API server serialises it (JSON dicts). Pure.

`pod_facts` reads a pod once into `PodFacts`: identity, annotations, node,
scheduler, phase, whether it is being deleted, when its containers ran, which ran out
of GPU memory and which the kernel killed for RAM; `outcome_of` names how a finished
pod ended.

Which is which, as a container's termination says it:

* a **GPU OOM** is an ordinary error exit (exit code not 0) whose termination message
  names a device allocation failure: PyTorch's ``torch.OutOfMemoryError`` ("CUDA out of
  memory"; older releases ``torch.cuda.OutOfMemoryError`` or a ``RuntimeError`` with that
  text), TensorFlow's ``ResourceExhaustedError`` ("OOM when allocating tensor"), JAX's /
  XLA's ``RESOURCE_EXHAUSTED: Out of memory``, or HAMi-core's own refusal
  (``[HAMI-core ERROR ...]: Device N OOM used / limit``). The message is the container's
  ``/dev/termination-log``, or with ``terminationMessagePolicy: FallbackToLogsOnError``
  the tail of its log when it wrote none (what the examples in k8s/ set);
* ``reason: OOMKilled`` is the kernel's cgroup killer: the container outgrew its RAM
  limit. It says nothing about GPU memory.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from extender.wire.gangs import group_of
from extender.model import GPU_MEMORY, MODEL
from extender.wire.cpu import cpu_requested
from extender.wire.objects import controller_of, gpus_requested

FINISHED_PHASES = ("Succeeded", "Failed")
GPU_OOM_MESSAGE = re.compile(
    r"CUDA out of memory|OutOfMemoryError"  # PyTorch (torch.OutOfMemoryError and older)
    r"|OOM when allocating tensor|ResourceExhaustedError"  # TensorFlow
    r"|RESOURCE_EXHAUSTED: Out of memory"  # JAX / XLA
    r"|HAMI-core ERROR[^\n]*Device \d+ OOM")  # HAMi-core's limit inside the container


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
    oom_events: tuple[str, ...]  # one id per container instance that ran out of GPU memory
    scheduler: str = ""  # spec.schedulerName
    deleting: bool = False  # metadata.deletionTimestamp set: the pod is going
    gpus: int = 0  # nvidia.com/gpu its containers request
    owner: str = ""  # kind/name of its controller
    ram_kills: tuple[str, ...] = ()  # one id per container instance OOMKilled (RAM limit)
    gang: str = ""  # namespace/name of the gang it is a member of ("" none)
    cpu_milli: int = 0  # CPU it requests of its node, millicores


def _instant(text: Any) -> float:
    if not isinstance(text, str) or not text:
        return 0.0
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def _gang(meta: dict[str, Any], spec: Any) -> str:
    """namespace/name of the pod's gang; "" for none, or a reference that is not one (its
    filter refused it: no plan of it exists)."""
    try:
        group = group_of(meta, spec)
    except ValueError:
        return ""
    return f"{meta.get('namespace', 'default')}/{group.name}" if group is not None else ""


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
    started, finished, ooms, ram = [], [], [], []
    for container in statuses:
        state = container.get("state") or {}
        if "running" in state:
            started.append(_instant((state["running"] or {}).get("startedAt")))
        terminated = state.get("terminated")
        if terminated:
            started.append(_instant(terminated.get("startedAt")))
            finished.append(_instant(terminated.get("finishedAt")))
        for term in (terminated, (container.get("lastState") or {}).get("terminated")):
            kind = termination_kind(term)
            if kind:
                instance = term.get("containerID") or f"{term.get('finishedAt')}"
                (ooms if kind == "gpu-oom" else ram).append(
                    f"{meta['uid']}/{container.get('name')}/{instance}")
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
        gpus=_gpus(spec), owner=controller_of(meta), ram_kills=tuple(dict.fromkeys(ram)),
        gang=_gang(meta, spec), cpu_milli=cpu_requested(spec),
    )  # fmt: skip


def termination_kind(terminated: Any) -> str:
    """"gpu-oom", "ram-oom" or "" for a container's ``terminated`` state (module docstring)."""
    if not isinstance(terminated, Mapping):
        return ""
    if terminated.get("reason") == "OOMKilled":
        return "ram-oom"
    message = terminated.get("message")
    if terminated.get("exitCode") not in (0, None) and isinstance(message, str) \
            and GPU_OOM_MESSAGE.search(message):
        return "gpu-oom"
    return ""


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
    if facts.ram_kills and facts.phase == "Failed":
        return "ram-oom"
    return facts.phase.lower()
