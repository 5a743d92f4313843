"""What the monitor may record for a pod already bound, and whom a release lets in. Pure.

Anyone who can edit a pod can edit the reservation bind wrote on it, so the
monitor takes those values only when the extender's signature over them
verifies for this pod on this node and they fit the node's layout
(`trusted_reservation`); otherwise it estimates the job again and puts it on
`likeliest_gpus`. After a release, `waiters_that_fit` names the waiting pods
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
                        node: NodeState) -> tuple[tuple[int, ...], float, float] | None:
    """(GPU indices, reserved MiB on each, predicted s) from the annotations `values` (GPUs,
    reserved MiB, predicted seconds, signature, as written on the pod) when the signature
    is the extender's over exactly these for this pod and node, and the values are in
    range: distinct indices within the node's GPUs, MiB in (0, its memory], finite
    seconds >= 0."""
    if node.gpus is None or not all(isinstance(v, str) and len(v) <= MAX_ANNOTATION_CHARS
                                    for v in values):
        return None
    gpu, mib, seconds, signature = values
    if not is_signed(key, signature, uid, node_name, gpu, mib, seconds):
        return None
    try:
        reserved, predicted = float(mib), float(seconds)
    except ValueError:
        return None
    parts = gpu.split(",")
    if not (all(p.isascii() and p.isdigit() and int(p) < node.gpus.count for p in parts)
            and len(set(parts)) == len(parts)
            and 0 < reserved <= node.gpus.memory_mib
            and math.isfinite(predicted) and predicted >= 0):
        return None
    return tuple(int(p) for p in parts), reserved, predicted


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


def likeliest_gpus(node: NodeState, mib: float, limit: int, count: int = 1) -> list[GpuState]:
    """Where an estimated adoption goes: the `count` roomiest GPUs with room for `mib` and a
    slot, then the roomiest others (the adoption then reports the over-commit). The node
    must have GPUs."""
    def roomy(g: GpuState) -> tuple[bool, float, int]:
        return len(g.jobs) < limit and mib <= g.free_mib, g.free_mib, -g.index

    return sorted(node.gpu_states, key=roomy, reverse=True)[:count]
