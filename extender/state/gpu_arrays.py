"""A worker's arrays of every GPU the node watcher knows, kept current row by row.

One row per GPU of every node in the watcher's layouts (node order, then GPU
index): memory, free MiB, live jobs and where they sit in packed job arrays
(reserved MiB, predicted seconds, start, expiry, uid). The queue mirror marks a
row stale when its queue changes in Redis's change log; a row is also due when
an unconfirmed reservation on it expires. Only those rows are recomputed, by the
same rule as `QueueMirror.node_state` (`live_gpu`), so a request costs what
changed plus array gathers, never a pass over the nodes in Python.

`table(names, now)` gives the request's `GpuTable` (the same object again while
nothing it shows changed). Job slots are only appended (the arrays grow, and are
compacted into new arrays), so a table handed out earlier never sees later
changes. Rebuilt whole when the watcher's layouts change.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from itertools import repeat

import numpy as np

from extender.core.gpu_table import GpuTable
from extender.model import GpuState, NodeGpus, QueuedJob

Queues = Mapping[tuple[str, int], tuple[QueuedJob, ...]]
LiveGpu = Callable[[str, int, int, tuple[QueuedJob, ...], float], tuple[GpuState, float]]


class GpuArrays:
    def __init__(self, layouts: Mapping[str, NodeGpus], queues: Queues, now: float,
                 live_gpu: LiveGpu) -> None:
        self.source = layouts
        self._queues = queues
        self._live_gpu = live_gpu
        self.layouts: list[NodeGpus | None] = [None]  # layout 0: a node the watcher never saw
        ids: dict[NodeGpus, int] = {}
        self.node_row = {name: i for i, name in enumerate(layouts)}
        self.node_names = list(layouts)
        node_layout, node_count = [], []
        for layout in layouts.values():
            if layout not in ids:
                ids[layout] = len(self.layouts)
                self.layouts.append(layout)
            node_layout.append(ids[layout])
            node_count.append(layout.count)
        self.node_layout = np.array(node_layout, dtype=np.int64)
        self.node_count = np.array(node_count, dtype=np.int64)
        self.node_start = np.cumsum(self.node_count) - self.node_count
        rows = int(self.node_count.sum())
        self.gpu_node = np.repeat(np.arange(len(node_count)), self.node_count)
        self.gpu_index = np.arange(rows) - np.repeat(self.node_start, self.node_count)
        memory = np.array([g.memory_mib for g in layouts.values()], dtype=np.int64)
        self.gpu_capacity = np.repeat(memory, self.node_count).astype(float)
        self.gpu_free = self.gpu_capacity.copy()
        self.gpu_jobs = np.zeros(rows, dtype=np.int64)
        self.job_start = np.zeros(rows, dtype=np.int64)
        self.valid_until = np.full(rows, math.inf)
        self._job_mib = np.zeros(1024)
        self._job_predicted = np.zeros(1024)
        self._job_started = np.zeros(1024)
        self._job_expires = np.zeros(1024)
        self._job_uid: list[str] = []
        self.version = 0
        self._stale: set[int] = set()
        self._cached: tuple[tuple[str, ...], int, GpuTable] | None = None
        for node, index in queues:
            self.mark(node, index)
        self.refresh(now)

    def mark(self, node: str, index: int) -> None:
        """The queue of GPU `index` of `node` changed: recompute its row before next use."""
        position = self.node_row.get(node)
        if position is not None and 0 <= index < self.node_count[position]:
            self._stale.add(int(self.node_start[position]) + index)

    def refresh(self, now: float) -> None:
        """Recompute the rows whose queue changed, and those where a reservation expired."""
        due = self._stale
        self._stale = set()
        if len(self.valid_until) and now >= self.next_expiry:
            due.update(np.flatnonzero(self.valid_until <= now).tolist())
        if not due:
            return
        for row in sorted(due):
            self._recompute(row, now)
        self.version += 1

    @property
    def next_expiry(self) -> float:
        return float(self.valid_until.min()) if len(self.valid_until) else math.inf

    def table(self, names: Sequence[str], now: float) -> GpuTable:
        """The `GpuTable` of the named nodes at `now` (unknown names: no layout)."""
        self.refresh(now)
        key = tuple(names)
        if self._cached is not None and self._cached[1] == self.version \
                and self._cached[0] == key:
            return self._cached[2]
        rows = np.fromiter(map(self.node_row.get, key, repeat(-1)), dtype=np.int64,
                           count=len(key))
        known = rows >= 0
        rows = np.where(known, rows, 0)
        node_layout = np.where(known, self.node_layout[rows] if len(self.node_layout) else 0, 0)
        counts = np.where(known, self.node_count[rows] if len(self.node_count) else 0, 0)
        starts = self.node_start[rows] if len(self.node_start) else np.zeros(len(rows), np.int64)
        ends = np.cumsum(counts)
        gpu_rows = np.repeat(starts - (ends - counts), counts) + np.arange(int(ends[-1])
                                                                          if len(ends) else 0)
        table = GpuTable(key, self.layouts, node_layout, counts, self.gpu_index[gpu_rows],
                         self.gpu_capacity[gpu_rows], self.gpu_free[gpu_rows],
                         self.gpu_jobs[gpu_rows], self.job_start[gpu_rows], self._job_mib,
                         self._job_predicted, self._job_started, job_uid=self._job_uid,
                         job_expires=self._job_expires)
        self._cached = (key, self.version, table)
        return table

    def _recompute(self, row: int, now: float) -> None:
        node = self.node_names[int(self.gpu_node[row])]
        index = int(self.gpu_index[row])
        memory = int(self.gpu_capacity[row])
        gpu, valid_until = self._live_gpu(node, index, memory, self._queues.get((node, index), ()),
                                          now)
        self.gpu_free[row] = gpu.free_mib
        self.gpu_jobs[row] = len(gpu.jobs)
        self.valid_until[row] = valid_until
        if gpu.jobs:
            self.job_start[row] = self._append(gpu.jobs)

    def _append(self, jobs: tuple[QueuedJob, ...]) -> int:
        """Put jobs in fresh slots (never over a slot a table may still read)."""
        start = len(self._job_uid)
        if start + len(jobs) > len(self._job_mib):
            self._compact(len(jobs))
            start = len(self._job_uid)
        end = start + len(jobs)
        self._job_mib[start:end] = [j.reserved_mib for j in jobs]
        self._job_predicted[start:end] = [j.predicted_s for j in jobs]
        self._job_started[start:end] = [j.started_at for j in jobs]
        self._job_expires[start:end] = [j.expires_at for j in jobs]
        self._job_uid.extend(j.uid for j in jobs)
        return start

    def _compact(self, more: int) -> None:
        """New job arrays holding only the rows' live jobs, with room for `more` and growth."""
        busy = np.flatnonzero(self.gpu_jobs > 0)
        counts = self.gpu_jobs[busy]
        live = int(counts.sum())
        size = max(1024, 2 * (live + more))
        ends = np.cumsum(counts)
        old = np.repeat(self.job_start[busy] - (ends - counts), counts) + np.arange(live)
        arrays = []
        for values in (self._job_mib, self._job_predicted, self._job_started, self._job_expires):
            fresh = np.zeros(size)
            fresh[:live] = values[old]
            arrays.append(fresh)
        self._job_mib, self._job_predicted, self._job_started, self._job_expires = arrays
        self._job_uid = [self._job_uid[i] for i in old.tolist()]
        self.job_start[busy] = ends - counts
