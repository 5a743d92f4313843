"""Prioritize (paper Eq. 1-2): each node priced by the GPUs bind would take, then scored. Pure.

The price comes from the configured scoring policy (`extender.policies`); the
GPU priced is the one bind will reserve: the cheapest, best fit among equals.
A pod on k GPUs of one node (`Need.gpus`) is priced on the slowest of the k
cheapest usable GPUs (best fit first among equals), with the memory those k
would have left.

Many nodes are priced at once over the request's `GpuTable`: the GPUs with room
come from `extender.core.fit_rows` (shared with filter), idle ones cost the job
alone, busy ones are priced by the policy on arrays (`ScoringPolicy.costs_s`). A
request naming fewer than `ARRAYS_FROM` nodes is priced node by node
(`extender.core.per_node`), the same prices.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import replace
from typing import NamedTuple

import numpy as np

from extender.by_node import NodeScores, NodeVerdicts
from extender.core import fragmentation, per_node
from extender.core.filtering.holds import holds_in_force
from extender.core.fit_rows import Fit, fit_rows
from extender.core.gpu_table import GpuTable, judged_at_once
from extender.core.interference import Alphas, alphas_for
from extender.core.job import Assessment, PodJob
from extender.core.room import NO_HOLDS, Holds
from extender.model import ClusterSnapshot, Limits, Need, NodeGpus, NodeState, Verdict
from extender.policies.base import TIED_SCORE, Placement, ScoringPolicy
from extender.policies.timeline_arrays import remaining_s
from extender.settings import Settings


def decide_scores(assessment: Assessment, nodes: Collection[str], settings: Settings,
                  passed_by: Mapping[str, Verdict] | None = None) -> Mapping[str, float]:
    """Scores in [0, 1] per named node; all 0 for pods not ours or refused. `nodes`: the
    assessment snapshot's nodes, or a part of them (filter's snapshot, reused for the
    nodes that passed): only those are scored, as if they were all it held.
    `passed_by`: filter's verdicts on this assessment, when `nodes` may be the ones they
    passed (then their `fits` marks them, with no lookup per name)."""
    if not isinstance(assessment, PodJob):
        return dict.fromkeys(nodes, 0.0)
    snapshot = assessment.snapshot
    alphas = alphas_for(snapshot, settings)
    holds = holds_in_force(assessment, settings, alphas)
    among = None if len(nodes) == len(snapshot.nodes) else nodes
    return score_nodes(snapshot, assessment.needs, settings.collocation, settings.policy, holds,
                       alphas, among, passed_by, settings.tie_break,
                       assessment.demand.cpu_milli)


def score_nodes(snapshot: ClusterSnapshot, needs: Mapping[str, Need], limits: Limits,
                policy: ScoringPolicy, holds: Holds = NO_HOLDS,
                alphas: Alphas | None = None, among: Collection[str] | None = None,
                passed_by: Mapping[str, Verdict] | None = None,
                tie_break: str = "best-fit", job_cpu: float = 0.0) -> Mapping[str, float]:
    """Scores in [0, 1] for the nodes that can take the job (others score 0): a
    `NodeScores` over many nodes, in the snapshot's order. Busy GPUs are played forward
    at their type's alpha (`alphas`; None: the policy's own everywhere). `among`: the
    snapshot's nodes to score (None: all of them); the others are left out. `tie_break`:
    among the nodes priced alike, the best fit wins, or the least fragmenting
    (`extender.core.fragmentation`, the job asking `job_cpu` millicores of its node; judged
    over the arrays however few the nodes)."""
    alphas = alphas or Alphas(policy.alpha)
    if tie_break == "best-fit" and not judged_at_once(snapshot.nodes):
        held_nodes = {node for node, _ in holds}
        idle: dict[NodeGpus | None, Placement | None] = {}  # idle nodes: the layout decides
        placements: dict[str, Placement] = {}
        names = [name for name in snapshot.nodes if among is None or name in among]
        beside_idle = policy.beside_idle(backlog=bool(snapshot.waiting))
        if beside_idle is not policy and any(  # only a policy that differs asks (not drain)
                per_node.idle_gpu_fits(snapshot.nodes[name], needs, limits, holds)
                for name in names):
            policy = beside_idle
        for name in names:
            node = snapshot.nodes[name]
            if node.idle and name not in held_nodes:
                if node.gpus not in idle:
                    idle[node.gpus] = per_node.node_placement(node, needs, limits, snapshot.now,
                                                              policy)
                placement = idle[node.gpus]
            else:
                placement = per_node.node_placement(node, needs, limits, snapshot.now,
                                                    policy.with_alpha(alphas.of(node.gpus)),
                                                    holds)
            if placement is not None:
                placements[name] = placement
        scores = policy.scores(placements)
        return {name: scores.get(name, 0.0) for name in names}
    table = GpuTable.from_states(snapshot.nodes)
    only = None if among is None else _marked(table, among, passed_by)
    fit = fit_rows(table, needs, limits, holds)
    placed = _placements(table, fit, policy, snapshot.now, alphas.rows(table), only,
                         bool(snapshot.waiting))
    ties, left = None, placed.left
    if tie_break == "fragmentation":  # FGD's score, then the tightest fit in shares of a GPU
        ties = -fragmentation.score(_fragmentation_delta(table, fit, placed, job_cpu))
        left = _share_left(table, fit, placed)
    scores = np.zeros(len(table.names))
    scores[placed.nodes] = policy.score_array(placed.cost, left, ties)
    if only is None:
        return NodeScores(table.names, scores, table.positions)
    return NodeScores(table.names_array[only].tolist(), scores[only])


def spare_gpu_scores(snapshot: ClusterSnapshot, limits: Limits,
                     job_cpu: float) -> Mapping[str, float]:
    """Scores in [0, 1] of the snapshot's nodes for a pod that asks no GPU and `job_cpu`
    millicores: FGD's integer score of how its CPU leaves the node's free GPUs short for
    the mix (`fragmentation.cpu_delta`). The nodes it strands least (a node without GPUs
    strands none) keep 1 together, for kube-scheduler to pick among at random; the others
    their score over the best, at most `TIED_SCORE`."""
    table = GpuTable.from_states(snapshot.nodes)
    per_layout = [limits.for_node(layout) if layout is not None else 0
                  for layout in table.layouts]
    limit = np.array([*per_layout, 0], dtype=np.int64)[table.gpu_layout]
    delta = fragmentation.cpu_delta(table, limit, fragmentation.request_mix(table), job_cpu)
    points = fragmentation.score(table.per_node(delta, 0.0))
    best = points.max(initial=0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        below = np.minimum(np.where(best > 0, points / best, 0.0), TIED_SCORE)
    return NodeScores(table.names, np.where(points >= best, 1.0, below), table.positions)


def _marked(table: GpuTable, among: Collection[str],
            passed_by: Mapping[str, Verdict] | None) -> np.ndarray:
    """A bool per node of `table`: the nodes of `among`. Filter's verdicts over this very
    table already mark the nodes they passed; any other set is looked up name by name."""
    if (isinstance(passed_by, NodeVerdicts) and passed_by.names is table.names
            and len(among) == len(passed_by.passing) and list(among) == passed_by.passing):
        return passed_by.fits
    only = np.zeros(len(table.names), dtype=bool)
    only[np.fromiter(map(table.positions.__getitem__, among), dtype=np.int64,
                     count=len(among))] = True
    return only


def node_placement(node: NodeState, needs: Mapping[str, Need], limits: Limits, now: float,
                   policy: ScoringPolicy, holds: Holds = NO_HOLDS) -> Placement | None:
    """The node's price and the memory left on the GPUs bind would reserve. None when the
    node cannot take the job now."""
    nodes = {node.name: node}
    if not judged_at_once(nodes):
        return per_node.node_placement(node, needs, limits, now, policy, holds)
    table = GpuTable.from_states(nodes)
    placed = _placements(table, fit_rows(table, needs, limits, holds), policy, now)
    return Placement(float(placed.cost[0]), float(placed.left[0])) if len(placed.nodes) else None


class Placed(NamedTuple):
    """The nodes that can take the job (positions, in order), their prices, memory left
    and the GPU rows priced: `rows`, each owned by the placement at `owner` (one row for a
    job on one GPU, k for a job on k)."""

    nodes: np.ndarray
    cost: np.ndarray
    left: np.ndarray
    rows: np.ndarray
    owner: np.ndarray


def _fragmentation_delta(table: GpuTable, fit: Fit, placed: Placed,
                         job_cpu: float = 0.0) -> np.ndarray:
    """Per placement, how it changes its node's fragmentation (`extender.core.fragmentation`)."""
    return fragmentation.placement_delta(table, placed.rows, fit.padded_mib[placed.rows],
                                         fit.limit, fragmentation.request_mix(table),
                                         placed.owner, len(placed.nodes), job_cpu)


def _share_left(table: GpuTable, fit: Fit, placed: Placed) -> np.ndarray:
    """Per placement, the share of a GPU its GPUs would have left, percent (summed over a
    job's k GPUs), to 6 decimals: cards of different sizes compare as FGD compares them."""
    rows = placed.rows
    left = (table.gpu_free[rows] - fit.padded_mib[rows]) / table.gpu_capacity[rows]
    return np.round(np.bincount(placed.owner, weights=left * fragmentation.PERCENT,
                                minlength=len(placed.nodes)), 6)


def _placements(table: GpuTable, fit: Fit, policy: ScoringPolicy, now: float,
                alpha: float | np.ndarray | None = None, only: np.ndarray | None = None,
                backlog: bool = False) -> Placed:
    """The placements (`Placed`), priced at `alpha` (per GPU row or one for all; None: the
    policy's); `only` (a bool per node): the nodes to price, the others left out."""
    if only is not None:
        fit = replace(fit, room=fit.room & only[table.gpu_node],
                      room_count=np.where(only, fit.room_count, 0))
    cost = np.full(len(fit.room), np.inf)
    cost[fit.room] = fit.work_s[fit.room]  # an idle GPU costs the job alone
    beside_idle = policy.beside_idle(backlog)
    if beside_idle is not policy and (fit.room & (table.gpu_jobs == 0)).any():
        policy = beside_idle  # only a policy that differs asks (not drain), as per node
    busy = np.flatnonzero(fit.room & (table.gpu_jobs > 0))
    if len(busy):
        width = int(table.gpu_jobs[busy].max())
        left_s = remaining_s(table.jobs_matrix(busy, width, table.jobs.predicted_s),
                             table.jobs_matrix(busy, width, table.jobs.started_at), now)
        cost[busy] = policy.costs_s(left_s, fit.work_s[busy],
                                    alpha[busy] if isinstance(alpha, np.ndarray) else alpha,
                                    table.gpu_jobs[busy])
    seg_gpus = fit.gpus[table.seg_starts]
    seg_room = fit.room_count[table.seg_nodes]
    single = (seg_gpus == 1) & (seg_room >= 1)
    several = (seg_gpus > 1) & (seg_room >= seg_gpus)
    seg_cost = np.full(len(table.seg_nodes), np.inf)
    seg_left = np.zeros(len(table.seg_nodes))
    rows, row_seg = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    if single.any():
        row = _cheapest_rows(table, fit, cost)
        seg_cost[single] = cost[row[single]]
        seg_left[single] = table.gpu_free[row[single]] - fit.padded_mib[row[single]]
        rows, row_seg = row[single], np.flatnonzero(single)
    if several.any():
        taken, taken_seg = _slowest_of_cheapest(table, fit, cost, several, seg_cost, seg_left)
        rows, row_seg = np.r_[rows, taken], np.r_[row_seg, taken_seg]
    placed = single | several
    placement = np.cumsum(placed) - 1  # segment -> its place among the placed
    return Placed(table.seg_nodes[placed], seg_cost[placed], seg_left[placed], rows,
                  placement[row_seg])


def _cheapest_rows(table: GpuTable, fit: Fit, cost: np.ndarray) -> np.ndarray:
    """Per segment, the row `ScoringPolicy.cheapest` picks among the GPUs with room taken in
    best-fit order: the first that costs no more than the job alone (every GPU before it
    costs more, so it is the cheapest), else the first at the lowest cost."""
    chosen = np.full(len(table.seg_nodes), -1)
    alone = fit.room & (cost <= fit.work_s)
    segments, rows = table.first_in_order(alone, table.fit_order, table.fit_rank)
    chosen[segments] = rows
    rest = fit.room & (chosen[table.gpu_seg] < 0)
    if rest.any():
        segments, rows = table.first_least(rest, cost, table.fit_order, table.fit_rank)
        chosen[segments] = rows
    return chosen


def _slowest_of_cheapest(table: GpuTable, fit: Fit, cost: np.ndarray, several: np.ndarray,
                         seg_cost: np.ndarray, seg_left: np.ndarray
                         ) -> tuple[np.ndarray, np.ndarray]:
    """For pods on k GPUs: the k cheapest GPUs with room of each node (then best fit, then
    index), priced by the slowest of them; memory left summed over the k. Returns those
    rows and their segments."""
    rows = np.flatnonzero(fit.room & several[table.gpu_seg])
    seg = table.gpu_seg[rows]
    order = np.lexsort((table.gpu_index[rows], table.gpu_free[rows], cost[rows], seg))
    rows, seg = rows[order], seg[order]
    first = np.searchsorted(seg, seg, side="left")
    taken = (np.arange(len(rows)) - first) < fit.gpus[rows]
    rows, seg = rows[taken], seg[taken]
    slowest = np.full(len(seg_cost), -np.inf)
    np.maximum.at(slowest, seg, cost[rows])
    left = np.zeros(len(seg_left))
    np.add.at(left, seg, table.gpu_free[rows] - fit.padded_mib[rows])
    seg_cost[several] = slowest[several]
    seg_left[several] = left[several]
    return rows, seg
