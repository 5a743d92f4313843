"""Prometheus metrics. Correct under gunicorn's worker processes: gunicorn.conf.py sets
PROMETHEUS_MULTIPROC_DIR before the workers start, and `/metrics` then aggregates
every worker's files through `MultiProcessCollector`.
"""

from __future__ import annotations

import os
from collections import Counter as Tally
from collections.abc import Iterable
from typing import TYPE_CHECKING

from prometheus_client import (
    CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest, multiprocess,
)  # fmt: skip

if TYPE_CHECKING:
    from extender.core.filtering import FilterDecision

REQUEST_SECONDS = Histogram(
    "schedtune_extender_request_seconds", "Latency per verb", ["verb"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
)  # fmt: skip
FILTER_DENIALS = Counter("schedtune_filter_denials_total", "Nodes refused by filter", ["reason"])
PASSTHROUGH = Counter("schedtune_passthrough_total", "Pods without schedtune.io/model", ["verb"])
ERRORS = Counter("schedtune_extender_errors_total", "Requests answered with an error",
                 ["verb", "kind"])
BINDS = Counter("schedtune_binds_total", "Bind outcomes", ["outcome"])
# The monitor's (its own process, served on EXTENDER_MONITOR_PORT).
OOM_KILLS = Counter("schedtune_oom_kills_total", "Containers of annotated pods OOM-killed")
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
    record_denials(v.reason for v in decision.verdicts.values() if not v.fits)


def render() -> tuple[bytes, str]:
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        return generate_latest(registry), CONTENT_TYPE_LATEST
    return generate_latest(), CONTENT_TYPE_LATEST
