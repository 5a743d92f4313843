"""Prometheus metrics. Correct under gunicorn's worker processes: gunicorn.conf.py sets
PROMETHEUS_MULTIPROC_DIR before the workers start, and `/metrics` then aggregates
every worker's files through `MultiProcessCollector`.

Counters and histograms count what a process did. What the cluster holds (capacity,
reservations, jobs, waiting pods) is in Redis, not in any process, so `StateCollector`
reads it at scrape time. Labels are verbs, outcomes, reason kinds, GPU types and job
states: never pods, nodes or UIDs (/metrics is open to the token; extender/web/auth.py).
docs/observability.md lists every metric.
"""

from __future__ import annotations

import math
import os
import time
from collections import Counter as Tally
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

from prometheus_client import (
    CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, Counter, Histogram, generate_latest,
    multiprocess,
)  # fmt: skip
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from extender.by_node import refused_items
from extender.core.queue_report import queue_report
from extender.errors import StoreUnavailable
from extender.model import Limits, type_of

if TYPE_CHECKING:
    from extender.core.filtering import FilterDecision
    from extender.state.store import RedisStore

REQUEST_SECONDS = Histogram(
    "schedtune_extender_request_seconds", "Latency per verb", ["verb"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
)  # fmt: skip
AFTER_ANSWER_SECONDS = Histogram(
    "schedtune_extender_after_answer_seconds",
    "Work a worker does once a verb's answer is sent, before its next request", ["verb"],
    buckets=(0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1),
)  # fmt: skip
FILTER_DENIALS = Counter("schedtune_filter_denials_total", "Nodes refused by filter", ["reason"])
PASSTHROUGH = Counter("schedtune_passthrough_total", "Pods without schedtune.io/model", ["verb"])
ERRORS = Counter("schedtune_extender_errors_total", "Requests answered with an error",
                 ["verb", "kind"])
BINDS = Counter("schedtune_binds_total", "Bind outcomes", ["outcome"])
REGISTRY_RELOADS = Counter("schedtune_registry_reloads_total", "Times a worker followed a "
                           "change of the model registry (entries read: those that changed)")
REGISTRY_UNUSABLE = Counter("schedtune_registry_unusable_entries_total", "Registry entries a "
                            "worker skipped, once per entry and revision (`/readyz` names them)")
# The monitor's (its own process, served on EXTENDER_MONITOR_PORT).
OOM_KILLS = Counter("schedtune_oom_kills_total", "Containers of annotated pods that ran out of "
                    "GPU memory (exit and termination message)")
RAM_KILLS = Counter("schedtune_ram_kills_total", "Containers of annotated pods OOMKilled by "
                    "their RAM limit (no GPU floor raised)")
RELEASES = Counter("schedtune_reservations_released_total", "Reservations released by the "
                   "monitor", ["outcome"])
ADOPTIONS = Counter("schedtune_reservations_adopted_total", "Bound pods given a reservation "
                    "by the monitor", ["status"])
ADOPTION_OVERCOMMITS = Counter("schedtune_adoption_overcommit_total", "Bound pods adopted on a "
                               "GPU without room for them (counted in full, a Warning event)")
ADOPTIONS_UNVERIFIED = Counter("schedtune_adoption_unverified_total", "Reservations written on "
                               "pods that did not verify (unsigned, forged or out of range): "
                               "estimated again")
MONITOR_POD_ERRORS = Counter("schedtune_monitor_pod_errors_total", "Pods or records the monitor "
                             "could not apply (skipped; the others go on)")
WAITERS_REQUEUED = Counter("schedtune_waiters_requeued_total", "Waiting pods updated so "
                           "kube-scheduler retries them after a release", ["outcome"])
EVENTS = Counter("schedtune_events_total", "Kubernetes events the monitor posts on pods "
                 "(outcome: posted, dropped, failed)", ["reason", "outcome"])
PREDICTION_ERROR = Histogram(
    "schedtune_prediction_error_ratio", "Observed / predicted, per finished run "
    "(1 = exact; above 1: the run took longer than predicted)", ["target"],
    buckets=(0.25, 0.5, 0.67, 0.8, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0, 4.0),
)  # fmt: skip
NO_LAYOUT = "no-layout"  # the gpu_type label of reservations on nodes the watcher never saw
STATE_UP_HELP = "1 when the state in Redis could be read for this scrape, else 0"


def denial_kind(reason: str) -> str:
    """A low-cardinality label for a filter reason (the reason itself names nodes and MiB)."""
    for key, kind in (("collocation limit", "collocation_limit"), ("MiB free", "memory"),
                      ("more than the", "exceeds_gpu"), ("schedtune.io/", "annotation"),
                      ("model", "unknown_model"), ("label", "gpu_labels"),
                      ("node unknown", "unknown_node")):  # fmt: skip
        if key in reason:
            return kind
    return "other"


def record_denials(reasons: Iterable[str]) -> None:
    """Count refused nodes by kind: one metric update per kind, not per node."""
    by_kind: Tally[str] = Tally()
    for reason, count in Tally(reasons).items():
        by_kind[denial_kind(reason)] += count
    for kind, count in by_kind.items():
        FILTER_DENIALS.labels(kind).inc(count)


def count_filter(verb: str, decision: FilterDecision) -> None:
    """Count a filter or predicate answer: a pass-through pod, or its refused nodes by kind."""
    if decision.passthrough:
        PASSTHROUGH.labels(verb).inc()
    record_denials(v.reason for _, v in refused_items(decision.verdicts))


def observe_prediction(observed_s: float, predicted_s: float) -> None:
    """Record one finished run's time against its prediction (the monitor's, on release).
    A non-finite or non-positive value (a run never timed, a broken record) is ignored."""
    if not (observed_s > 0 and predicted_s > 0):  # False for NaN too
        return
    ratio = observed_s / predicted_s
    if math.isfinite(ratio) and ratio > 0:
        PREDICTION_ERROR.labels("time").observe(ratio)


class StateCollector(Collector):
    """The shared state as gauges, read from Redis at each scrape: per GPU type, capacity,
    reserved MiB (live reservations only: expired ones are not counted), GPUs and jobs by
    state; waiting pods; and `schedtune_state_up`. Every replica reports the same values,
    so aggregate them with `max`, never `sum`.

    Redis unreachable: only `schedtune_state_up 0`, never an exception, so a scrape still
    returns the process's own metrics.
    """

    def __init__(self, store: RedisStore, limits: Limits,
                 clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.limits = limits
        self.clock = clock

    def collect(self) -> Iterator[GaugeMetricFamily]:
        now = self.clock()
        try:
            layouts = self.store.node_layouts()
            report = queue_report(layouts, self.store.jobs(), self.limits, now)
            waiting = len(self.store.waiters(now))
            alphas = self.store.learned_alphas()
        except StoreUnavailable:
            yield GaugeMetricFamily("schedtune_state_up", STATE_UP_HELP, value=0)
            return
        capacity: dict[str, float] = defaultdict(float)
        gpus: dict[str, int] = defaultdict(int)
        reserved: dict[str, float] = defaultdict(float)
        jobs: Tally[tuple[str, str]] = Tally()
        for entry in report:
            layout = layouts.get(entry["node"])
            gpu_type = NO_LAYOUT if layout is None else type_of(layout)
            gpus[gpu_type] += layout.count if layout else 0
            capacity[gpu_type] += layout.total_mib if layout else 0
            for gpu in entry["gpus"]:
                reserved[gpu_type] += gpu["reserved_mib"]
                jobs.update((gpu_type, job["state"]) for job in gpu["queue"])
        yield GaugeMetricFamily("schedtune_state_up", STATE_UP_HELP, value=1)
        yield _by_type("schedtune_gpu_capacity_mib", "GPU memory of the nodes' layouts, MiB",
                       capacity)
        yield _by_type("schedtune_gpu_reserved_mib", "GPU memory held by live reservations, MiB",
                       reserved)
        yield _by_type("schedtune_gpus", "GPUs in the nodes' layouts", gpus)
        family = GaugeMetricFamily("schedtune_jobs", "Live reservations by GPU type and state "
                                   "(reserved, bound, running)", labels=["gpu_type", "state"])
        for (gpu_type, state), count in sorted(jobs.items()):
            family.add_metric([gpu_type, state], count)
        yield family
        yield GaugeMetricFamily("schedtune_waiting_pods", "Annotated pods that fit nowhere "
                                "when last filtered, still waiting", value=waiting)
        yield _by_type("schedtune_interference_alpha", "Collocation slowdown the monitor "
                       "learned per GPU type (speed 1 / (1 + alpha (k - 1)) with k jobs)",
                       alphas)


def _by_type(name: str, documentation: str, values: dict[str, float] | dict[str, int]
             ) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, documentation, labels=["gpu_type"])
    for gpu_type, value in sorted(values.items()):
        family.add_metric([gpu_type], value)
    return family


def render(extra: Iterable[Collector] = ()) -> tuple[bytes, str]:
    """The exposition of this process's metrics (every worker's, under gunicorn) and of
    the `extra` collectors, run once each."""
    registry = CollectorRegistry()
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        multiprocess.MultiProcessCollector(registry)
    else:
        registry.register(REGISTRY)
    for collector in extra:
        registry.register(collector)
    return generate_latest(registry), CONTENT_TYPE_LATEST
