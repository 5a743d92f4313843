"""The GPUs of the nodes a request names, as arrays: what filter and prioritize read. Pure.

A `GpuTable` holds the request's nodes in request order, each with its layout
(an index into a short list of distinct layouts), and every GPU of them as a
row (node order, then GPU order): its index, memory, free MiB, job count and
where its jobs sit in packed job arrays (reserved MiB, predicted seconds,
start; queue order). Decisions then cost array operations, not Python per node.

It is also the snapshot's ``Mapping[str, NodeState]``: a `NodeState` is only
materialised when something asks for one node (a reason naming a held GPU, bind,
the monitor). Built from `NodeState`s (`from_states`: tests, one-node requests,
layouts a request claims) or, incrementally, by a worker's queue mirror
(`extender.state.gpu_arrays`). Immutable once built; `memo` lets filter and
prioritize of one pod share work on the same table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from extender.model import GpuState, NodeGpus, NodeState, QueuedJob

IntArray = np.ndarray
FloatArray = np.ndarray


class GpuTable(Mapping[str, NodeState]):
    """Nodes and their GPUs as arrays (see the module docstring).

    Per node (request order): `node_layout` (index into `layouts`; a `None` layout is
    a node without one), `node_start`, `node_rows` (its GPU rows). Per GPU row:
    `gpu_node` (node position), `gpu_index`, `gpu_capacity`, `gpu_free` (MiB, as
    `GpuState.free_mib`), `gpu_jobs`, `job_start` (into `job_mib`, `job_predicted`,
    `job_started`, which may hold other rows' jobs too).

    A `NodeState` comes from `state_of` when given, else is rebuilt from the rows and
    the jobs' `job_uid` and `job_expires`."""

    def __init__(self, names: Sequence[str], layouts: Sequence[NodeGpus | None],
                 node_layout: IntArray, node_rows: IntArray, gpu_index: IntArray,
                 gpu_capacity: FloatArray, gpu_free: FloatArray, gpu_jobs: IntArray,
                 job_start: IntArray, job_mib: FloatArray, job_predicted: FloatArray,
                 job_started: FloatArray, state_of: Callable[[str], NodeState] | None = None,
                 job_uid: Sequence[str] = (), job_expires: FloatArray | None = None) -> None:
        self.names = list(names)
        self.layouts = list(layouts)
        self.node_layout = node_layout
        self.node_rows = node_rows
        self.node_start = np.cumsum(node_rows, dtype=np.int64) - node_rows
        self.gpu_node = np.repeat(np.arange(len(self.names)), node_rows)
        self.gpu_index = gpu_index
        self.gpu_capacity = gpu_capacity
        self.gpu_free = gpu_free
        self.gpu_jobs = gpu_jobs
        self.job_start = job_start
        self.job_mib = job_mib
        self.job_predicted = job_predicted
        self.job_started = job_started
        self.gpu_layout = node_layout[self.gpu_node]
        has_rows = node_rows > 0
        self.seg_nodes = np.flatnonzero(has_rows)  # nodes with at least one GPU row
        self.seg_starts = self.node_start[has_rows]
        self.gpu_seg = np.repeat(np.arange(len(self.seg_nodes)), node_rows[has_rows])
        self.memo: dict[Any, Any] = {}
        self._state_of = state_of or self._rebuilt
        self._job_uid = job_uid
        self._job_expires = job_expires
        self._states: dict[str, NodeState] = {}
        self._positions: dict[str, int] | None = None
        self._names_array: np.ndarray | None = None

    @classmethod
    def from_states(cls, nodes: Mapping[str, NodeState]) -> GpuTable:
        """The table of these node states (Python per GPU: for small or unusual requests)."""
        if isinstance(nodes, GpuTable):
            return nodes
        layout_ids: dict[NodeGpus | None, int] = {}
        node_layout, node_rows = [], []
        rows: list[tuple[int, float, float, int, int]] = []
        mib: list[float] = []
        predicted: list[float] = []
        started: list[float] = []
        for state in nodes.values():
            node_layout.append(layout_ids.setdefault(state.gpus, len(layout_ids)))
            node_rows.append(len(state.gpu_states))
            for gpu in state.gpu_states:
                rows.append((gpu.index, gpu.capacity_mib, gpu.free_mib, len(gpu.jobs), len(mib)))
                for job in gpu.jobs:
                    mib.append(job.reserved_mib)
                    predicted.append(job.predicted_s)
                    started.append(job.started_at)
        columns = list(zip(*rows, strict=True)) or [(), (), (), (), ()]
        return cls(list(nodes), list(layout_ids), np.array(node_layout, dtype=np.int64),
                   np.array(node_rows, dtype=np.int64), np.array(columns[0], dtype=np.int64),
                   np.array(columns[1], dtype=float), np.array(columns[2], dtype=float),
                   np.array(columns[3], dtype=np.int64), np.array(columns[4], dtype=np.int64),
                   np.array(mib, dtype=float), np.array(predicted, dtype=float),
                   np.array(started, dtype=float), nodes.__getitem__)

    # --- Mapping[str, NodeState] ---------------------------------------------------------

    def __getitem__(self, name: str) -> NodeState:
        if name not in self.positions:
            raise KeyError(name)
        return self._state_of(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.names)

    def __contains__(self, name: object) -> bool:
        return name in self.positions

    # --- helpers for decisions -----------------------------------------------------------

    @property
    def positions(self) -> dict[str, int]:
        """Node name -> position (built on first use: most requests never need it)."""
        if self._positions is None:
            self._positions = {name: i for i, name in enumerate(self.names)}
        return self._positions

    @property
    def names_array(self) -> np.ndarray:
        if self._names_array is None:
            names = np.empty(len(self.names), dtype=object)
            names[:] = self.names
            self._names_array = names
        return self._names_array

    def layout_of(self, position: int) -> NodeGpus | None:
        return self.layouts[int(self.node_layout[position])]

    def _rebuilt(self, name: str) -> NodeState:
        """The node's state from the rows (kept: asked again for the same node)."""
        state = self._states.get(name)
        if state is None:
            position = self.positions[name]
            start = int(self.node_start[position])
            gpus = []
            for row in range(start, start + int(self.node_rows[position])):
                first, count = int(self.job_start[row]), int(self.gpu_jobs[row])
                jobs = tuple(QueuedJob(self._job_uid[j], float(self.job_mib[j]),
                                       float(self.job_predicted[j]), float(self.job_started[j]),
                                       float(self._job_expires[j]))  # type: ignore[index]
                             for j in range(first, first + count))
                gpus.append(GpuState(name, int(self.gpu_index[row]),
                                     int(self.gpu_capacity[row]), jobs))
            state = self._states[name] = NodeState(name, self.layout_of(position), tuple(gpus))
        return state

    def jobs_matrix(self, rows: IntArray, width: int, values: FloatArray) -> FloatArray:
        """`values` (a job array) of the first `width` jobs of each GPU row in `rows`, one
        row each, queue order; 0 past a row's own jobs."""
        columns = np.arange(width)
        index = self.job_start[rows][:, None] + columns[None, :]
        real = columns[None, :] < self.gpu_jobs[rows][:, None]
        if not len(values):
            return np.zeros(index.shape)
        return np.where(real, values[np.where(real, index, 0)], 0.0)

    def segment_min(self, values: np.ndarray) -> np.ndarray:
        """Per node with GPU rows (`seg_nodes` order), the least of `values` over its rows."""
        if not len(self.seg_starts):
            return values[:0]
        return np.minimum.reduceat(values, self.seg_starts)

    def segment_max(self, values: np.ndarray) -> np.ndarray:
        if not len(self.seg_starts):
            return values[:0]
        return np.maximum.reduceat(values, self.seg_starts)

    def segment_sum(self, values: np.ndarray) -> np.ndarray:
        if not len(self.seg_starts):
            return values[:0]
        return np.add.reduceat(values, self.seg_starts)

    def per_node(self, segment_values: np.ndarray, empty: Any) -> np.ndarray:
        """Per-segment values spread to every node (`empty` for nodes without GPU rows)."""
        out = np.full(len(self.names), empty, dtype=np.result_type(segment_values, type(empty)))
        out[self.seg_nodes] = segment_values
        return out

    def first_row(self, mask: np.ndarray) -> np.ndarray:
        """Per segment, the first row (in row order) where `mask` holds; -1 where none."""
        rows = np.where(mask, np.arange(len(mask)), np.iinfo(np.int64).max)
        first = self.segment_min(rows) if len(rows) else np.zeros(0, dtype=np.int64)
        return np.where(first == np.iinfo(np.int64).max, -1, first)


def distinct_layouts(nodes: Mapping[str, NodeState]) -> list[NodeGpus | None]:
    """The distinct layouts of the nodes (what the needs per GPU type depend on): without
    a pass over the nodes for a `GpuTable`."""
    if isinstance(nodes, GpuTable):
        present = np.unique(nodes.node_layout) if len(nodes.names) else []
        return [nodes.layouts[int(i)] for i in present]
    return list(dict.fromkeys(node.gpus for node in nodes.values()))
