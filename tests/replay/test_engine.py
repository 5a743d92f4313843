"""The replay simulator's bookkeeping on hand-computed cases: queueing, sharing, start-up
that shares the GPU, OOM kills and their retries, multi-GPU jobs."""

from __future__ import annotations

import pytest

from replay.baselines import WholeGpuPolicy
from replay.engine import SimNode, Simulator, metrics
from replay.interference import Uniform
from replay.world import SimJob, World

GPU = SimNode("n0", "RTX-3090", "NVIDIA-GeForce-RTX-3090", 1, 4000)


def _world(startup: float, alpha: float, mib: dict[str, float], seconds: dict[str, float],
           estimator, shares: bool = True) -> World:  # noqa: ANN001
    world = World("hand-made", startup_s=startup, interference=Uniform(alpha),
                  startup_shares=shares, time_noise=0.0, memory_noise=0.0, estimator=estimator)
    for model in mib:
        world.measured_mib[model, "train", 8, "RTX-3090"] = mib[model]
        world.measured_unit_s[model, "train", 8, "RTX-3090"] = seconds[model]
    return world


class FirstGpu:
    """Always GPU 0 of the first node: sharing with no limit (the world decides OOM)."""

    name = "first-gpu"

    def place(self, job, now, sim):  # noqa: ANN001, ANN201
        return sim.nodes[0].name, (0,)

    def started(self, placement, now) -> None: ...  # noqa: ANN001

    def ended(self, placement, now, oom) -> None: ...  # noqa: ANN001


@pytest.fixture(scope="module")
def estimator():  # noqa: ANN201
    from estimator.predict import Estimator

    return Estimator.load()


def test_whole_gpu_queue_two_jobs(estimator) -> None:
    world = _world(10, 0.5, {"resnet18": 1000, "resnet34": 1000},
                   {"resnet18": 100, "resnet34": 100}, estimator)
    sim = Simulator(world, [GPU], WholeGpuPolicy("default"))
    jobs = [SimJob(0, 0, "resnet18", "train", 8, 1), SimJob(1, 5, "resnet34", "train", 8, 1)]
    out = {o.job.id: o for o in sim.run(jobs)}
    assert (out[0].placed_s, out[0].ended_s) == (0, 110)  # 10 s start-up + 100 s
    assert (out[1].placed_s, out[1].ended_s) == (110, 220)  # waits for the whole GPU
    m = metrics(sim, list(out.values()))
    assert m["makespan_s"] == 220 and m["avg_jct_s"] == (110 + 215) / 2
    assert m["avg_queue_s"] == 52.5 and m["oom_count"] == 0 and m["retries"] == 0
    assert m["mem_util"] == pytest.approx(1000 * 220 / (4000 * 220))
    assert m["placed_on_arrival"] == 0.5 and m["gpu_busy"] == 1.0


def test_two_jobs_sharing_one_gpu_slow_each_other(estimator) -> None:
    world = _world(0, 0.5, {"resnet18": 1000, "resnet34": 1000},
                   {"resnet18": 100, "resnet34": 100}, estimator)
    sim = Simulator(world, [GPU], FirstGpu())
    jobs = [SimJob(0, 0, "resnet18", "train", 8, 1), SimJob(1, 0, "resnet34", "train", 8, 1)]
    out = sim.run(jobs)
    assert [o.ended_s for o in out] == pytest.approx([150, 150])  # each at speed 1/1.5
    assert metrics(sim, out)["mem_util"] == pytest.approx(0.5)


@pytest.mark.parametrize(("shares", "ends"), [(True, 165.0), (False, 160.0)])
def test_start_up_shares_the_gpu_when_the_world_says_so(estimator, shares, ends) -> None:
    world = _world(10, 0.5, {"resnet18": 1000, "resnet34": 1000},
                   {"resnet18": 100, "resnet34": 100}, estimator, shares=shares)
    sim = Simulator(world, [GPU], FirstGpu())
    jobs = [SimJob(0, 0, "resnet18", "train", 8, 1), SimJob(1, 0, "resnet34", "train", 8, 1)]
    # shared: 10 s of start-up at speed 2/3 (15 s), then 100 s of work at 2/3 (150 s);
    # alone: 10 s wall clock, then 150 s
    assert [o.ended_s for o in sim.run(jobs)] == pytest.approx([ends, ends])


def test_an_oom_kill_is_retried_after_the_back_off(estimator) -> None:
    world = _world(0, 0.5, {"resnet18": 3000, "resnet34": 3000},
                   {"resnet18": 20, "resnet34": 100}, estimator)
    sim = Simulator(world, [GPU], FirstGpu())
    jobs = [SimJob(0, 0, "resnet18", "train", 8, 1), SimJob(1, 0, "resnet34", "train", 8, 1)]
    first, second = sim.run(jobs)
    # both at 2/3 until the short one ends at 30 s (20 of work); the other has 20 done and
    # is killed at 30 (30 % of 100) alone, at 40 s; its new pod comes 10 s later, alone
    assert first.ended_s == pytest.approx(30) and first.ooms == 0
    assert second.ooms == 1 and not second.failed and second.ended_s == pytest.approx(150)
    assert sim.kills == [{"job": 1, "attempt": 0, "model": "resnet34", "task": "train",
                          "batch": 8, "node": "n0", "gpu_type": "RTX-3090", "true_mib": 3000.0,
                          "at_s": 40.0}]
    m = metrics(sim, [first, second])
    assert (m["oom_count"], m["retries"], m["failed"], m["oom_max_per_type"]) == (1, 1, 0, 1)
    assert m["avg_jct_s"] == pytest.approx((30 + 150) / 2)  # the wasted run counts


def test_a_job_killed_past_the_retry_limit_has_failed(estimator) -> None:
    world = _world(0, 0.5, {"resnet18": 3000, "resnet34": 3000},
                   {"resnet18": 1000, "resnet34": 100}, estimator)
    sim = Simulator(world, [GPU], FirstGpu(), retry_limit=0)
    jobs = [SimJob(0, 0, "resnet18", "train", 8, 1), SimJob(1, 0, "resnet34", "train", 8, 1)]
    outcomes = sim.run(jobs)
    second = outcomes[1]
    assert second.failed and second.ooms == 1 and not second.completed
    m = metrics(sim, outcomes)
    assert m["failed"] == 1 and m["retries"] == 0 and m["oom_count"] == 1


def test_a_multi_gpu_job_holds_distinct_gpus_of_one_node(estimator) -> None:
    node = SimNode("n2", "RTX-3090", "NVIDIA-GeForce-RTX-3090", 2, 24576)
    world = World("trace", startup_s=0, interference=Uniform(0.0), estimator=estimator)
    jobs = [SimJob(0, 0, "", "", 0, 1, gpus=2, declared_mib=1000, duration_s=50),
            SimJob(1, 0, "", "", 0, 1, gpus=1, declared_mib=1000, duration_s=10)]
    sim = Simulator(world, [node], WholeGpuPolicy("default"))
    first, second = sim.run(jobs)
    assert first.gpus == (0, 1) and first.ended_s == 50
    assert second.placed_s == 50 and second.ended_s == 60  # no GPU was free before

    class Same(FirstGpu):
        def place(self, job, now, sim):  # noqa: ANN001, ANN201
            return "n2", (0,) * job.gpus

    with pytest.raises(ValueError, match="needs 2 distinct GPUs"):
        Simulator(world, [node], Same()).run(jobs[:1])
