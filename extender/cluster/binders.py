"""Who creates a pod's Binding once its GPU is reserved: the API server, or nobody.

`kube.Binder` (the only one that talks to a cluster) creates the Binding and
writes the reservation on the pod. `RecordOnly` is the explicit choice of a
service without a cluster (replay, tests, `EXTENDER_BIND=record`) and of
Volcano's allocate event (Volcano binds the pod itself): the reservation is
made, nothing is sent anywhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol


class BindTarget(Protocol):
    def bind(self, namespace: str, name: str, uid: str, node: str,
             annotations: Mapping[str, str]) -> None:
        """Place the pod on `node` and record `annotations` on it; raise `BindFailed`."""


class RecordOnly:
    """Binds nothing: the reservation alone records the placement."""

    def bind(self, namespace: str, name: str, uid: str, node: str,
             annotations: Mapping[str, str]) -> None:
        return None


RECORD_ONLY = RecordOnly()
