"""What a GPU OOM kill teaches the monitor (`extender.core.oom`): the killed job type's floor
for the pod's namespace, within the bounds `RedisStore.raise_floor` keeps, and the growth
of the jobs beside it on its GPU."""

from __future__ import annotations

import logging
from collections.abc import Callable

from estimator.catalogue import CATALOGUE
from extender.core import oom
from extender.model import JobRecord, job_type
from extender.settings import Settings
from extender.state.records import MAX_FLOOR_MIB
from extender.state.store import RedisStore

log = logging.getLogger(__name__)


class OomLearning:
    def __init__(self, store: RedisStore, settings: Settings,
                 clock: Callable[[], float]) -> None:
        self.store, self.settings, self.clock = store, settings, clock

    def learn(self, uid: str, namespace: str) -> str:
        """After a GPU OOM of pod `uid` in `namespace`: raise its job type's floor for the
        namespace (every replica reserves at least that from its next request) and grow the
        jobs beside it; returns what to add to the pod's Warning."""
        job = self.store.job(uid)
        if job is None:
            return ": report it"  # not a reservation of ours
        if not job.model or not job.gpu_type or job.batch <= 0:
            return ": report it" + self.grow_beside(job)  # declared memory, or no type
        kind = job_type(job.model, job.task, job.batch, job.gpu_type)
        raised = self.store.raise_floor(kind, namespace, oom.next_floor(job.own_mib),
                                        self.largest_gpu_mib(job.gpu_type), self.clock(),
                                        self.settings.floor_window_s,
                                        self.settings.floor_raises)
        what = f"{job.model} {job.task} batch {job.batch} on {job.gpu_type}"
        if not raised.counted:
            log.warning("OOM floor not raised: the namespace's raises are spent",
                        extra={"namespace": namespace, "job_type": kind})
            return (f" ({job.own_mib:.0f} MiB); {what} was raised {self.settings.floor_raises}"
                    f" times in this namespace within {self.settings.floor_window_s:.0f} s:"
                    f" no more (it reserves {raised.namespace_mib:.0f} MiB here)")
        log.warning("OOM floor raised", extra={"model": job.model, "task": job.task,
                                               "batch": job.batch, "gpu_type": job.gpu_type,
                                               "namespace": namespace,
                                               "floor_mib": raised.namespace_mib,
                                               "everyone_mib": raised.everyone_mib})
        return (f" ({job.own_mib:.0f} MiB); {what} now reserves at least "
                f"{raised.namespace_mib:.0f} MiB in namespace {namespace}"
                f"{self.grow_beside(job)}")

    def largest_gpu_mib(self, gpu_type: str) -> float:
        """The most memory a GPU of the type has among the watched nodes (the catalogue's
        when none is watched): a floor above it would lock the job type out."""
        watched = [g.memory_mib for g in self.store.node_layouts().values()
                   if g.gpu_type == gpu_type and g.memory_mib > 0]
        if watched:
            return float(max(watched))
        known = CATALOGUE.get(gpu_type)
        return float(known.memory_mib) if known else MAX_FLOOR_MIB

    def grow_beside(self, job: JobRecord) -> str:
        """Grow the reservations of the jobs running beside a killed one, so that its GPU
        shows no more room than the killed job held (`RedisStore.grow_beside`): a floor
        protects its job type's next pod, this every pod, while the jobs that may have
        overrun still run. Returns what to add to the pod's Warning."""
        layout = self.store.node_layouts().get(job.node)
        if layout is None or layout.memory_mib <= 0:
            return ""
        grown = self.store.grow_beside(job, [layout.memory_of(i) for i in job.gpus],
                                       self.clock())
        if not grown:
            return ""
        log.warning("reservations grown beside an OOM kill",
                    extra={"node": job.node, "gpus": list(job.gpus), "grown_mib": grown})
        return (f"; the {len(grown)} job(s) beside it on {job.node} now reserve "
                f"{sum(grown.values()):.0f} MiB more")
