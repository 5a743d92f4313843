"""Scheduling decisions: pure functions of (needs, snapshot, limits, now). No I/O, no Flask.

* `filter_nodes` (Algorithm 2): a node passes when one of its GPUs has room
  for the padded estimate of the job on that GPU type and is below its
  collocation limit; the verdict names the best-fit GPU, or says why not.
* `score_nodes` (Eq. 1-2): expected completion on the node's cheapest GPU,
  normalised so the soonest scores 1; among nodes as soon as each other, the
  tightest fit keeps the top score (packing leaves the larger holes for larger
  jobs, as kube-scheduler's MostAllocated or Volcano's binpack would).
* `reservation_candidates`: the GPUs bind should try, the one scored first:
  cheapest, then best fit.
* `held_gpus`: starvation guard. A pod that fit nowhere waits; the GPU where it
  will fit soonest is held for it: other jobs go there only if both fit, or if
  they are gone before it would fit anyway (within `BACKFILL_SLACK`), so a
  stream of small jobs cannot keep a large one out forever (EASY backfilling's
  reservation, with memory as the resource).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from extender.policies import timeline as scoring
from extender.model import (
    UNKNOWN_TYPE, ClusterSnapshot, GpuState, Limits, Need, NodeGpus, NodeState, QueuedJob,
    Verdict, Waiter, type_of,
)

NO_HOLDS: Mapping[tuple[str, int], Hold] = {}
BACKFILL_SLACK = 1.1  # a backfilled job may push the waiter's expected fit back 10 %
TIED_SCORE = 0.9  # as soon as the best node but a looser fit: below it on every wire's scale


@dataclass(frozen=True)
class Hold:
    """A GPU kept for a waiting pod: `padded_mib` of it stays free for that pod, unless a
    job would be gone before the pod fits anyway (`fits_in_s`, played forward at `now`)."""

    uid: str
    padded_mib: float
    fits_in_s: float = 0.0
    now: float = 0.0
    alpha: float = 0.0
    limit: int = 0


def _label(gpus: NodeGpus) -> str:
    return gpus.gpu_type or gpus.product


def _room(gpu: GpuState, need: Need, limit: int, hold: Hold | None) -> bool:
    if not (len(gpu.jobs) < limit and need.padded_mib <= gpu.free_mib):
        return False
    if hold is None:
        return True
    if len(gpu.jobs) + 1 < limit and need.padded_mib + hold.padded_mib <= gpu.free_mib:
        return True  # fits beside the waiter
    # Backfill: the job may borrow the held room if the waiter would not fit sooner without it.
    job = QueuedJob("backfill", need.padded_mib, need.predicted_s)
    later = GpuState(gpu.node, gpu.index, gpu.capacity_mib, (*gpu.jobs, job))
    return scoring.wait_until_fits_s(later, hold.padded_mib, hold.limit, hold.now,
                                     hold.alpha) <= hold.fits_in_s * BACKFILL_SLACK


def usable_gpus(node: NodeState, need: Need, limit: int,
                holds: Mapping[tuple[str, int], Hold] = NO_HOLDS) -> list[GpuState]:
    """GPUs that can take the job now, best fit (least free memory left) first. A held
    GPU takes it only beside the memory and slot kept for its waiter, or as a backfill."""
    if holds:
        fitting = [g for g in node.gpu_states
                   if _room(g, need, limit, holds.get((g.node, g.index)))]  # fmt: skip
    else:  # the common case, spelled out: this runs for every GPU of every request
        fitting = [g for g in node.gpu_states
                   if len(g.jobs) < limit and need.padded_mib <= g.free_mib]  # fmt: skip
    if len(fitting) > 1:
        fitting.sort(key=lambda g: (g.free_mib, g.index))
    return fitting


def held_gpus(snapshot: ClusterSnapshot, limits: Limits, alpha: float, uid: str,
              max_holds: int, after_s: float = 0.0) -> dict[tuple[str, int], Hold]:
    """GPUs held for the waiters older than pod `uid` that have waited `after_s` or more,
    oldest first, one GPU each: the one among the snapshot's nodes where the waiter fits
    soonest (then runs fastest)."""
    holds: dict[tuple[str, int], Hold] = {}
    due = [w for w in _ahead_of(snapshot.waiting, uid) if snapshot.now - w.since >= after_s]
    for waiter in due[:max_holds]:
        best: tuple[float, float, tuple[str, int], int] | None = None
        for node in snapshot.nodes.values():
            gpus = node.gpus
            if gpus is None or not node.gpu_states or type_of(gpus) not in waiter.needs:
                continue
            mib, seconds = waiter.needs[type_of(gpus)]
            limit = limits.for_node(gpus)
            for gpu in node.gpu_states:
                if (node.name, gpu.index) in holds:
                    continue
                wait = scoring.wait_until_fits_s(gpu, mib, limit, snapshot.now, alpha)
                if wait < math.inf and (best is None or (wait, seconds) < best[:2]):
                    best = (wait, seconds, (node.name, gpu.index), limit)
        if best is not None:
            holds[best[2]] = Hold(waiter.uid, waiter.needs[_type_at(snapshot, best[2])][0],
                                  best[0], snapshot.now, alpha, best[3])
    return holds


def held_from(node: NodeState, need: Need, limits: Limits,
              holds: Mapping[tuple[str, int], Hold]) -> list[int]:
    """The node's GPUs that a hold keeps from this job (bind must not pick them)."""
    if not holds or node.gpus is None:
        return []
    limit = limits.for_node(node.gpus)
    return [g.index for g in node.gpu_states
            if (hold := holds.get((node.name, g.index))) and not _room(g, need, limit, hold)]


def _ahead_of(waiting: tuple[Waiter, ...], uid: str) -> list[Waiter]:
    """Waiters served before `uid`: all others, or only the older ones if it waits too."""
    own = next((w.since for w in waiting if w.uid == uid), math.inf)
    return [w for w in waiting if w.uid != uid and w.since <= own]


def _type_at(snapshot: ClusterSnapshot, gpu: tuple[str, int]) -> str:
    layout = snapshot.nodes[gpu[0]].gpus
    assert layout is not None
    return type_of(layout)


def node_verdict(node: NodeState, needs: Mapping[str, Need], limits: Limits,
                 holds: Mapping[tuple[str, int], Hold] = NO_HOLDS) -> Verdict:
    gpus = node.gpus
    if gpus is None:
        return Verdict(False, "node unknown to the extender: no GPU layout in the "
                       "request and none from the node watcher yet", unresolvable=True)
    if gpus.problem or gpus.count == 0:
        return Verdict(False, gpus.problem or "node has no GPUs", unresolvable=True)
    need = needs[type_of(gpus)]
    label = _label(gpus)
    if need.padded_mib > gpus.memory_mib:
        return Verdict(False, f"needs {need.padded_mib:.0f} MiB padded, more than "
                       f"the {gpus.memory_mib} MiB of one {label}", unresolvable=True)
    limit = limits.for_node(gpus)
    fitting = usable_gpus(node, need, limit, holds)
    if fitting:
        return Verdict(True, gpu_index=fitting[0].index)
    held = [g for g in node.gpu_states if (node.name, g.index) in holds
            and _room(g, need, limit, None)]  # fmt: skip
    if held:
        hold = holds[node.name, held[0].index]
        return Verdict(False, f"GPU {held[0].index} ({label}) is held for an older waiting pod "
                       f"({hold.uid}, {hold.padded_mib:.0f} MiB); the job does not fit beside it")
    roomiest = max(node.gpu_states, key=lambda g: (len(g.jobs) < limit, g.free_mib))
    if len(roomiest.jobs) >= limit:
        return Verdict(False, f"collocation limit {limit} reached on every GPU "
                       f"({label})")
    return Verdict(False, f"needs {need.padded_mib:.0f} MiB padded, "
                   f"{roomiest.free_mib:.0f} MiB free on GPU {roomiest.index} ({label})")


def filter_nodes(snapshot: ClusterSnapshot, needs: Mapping[str, Need], limits: Limits,
                 holds: Mapping[tuple[str, int], Hold] = NO_HOLDS) -> dict[str, Verdict]:
    """Verdict per node; idle nodes of one layout are judged once (most of a large cluster)."""
    held_nodes = {node for node, _ in holds}
    by_layout: dict[NodeGpus | None, Verdict] = {}
    verdicts = {}
    for name, node in snapshot.nodes.items():
        if node.idle and name not in held_nodes:
            verdict = by_layout.get(node.gpus)
            if verdict is None:
                verdict = by_layout[node.gpus] = node_verdict(node, needs, limits)
        else:
            verdict = node_verdict(node, needs, limits, holds)
        verdicts[name] = verdict
    return verdicts


def node_placement(node: NodeState, needs: Mapping[str, Need], limits: Limits, now: float,
                   cost: scoring.CostModel,
                   holds: Mapping[tuple[str, int], Hold] = NO_HOLDS) -> tuple[float, float] | None:
    """(expected completion s, MiB left free) on the GPU of the node bind would reserve:
    the cheapest, best fit among equals. None when no GPU can take the job now."""
    if node.gpus is None or node.gpus.count == 0 or node.gpus.problem:
        return None
    need = needs[type_of(node.gpus)]
    fitting = usable_gpus(node, need, limits.for_node(node.gpus), holds)
    if not fitting:
        return None
    jct, gpu = cost.cheapest(fitting, need.predicted_s, now)
    return jct, gpu.free_mib - need.padded_mib


def score_nodes(snapshot: ClusterSnapshot, needs: Mapping[str, Need], limits: Limits,
                cost: scoring.CostModel,
                holds: Mapping[tuple[str, int], Hold] = NO_HOLDS) -> dict[str, float]:
    """Scores in [0, 1] for the nodes that can take the job (others score 0)."""
    held_nodes = {node for node, _ in holds}
    idle: dict[NodeGpus | None, tuple[float, float] | None] = {}
    placements: dict[str, tuple[float, float]] = {}
    for name, node in snapshot.nodes.items():
        if node.idle and name not in held_nodes:
            if node.gpus not in idle:
                idle[node.gpus] = node_placement(node, needs, limits, snapshot.now, cost)
            value = idle[node.gpus]
        else:
            value = node_placement(node, needs, limits, snapshot.now, cost, holds)
        if value is not None:
            placements[name] = value
    scores = scoring.normalise({name: jct for name, (jct, _) in placements.items()})
    _pack_ties(scores, placements)
    return {name: scores.get(name, 0.0) for name in snapshot.nodes}


def _pack_ties(scores: dict[str, float], placements: Mapping[str, tuple[float, float]]) -> None:
    """Of the nodes tied for the soonest completion, only the tightest fit keeps the top
    score (the first listed among equals), so the choice is ours, not a coin toss."""
    if len(placements) < 2:
        return
    soonest = min(jct for jct, _ in placements.values())
    tied = [name for name, (jct, _) in placements.items() if jct <= soonest * (1 + 1e-9)]
    keep = min(tied, key=lambda name: placements[name][1])
    for name in tied:
        if name != keep:
            scores[name] = min(scores[name], TIED_SCORE)


def reservation_candidates(node: NodeState, need: Need, limits: Limits,
                           cost: scoring.CostModel, now: float,
                           avoid: frozenset[int] = frozenset()) -> list[tuple[int, float, int]]:
    """(gpu index, capacity MiB, limit) for the node's GPUs, in the order prioritize
    costed them (cheapest, then best fit: the GPU it scored comes first); `avoid`: GPUs
    filter found held for a waiter with no room beside it (left out).

    The store re-checks room atomically, so a GPU filled meanwhile is skipped there.
    """
    assert node.gpus is not None
    limit = limits.for_node(node.gpus)
    order = usable_gpus(node, need, limit)
    order.sort(key=lambda g: cost.cost_s(g, need.predicted_s, now))  # stable: best fit among equals
    rest = [g for g in node.gpu_states if g not in order]
    return [(g.index, float(g.capacity_mib), limit) for g in (*order, *rest)
            if g.index not in avoid]
