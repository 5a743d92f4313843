"""The extender policy learns from OOM kills as a cluster would: the killed pod reaches the
monitor as Failed/OOMKilled, the job type's floor rises in Redis, and the Job's next pod
(new UID, same annotations) reserves at least that floor."""

from __future__ import annotations

import pytest

from estimator.predict import Estimator, Job
from replay.engine import SimNode, Simulator, metrics
from replay.interference import Uniform
from replay.policies import ExtenderPolicy
from replay.world import SimJob, World

GPU = SimNode("gpu-0", "RTX-3090", "NVIDIA-GeForce-RTX-3090", 1, 24576, slots=4)


@pytest.fixture(scope="module")
def estimator() -> Estimator:
    return Estimator.load()


def test_an_oom_kill_raises_the_floor_and_the_retry_reserves_it(estimator, redis_url) -> None:
    padded = estimator.estimate(Job("resnet50", "train", 32, 1),
                                gpus=["RTX-3090"])["RTX-3090"].padded_mib
    # a world where the job really needs 40 % more than ours reserves: four fit by
    # reservation, not by truth
    true_mib = padded * 1.4
    assert 4 * padded <= GPU.memory_mib < 4 * true_mib
    world = World("too big", startup_s=0, interference=Uniform(0.5), time_noise=0.0,
                  memory_noise=0.0, estimator=estimator)
    world.measured_mib["resnet50", "train", 32, "RTX-3090"] = true_mib
    world.measured_unit_s["resnet50", "train", 32, "RTX-3090"] = 100.0
    policy = ExtenderPolicy("ours", [GPU], redis_url)
    try:
        sim = Simulator(world, [GPU], policy)
        outcomes = sim.run([SimJob(i, 0, "resnet50", "train", 32, 1) for i in range(4)])
    finally:
        policy.close()
    m = metrics(sim, outcomes)
    assert m["oom_count"] >= 1 and m["failed"] == 0 and m["unscheduled"] == 0
    first = policy.reserves[0]
    assert first["job_type"] == "resnet50|train|32|RTX-3090" and first["attempt"] == 0
    assert first["reserved_mib"] == pytest.approx(padded, rel=0.01)
    assert first["floor_after_mib"] == pytest.approx(max(padded * 1.25, padded + 1024), rel=0.01)
    assert first["true_mib"] == pytest.approx(true_mib, abs=0.1)
    retried = [o for o in outcomes if o.ooms]
    assert retried and all(o.completed for o in retried)
    uids = {p["metadata"]["uid"] for p in policy.pods.values()}
    assert not uids  # every pod ended and was reported
