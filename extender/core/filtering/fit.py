"""The filter's second stage, fit: which nodes can take the pod now, and why not (paper
Algorithm 2). Pure.

A node passes when enough of its GPUs (the pod's `Need.gpus`, one by default)
have room for the padded estimate of the job on that GPU type, below its
collocation limit and beside the room held for waiting pods (`extender.core.room`,
the holds stage's `Hold`s). The verdict names the best-fit GPU, or says why not in
words `kubectl describe` users read (`extender.core.per_node` holds them).

Many nodes are judged at once over the request's `GpuTable` (`extender.core.fit_rows`),
a reason written once per distinct failure; a request naming fewer than
`ARRAYS_FROM` nodes is judged node by node (`per_node`), the same decisions.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from extender.by_node import NodeVerdicts, object_array
from extender.core import per_node
from extender.core.fit_rows import Fit, fit_rows
from extender.core.gpu_table import GpuTable, judged_at_once
from extender.core.room import NO_HOLDS, Holds, has_room
from extender.model import Limits, Need, NodeGpus, NodeState, Verdict


def judge(nodes: Mapping[str, NodeState], needs: Mapping[str, Need], limits: Limits,
          holds: Holds) -> tuple[Mapping[str, Verdict], list[str]]:
    """The stage: a verdict per node and the passing nodes, in order; judged at once, or
    node by node for a request naming few nodes."""
    if not judged_at_once(nodes):
        by_layout: dict[NodeGpus | None, Verdict] = {}  # idle nodes: the layout decides
        held_nodes = {node for node, _ in holds}
        verdicts = {}
        for name, node in nodes.items():
            if node.idle and name not in held_nodes:
                verdict = by_layout.get(node.gpus)
                if verdict is None:
                    verdict = by_layout[node.gpus] = per_node.node_verdict(node, needs, limits)
            else:
                verdict = per_node.node_verdict(node, needs, limits, holds)
            verdicts[name] = verdict
        return verdicts, [name for name, verdict in verdicts.items() if verdict.fits]
    table = GpuTable.from_states(nodes)
    verdicts, fits = _judge_at_once(table, fit_rows(table, needs, limits, holds), holds)
    passing = table.names_array[fits].tolist()
    return NodeVerdicts(table.names, verdicts, fits, passing, table.positions), passing


def filter_nodes(nodes: Mapping[str, NodeState], needs: Mapping[str, Need], limits: Limits,
                 holds: Holds = NO_HOLDS) -> Mapping[str, Verdict]:
    """Verdict per node."""
    return judge(nodes, needs, limits, holds)[0]


def node_verdict(node: NodeState, needs: Mapping[str, Need], limits: Limits,
                 holds: Holds = NO_HOLDS) -> Verdict:
    return filter_nodes({node.name: node}, needs, limits, holds)[node.name]


def _judge_at_once(table: GpuTable, fit: Fit, holds: Holds) -> tuple[np.ndarray, np.ndarray]:
    """A verdict per node of `table`, in order (one `Verdict` per distinct outcome), and
    which nodes pass."""
    # Whole layouts that can never take the job: no layout, a problem, too small a card.
    verdicts = [per_node.layout_verdict(g, n)
                for g, n in zip(table.layouts, fit.needs, strict=True)]
    out = object_array(verdicts)[table.node_layout]
    settled = np.array([v is not None for v in verdicts], dtype=bool)[table.node_layout]
    gpus_needed = table.per_node(fit.gpus[table.seg_starts], 1)
    fits = ~settled & (fit.room_count >= gpus_needed)
    if fits.any():
        passing = np.flatnonzero(fits)
        best = fit.best_index[table.node_seg[passing]]
        out[passing] = object_array([Verdict(True, gpu_index=i)
                                 for i in range(int(best.max()) + 1)])[best]
    failing = ~settled & ~fits
    if holds and failing.any():
        for position, verdict in _held_verdicts(table, fit, holds, failing).items():
            out[position] = verdict
            failing[position] = False
    if failing.any():
        _failing_verdicts(table, fit, failing, out)
    return out, fits


def _held_verdicts(table: GpuTable, fit: Fit, holds: Holds,
                   failing: np.ndarray) -> dict[int, Verdict]:
    """Failing nodes that would pass but for a GPU held for another waiting pod."""
    by_node: dict[int, list[tuple[int, int]]] = {}
    for node, index in holds:
        position = table.positions.get(node)
        if position is not None and failing[position]:
            by_node.setdefault(position, []).append((node, index))
    verdicts = {}
    for position, keys in by_node.items():
        name = table.names[position]
        state = table[name]
        gpus, need = state.gpus, fit.needs[int(table.node_layout[position])]
        assert gpus is not None and need is not None
        limit = fit.limits[int(table.node_layout[position])]
        held = [g for g in state.gpu_states if (name, g.index) in holds
                and has_room(g, need, limit, None)]  # fmt: skip
        if held and int(fit.room_count[position]) + len(held) >= need.gpus:
            verdicts[position] = Verdict(False, per_node.held_reason(
                held[0].index, gpus.gpu_type or gpus.product, holds[name, held[0].index]))
    return verdicts


def _failing_verdicts(table: GpuTable, fit: Fit, failing: np.ndarray, out: np.ndarray) -> None:
    """Reasons for nodes short of room: the collocation limit everywhere, or the memory of
    the roomiest GPU (most free among those below the limit, first in GPU order); one
    `Verdict` per distinct reason."""
    below = table.gpu_jobs < fit.limit
    roomiest = np.full(len(table.seg_nodes), -1)
    segments, rows = table.first_in_order(below, table.roomy_order, table.roomy_rank)
    roomiest[segments] = rows
    positions = np.flatnonzero(failing)
    rows = roomiest[table.node_seg[positions]]
    columns = (table.node_layout[positions], fit.room_count[positions],
               np.where(rows >= 0, table.gpu_free[rows], 0.0),
               np.where(rows >= 0, table.gpu_index[rows], -1))
    order = np.lexsort(columns[::-1])
    new = np.zeros(len(order), dtype=bool)
    new[0] = True
    for column in columns:
        ordered = column[order]
        new[1:] |= ordered[1:] != ordered[:-1]
    firsts = order[new]
    which = np.empty(len(order), dtype=np.int64)
    which[order] = np.cumsum(new) - 1
    verdicts = [_short_verdict(table, fit, layout, room, free, index) for layout, room, free, index
                in zip(*(column[firsts].tolist() for column in columns), strict=True)]
    out[positions] = object_array(verdicts)[which]


def _short_verdict(table: GpuTable, fit: Fit, layout: int, room: int, free: float,
                   index: int) -> Verdict:
    gpus, need = table.layouts[layout], fit.needs[layout]
    assert gpus is not None and need is not None
    return Verdict(False, per_node.short_reason(need, gpus, fit.limits[layout], room,
                                                None if index < 0 else (free, index)))
