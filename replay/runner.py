"""One replay: every policy on the same world, cluster and arrivals, into one report.

Policies are chosen by name (`POLICIES`); `ORACLES` read the world's truth. The extender
policies share one Redis, the one `Settings` resolves from the environment:
``REDIS_URL``, else an embedded redis-server in a temporary directory, started for the
replay and stopped after (each policy wipes it before it starts). With ``parallel`` > 1,
the extender policies (all the replay's time but a second or two) run in worker
processes at once, each in a database of its own (`with_db`); the figures are the same.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import pickle
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

from tqdm import tqdm

from estimator.predict import Estimator
from extender.model import Limits
from extender.redis_url import with_db
from extender.settings import Settings
from extender.state.embedded_redis import EmbeddedRedis
from replay.baselines import DeclaredMemoryPolicy, OraclePolicy, WholeGpuPolicy
from replay.engine import Outcome, Policy, SimNode, Simulator, metrics
from replay.folds import fold_of, load_estimators
from replay.policies import ExtenderPolicy
from replay.scenario import Scenario
from replay.world import SimJob, World

POLICIES = ("default", "schedtune-paper", "gavel-like", "declared", "declared-fraction",
            "oracle", "ours")
ORACLES = ("gavel-like", "oracle")
EXTENDER_POLICIES = ("schedtune-paper", "ours")
DESIGNS = {"schedtune-paper": "paper-rfr", "ours": "ours"}
SENSITIVITY_STARTUP_S = (2.0, 30.0)
SENSITIVITY_FIGURES = ("makespan_s", "avg_jct_s", "oom_count")


class Run(NamedTuple):
    """One policy's figures, with its simulator and outcomes (for the plots)."""

    result: dict[str, Any]
    sim: Simulator
    outcomes: list[Outcome]


class Deciders:
    """The estimators the extender policies decide with in one scenario: the committed
    artefacts, or in a held-out world one per fold (loaded once per process, reused)."""

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self._loaded: dict[str, dict[str, Estimator]] = {}

    def for_policy(self, name: str) -> dict[str, Any]:
        """Keyword arguments of `ExtenderPolicy` for the policy `name`."""
        if not self.scenario.held_out:
            return {}
        design = DESIGNS[name]
        if design not in self._loaded:
            dirs = {fold: Path(path) for fold, path in self.scenario.folds}
            estimators: dict[str, Estimator] = load_estimators(dirs, design)
            estimators[""] = Estimator.load(design=design)  # models no fold holds out
            self._loaded[design] = estimators
        estimators = self._loaded[design]
        protocol = self.scenario.held_out
        return {"estimators": estimators,
                "route": lambda job: fold if (fold := fold_of(job.model, protocol))
                in estimators else ""}


def make_policy(name: str, nodes: list[SimNode], redis_url: str,
                deciders: Deciders | None = None) -> Policy:
    """The policy called `name` (one of `POLICIES`); ours as the scenario's ``EXTENDER_*``
    variables configure it, the paper's policy always as published."""
    if name == "default":
        return WholeGpuPolicy(name)
    if name == "gavel-like":
        return WholeGpuPolicy(name, heterogeneity_aware=True)
    if name in ("declared", "declared-fraction"):
        return DeclaredMemoryPolicy(name, fraction=name == "declared-fraction")
    if name == "oracle":
        return OraclePolicy(name)
    routing = deciders.for_policy(name) if deciders else {}
    if name == "schedtune-paper":
        return ExtenderPolicy(name, nodes, redis_url, estimator_design="paper-rfr",
                              scoring="paper", collocation=Limits(4, {}), hold_for=0,
                              **routing)
    if name == "ours":
        env = dict(deciders.scenario.extender_env) if deciders else {}
        return ExtenderPolicy(name, nodes, redis_url, base=Settings.from_env(env), **routing)
    raise ValueError(f"unknown policy {name!r}; accepted: {', '.join(POLICIES)}")


def run_policy(name: str, world: World, nodes: list[SimNode], jobs: list[SimJob],
               redis_url: str, progress: bool = False, deciders: Deciders | None = None,
               retry_limit: int = 3) -> Run:
    """Replay `jobs` under the policy `name`; figures as `metrics`, plus decisions,
    decisions per second of deciding (wall time), the run's wall time and, for the
    extender policies, the reservation before and the floor after each OOM kill."""
    policy = make_policy(name, nodes, redis_url, deciders)
    sim = Simulator(world, nodes, policy, retry_limit=retry_limit)
    started = time.perf_counter()
    try:
        with tqdm(total=len(jobs), desc=f"{name:>17}", disable=not progress,
                  leave=False) as bar:
            sim.on_end = lambda: bar.update(1)
            outcomes = sim.run(jobs)
    finally:
        if isinstance(policy, ExtenderPolicy):
            policy.close()
    wall = time.perf_counter() - started
    result = metrics(sim, outcomes)
    deciding = getattr(policy, "seconds", wall)
    result["decisions"] = sim.decisions
    result["decisions_per_s"] = round(sim.decisions / deciding, 1) if deciding else None
    result["wall_s"] = round(wall, 2)
    result["oracle"] = name in ORACLES
    if isinstance(policy, ExtenderPolicy):
        result["oom_reserves"] = policy.reserves
    return Run(result, sim, outcomes)


@contextmanager
def replay_redis(env: Mapping[str, str]) -> Iterator[str]:
    """The URL of the Redis a replay uses: ``REDIS_URL``'s from `env`, else an embedded
    server in a temporary directory, running until the block ends.
    Raises `SettingsError` on an unusable ``EXTENDER_*`` value in `env`."""
    with tempfile.TemporaryDirectory(prefix="schedtune-replay-") as tmp:
        settings = Settings.from_env({**env, "EXTENDER_STATE_DIR": tmp})
        embedded = None
        try:  # a replay stopped while the server starts stops it too
            if settings.embedded_redis_dir is not None:
                embedded = EmbeddedRedis(settings.embedded_redis_dir, appendonly=False)
                embedded.start()
            yield settings.store_url
        finally:
            if embedded is not None:
                embedded.stop()


def describe_cluster(nodes: list[SimNode]) -> dict[str, Any]:
    slots = {n.gpu_type: n.slots for n in nodes}
    return {"nodes": len(nodes), "gpus": sum(n.count for n in nodes),
            "types": sorted(slots), "collocation_limits": dict(sorted(slots.items()))}


def run_replay(jobs: list[SimJob], nodes: list[SimNode], workload: str,
               policies: Sequence[str], scenario: Scenario, *, env: Mapping[str, str],
               sensitivity: bool = False, progress: bool = False,
               world: World | None = None,
               parallel: int = 1) -> tuple[dict[str, Any], dict[str, Run]]:
    """Every policy in `policies` over `jobs` on `nodes` in the scenario's world (or
    `world`), on the Redis `env` names (`replay_redis`). Returns the report (workload,
    cluster, world, assumptions and each policy's figures; with `sensitivity`, makespan,
    JCT and OOMs again at 2 s and 30 s start-up) and the runs by policy name; `parallel`:
    processes replaying extender policies at once (module docstring)."""
    deciders = Deciders(scenario)
    with replay_redis(env) as redis_url:
        types = {n.gpu_type for n in nodes}
        world = world or scenario.build_world(types)
        runs = _run_policies(policies, world, nodes, jobs, redis_url, progress, deciders,
                             parallel)
        report: dict[str, Any] = {
            "workload": workload, "jobs": len(jobs), "cluster": describe_cluster(nodes),
            **world.describe(), **scenario.describe(),
            "oracles": [p for p in policies if p in ORACLES],
            "policies": {p: run.result for p, run in runs.items()},
        }
        if sensitivity:
            report["startup_sensitivity"] = {}
            for other_s in SENSITIVITY_STARTUP_S:
                other = dataclasses.replace(world, startup_s=other_s)
                report["startup_sensitivity"][f"{other_s:g}s"] = {
                    p: {k: v for k, v in run_policy(p, other, nodes, jobs, redis_url, False,
                                                    deciders, scenario.retry_limit
                                                    ).result.items()
                        if k in SENSITIVITY_FIGURES}
                    for p in policies}
    return report, runs


def _run_policies(policies: Sequence[str], world: World, nodes: list[SimNode],
                  jobs: list[SimJob], redis_url: str, progress: bool, deciders: Deciders,
                  parallel: int) -> dict[str, Run]:
    """Each policy's run, in `policies`' order: the extender policies in worker processes
    when `parallel` > 1 and there are several, the others here meanwhile."""
    retry_limit = deciders.scenario.retry_limit
    apart = [p for p in policies if p in EXTENDER_POLICIES]
    if parallel < 2 or len(apart) < 2:
        return {p: run_policy(p, world, nodes, jobs, redis_url, progress, deciders,
                              retry_limit) for p in policies}
    if progress:
        print(f"replaying {', '.join(apart)} in {min(parallel, len(apart))} processes",
              file=sys.stderr, flush=True)
    context = multiprocessing.get_context("spawn")  # no threads or sockets inherited
    # Pickled here, once: the pool pickles in a thread of its own, while the policies run
    # here meanwhile touch the same objects.
    replayed = pickle.dumps((world, nodes, jobs, deciders.scenario))
    with ProcessPoolExecutor(min(parallel, len(apart)), mp_context=context) as pool:
        futures = {p: pool.submit(_run_apart, p, replayed, with_db(redis_url, db))
                   for db, p in enumerate(apart, start=1)}
        runs = {p: run_policy(p, world, nodes, jobs, redis_url, progress, deciders,
                              retry_limit) for p in policies if p not in futures}
        for name, future in futures.items():
            runs[name] = future.result()
            if progress:
                print(f"{name:>17}: {runs[name].result['wall_s']:.0f} s", file=sys.stderr,
                      flush=True)
    return {p: runs[p] for p in policies}


def _run_apart(name: str, replayed: bytes, redis_url: str) -> Run:
    """`run_policy` in a worker process (`replayed`: the world, nodes, jobs and scenario,
    pickled); what goes back is its figures, simulator and outcomes, without the policy
    (its connections) or the progress hook."""
    world, nodes, jobs, scenario = pickle.loads(replayed)  # our own, just made
    run = run_policy(name, world, nodes, jobs, redis_url, False, Deciders(scenario),
                     scenario.retry_limit)
    run.sim.policy = None  # type: ignore[assignment]
    run.sim.on_end = _nothing
    return run


def _nothing() -> None:
    """A progress hook that can cross a process boundary."""
