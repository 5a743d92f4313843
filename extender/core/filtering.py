"""Filter (paper Algorithm 2): which nodes can take the pod now, and why not. Pure.

A node passes when enough of its GPUs (the pod's `Need.gpus`, one by default)
have room for the padded estimate of the job on that GPU type, below its
collocation limit and beside the room held for older (or much shorter) waiting pods
(`extender.core.room`). The verdict names the best-fit GPU, or says why not in
words `kubectl describe` users read (`extender.core.per_node` holds them). A pod
that fits nowhere (and could fit somewhere once jobs end) becomes a waiter, as does
one worth keeping for a much faster GPU that frees later (`extender.core.patience`),
or for a GPU of its own rather than share (`extender.core.sharing`).

Many nodes are judged at once over the request's `GpuTable` (`extender.core.fit`),
a reason written once per distinct failure; a request naming fewer than
`ARRAYS_FROM` nodes is judged node by node (`per_node`), the same decisions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from extender.by_node import NodeVerdicts
from extender.core import decisions, per_node
from extender.core.fit import Fit, fit_rows
from extender.core.gpu_table import GpuTable, judged_at_once
from extender.core.interference import Alphas, alphas_for
from extender.core.job import Assessment, NotOurs, PodJob, Refused
from extender.core.patience import FasterLater, faster_later, holds_in_force
from extender.core.sharing import OwnGpuSoon, own_gpu_soon
from extender.core.room import NO_HOLDS, Holds, has_room, held_from
from extender.model import (
    Decision, FilterRecord, Limits, Need, NodeGpus, NodeState, Verdict, Waiter, type_of,
)  # fmt: skip
from extender.settings import Settings

@dataclass(frozen=True)
class FilterDecision:
    """Filter's whole answer: a verdict per node, and what to write. `record`: what bind
    will need (annotated pods only); `waiter`: the pod fits nowhere now, record it as
    waiting (or refresh it); `told`: decisions for the pods' owners (this pod waits, a
    GPU is held for another waiting pod)."""

    verdicts: Mapping[str, Verdict]  # a `NodeVerdicts` over many nodes
    record: FilterRecord | None = None
    waiter: Waiter | None = None
    passthrough: bool = False
    told: tuple[Decision, ...] = ()

    def writes_beyond(self, written: FilterRecord | None) -> bool:
        """Whether anything is left to write once `written` went with the read: another
        record, a waiter, decisions told."""
        return self.record is not None and (self.record != written or bool(self.told)
                                            or self.waiter is not None)


def decide_filter(assessment: Assessment, nodes: Mapping[str, NodeGpus | None],
                  settings: Settings) -> FilterDecision:
    """The filter decision for a pod over the request's nodes (layouts: None in names mode)."""
    match assessment:
        case NotOurs():
            return FilterDecision(dict.fromkeys(nodes, Verdict(True)), passthrough=True)
        case Refused(reason):
            return FilterDecision(dict.fromkeys(nodes, Verdict(False, reason, unresolvable=True)))
    assert isinstance(assessment, PodJob)
    snapshot, needs, pod = assessment.snapshot, assessment.needs, assessment.demand
    limits = settings.collocation
    alphas = alphas_for(snapshot, settings)
    holds = holds_in_force(assessment, settings, alphas)
    verdicts, passing = _verdicts(snapshot.nodes, needs, limits, holds)
    since = next((w.since for w in snapshot.waiting if w.uid == pod.uid), snapshot.now)
    faster = None
    if passing and settings.hold_for:
        faster = _worth_waiting_for(assessment, holds, alphas, snapshot.now - since, settings)
        if faster is not None:
            verdicts, passing = _refused(verdicts, Verdict(False, faster.reason())), []
    held_nodes = sorted({node for node, _ in holds}, key=list(snapshot.nodes).index) \
        if holds else []
    held = {name: tuple(blocked) for name in held_nodes if verdicts[name].fits
            and (blocked := held_from(snapshot.nodes[name], _need(snapshot.nodes[name], needs),
                                      limits, holds))}  # fmt: skip
    # Bind comes only to a node that passed: keep no other layout (a large request's record).
    layouts = ({name: gpus for name in passing if (gpus := nodes[name]) is not None}
               if any(nodes.values()) else {})
    waits = settings.hold_for and not passing and not all(
        v.unresolvable for v in verdicts.values())
    waiter = None
    if waits:
        per_type = {t: (n.padded_mib, n.predicted_s) for t, n in needs.items()}
        waiter = Waiter(pod.uid, since, per_type, f"{pod.namespace}/{pod.name}", pod.gpus)
    told = decisions.holds_told(holds, snapshot.waiting,
                                {node: snapshot.nodes[node].gpus for node in held_nodes})
    if waiter is not None:
        told += (decisions.waiting(waiter, faster.reason() if faster else ""),)
    return FilterDecision(verdicts, FilterRecord(pod, layouts, held), waiter, told=told)


def _worth_waiting_for(job: PodJob, holds: Holds, alphas: Alphas, waited_s: float,
                       settings: Settings) -> FasterLater | OwnGpuSoon | None:
    """A GPU the pod should wait for though it fits now: a much faster one
    (`patience.faster_later`, while it has waited less than EXTENDER_HOLD_AFTER_S), else
    one of its own rather than share (`sharing.own_gpu_soon`, with no bound: a long job
    that gives up waiting shares at the worst time, having paid the wait too)."""
    faster_s = settings.hold_after_s - waited_s if settings.wait_for_faster else 0.0
    if faster_s <= 0 and not settings.share_if_pays:
        return None
    snapshot = job.snapshot
    table = GpuTable.from_states(snapshot.nodes)
    fit = fit_rows(table, job.needs, settings.collocation, holds)
    if faster_s > 0 and (found := faster_later(table, fit, alphas, snapshot.now,
                                               settings.wait_for_faster, faster_s,
                                               holds)) is not None:
        return found
    return own_gpu_soon(table, fit, alphas, snapshot.now, holds=holds) \
        if settings.share_if_pays else None


def filter_nodes(nodes: Mapping[str, NodeState], needs: Mapping[str, Need], limits: Limits,
                 holds: Holds = NO_HOLDS) -> Mapping[str, Verdict]:
    """Verdict per node."""
    return _verdicts(nodes, needs, limits, holds)[0]


def node_verdict(node: NodeState, needs: Mapping[str, Need], limits: Limits,
                 holds: Holds = NO_HOLDS) -> Verdict:
    return filter_nodes({node.name: node}, needs, limits, holds)[node.name]


def _verdicts(nodes: Mapping[str, NodeState], needs: Mapping[str, Need], limits: Limits,
              holds: Holds) -> tuple[Mapping[str, Verdict], list[str]]:
    """Verdict per node and the passing nodes, in order: at once, or node by node."""
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
    verdicts, fits = _judge(table, fit_rows(table, needs, limits, holds), holds)
    passing = table.names_array[fits].tolist()
    return NodeVerdicts(table.names, verdicts, fits, passing, table.positions), passing


def _judge(table: GpuTable, fit: Fit, holds: Holds) -> tuple[np.ndarray, np.ndarray]:
    """A verdict per node of `table`, in order (one `Verdict` per distinct outcome), and
    which nodes pass."""
    # Whole layouts that can never take the job: no layout, a problem, too small a card.
    verdicts = [per_node.layout_verdict(g, n)
                for g, n in zip(table.layouts, fit.needs, strict=True)]
    out = _objects(verdicts)[table.node_layout]
    settled = np.array([v is not None for v in verdicts], dtype=bool)[table.node_layout]
    gpus_needed = table.per_node(fit.gpus[table.seg_starts], 1)
    fits = ~settled & (fit.room_count >= gpus_needed)
    if fits.any():
        passing = np.flatnonzero(fits)
        best = fit.best_index[table.node_seg[passing]]
        out[passing] = _objects([Verdict(True, gpu_index=i)
                                 for i in range(int(best.max()) + 1)])[best]
    failing = ~settled & ~fits
    if holds and failing.any():
        for position, verdict in _held_verdicts(table, fit, holds, failing).items():
            out[position] = verdict
            failing[position] = False
    if failing.any():
        _failing_verdicts(table, fit, failing, out)
    return out, fits


def _objects(values: list[Any]) -> np.ndarray:
    array = np.empty(len(values), dtype=object)
    array[:] = values
    return array


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
    out[positions] = _objects(verdicts)[which]


def _short_verdict(table: GpuTable, fit: Fit, layout: int, room: int, free: float,
                   index: int) -> Verdict:
    gpus, need = table.layouts[layout], fit.needs[layout]
    assert gpus is not None and need is not None
    return Verdict(False, per_node.short_reason(need, gpus, fit.limits[layout], room,
                                                None if index < 0 else (free, index)))


def _refused(verdicts: Mapping[str, Verdict], refused: Verdict) -> Mapping[str, Verdict]:
    """`verdicts` with every passing node's replaced by `refused` (as arrays, if they are)."""
    if isinstance(verdicts, NodeVerdicts):
        array = verdicts.array.copy()
        array[verdicts.fits] = _objects([refused])
        return NodeVerdicts(verdicts.names, array, np.zeros_like(verdicts.fits), [],
                            verdicts.positions)
    return {name: refused if verdict.fits else verdict for name, verdict in verdicts.items()}


def _need(node: NodeState, needs: Mapping[str, Need]) -> Need:
    assert node.gpus is not None  # a passing node has a layout
    return needs[type_of(node.gpus)]

