"""Lifecycle monitor: keeps the Redis queues true to the pods the API server reports.

`schedtune monitor` (its own process: a second container beside the
extender) lists and watches pods through the Kubernetes API, and for pods
annotated with ``schedtune.io/model``:

* bound to a node with no reservation (Redis lost, bound by someone else,
  reservation expired before bind confirmed): adopts one, from the
  reservation written on the pod at bind time (``schedtune.io/gpu``,
  ``reserved-mib``, ``predicted-seconds``), else from a fresh estimate on the
  node's roomiest GPU;
* running: records the start time, so remaining time is real;
* succeeded, failed, evicted or deleted: releases the reservation at once and
  appends an observation (model, task, batch, units, GPU type, seconds, OOM,
  outcome) for retraining;
* OOMKilled containers: counted once each, in Redis (`st:ooms`) and in
  ``schedtune_oom_kills_total``.

Every full listing (at start, after a 410, every ``EXTENDER_RECONCILE_S``)
also releases reservations whose pods no longer exist.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from estimator.errors import EstimatorError
from estimator.predict import Estimator, Job
from extender import logs
from extender.core.annotations import AnnotationError, parse_demand
from extender.metrics import ADOPTIONS, OOM_KILLS, RELEASES
from extender.model import (
    GPU, MODEL, PREDICTED_S, RESERVED_MIB, JobRecord, NodeState, PodInfo, type_of,
)  # fmt: skip
from extender.settings import Settings
from extender.state.store import RedisStore

log = logging.getLogger(__name__)
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


def _instant(text: Any) -> float:
    if not isinstance(text, str) or not text:
        return 0.0
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def pod_facts(pod: Mapping[str, Any]) -> PodFacts | None:
    """None for pods that are not ours (no ``schedtune.io/model``) or not readable."""
    meta = pod.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    if not isinstance(annotations, Mapping) or MODEL not in annotations or not meta.get("uid"):
        return None
    status = pod.get("status") or {}
    statuses = status.get("containerStatuses") or []
    started, finished, ooms = [], [], []
    for container in statuses:
        state = container.get("state") or {}
        if "running" in state:
            started.append(_instant(state["running"].get("startedAt")))
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
        annotations=annotations, node=(pod.get("spec") or {}).get("nodeName") or "",
        phase=status.get("phase", ""), reason=status.get("reason", ""),
        created_at=_instant(meta.get("creationTimestamp")),
        running_since=min((t for t in started if t > 0), default=0.0),
        finished_at=max(finished) if all_done else 0.0, oom_events=tuple(dict.fromkeys(ooms)),
    )  # fmt: skip


class Monitor:
    def __init__(self, store: RedisStore, estimator: Estimator | None = None,
                 clock: Callable[[], float] = time.time, grace_s: float = 60.0,
                 warn: Callable[[PodFacts, str, str], None] | None = None) -> None:
        self.store = store
        self.warn = warn  # posts a Warning event on the pod (kube.pod_event in a cluster)
        self.estimator = estimator
        self.clock = clock
        self.grace_s = grace_s  # reservations younger than this survive a listing without them

    def on_event(self, kind: str, pod: Mapping[str, Any]) -> None:
        facts = pod_facts(pod)
        if facts is None:
            return
        if kind == "DELETED":
            self._finish(facts, "deleted")
            return
        for event in facts.oom_events:
            if self.store.record_oom(event):
                OOM_KILLS.inc()
                log.error("OOM kill", extra={"pod": facts.name, "namespace": facts.namespace,
                                             "pod_uid": facts.uid, "node": facts.node})
                if self.warn:
                    self.warn(facts, "SchedTuneOOMKilled", "a container was OOM-killed on "
                              f"{facts.node}; the reservation was too small: report it")
        if facts.phase in FINISHED_PHASES:
            self._finish(facts, _outcome(facts))
            return
        if not facts.node:
            return  # pending: the extender's reservation, if any, expires by itself
        job = self.store.job(facts.uid)
        if job is None or job.node != facts.node:
            self._adopt(facts)
        if facts.running_since and (job is None or job.state != "running"):
            self.store.mark_running(facts.uid, facts.running_since)

    def reconcile(self, pods: list[dict[str, Any]]) -> None:
        """A full listing: apply every pod's state, release reservations of vanished pods."""
        listed_at = self.clock()
        live = set()
        for pod in pods:
            facts = pod_facts(pod)
            if facts is not None:
                live.add(facts.uid)
                self.on_event("ADDED", pod)
        for job in self.store.jobs():
            if job.uid not in live and job.reserved_at < listed_at - self.grace_s:
                if self.store.release(job.uid) is not None:
                    RELEASES.labels("vanished").inc()
                    log.info("released reservation of a vanished pod",
                             extra={"pod_uid": job.uid, "pod": job.pod, "node": job.node})

    def _finish(self, facts: PodFacts, outcome: str) -> None:
        released = self.store.release(facts.uid)
        if released is None:
            return
        RELEASES.labels(outcome).inc()
        if released.started_at <= 0:
            return
        ended = facts.finished_at or self.clock()
        self.store.record_observation({
            "uid": facts.uid, "model": released.model, "task": released.task,
            "batch": released.batch, "units": released.units, "gpu_type": released.gpu_type,
            "node": released.node, "seconds": round(max(0.0, ended - released.started_at), 3),
            "predicted_s": released.predicted_s, "reserved_mib": released.reserved_mib,
            "oom": int(bool(facts.oom_events)), "outcome": outcome,
        })  # fmt: skip

    def _adopt(self, facts: PodFacts) -> None:
        base = self._base(facts)
        node = self.store.snapshot({facts.node: None}, self.clock()).nodes[facts.node]
        record = None if base is None else (self._recorded(facts, base, node)
                                            or self._estimated(facts, base, node))
        if record is None:
            ADOPTIONS.labels("failed").inc()
            return
        status = self.store.adopt(record)
        ADOPTIONS.labels(status).inc()
        log.info("adopted bound pod", extra={"pod_uid": facts.uid, "pod": facts.name,
                                             "node": facts.node, "status": status})

    def _base(self, facts: PodFacts) -> dict[str, Any] | None:
        """The record's fields every adoption shares (None: annotations a user must fix)."""
        try:
            pod = PodInfo(facts.uid, facts.name, facts.namespace, facts.annotations)
            demand = parse_demand(pod)
        except AnnotationError as exc:
            log.warning("bound pod with bad annotations", extra={"pod_uid": facts.uid,
                                                                 "detail": str(exc)})
            return None
        assert demand is not None
        running = facts.running_since > 0
        return {"uid": facts.uid, "pod": facts.name, "namespace": facts.namespace,
                "model": demand.model, "task": demand.task, "node": facts.node,
                "state": "running" if running else "bound",
                "reserved_at": facts.created_at or self.clock(),
                "started_at": facts.running_since, "batch": demand.batch, "units": demand.units}

    @staticmethod
    def _recorded(facts: PodFacts, base: dict[str, Any], node: NodeState) -> JobRecord | None:
        """The reservation as the extender wrote it on the pod at bind time."""
        values = [facts.annotations.get(k) for k in (GPU, RESERVED_MIB, PREDICTED_S)]
        try:
            gpu, mib, predicted = int(values[0]), float(values[1]), float(values[2])
        except (TypeError, ValueError):
            return None
        if gpu < 0 or mib <= 0:
            return None
        gpu_type = type_of(node.gpus) if node.gpus else ""
        return JobRecord(**base, gpu_index=gpu, reserved_mib=mib, predicted_s=predicted,
                         gpu_type=gpu_type)

    def _estimated(self, facts: PodFacts, base: dict[str, Any],
                   node: NodeState) -> JobRecord | None:
        """No reservation recorded on the pod: estimate it on the node's roomiest GPU."""
        if node.gpus is None or not node.gpu_states or self.estimator is None:
            log.warning("cannot account a bound pod: node layout or estimator unknown",
                        extra={"pod_uid": facts.uid, "node": facts.node})
            return None
        job = Job(base["model"], base["task"], base["batch"], base["units"])
        try:
            if node.gpus.gpu_type:
                estimate = self.estimator.estimate(job, gpus=[node.gpus.gpu_type])[node.gpus.gpu_type]
            else:
                estimate = self.estimator.estimate_unknown(job)
        except EstimatorError as exc:
            log.warning("cannot estimate a bound pod", extra={"pod_uid": facts.uid,
                                                              "detail": str(exc)})
            return None
        roomiest = max(node.gpu_states, key=lambda g: (g.free_mib, -g.index))
        return JobRecord(**base, gpu_index=roomiest.index,
                         reserved_mib=round(estimate.padded_mib, 1),
                         predicted_s=round(estimate.predicted_s, 3), gpu_type=type_of(node.gpus))


def _outcome(facts: PodFacts) -> str:
    if facts.reason == "Evicted":
        return "evicted"
    if facts.oom_events and facts.phase == "Failed":
        return "oom"
    return facts.phase.lower()


def main(argv: list[str] | None = None) -> int:
    """Run the monitor (configured by the environment: see extender/settings.py)."""
    import argparse

    from prometheus_client import start_http_server

    from extender.cluster import kube
    from extender.state.embedded_redis import open_store

    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args(argv)
    settings = Settings.from_env(os.environ)
    logs.configure(settings.log_level)
    if not kube.load_config(settings.kubeconfig):
        print("error: no cluster configuration (in-cluster service account or KUBECONFIG); "
              "the monitor follows pods through the Kubernetes API", file=sys.stderr)
        return 2
    store = open_store(settings)

    def warn(facts: PodFacts, reason: str, message: str) -> None:
        kube.pod_event(facts.namespace, facts.name, facts.uid, reason, message)

    monitor = Monitor(store, Estimator.load(design=settings.estimator_design), warn=warn)
    start_http_server(settings.monitor_port)
    api = kube.client.CoreV1Api()
    log.info("monitor started", extra={"redis": settings.store_url.split("@")[-1],
                                       "reconcile_s": settings.reconcile_s})
    # Survives API trouble and Redis outages: a failed event triggers a re-list and reconcile.
    kube.watch_forever(api.list_pod_for_all_namespaces, monitor.reconcile, monitor.on_event,
                       threading.Event(), relist_every_s=settings.reconcile_s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
