"""A worker's arrays of every GPU the node watcher knows, kept current row by row.

One row per GPU of every node in the watcher's layouts (node order, then GPU
index): memory, free MiB, live jobs and where they sit in packed job columns,
and the row's rank within its node by best fit and by room (the orders decisions
read). The queue mirror marks a row stale when its queue changes in Redis's
change log; a row is also due when an unconfirmed reservation on it expires.
Only those rows (and their nodes' ranks) are recomputed, by the same rule as
`QueueMirror.node_state` (`live_gpu`), so a request costs what changed plus array
gathers, never a pass over the nodes in Python.

`table(names, now)` gives the request's `GpuTable` (the same object again while
nothing changed). The shapes of the last few node sets are kept: kube-scheduler
names one set to filter and the passing part of it to prioritize, pod after pod,
and a set's shape costs a name lookup per node to rebuild. Its order is the order
the set was first named in: kube-scheduler lists the nodes as its parallel filters
finish (a new order each pod), and a table per order would be rebuilt every pod;
so the nodes come back in that first order, and ties between equal nodes break
the same way whatever order a request names them in. Job slots are only ever
appended (and compacted into new columns), so a table handed out earlier never sees
a later change. Rebuilt whole when the watcher's layouts change.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat

import numpy as np

from extender.core.gpu_table import GpuTable, Jobs, NodeShape, StateCache
from extender.model import GpuState, NodeGpus, QueuedJob

Queues = Mapping[tuple[str, int], tuple[QueuedJob, ...]]
LiveGpu = Callable[[str, int, int, tuple[QueuedJob, ...], float], tuple[GpuState, float]]
FIRST_SLOTS = 1024
SHAPES_KEPT = 4  # node lists whose shapes (and latest table) a worker keeps


@dataclass
class _Shaped:
    """A node set's shape, its node rows (-1: a node the watcher never saw) and GPU rows,
    and its latest table with the version it shows."""

    members: frozenset[str]
    shape: NodeShape
    nodes: np.ndarray
    rows: np.ndarray
    table: tuple[int, GpuTable] | None = None

    def holds_exactly(self, names: Sequence[str]) -> bool:
        """Whether distinct `names` are this set: no new set built (names hash once)."""
        return len(names) == len(self.members) and self.members.issuperset(names)


class GpuArrays:
    def __init__(self, layouts: Mapping[str, NodeGpus], queues: Queues, now: float,
                 live_gpu: LiveGpu) -> None:
        self.source = layouts
        self._queues, self._live_gpu = queues, live_gpu
        self.layouts: list[NodeGpus | None] = [None]  # layout 0: a node the watcher never saw
        ids: dict[NodeGpus, int] = {}
        self.node_row = {name: i for i, name in enumerate(layouts)}
        self.node_names = list(layouts)
        node_layout = [ids.setdefault(g, len(ids) + 1) for g in layouts.values()]
        self.layouts += list(ids)
        self.node_layout = np.array(node_layout, dtype=np.int64)
        self.node_count = np.array([g.count for g in layouts.values()], dtype=np.int64)
        self.node_start = np.cumsum(self.node_count) - self.node_count
        self.node_version = np.zeros(len(node_layout) + 1, dtype=np.int64)  # + unknown
        rows = int(self.node_count.sum())
        self.gpu_node = np.repeat(np.arange(len(node_layout)), self.node_count)
        self.gpu_index = np.arange(rows) - np.repeat(self.node_start, self.node_count)
        self.gpu_capacity = np.array([g.memory_of(i) for g in layouts.values()
                                      for i in range(g.count)], dtype=float)
        self.gpu_free = self.gpu_capacity.copy()
        self.gpu_jobs = np.zeros(rows, dtype=np.int64)
        self.job_start = np.zeros(rows, dtype=np.int64)
        self.valid_until = np.full(rows, math.inf)
        self.fit_rank = self.gpu_index.copy()  # idle GPUs: index order either way
        self.roomy_rank = self.gpu_index.copy()
        self._columns = [np.zeros(FIRST_SLOTS) for _ in range(5)]
        self._uids: list[str] = []
        self.states: StateCache = {}
        self.version = 0
        self._stale: set[int] = set()
        # node sets' shapes (in the order first named), node rows, GPU rows, and latest
        # tables (version, table); the most recently used last
        self._shapes: list[_Shaped] = []
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
        due, self._stale = self._stale, set()
        if len(self.valid_until) and now >= self.valid_until.min():
            due.update(np.flatnonzero(self.valid_until <= now).tolist())
        if not due:
            return
        self.version += 1
        for row in due:
            self._recompute(row, now)
        for node in {int(self.gpu_node[row]) for row in due}:
            self._rank(node)
            self.node_version[node] = self.version

    def table(self, names: Sequence[str], now: float) -> GpuTable:
        """The `GpuTable` of the named (distinct) nodes at `now` (unknown names: no layout),
        in the order this set of names was first asked for in (the module docstring)."""
        self.refresh(now)
        shapes = self._shapes
        found = next((i for i in range(len(shapes) - 1, -1, -1)
                      if shapes[i].holds_exactly(names)), None)
        if found is None:
            shaped = _Shaped(frozenset(names), *self._shape_of(tuple(names)))
            del shapes[:max(0, len(shapes) + 1 - SHAPES_KEPT)]  # the least recently used
        else:
            shaped = shapes.pop(found)
        shapes.append(shaped)
        if shaped.table is None or shaped.table[0] != self.version:
            rows, mib, predicted, started, expires, cpu = shaped.rows, *self._columns
            table = GpuTable(shaped.shape, self.gpu_free[rows], self.gpu_jobs[rows],
                             self.job_start[rows], Jobs(mib, predicted, started, expires,
                                                        self._uids, cpu),
                             fit_rank=self.fit_rank[rows], roomy_rank=self.roomy_rank[rows],
                             states=self.states, node_version=self.node_version[shaped.nodes])
            shaped.table = (self.version, table)
        return shaped.table[1]

    def _shape_of(self, names: tuple[str, ...]) -> tuple[NodeShape, np.ndarray, np.ndarray]:
        """The named nodes' shape, their node rows (a row of no GPUs for a node the watcher
        never saw) and their GPU rows, in order."""
        nodes = np.fromiter(map(self.node_row.get, names, repeat(-1)), dtype=np.int64,
                            count=len(names))
        known = nodes >= 0
        nodes = np.where(known, nodes, len(self.node_layout))  # the row past the end
        node_layout = np.append(self.node_layout, 0)[nodes]
        counts = np.append(self.node_count, 0)[nodes]
        starts = np.append(self.node_start, 0)[nodes]
        ends = np.cumsum(counts)
        rows = np.repeat(starts - (ends - counts), counts) + np.arange(int(ends[-1]) if len(ends)
                                                                       else 0)
        shape = NodeShape(list(names), self.layouts, node_layout, counts, self.gpu_index[rows],
                          self.gpu_capacity[rows])
        return shape, np.where(known, nodes, -1), rows

    def _recompute(self, row: int, now: float) -> None:
        node = self.node_names[int(self.gpu_node[row])]
        index = int(self.gpu_index[row])
        queue = self._queues.get((node, index), ())
        gpu, valid_until = self._live_gpu(node, index, int(self.gpu_capacity[row]), queue, now)
        self.gpu_free[row] = gpu.free_mib
        self.valid_until[row] = valid_until
        self.gpu_jobs[row] = 0  # its old slots are not live: a compaction must not keep them
        if gpu.jobs:
            self.job_start[row] = self._append(gpu.jobs)
        self.gpu_jobs[row] = len(gpu.jobs)

    def _rank(self, node: int) -> None:
        """The node's rows ranked by best fit (free, index) and by room (most free first)."""
        start = int(self.node_start[node])
        rows = range(start, start + int(self.node_count[node]))
        free = self.gpu_free
        by_fit = sorted(rows, key=lambda r: (free[r], self.gpu_index[r]))
        by_room = sorted(rows, key=lambda r: -free[r])  # stable: GPU order among equals
        for rank, (fit, room) in enumerate(zip(by_fit, by_room, strict=True)):
            self.fit_rank[fit] = rank
            self.roomy_rank[room] = rank

    def _append(self, jobs: tuple[QueuedJob, ...]) -> int:
        """Put jobs in fresh slots (never over a slot a table may still read)."""
        start = len(self._uids)
        if start + len(jobs) > len(self._columns[0]):
            self._compact(len(jobs))
            start = len(self._uids)
        end = start + len(jobs)
        mib, predicted, started, expires, cpu = self._columns
        mib[start:end] = [j.reserved_mib for j in jobs]
        predicted[start:end] = [j.predicted_s for j in jobs]
        started[start:end] = [j.started_at for j in jobs]
        expires[start:end] = [j.expires_at for j in jobs]
        cpu[start:end] = [j.cpu_milli for j in jobs]
        self._uids.extend(j.uid for j in jobs)
        return start

    def _compact(self, more: int) -> None:
        """New job columns holding only the rows' live jobs, with room for `more` and growth."""
        busy = np.flatnonzero(self.gpu_jobs > 0)
        counts = self.gpu_jobs[busy]
        live = int(counts.sum())
        ends = np.cumsum(counts)
        old = np.repeat(self.job_start[busy] - (ends - counts), counts) + np.arange(live)
        size = max(FIRST_SLOTS, 2 * (live + more))
        fresh = []
        for column in self._columns:
            values = np.zeros(size)
            values[:live] = column[old]
            fresh.append(values)
        self._columns = fresh
        self._uids = [self._uids[i] for i in old.tolist()]
        self.job_start[busy] = ends - counts
