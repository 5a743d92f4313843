"""One replay: every policy on the same world, cluster and arrivals, into one report.

Policies are chosen by name (`POLICIES`). The extender policies share one Redis,
the one `Settings` resolves from the environment: ``REDIS_URL``, else an embedded
redis-server in a temporary directory, started for the replay and stopped after
(each policy wipes it before it starts).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

from tqdm import tqdm

from extender.model import Limits
from extender.settings import Settings
from extender.state.embedded_redis import EmbeddedRedis
from replay.engine import Outcome, Policy, SimNode, Simulator, metrics
from replay.policies import ExtenderPolicy, WholeGpuPolicy
from replay.world import SimJob, World

POLICIES = ("default", "schedtune-paper", "gavel-like", "ours")
SENSITIVITY_STARTUP_S = (2.0, 30.0)
SENSITIVITY_FIGURES = ("makespan_s", "avg_jct_s", "oom_count")


class Run(NamedTuple):
    """One policy's figures, with its simulator and outcomes (for the plots)."""

    result: dict[str, Any]
    sim: Simulator
    outcomes: list[Outcome]


def make_policy(name: str, nodes: list[SimNode], redis_url: str) -> Policy:
    """The policy called `name` (one of `POLICIES`; anything else is ours)."""
    if name == "default":
        return WholeGpuPolicy(name, heterogeneity_aware=False)
    if name == "gavel-like":
        return WholeGpuPolicy(name, heterogeneity_aware=True)
    if name == "schedtune-paper":
        return ExtenderPolicy(name, nodes, redis_url, estimator_design="paper-rfr",
                              scoring="paper", collocation=Limits(4, {}), hold_for=0)
    return ExtenderPolicy(name, nodes, redis_url)


def run_policy(name: str, world: World, nodes: list[SimNode], jobs: list[SimJob],
               redis_url: str, progress: bool) -> Run:
    """Replay `jobs` under the policy `name`; figures as `metrics`, plus decisions,
    decisions per second of deciding (wall time) and the run's wall time."""
    policy = make_policy(name, nodes, redis_url)
    sim = Simulator(world, nodes, policy)
    started = time.perf_counter()
    with tqdm(total=len(jobs), desc=f"{name:>16}", disable=not progress, leave=False) as bar:
        sim.on_end = lambda: bar.update(1)
        outcomes = sim.run(jobs)
    wall = time.perf_counter() - started
    if isinstance(policy, ExtenderPolicy):
        policy.close()
    result = metrics(sim, outcomes)
    deciding = getattr(policy, "seconds", wall)
    result["decisions"] = sim.decisions
    result["decisions_per_s"] = round(sim.decisions / deciding, 1) if deciding else None
    result["wall_s"] = round(wall, 2)
    return Run(result, sim, outcomes)


@contextmanager
def replay_redis(env: Mapping[str, str]) -> Iterator[str]:
    """The URL of the Redis a replay uses: ``REDIS_URL``'s from `env`, else an embedded
    server in a temporary directory, running until the block ends.
    Raises `SettingsError` on an unusable ``EXTENDER_*`` value in `env`."""
    with tempfile.TemporaryDirectory(prefix="schedtune-replay-") as tmp:
        settings = Settings.from_env({**env, "EXTENDER_STATE_DIR": tmp})
        embedded = None
        if settings.embedded_redis_dir is not None:
            embedded = EmbeddedRedis(settings.embedded_redis_dir)
            embedded.start()
        try:
            yield settings.store_url
        finally:
            if embedded is not None:
                embedded.stop()


def run_replay(jobs: list[SimJob], nodes: list[SimNode], workload: str,
               policies: Sequence[str], data_dir: Path | None, startup_s: float, *,
               env: Mapping[str, str], sensitivity: bool = False,
               progress: bool = False) -> tuple[dict[str, Any], dict[str, Run]]:
    """Every policy in `policies` over `jobs` on `nodes`, in the world of `data_dir` (the
    reference data's, else the predictors'), on the Redis `env` names (`replay_redis`).
    Returns the report (workload, cluster, world and each policy's figures; with
    `sensitivity`, makespan, JCT and OOMs again at 2 s and 30 s start-up) and the runs by
    policy name."""
    with replay_redis(env) as redis_url:
        world = World.load(data_dir, startup_s=startup_s)
        runs = {p: run_policy(p, world, nodes, jobs, redis_url, progress) for p in policies}
        report: dict[str, Any] = {
            "workload": workload, "jobs": len(jobs),
            "cluster": {"nodes": len(nodes), "gpus": sum(n.count for n in nodes),
                        "types": sorted({n.gpu_type for n in nodes})},
            **world.describe(), "policies": {p: run.result for p, run in runs.items()},
        }
        if sensitivity:
            report["startup_sensitivity"] = {}
            for other_s in SENSITIVITY_STARTUP_S:
                other = World.load(data_dir, startup_s=other_s)
                report["startup_sensitivity"][f"{other_s:g}s"] = {
                    p: {k: v for k, v in run_policy(p, other, nodes, jobs, redis_url,
                                                    False).result.items()
                        if k in SENSITIVITY_FIGURES}
                    for p in policies}
    return report, runs
