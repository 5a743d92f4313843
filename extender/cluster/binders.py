"""Who creates a pod's Binding once its GPU is reserved: the API server, or nobody.

`kube.Binder` (the only one that talks to a cluster) creates the Binding and
writes the reservation on the pod; it is also a `PodReader`, so bind checks
the pod the API server has before doing anything. `RecordOnly` is the
explicit choice of a service without a cluster (replay, tests,
`EXTENDER_BIND=record`) and of Volcano's allocate event (Volcano binds the pod
itself): the reservation is made, nothing is sent anywhere, and with no pod to
read the filter record alone decides what bind does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, runtime_checkable

from extender.core.binding import LivePod


class BindTarget(Protocol):
    def bind(self, namespace: str, name: str, uid: str, node: str,
             annotations: Mapping[str, str]) -> None:
        """Place the pod on `node` and record `annotations` on it; raise `BindFailed`."""


@runtime_checkable
class PodReader(Protocol):
    def read_pod(self, namespace: str, name: str) -> LivePod:
        """The pod as the API server has it now; raise `Conflict` if it does not exist,
        `BindFailed` if the API cannot say."""


class RecordOnly:
    """Binds nothing: the reservation alone records the placement. Reads no pod (not a
    `PodReader`): there is no cluster to ask."""

    def bind(self, namespace: str, name: str, uid: str, node: str,
             annotations: Mapping[str, str]) -> None:
        return None


RECORD_ONLY = RecordOnly()
