"""Many orders of one workload: each order replayed under every policy, then the
distribution of each figure per policy and how one policy fares against each other.

An order is one arrival sequence (a shuffled trace, or a generated workload's seed).
Orders run in worker processes when ``parallel`` > 1; each worker uses its own database
of the one Redis server (`with_db`), so the policies of concurrent orders never see
each other's state.
"""

from __future__ import annotations

import multiprocessing
import statistics
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np

from extender.redis_url import with_db
from replay.engine import SimNode
from replay.runner import Deciders, run_policy
from replay.scenario import Scenario
from replay.world import SimJob, World

#: Figures summarised per policy, and whether lower is better.
FIGURES = {"makespan_s": True, "avg_jct_s": True, "p95_jct_s": True, "mem_util": False,
           "oom_count": True, "retries": True, "failed": True, "placed_on_arrival": False}
VERSUS = ("makespan_s", "avg_jct_s")
BOOTSTRAP = 2000  # resamples of the orders behind each medians gap's interval
MAX_DATABASES = 15  # redis-server's default 16 databases, 0 left to the parent
_worker: dict[str, Any] = {}  # one worker process's scenario, world and estimators


def _init(redis_url: str, databases: Any, scenario: Scenario, nodes: list[SimNode],
          policies: Sequence[str], world: World | None) -> None:
    db = databases.get() if databases is not None else None
    _worker.clear()
    _worker.update(redis_url=redis_url if db is None else with_db(redis_url, db),
                   scenario=scenario, nodes=nodes, policies=list(policies),
                   world=world or scenario.build_world({n.gpu_type for n in nodes}),
                   deciders=Deciders(scenario))


def _run_order(order: int, jobs: list[SimJob]) -> dict[str, Any]:
    w = _worker
    results = {}
    for policy in w["policies"]:
        run = run_policy(policy, w["world"], w["nodes"], jobs, w["redis_url"], False,
                         w["deciders"], w["scenario"].retry_limit)
        results[policy] = run.result
    return {"order": order, "policies": results}


def run_orders(orders: Mapping[int, list[SimJob]], nodes: list[SimNode],
               policies: Sequence[str], scenario: Scenario, redis_url: str,
               parallel: int = 1, world: World | None = None,
               progress: Callable[[dict[str, Any]], None] = lambda _: None) -> list[dict]:
    """Each order's figures per policy, in order; `progress` is called as each finishes."""
    parallel = max(1, min(parallel, len(orders), MAX_DATABASES))
    if parallel == 1:
        _init(redis_url, None, scenario, nodes, policies, world)
        done = []
        for order, jobs in orders.items():
            done.append(_run_order(order, jobs))
            progress(done[-1])
        return done
    context = multiprocessing.get_context("spawn")  # no threads or sockets inherited
    databases = context.Manager().Queue()
    for db in range(1, parallel + 1):
        databases.put(db)
    with ProcessPoolExecutor(parallel, mp_context=context, initializer=_init,
                             initargs=(redis_url, databases, scenario, nodes, policies,
                                       world)) as pool:
        futures = [pool.submit(_run_order, order, jobs) for order, jobs in orders.items()]
        done = []
        for future in futures:
            done.append(future.result())
            progress(done[-1])
    return done


def _percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q))


def _medians_gap_interval(pairs: list[tuple[float, float]]) -> list[float]:
    """The 5th and 95th percentiles of the gap between the two medians (in %) over
    `BOOTSTRAP` resamples of the orders, each order's pair kept together: how far the gap
    would move with other orders of the same world. Seeded, so a report reads the same."""
    mine, theirs = np.array(pairs, dtype=float).T
    picks = np.random.default_rng(0).integers(0, len(pairs), size=(BOOTSTRAP, len(pairs)))
    gaps = 100 * (np.median(mine[picks], axis=1) / np.median(theirs[picks], axis=1) - 1)
    return [round(float(q), 2) for q in np.percentile(gaps, [5, 95])]


def summarise(per_order: list[dict], reference: str = "ours") -> dict[str, Any]:
    """Per policy and figure: median, p10, p90 and worst over the orders; and for
    `reference` against each other policy, per figure of `VERSUS`: orders it wins (lower),
    loses, ties, its median and worst gap (reference / other - 1, in %), the gap between the
    two policies' medians with its 90 % bootstrap interval, and the orders where it is more
    than 5 % behind."""
    policies = list(per_order[0]["policies"]) if per_order else []
    summary: dict[str, Any] = {}
    for policy in policies:
        summary[policy] = {}
        for figure, lower in FIGURES.items():
            values = [o["policies"][policy][figure] for o in per_order
                      if o["policies"][policy].get(figure) is not None]
            if not values:
                continue
            summary[policy][figure] = {
                "median": round(statistics.median(values), 4),
                "p10": round(_percentile(values, 10), 4), "p90": round(_percentile(values, 90), 4),
                "worst": round(max(values) if lower else min(values), 4)}
    versus: dict[str, Any] = {}
    if reference in policies:
        for other in (p for p in policies if p != reference):
            versus[other] = {}
            for figure in VERSUS:
                pairs = [(o["policies"][reference][figure], o["policies"][other][figure])
                         for o in per_order if o["policies"][reference][figure] is not None
                         and o["policies"][other][figure]]
                if not pairs:
                    continue
                gaps = [100 * (mine / theirs - 1) for mine, theirs in pairs]
                medians = [statistics.median(side) for side in zip(*pairs, strict=True)]
                versus[other][figure] = {
                    "wins": sum(g < 0 for g in gaps), "losses": sum(g > 0 for g in gaps),
                    "ties": sum(g == 0 for g in gaps),
                    "median_gap_pct": round(statistics.median(gaps), 2),
                    "medians_gap_pct": round(100 * (medians[0] / medians[1] - 1), 2),
                    "medians_gap_90pct": _medians_gap_interval(pairs),
                    "worst_gap_pct": round(max(gaps), 2),
                    "behind_5pct": sum(g > 5 for g in gaps)}
    return {"orders": len(per_order), "summary": summary, "reference": reference,
            "versus": versus}
