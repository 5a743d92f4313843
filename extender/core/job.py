"""What the verbs know about a pod before deciding: not ours, refused, or a job to place.

The service builds one per request (annotations parsed, one snapshot read, the
estimator asked once); each verb's decision function takes it whole.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from extender.model import ClusterSnapshot, Need, PodDemand


@dataclass(frozen=True)
class NotOurs:
    """No ``schedtune.io/model``: the pod passes through, untouched."""


@dataclass(frozen=True)
class Refused:
    """Annotations or a model the user must fix: every node refused, saying what to fix."""

    reason: str


@dataclass(frozen=True)
class PodJob:
    """An annotated pod, the snapshot read for it and its needs per GPU type."""

    demand: PodDemand
    snapshot: ClusterSnapshot
    needs: Mapping[str, Need]

    @property
    def waiting_since(self) -> float:
        """When the pod began waiting (its `Waiter`'s `since`), or now if it is not waiting."""
        return next((w.since for w in self.snapshot.waiting if w.uid == self.demand.uid),
                    self.snapshot.now)


Assessment = NotOurs | Refused | PodJob
