"""Lifecycle monitor: keeps the Redis queues true to the pods the API server reports.

`schedtune monitor` (its own process: a second container beside the
extender) lists and watches pods through the Kubernetes API, and for pods
annotated with ``schedtune.io/model``:

* bound with no reservation (Redis lost, reservation expired before bind
  confirmed), placed by our scheduler (``spec.schedulerName``): adopts one. The
  reservation bind wrote on the pod is taken only when its signature verifies
  and it fits the node (`extender.core.adoption`), else estimated again; a pod
  that does not fit its GPU is recorded anyway (it is there), posted as a
  Warning event and counted;
* reserved but unconfirmed (Volcano's allocate) and seen bound there: confirms it;
* running: records the start time, so remaining time is real;
* succeeded, failed, evicted, being deleted (``deletionTimestamp``) or deleted:
  releases the reservation at once, updates each waiting pod that now fits on
  the freed GPU (``schedtune.io/requeued-at``: kube-scheduler retries it now),
  and appends an observation (model, task, batch, units, GPU type, GPUs, start,
  seconds, OOM, outcome) for retraining; after a success, refits each GPU type's
  collocation slowdown from the latest runs (`extender.core.interference`) and
  publishes it for every worker's next decision;
* containers that ran out of GPU memory (`extender.cluster.pods`: their exit and
  termination message say so): counted once each (`st:ooms`,
  ``schedtune_oom_kills_total``), and the killed job's type (model, task, batch, GPU
  type) never gets the same reservation again in the pod's namespace: its floor in Redis
  rises above what was reserved (`core.oom`, bounded: `RedisStore.raise_floor`), and the
  jobs still running beside it grow their reservations until its GPU shows no more room
  than the killed job held (one of them may have overrun: nobody can tell), as far as
  the kill was within its namespace's budget of raises;
* under HAMi (`EXTENDER_NODE_AGENT=hami`), a pod whose device plugin answered
  ``bind-phase: failed``, or has not answered within ``EXTENDER_AGENT_TIMEOUT_S``: its
  reservation and HAMi's node lock are released, and a Warning says why;
* ``OOMKilled`` containers (the RAM limit): counted (``schedtune_ram_kills_total``) and
  warned of; no GPU floor rises and no neighbour grows;

Its second thread (`extender.cluster.events`) posts the decisions the extender logs
(reserved, waiting, a GPU held) and the releases logged here as Events on the pods.

Every full listing (at start, after a 410, every ``EXTENDER_RECONCILE_S``)
also releases reservations whose pods no longer exist. A pod that cannot be
applied is logged and skipped; only an unreachable Redis stops a listing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from estimator.predict import Estimator
from extender.cluster.adopter import Adopter
from extender.cluster.oom_learning import OomLearning
from extender.cluster.pods import FINISHED_PHASES, PodFacts, outcome_of, pod_facts, pod_uid
from extender.core import decisions
from extender.core.adoption import waiters_that_fit
from extender.core.time_bias import learn_time_biases, owner_key
from extender.core.interference import (
    Alphas, company, learn_alphas, runs_from_jobs, runs_from_observations,
)  # fmt: skip
from extender.errors import StoreRefused, StoreUnavailable
from extender.metrics import (
    MONITOR_POD_ERRORS, OOM_KILLS, RAM_KILLS, RELEASES, WAITERS_REQUEUED, observe_prediction,
)  # fmt: skip
from extender.model import JobRecord, job_type
from extender.registry import ModelRegistry
from extender.settings import Settings
from extender.sizing import Sizer
from extender.wire import gpushare, hami
from extender.state.gang_store import GANG_PLACEHOLDER
from extender.state.store import RedisStore

log = logging.getLogger(__name__)
LEARN_FROM_RUNS = 2000  # the latest observations each refit of the collocation slowdown reads
# (namespace, name, uid, now): update the waiting pod so kube-scheduler retries it now.
Requeue = Callable[[str, str, str, float], None]


class Monitor:
    """`settings`: the scheduler whose pods are adopted, the key that signs reservations,
    the collocation limits. `warn(facts, reason, message)` posts a Warning event on the
    pod; `requeue` updates a waiting pod (both best effort, logged when they fail)."""

    def __init__(self, store: RedisStore, estimator: Estimator | None = None,
                 clock: Callable[[], float] = time.time, grace_s: float = 60.0,
                 warn: Callable[[PodFacts, str, str], None] | None = None,
                 settings: Settings | None = None, requeue: Requeue | None = None,
                 unlock: Callable[[str, str, str], object] | None = None) -> None:
        self.store = store
        self.unlock = unlock  # (node, namespace, pod): drop HAMi's node lock if the pod's
        self.warn = warn  # kube.pod_event in a cluster
        self.requeue = requeue  # a pod patch in a cluster
        self.estimator = estimator
        self.clock = clock
        self.grace_s = grace_s  # reservations younger than this survive a listing without them
        self.settings = settings or Settings()
        self.sizer = None if estimator is None else Sizer(estimator,
                                                          self.settings.declared_default_s)
        self.registry = None if self.sizer is None else ModelRegistry(store, self.sizer)
        self.oom = OomLearning(store, self.settings, clock)
        self.adopter = Adopter(store, self.sizer, self.registry, self.settings, clock,
                               self._warn)

    def on_event(self, kind: str, pod: Mapping[str, Any]) -> None:
        """Apply one pod's state. A pod that cannot be applied is logged and counted
        (`schedtune_reservations_adopted_total{status="error"}`), never raised, so one bad
        pod never stops the others; only `StoreUnavailable` propagates (re-list later)."""
        self._isolated(self._apply, kind, pod)

    def reconcile(self, pods: list[dict[str, Any]]) -> None:
        """A full listing: apply every pod's state, release reservations of vanished pods."""
        listed_at = self.clock()
        live = set()
        for pod in pods:
            live.add(pod_uid(pod))
            self.on_event("ADDED", pod)
        for job in self.store.jobs():
            if job.uid.startswith(GANG_PLACEHOLDER):
                continue  # a gang plan's slot no pod took yet: it expires with the plan
            if job.uid not in live and job.reserved_at < listed_at - self.grace_s:
                self._isolated(self._release_vanished, job)

    def _isolated(self, handler: Callable[..., None], *args: Any) -> None:
        try:
            handler(*args)
        except StoreUnavailable as exc:
            if not isinstance(exc, StoreRefused):  # unreachable: stop, the caller retries
                raise
            self._skipped(args[-1])  # refused for one key (a wrong type): skip that pod
        except Exception:  # noqa: BLE001  (bad data in one pod or record: skip it, go on)
            self._skipped(args[-1])

    def _skipped(self, subject: Any) -> None:
        MONITOR_POD_ERRORS.inc()
        uid = subject.uid if isinstance(subject, JobRecord) else pod_uid(subject)
        log.exception("could not apply a pod's state; skipped", extra={"pod_uid": uid})

    def _apply(self, kind: str, pod: Mapping[str, Any]) -> None:
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
                self._warn(facts, "SchedTuneOOMKilled", "a container ran out of GPU memory on "
                           f"{facts.node}; the reservation was too small"
                           f"{self.oom.learn(facts.uid, facts.namespace)}")
        for event in facts.ram_kills:
            if self.store.record_oom(f"ram:{event}"):
                RAM_KILLS.inc()
                self._warn(facts, "SchedTuneRAMKilled", "a container was OOM-killed by its "
                           f"memory limit (RAM) on {facts.node}: raise the container's memory "
                           "limit; the GPU reservation is not changed by it")
        if facts.phase in FINISHED_PHASES:
            self._finish(facts, outcome_of(facts))
            return
        if self._handover_failed(facts):
            return
        if facts.deleting:  # now, before the DELETED event at which waiting pods are retried
            self._finish(facts, "deleted")
            return
        if not facts.node:
            return  # pending: the extender's reservation, if any, expires by itself
        job = self.store.job(facts.uid)
        if job is not None and job.node == facts.node and (
                job.expires_at <= 0
                or self.store.confirm_placement(facts.uid, facts.node, self.clock())):
            pass  # counted where it runs (an allocation bound by Volcano now confirmed)
        elif facts.scheduler != self.settings.scheduler_name:
            return  # placed by another scheduler: never adopted
        else:
            self.adopter.adopt(facts)
        if facts.running_since and (job is None or job.state != "running"):
            self.store.mark_running(facts.uid, facts.running_since)

    def _handover_failed(self, facts: PodFacts) -> bool:
        """The node agent's device plugin (HAMi's, or Volcano's GPU-share one) answered
        ``failed``, or did not answer in time: release the
        reservation and the node lock (when still the pod's), and say why on the pod. The
        pod is bound: its kubelet fails it, and its controller's next pod is placed anew.
        True for such a pod, also once released (it is never adopted again, unless its
        containers run: then it holds its GPUs, and is adopted like any bound pod)."""
        if self.settings.node_agent == "none":
            return False
        if facts.running_since:  # its containers run: handed over, whatever the pod says
            self.store.handover_answered(facts.uid)
            return False
        protocol = gpushare if self.settings.node_agent == "volcano" else hami
        outcome = protocol.allocation_outcome(facts.annotations, self.clock(),
                                              self.settings.agent_timeout_s)
        if outcome == "success":
            self.store.handover_answered(facts.uid)
        if outcome not in ("failed", "unanswered"):
            return False
        if self.store.job(facts.uid) is None:
            return True
        self._finish(facts, f"allocation-{outcome}")
        self.store.handover_answered(facts.uid)
        if self.unlock is not None and protocol is hami:
            self.unlock(facts.node, facts.namespace, facts.name)
        said = ("answered failed" if outcome == "failed" else
                f"did not answer within {self.settings.agent_timeout_s:.0f} s")
        agent = "Volcano's" if protocol is gpushare else "HAMi's"
        self._warn(facts, "SchedTuneAllocationFailed", f"{agent} device plugin on {facts.node} "
                   f"{said} handing over the reserved GPUs; the reservation is released")
        return True

    def check_handovers(self, read_pod: Callable[[str, str], Mapping[str, Any] | None]) -> int:
        """Look again at each pod whose node agent should have answered by now (no event
        may come for a pod whose hand-over hangs); `read_pod(namespace, name)` is the API's
        pod (None: gone). Returns how many were looked at."""
        overdue = self.store.overdue_handovers(self.clock() - self.settings.agent_timeout_s)
        for uid in overdue:
            job = self.store.job(uid)
            if job is None:
                self.store.handover_answered(uid)  # released meanwhile
                continue
            pod = read_pod(job.namespace, job.pod)
            if pod is None or pod_uid(pod) != uid:
                self._isolated(self._release_vanished, job)
                self.store.handover_answered(uid)
            else:
                self.on_event("MODIFIED", pod)
        return len(overdue)

    def _release_vanished(self, job: JobRecord) -> None:
        released = self.store.release(job.uid)
        if released is not None:
            RELEASES.labels("vanished").inc()
            log.info("released reservation of a vanished pod",
                     extra={"pod_uid": job.uid, "pod": job.pod, "node": job.node})
            self._requeue_waiters(released)

    def _finish(self, facts: PodFacts, outcome: str) -> None:
        if facts.gang and self.store.gangs.release(facts.gang, only_partial=True) > 0:
            log.info("gang plan released: it lost a member before it was whole",
                     extra={"gang": facts.gang, "pod": facts.name, "outcome": outcome})
        released = self.store.release(facts.uid)
        if released is None:
            return
        RELEASES.labels(outcome).inc()
        self._requeue_waiters(released)
        self.store.tell(decisions.released(released, outcome), self.clock(),
                        self.settings.decision_repeat_s)
        if released.started_at <= 0:
            return
        ended = facts.finished_at or self.clock()
        seconds = max(0.0, ended - released.started_at)
        if outcome == "succeeded":  # a run cut short would read as a wrong prediction
            observe_prediction(seconds, released.predicted_s)
            if not released.model and facts.owner:  # times its owner's next declared pods
                self.store.record_owner_run(owner_key(facts.namespace, facts.owner), seconds)
        self.store.record_observation({
            "uid": facts.uid, "model": released.model, "task": released.task,
            "batch": released.batch, "units": released.units, "gpu_type": released.gpu_type,
            "node": released.node, "gpus": ",".join(map(str, released.gpus)),
            "started_at": released.started_at, "seconds": round(seconds, 3),
            "predicted_s": round(released.predicted_s / released.time_factor, 3),  # estimate
            "reserved_mib": released.own_mib,
            "oom": int(bool(facts.oom_events)), "outcome": outcome,
            "owner": owner_key(facts.namespace, facts.owner),
        })  # fmt: skip
        if outcome == "succeeded" and released.model:
            if released.gpu_type and released.batch > 0:  # the floor's raises start again
                self.store.floor_held(job_type(released.model, released.task, released.batch,
                                               released.gpu_type), facts.namespace, ended)
            self._learn_interference()

    def _learn_interference(self) -> None:
        """Refit each GPU type's collocation slowdown from the latest runs and the jobs
        running beside them, and publish it (`RedisStore.set_alphas`)."""
        runs = [*runs_from_observations(self.store.recent_observations(LEARN_FROM_RUNS)),
                *runs_from_jobs(self.store.jobs(), self.clock())]
        priors = Alphas(self.settings.interference_alpha, {}, self.settings.interference_priors)
        beside = company(runs)
        fits = learn_alphas(runs, priors.of_type, beside)
        learned = Alphas(priors.default, {t: f.alpha for t, f in fits.items()}, priors.priors)
        biases = learn_time_biases(runs, learned.of_type, beside)
        self.store.set_alphas(fits.values(), biases)
        if fits:
            log.debug("collocation slowdowns refitted",
                      extra={"alphas": {t: f.alpha for t, f in fits.items()}})

    def _requeue_waiters(self, released: JobRecord) -> None:
        """Update each waiting pod that now fits on a GPU `released` freed, oldest first,
        once: kube-scheduler moves an unschedulable pod back to its queue on an update.
        Best effort: a failure is logged and never undoes or delays the release."""
        if self.requeue is None or released.gpu_index < 0:
            return
        try:
            now = self.clock()
            snap = self.store.snapshot({released.node: None}, now)
            fitting = list({w.uid: w for index in released.gpus for w in waiters_that_fit(
                snap.nodes[released.node], index, snap.waiting, self.settings.collocation)
            }.values())
        except Exception as exc:  # noqa: BLE001
            log.warning("could not look for waiting pods to requeue: %s", type(exc).__name__,
                        extra={"node": released.node, "gpu": released.gpu_index})
            return
        for waiter in fitting:
            namespace, _, name = waiter.pod.partition("/")
            # A gang waits as one waiter, named for the member filtered last: that member.
            uid = "" if waiter.uid.startswith(GANG_PLACEHOLDER) else waiter.uid
            try:
                self.requeue(namespace, name, uid, now)
            except Exception as exc:  # noqa: BLE001
                WAITERS_REQUEUED.labels("failed").inc()
                log.warning("could not requeue a waiting pod: %s", type(exc).__name__,
                            extra={"pod": waiter.pod, "pod_uid": waiter.uid})
                continue
            WAITERS_REQUEUED.labels("requeued").inc()
            log.info("requeued a waiting pod that now fits", extra={
                "pod": waiter.pod, "pod_uid": waiter.uid, "node": released.node,
                "gpu": released.gpu_index, "released": released.uid})

    def _warn(self, facts: PodFacts, reason: str, message: str) -> None:
        if self.warn is None:
            return
        try:
            self.warn(facts, reason, message)
        except Exception as exc:  # noqa: BLE001  (an event is best effort)
            log.warning("could not post event %s: %s", reason, type(exc).__name__,
                        extra={"pod_uid": facts.uid})
