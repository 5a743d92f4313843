"""Volcano's GPU-share device plugin protocol (volcano-sh/devices, the plugin Volcano's
gpushare predicate drives): the annotations it reads on a pod. Pure.

As its documentation and source describe them (volcano-sh/devices: the pod's
``volcano.sh/gpu-index``, ``volcano.sh/predicate-time`` and ``volcano.sh/gpu-assigned``;
written here from that description):

* ``volcano.sh/gpu-index``: the GPU indices of the node the pod runs on, comma-separated;
* ``volcano.sh/predicate-time``: when they were chosen, in nanoseconds since the epoch;
* ``volcano.sh/gpu-assigned``: ``false`` until the device plugin, when the kubelet calls
  Allocate, hands the oldest such pending pod on the node its GPUs
  (``NVIDIA_VISIBLE_DEVICES``) and sets it ``true``.

The container's GPU memory is its ``volcano.sh/gpu-memory`` request (MiB), which the
user writes; the plugin matches a pod by it and isolates nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

GPU_INDEX = "volcano.sh/gpu-index"
PREDICATE_TIME = "volcano.sh/predicate-time"
GPU_ASSIGNED = "volcano.sh/gpu-assigned"


def bind_annotations(gpus: Sequence[int], now: float) -> dict[str, str]:
    """What the extender writes on the pod before its Binding."""
    return {GPU_INDEX: ",".join(map(str, gpus)), PREDICATE_TIME: str(int(now * 1e9)),
            GPU_ASSIGNED: "false"}


def allocation_outcome(annotations: Mapping[str, Any], now: float, timeout_s: float) -> str:
    """"" (not handed over this way), "allocating", "success", or "unanswered" (not
    assigned `timeout_s` after the predicate time). The plugin has no failed answer."""
    assigned = annotations.get(GPU_ASSIGNED)
    if assigned not in ("true", "false") or GPU_INDEX not in annotations:
        return ""
    if assigned == "true":
        return "success"
    try:
        since = int(annotations.get(PREDICATE_TIME, "")) / 1e9
    except ValueError:
        return "unanswered"
    return "unanswered" if now - since > timeout_s else "allocating"
