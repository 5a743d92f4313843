"""Which GPUs of a request can take the job now, for all of them at once. Pure.

Filter's verdicts and prioritize's prices both start here: for every GPU row
of a `GpuTable`, the job's padded MiB and seconds on that GPU type, the
collocation limit, and whether the GPU has room (memory and a slot, and beside
the room a hold keeps: `extender.core.room.has_room`, asked only for the few
held GPUs). Per node: how many GPUs have room and the best fit among them (least
free memory left, then the lowest index), as `room.usable_gpus` orders them.

Needs and limits are looked up once per distinct layout, never per node. The
result is kept on the table (`GpuTable.remember`), so prioritize reuses what
filter computed for the same pod, and the holds the waiters' own fits, while the
state it read is unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from extender.core.gpu_table import GpuTable
from extender.core.room import Holds, has_room
from extender.model import Limits, Need, NodeGpus, need_on

NO_INDEX = np.iinfo(np.int64).max
MEMO_ENTRIES = 32  # fits kept on a table: a pod's, and the waiters' its holds weigh


@dataclass(frozen=True)
class Fit:
    """The job on every GPU row of a table (see the module docstring).

    Per layout (the table's `layouts`): `needs` (None: no usable layout, or not among
    the request's nodes) and `limits`. Per row: `padded_mib` (inf on a node without a
    usable layout), `work_s`, `limit`, `gpus` (GPUs of one node the job needs at once),
    `room`. Per node: `room_count`; per segment (`GpuTable.seg_nodes`): `best_index`,
    the GPU index of the best fit with room (`NO_INDEX` when none)."""

    needs: list[Need | None]
    limits: list[int]
    padded_mib: np.ndarray
    work_s: np.ndarray
    limit: np.ndarray
    gpus: np.ndarray
    room: np.ndarray
    room_count: np.ndarray
    best_index: np.ndarray


def usable(gpus: NodeGpus | None) -> bool:
    """A layout with GPUs to place on (no problem, at least one GPU)."""
    return gpus is not None and not gpus.problem and gpus.count > 0


def fit_rows(table: GpuTable, needs: Mapping[str, Need], limits: Limits,
             holds: Holds) -> Fit:
    """The job on every GPU row of `table`. Raises KeyError for a GPU type of a usable
    node that `needs` lacks (as the per-node code did)."""
    # type(needs): a waiter's needs (`patience._WaiterNeeds`) also answer for types not listed
    key = (type(needs), tuple(sorted(needs.items())), limits, tuple(sorted(holds.items())))
    return table.remember("fit", key, lambda: _fit_rows(table, needs, limits, holds),
                          MEMO_ENTRIES)


def _fit_rows(table: GpuTable, needs: Mapping[str, Need], limits: Limits,
              holds: Holds) -> Fit:
    present = np.bincount(table.node_layout, minlength=len(table.layouts)) > 0
    layout_needs: list[Need | None] = []
    layout_limits: list[int] = []
    for gpus, here in zip(table.layouts, present.tolist(), strict=True):
        ok = here and usable(gpus)
        layout_needs.append(need_on(needs, gpus) if ok and gpus is not None else None)
        layout_limits.append(limits.for_node(gpus) if ok and gpus is not None else 0)
    padded = np.array([np.inf if n is None else n.padded_mib for n in layout_needs])
    work = np.array([np.inf if n is None else n.predicted_s for n in layout_needs])
    count = np.array([1 if n is None else n.gpus for n in layout_needs], dtype=np.int64)
    rows = table.gpu_layout
    row_padded, row_limit = padded[rows], np.array(layout_limits, dtype=np.int64)[rows]
    room = (table.gpu_jobs < row_limit) & (row_padded <= table.gpu_free)
    for (node, index), hold in holds.items():
        row = table.row_of(node, index)
        need = None if row is None else layout_needs[int(table.gpu_layout[row])]
        if row is not None and need is not None:
            position = int(table.gpu_node[row])
            gpu = table[node].gpu_states[row - int(table.node_start[position])]
            room[row] = has_room(gpu, need, int(row_limit[row]), hold)
    room_count = table.per_node(table.count_per_segment(room), 0)
    best_index = np.full(len(table.seg_nodes), NO_INDEX)
    segments, best = table.first_in_order(room, table.fit_order, table.fit_rank)
    best_index[segments] = table.gpu_index[best]
    return Fit(layout_needs, layout_limits, row_padded, work[rows], row_limit, count[rows],
               room, room_count, best_index)
