"""The replay's Redis comes from Settings: REDIS_URL's when set, else an embedded server
that lives only as long as the replay. Policies by name; held-out worlds route each job to
the artefacts that never saw its model or family."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from extender.settings import SettingsError
from replay.baselines import DeclaredMemoryPolicy, OraclePolicy, WholeGpuPolicy
from replay.runner import ORACLES, POLICIES, Deciders, make_policy, replay_redis
from replay.scenario import Scenario
from replay.world import SimJob


def test_redis_url_from_the_environment_is_used_as_is(redis_url) -> None:
    with replay_redis({"REDIS_URL": redis_url}) as url:
        assert url == redis_url


def test_without_redis_url_an_embedded_server_lives_for_the_block() -> None:
    with replay_redis({}) as url:
        assert url.startswith("unix://") and redis.Redis.from_url(url).ping()
        socket = Path(url.removeprefix("unix://").split("?")[0])
    assert not socket.exists()


def test_unusable_extender_settings_are_refused() -> None:
    with pytest.raises(SettingsError), replay_redis({"EXTENDER_SCORING": "nope"}):
        pass


def test_baselines_need_no_extender() -> None:
    assert set(POLICIES) >= {"default", "schedtune-paper", "gavel-like", "declared", "oracle",
                             "ours"}
    assert set(ORACLES) == {"gavel-like", "oracle"}
    kinds = {"default": WholeGpuPolicy, "gavel-like": WholeGpuPolicy,
             "declared": DeclaredMemoryPolicy, "declared-fraction": DeclaredMemoryPolicy,
             "oracle": OraclePolicy}
    for name, kind in kinds.items():
        policy = make_policy(name, [], "redis://unused")
        assert isinstance(policy, kind) and policy.name == name
        assert policy.oracle == (name in ORACLES)
    with pytest.raises(ValueError, match="unknown policy"):
        make_policy("nope", [], "redis://unused")


def test_a_held_out_world_routes_each_job_to_its_fold(tmp_path) -> None:
    from estimator.portable import MODELS_DIR

    # two folds that both read the committed artefacts: routing is what is tested here
    folds = (("vgg", str(MODELS_DIR)), ("resnet", str(MODELS_DIR)))
    deciders = Deciders(Scenario("lofo", tmp_path, folds=folds))
    routing = deciders.for_policy("ours")
    assert set(routing["estimators"]) == {"vgg", "resnet", ""}
    route = routing["route"]
    assert route(SimJob(0, 0, "vgg16", "train", 8, 1)) == "vgg"
    assert route(SimJob(0, 0, "resnet50", "train", 8, 1)) == "resnet"
    assert route(SimJob(0, 0, "densenet121", "train", 8, 1)) == ""  # no fold: committed ones
    assert deciders.for_policy("ours")["estimators"] is routing["estimators"]  # loaded once
    assert Deciders(Scenario("reference", tmp_path)).for_policy("ours") == {}


def test_extender_policies_in_worker_processes_give_the_same_figures(redis_url,
                                                                       tmp_path) -> None:
    from replay.runner import run_replay
    from replay.workloads import generated_workload, parse_cluster

    nodes = parse_cluster("T4:1x2,A10:1x1")
    jobs = generated_workload(16, 30.0, seed=3, train_fraction=0.4)
    scenario = Scenario("perturbed", tmp_path, world_seed=2)
    policies = ["default", "schedtune-paper", "ours"]
    reports = [run_replay(jobs, nodes, "w", policies, scenario, env={"REDIS_URL": redis_url},
                          parallel=parallel) for parallel in (1, 2)]
    figures = ("makespan_s", "avg_jct_s", "oom_count", "unscheduled", "decisions")
    one, two = ({p: {k: r["policies"][p][k] for k in figures} for p in policies}
                for r, _ in reports)
    assert two == one and list(reports[1][0]["policies"]) == policies
    here, apart = (runs["ours"] for _, runs in reports)  # apart: back from its process
    # What the plots and --jobs-out read (memory in use summed in another process's set
    # order: equal to the last bits).
    assert apart.sim.timeline == [pytest.approx(point, rel=1e-12) for point in here.sim.timeline]
    assert [o.ended_s for o in apart.outcomes] == [o.ended_s for o in here.outcomes]
