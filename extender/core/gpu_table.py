"""The GPUs of the nodes a request names, as arrays: what filter and prioritize read. Pure.

A `GpuTable` holds the request's nodes in request order, each with its layout
(an index into a short list of distinct layouts), and every GPU of them as a
row (node order, then GPU order): its index, memory, free MiB, job count and
where its jobs sit in packed `Jobs` arrays (queue order). Decisions then cost
array operations, not Python per node.

It is also the snapshot's ``Mapping[str, NodeState]``: a `NodeState` is only
materialised when something asks for one node (a reason naming a held GPU, bind,
the monitor). Built from `NodeState`s (`from_states`: tests, one-node requests,
layouts a request claims) or, incrementally, by a worker's queue mirror
(`extender.state.gpu_arrays`). Immutable once built; `remember` lets filter and
prioritize of one pod, and the requests that read the same table, share work on it.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence, ValuesView
from typing import Any, NamedTuple, TypeVar

import numpy as np

from extender.model import GpuState, NodeGpus, NodeState, QueuedJob

T = TypeVar("T")
IntArray = np.ndarray
FloatArray = np.ndarray
_NO_RANK = np.iinfo(np.int64).max
ARRAYS_FROM = 32  # requests naming fewer nodes are judged node by node (`core.per_node`)
StateCache = dict[str, tuple[int, NodeState]]  # node -> (the version it shows, its state)


class Jobs(NamedTuple):
    """Packed job columns (a GPU row's jobs are `count` slots from its `job_start`)."""

    mib: FloatArray
    predicted_s: FloatArray
    started_at: FloatArray
    expires_at: FloatArray
    uid: Sequence[str]
    cpu_milli: FloatArray  # CPU each job's pod requested (0: not known)

    @classmethod
    def of(cls, jobs: Sequence[QueuedJob]) -> Jobs:
        columns = list(zip(*jobs, strict=True)) or [(), (), (), (), (), ()]
        uid, mib, predicted, started, expires, cpu = columns
        return cls(np.array(mib, dtype=float), np.array(predicted, dtype=float),
                   np.array(started, dtype=float), np.array(expires, dtype=float), list(uid),
                   np.array(cpu, dtype=float))


class NodeShape:
    """What a table's nodes and GPU rows are, apart from what is on them: names (request
    order), layouts, rows per node, each row's GPU index and memory, and what follows from
    those. Shared by every table of the same nodes while their layouts stay."""

    def __init__(self, names: Sequence[str], layouts: Sequence[NodeGpus | None],
                 node_layout: IntArray, node_rows: IntArray, gpu_index: IntArray,
                 gpu_capacity: FloatArray) -> None:
        self.names = names if isinstance(names, list) else list(names)
        self.layouts = layouts
        self.node_layout, self.node_rows = node_layout, node_rows
        self.gpu_index, self.gpu_capacity = gpu_index, gpu_capacity
        self.node_start = np.cumsum(node_rows, dtype=np.int64) - node_rows
        self.gpu_node = np.repeat(np.arange(len(self.names)), node_rows)
        self.gpu_layout = node_layout[self.gpu_node]
        has_rows = node_rows > 0
        self.seg_nodes = np.flatnonzero(has_rows)
        self.seg_starts = self.node_start[has_rows]
        self.gpu_seg = np.repeat(np.arange(len(self.seg_nodes)), node_rows[has_rows])
        self.node_seg = np.full(len(self.names), -1)
        self.node_seg[self.seg_nodes] = np.arange(len(self.seg_nodes))
        self.row_start = self.node_start[self.gpu_node]
        self._positions: dict[str, int] | None = None
        self._names_array: np.ndarray | None = None
        self._node_cpu: FloatArray | None = None

    @property
    def positions(self) -> dict[str, int]:
        """Node name -> position (built on first use: most requests never need it)."""
        if self._positions is None:
            self._positions = {name: i for i, name in enumerate(self.names)}
        return self._positions

    @property
    def node_cpu(self) -> FloatArray:
        """Per node, its allocatable CPU in millicores as its layout says (0: not known)."""
        if self._node_cpu is None:
            per_layout = np.array([layout.cpu_milli if layout else 0 for layout in self.layouts]
                                  + [0], dtype=float)  # + [0]: no layouts at all
            self._node_cpu = per_layout[self.node_layout]
        return self._node_cpu

    @property
    def names_array(self) -> np.ndarray:
        if self._names_array is None:
            names = np.empty(len(self.names), dtype=object)
            names[:] = self.names
            self._names_array = names
        return self._names_array


class GpuTable(Mapping[str, NodeState]):
    """Nodes and their GPUs as arrays (see the module docstring).

    From its `shape`, per node (request order): `names`, `node_layout` (index into
    `layouts`; a `None` layout is a node without one), `node_start`, `node_rows` (its GPU
    rows); per GPU row: `gpu_node` (node position), `gpu_index`, `gpu_capacity`. Per row,
    what is on it: `gpu_free` (MiB, as `GpuState.free_mib`), `gpu_jobs`, `job_start` (into
    `jobs`, which may hold other rows' jobs too). Segments are the nodes with GPU rows
    (`seg_nodes`, `gpu_seg`, `node_seg`: -1 for a node without).

    Two orders of the rows, node by node: `fit_order` (best fit first: free MiB, then
    GPU index, as `room.usable_gpus` sorts) and `roomy_order` (most free first, then
    GPU order, as `max` finds the roomiest), from each row's rank within its node
    (`fit_rank`, `roomy_rank`: given by the worker's arrays, else sorted here).

    A node's `NodeState` is rebuilt from its rows; `states` (shared between tables, with
    `node_version`: what each node shows) keeps one per node and version.
    """

    def __init__(self, shape: NodeShape, gpu_free: FloatArray, gpu_jobs: IntArray,
                 job_start: IntArray, jobs: Jobs, *, fit_rank: IntArray | None = None,
                 roomy_rank: IntArray | None = None, states: StateCache | None = None,
                 node_version: IntArray | None = None) -> None:
        self.shape = shape
        self.names, self.layouts = shape.names, shape.layouts
        self.node_layout, self.node_rows = shape.node_layout, shape.node_rows
        self.node_start, self.gpu_node = shape.node_start, shape.gpu_node
        self.gpu_layout, self.gpu_index = shape.gpu_layout, shape.gpu_index
        self.gpu_capacity, self.seg_nodes = shape.gpu_capacity, shape.seg_nodes
        self.seg_starts, self.gpu_seg, self.node_seg = (shape.seg_starts, shape.gpu_seg,
                                                        shape.node_seg)
        self.gpu_free, self.gpu_jobs, self.job_start = gpu_free, gpu_jobs, job_start
        self.jobs = jobs
        self._fit_rank, self._roomy_rank = fit_rank, roomy_rank
        self._fit_order: IntArray | None = None
        self._roomy_order: IntArray | None = None
        self.memo: dict[Any, Any] = {}
        self._states: StateCache = {} if states is None else states
        self._node_version = node_version

    @classmethod
    def from_states(cls, nodes: Mapping[str, NodeState]) -> GpuTable:
        """The table of these node states (Python per GPU: for small or unusual requests)."""
        if isinstance(nodes, GpuTable):
            return nodes
        layout_ids: dict[NodeGpus | None, int] = {}
        node_layout, node_rows = [], []
        rows: list[tuple[int, float, float, int, int]] = []
        jobs: list[QueuedJob] = []
        for state in nodes.values():
            node_layout.append(layout_ids.setdefault(state.gpus, len(layout_ids)))
            node_rows.append(len(state.gpu_states))
            for gpu in state.gpu_states:
                rows.append((gpu.index, gpu.capacity_mib, gpu.free_mib, len(gpu.jobs), len(jobs)))
                jobs.extend(gpu.jobs)
        index, capacity, free, count, start = list(zip(*rows, strict=True)) or [()] * 5
        shape = NodeShape(list(nodes), list(layout_ids), np.array(node_layout, dtype=np.int64),
                          np.array(node_rows, dtype=np.int64), np.array(index, dtype=np.int64),
                          np.array(capacity, dtype=float))
        table = cls(shape, np.array(free, dtype=float), np.array(count, dtype=np.int64),
                    np.array(start, dtype=np.int64), Jobs.of(jobs))
        table._states = {name: (0, state) for name, state in nodes.items()}
        return table

    # --- Mapping[str, NodeState] ---------------------------------------------------------

    def __getitem__(self, name: str) -> NodeState:
        position = self.positions.get(name)
        if position is None:
            raise KeyError(name)
        return self._state(name, position)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.names)

    def __contains__(self, name: object) -> bool:
        return name in self.positions

    def values(self) -> ValuesView[NodeState]:
        return _States(self)

    # --- for decisions -------------------------------------------------------------------

    @property
    def positions(self) -> dict[str, int]:
        """Node name -> position."""
        return self.shape.positions

    @property
    def names_array(self) -> np.ndarray:
        return self.shape.names_array

    @property
    def fit_rank(self) -> IntArray:
        if self._fit_rank is None:
            self._fit_rank = _ranks(self.gpu_node, self.shape.row_start,
                                    (self.gpu_index, self.gpu_free))
        return self._fit_rank

    @property
    def fit_order(self) -> IntArray:
        if self._fit_order is None:
            self._fit_order = _order(self.shape.row_start, self.fit_rank)
        return self._fit_order

    def remember(self, kind: str, key: Hashable, compute: Callable[[], T], keep: int) -> T:
        """`compute()`, kept on this table under `kind` and `key` (the latest `keep` of that
        kind): what follows from the table alone is the same for every request that reads
        it, and a worker hands the same table to each request while nothing changed. A key
        that cannot be hashed is computed and not kept."""
        kept = self.memo.setdefault(kind, {})
        try:
            if key in kept:
                return kept[key]
        except TypeError:
            return compute()
        value = compute()
        if len(kept) >= keep:
            del kept[next(iter(kept))]
        kept[key] = value
        return value

    @property
    def roomy_rank(self) -> IntArray:
        if self._roomy_rank is None:
            local = np.arange(len(self.gpu_free)) - self.shape.row_start
            self._roomy_rank = _ranks(self.gpu_node, self.shape.row_start, (local, -self.gpu_free))
        return self._roomy_rank

    @property
    def roomy_order(self) -> IntArray:
        if self._roomy_order is None:
            self._roomy_order = _order(self.shape.row_start, self.roomy_rank)
        return self._roomy_order

    def layout_of(self, position: int) -> NodeGpus | None:
        return self.layouts[int(self.node_layout[position])]

    def row_of(self, node: str, index: int) -> int | None:
        """The row of GPU `index` of `node`; None when the table has no such GPU."""
        position = self.positions.get(node)
        if position is None:
            return None
        start, size = int(self.node_start[position]), int(self.node_rows[position])
        local = np.flatnonzero(self.gpu_index[start:start + size] == index)
        return start + int(local[0]) if len(local) else None

    def jobs_matrix(self, rows: IntArray, width: int, values: FloatArray) -> FloatArray:
        """`values` (a `jobs` column) of the first `width` jobs of each GPU row in `rows`,
        one row each, queue order; 0 past a row's own jobs."""
        columns = np.arange(width)
        index = self.job_start[rows][:, None] + columns[None, :]
        real = columns[None, :] < self.gpu_jobs[rows][:, None]
        if not len(values):
            return np.zeros(index.shape)
        return np.where(real, values[np.where(real, index, 0)], 0.0)

    def count_per_segment(self, mask: np.ndarray) -> IntArray:
        """Per segment (`seg_nodes` order), how many of its rows `mask` holds for."""
        return np.bincount(self.gpu_seg[mask], minlength=len(self.seg_nodes))

    def per_node(self, segment_values: np.ndarray, empty: Any) -> np.ndarray:
        """Per-segment values spread to every node (`empty` for nodes without GPU rows)."""
        out = np.full(len(self.names), empty, dtype=np.result_type(segment_values, type(empty)))
        out[self.seg_nodes] = segment_values
        return out

    def first_in_order(self, mask: np.ndarray, order: IntArray,
                       rank: IntArray) -> tuple[IntArray, IntArray]:
        """Per segment with a row where `mask` holds, the first such row in `order` (one of
        the table's orders, node by node, and its `rank`: each row's place in its node):
        (segments, rows), segments ascending. The least rank per node, not a pass over
        the permuted rows."""
        if not len(self.seg_starts):
            return self.seg_starts, self.seg_starts
        least = np.minimum.reduceat(np.where(mask, rank, _NO_RANK), self.seg_starts)
        segments = np.flatnonzero(least != _NO_RANK)
        return segments, order[self.seg_starts[segments] + least[segments]]

    def first_least(self, mask: np.ndarray, values: np.ndarray, order: IntArray,
                    rank: IntArray) -> tuple[IntArray, IntArray]:
        """Per segment with a row where `mask` holds, the first row in `order` with the least
        of `values` among those rows: (segments, rows)."""
        hits = np.flatnonzero(mask)
        if not len(hits):
            return hits, hits
        segments = self.gpu_seg[hits]
        starts = np.flatnonzero(np.r_[True, segments[1:] != segments[:-1]])
        lengths = np.diff(np.r_[starts, len(hits)])
        least = np.repeat(np.minimum.reduceat(values[hits], starts), lengths)
        at_least = np.zeros(len(mask), dtype=bool)
        at_least[hits[values[hits] == least]] = True
        return self.first_in_order(at_least, order, rank)

    def _state(self, name: str, position: int) -> NodeState:
        version = -1 if self._node_version is None else int(self._node_version[position])
        kept = self._states.get(name)
        if kept is not None and kept[0] == max(version, 0):
            return kept[1]
        start = int(self.node_start[position])
        jobs = self.jobs
        gpus = []
        for row in range(start, start + int(self.node_rows[position])):
            first = int(self.job_start[row])
            queue = tuple(QueuedJob(jobs.uid[j], float(jobs.mib[j]), float(jobs.predicted_s[j]),
                                    float(jobs.started_at[j]), float(jobs.expires_at[j]),
                                    float(jobs.cpu_milli[j]))
                          for j in range(first, first + int(self.gpu_jobs[row])))
            gpus.append(GpuState(name, int(self.gpu_index[row]), int(self.gpu_capacity[row]),
                                 queue))
        state = NodeState(name, self.layout_of(position), tuple(gpus))
        if version >= 0:
            self._states[name] = (version, state)
        return state


class _States(ValuesView[NodeState]):
    """A table's node states in order, without a lookup by name for each."""

    _mapping: GpuTable

    def __iter__(self) -> Iterator[NodeState]:
        return map(self._mapping._state, self._mapping.names, range(len(self._mapping)))


def _ranks(node: IntArray, row_node_start: IntArray, keys: tuple[np.ndarray, ...]) -> IntArray:
    """Each row's rank within its node (rows of a node contiguous) when the node's rows are
    sorted by `keys` (last key first, as `np.lexsort`); ties keep row order."""
    order = np.lexsort((np.arange(len(node)), *keys, node))
    rank = np.empty(len(node), dtype=np.int64)
    rank[order] = np.arange(len(node)) - row_node_start[order]
    return rank


def _order(row_node_start: IntArray, rank: IntArray) -> IntArray:
    """Rows permuted so that each node's rows come in rank order (nodes stay in order)."""
    order = np.empty(len(rank), dtype=np.int64)
    order[row_node_start + rank] = np.arange(len(rank))
    return order


def judged_at_once(nodes: Mapping[str, NodeState]) -> bool:
    """Whether decisions over `nodes` take the array path (a table, or many nodes)."""
    return isinstance(nodes, GpuTable) or len(nodes) >= ARRAYS_FROM


def distinct_layouts(nodes: Mapping[str, NodeState]) -> list[NodeGpus | None]:
    """The distinct layouts of the nodes, in no particular order (what the job's needs per
    GPU type depend on): without a pass over the nodes for a `GpuTable`."""
    if isinstance(nodes, GpuTable):
        present = np.bincount(nodes.node_layout, minlength=len(nodes.layouts)) > 0
        return [nodes.layouts[i] for i in np.flatnonzero(present).tolist()]
    return list(dict.fromkeys(node.gpus for node in nodes.values()))
