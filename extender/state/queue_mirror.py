"""A worker's in-memory copy of the GPU queues, kept current from Redis's change log.

Every store mutation bumps `st:rev` and stamps the queue it touched in
`st:changed`; a snapshot asks Redis only for the queues changed since the rev
this worker last saw, in the same atomic read. A different `st:epoch` (Redis
wiped or replaced) discards the copy and reads everything again. Node states
are rebuilt only when one of their queues changed, their layout changed, or an
unconfirmed reservation on them expired, so a request on a large, busy
cluster costs what changed since the last one rather than every queue.

Requests that name nodes only (kube-scheduler's ``nodeCacheCapable``) read the
watcher's layouts through `table`: the same queues kept as arrays
(`extender.state.gpu_arrays`), so thousands of nodes cost array operations.

A queued job whose reserved MiB is not in (0, the GPU's memory] (the store
reads an unreadable value as NaN) counts as the whole GPU: bad state in Redis
never fails a request and never makes room.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache

from extender.core.gpu_table import GpuTable
from extender.model import GpuState, NodeGpus, NodeState, QueuedJob
from extender.state.gpu_arrays import GpuArrays


class QueueMirror:
    def __init__(self) -> None:
        self.epoch: str | None = None
        self.rev = 0
        self._queues: dict[tuple[str, int], tuple[QueuedJob, ...]] = {}
        self._busy_nodes: dict[str, set[int]] = {}
        self._states: dict[str, tuple[NodeGpus | None, float, NodeState]] = {}
        self._arrays: GpuArrays | None = None

    def reset(self, epoch: str | None) -> None:
        self.__init__()  # type: ignore[misc]
        self.epoch = epoch

    def apply(self, rev: int, changed: Iterable[tuple[str, int, tuple[QueuedJob, ...]]]) -> None:
        """Replace the given queues (an empty tuple: the queue emptied) and advance to `rev`."""
        arrays = self._arrays
        for node, index, jobs in changed:
            self._states.pop(node, None)
            if arrays is not None:
                arrays.mark(node, index)
            indices = self._busy_nodes.setdefault(node, set())
            if jobs:
                self._queues[node, index] = jobs
                indices.add(index)
            else:
                self._queues.pop((node, index), None)
                indices.discard(index)
                if not indices:
                    del self._busy_nodes[node]
        self.rev = rev

    def node_state(self, name: str, layout: NodeGpus | None, now: float) -> NodeState:
        if name not in self._busy_nodes:
            return idle_node(name, layout)
        cached = self._states.get(name)
        if cached is not None and (cached[0] is layout or cached[0] == layout) and now < cached[1]:
            return cached[2]
        gpus, valid_until = [], math.inf
        for index in range(layout.count if layout else 0):
            gpu, until = live_gpu(name, index, layout.memory_of(index),
                                  self._queues.get((name, index), ()), now)
            gpus.append(gpu)
            valid_until = min(valid_until, until)
        state = NodeState(name, layout, tuple(gpus))
        self._states[name] = (layout, valid_until, state)
        return state

    def table(self, names: Sequence[str], layouts: Mapping[str, NodeGpus],
              now: float) -> GpuTable:
        """The named nodes with the node watcher's `layouts` (a new mapping: rebuilt), as a
        `GpuTable` at `now`."""
        arrays = self._arrays
        if arrays is None or (arrays.source is not layouts and arrays.source != layouts):
            arrays = self._arrays = GpuArrays(layouts, self._queues, now, live_gpu)
        arrays.source = layouts  # equal: compared by identity from now on
        return arrays.table(names, now)


def live_gpu(name: str, index: int, memory: int, queue: tuple[QueuedJob, ...],
             now: float) -> tuple[GpuState, float]:
    """The GPU with the queue's jobs live at `now`, and until when that holds (the first
    expiry of an unconfirmed reservation on it; inf: none)."""
    live, valid_until = [], math.inf
    for job in queue:
        if not 0 < job.reserved_mib <= memory:
            # Unreadable (NaN), forged or larger than the GPU: it fills the GPU, so a broken
            # record can never make room for others.
            job = job._replace(reserved_mib=float(memory))
        if job.expires_at <= 0:
            live.append(job)
        elif job.expires_at > now:
            live.append(job)
            valid_until = min(valid_until, job.expires_at)
    return GpuState(name, index, memory, tuple(live)), valid_until


@lru_cache(maxsize=1 << 16)
def idle_node(name: str, layout: NodeGpus | None) -> NodeState:
    """A node without reservations; shared between requests (it is immutable)."""
    count = layout.count if layout else 0
    return NodeState(name, layout, tuple(GpuState(name, i, layout.memory_of(i))
                                         for i in range(count)))
