"""The filter's last stage, waiter: a pod no node takes now waits, and its owner is told.
Pure.

A pod that fits nowhere (and could fit somewhere once jobs end), or that the patience
stage keeps for a better GPU, becomes a `Waiter`: the starvation guard (the holds stage)
holds GPUs for the oldest. The decisions told (as Events on the pods) say which GPUs are
held for which waiting pod, and why this pod waits.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from extender.core import decisions
from extender.core.job import PodJob
from extender.core.room import Holds
from extender.model import Decision, Verdict, Waiter
from extender.settings import Settings

if TYPE_CHECKING:  # the patience stage's answer, read here for its reason only
    from extender.core.filtering.patience import FasterLater
    from extender.core.filtering.sharing import OwnGpuSoon


def waiter_and_told(job: PodJob, verdicts: Mapping[str, Verdict], passing: list[str],
                    holds: Holds, better: FasterLater | OwnGpuSoon | None,
                    settings: Settings) -> tuple[Waiter | None, tuple[Decision, ...]]:
    """The stage: the pod's `Waiter` (None: a node passed, the guard is off, or no node
    could ever take it) and the decisions told."""
    snapshot, pod = job.snapshot, job.demand
    told = decisions.holds_told(holds, snapshot.waiting,
                                {node: snapshot.nodes[node].gpus for node, _ in holds})
    if not settings.hold_for or passing or all(v.unresolvable for v in verdicts.values()):
        return None, told
    per_type = {t: (n.padded_mib, n.predicted_s) for t, n in job.needs.items()}
    waiter = Waiter(pod.uid, job.waiting_since, per_type, f"{pod.namespace}/{pod.name}",
                    pod.gpus)
    return waiter, (*told, decisions.waiting(waiter, better.reason() if better else ""))
