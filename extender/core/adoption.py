"""What the monitor may record for a pod already bound, and whom a release lets in. Pure.

Anyone who can edit a pod can edit the reservation bind wrote on it, so the
monitor takes those values only when the extender's signature over them
verifies for this pod on this node and they fit the node's layout
(`trusted_reservation`); otherwise it estimates the job again and puts it on
`likeliest_gpu`. After a release, `waiters_that_fit` names the waiting pods
that now fit on the freed GPU, so the monitor can make kube-scheduler retry
them at once.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from extender.core.room import has_room
from extender.core.signing import is_signed
from extender.model import GpuState, Limits, Need, NodeState, QueuedJob, Waiter, type_of

MAX_ANNOTATION_CHARS = 64  # a reservation value longer than this is not one bind wrote


def trusted_reservation(key: bytes, uid: str, node_name: str, values: list[Any],
                        node: NodeState) -> tuple[int, float, float] | None:
    """(GPU index, reserved MiB, predicted s) from the annotations `values` (GPU, reserved
    MiB, predicted seconds, signature, as written on the pod) when the signature is the
    extender's over exactly these for this pod and node, and the values are in range:
    an index within the node's GPUs, MiB in (0, its memory], finite seconds >= 0."""
    if node.gpus is None or not all(isinstance(v, str) and len(v) <= MAX_ANNOTATION_CHARS
                                    for v in values):
        return None
    gpu, mib, seconds, signature = values
    if not is_signed(key, signature, uid, node_name, gpu, mib, seconds):
        return None
    try:
        index, reserved, predicted = int(gpu), float(mib), float(seconds)
    except ValueError:
        return None
    if not (gpu.isascii() and gpu.isdigit() and index < node.gpus.count
            and 0 < reserved <= node.gpus.memory_mib
            and math.isfinite(predicted) and predicted >= 0):
        return None
    return index, reserved, predicted


def waiters_that_fit(node: NodeState, gpu_index: int, waiting: Iterable[Waiter],
                     limits: Limits) -> list[Waiter]:
    """The waiters that fit on the node's GPU `gpu_index` now (padded MiB for its type in
    the free memory, a free slot), oldest first, each taking its room before the next is
    tried: those named fit together. Waiters with no need for its type are skipped."""
    if node.gpus is None or not 0 <= gpu_index < len(node.gpu_states):
        return []
    gpu: GpuState = node.gpu_states[gpu_index]
    gpu_type, limit = type_of(node.gpus), limits.for_node(node.gpus)
    fitting = []
    for waiter in waiting:
        if gpu_type not in waiter.needs or "/" not in waiter.pod:
            continue
        mib, seconds = waiter.needs[gpu_type]
        if has_room(gpu, Need(mib, seconds), limit, None):
            fitting.append(waiter)
            gpu = GpuState(gpu.node, gpu.index, gpu.capacity_mib,
                           (*gpu.jobs, QueuedJob(waiter.uid, mib, seconds)))
    return fitting


def likeliest_gpu(node: NodeState, mib: float, limit: int) -> GpuState:
    """Where an estimated adoption goes: the roomiest GPU with room for `mib` and a slot,
    else the roomiest of all (the adoption then reports the over-commit). The node must
    have GPUs."""
    room = [g for g in node.gpu_states if len(g.jobs) < limit and mib <= g.free_mib]
    return max(room or node.gpu_states, key=lambda g: (g.free_mib, -g.index))
