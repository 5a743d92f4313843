"""The replay simulator's bookkeeping on hand-computed cases."""

from __future__ import annotations

import pytest

from replay.engine import SimNode, Simulator, metrics
from replay.policies import WholeGpuPolicy
from replay.world import SimJob, World

GPU = SimNode("n0", "RTX-3090", "NVIDIA-GeForce-RTX-3090", 1, 4000)


def _world(startup: float, alpha: float, mib: dict[str, float], seconds: dict[str, float],
           estimator) -> World:  # noqa: ANN001
    world = World("hand-made", startup_s=startup, alpha=alpha, time_noise=0.0,
                  memory_noise=0.0, estimator=estimator)
    for model in mib:
        world.measured_mib[model, "train", 8, "RTX-3090"] = mib[model]
        world.measured_unit_s[model, "train", 8, "RTX-3090"] = seconds[model]
    return world


class FirstGpu:
    """Always GPU 0 of the first node: sharing with no limit (the world decides OOM)."""

    name = "first-gpu"

    def place(self, job, now, sim):  # noqa: ANN001, ANN201
        return sim.nodes[0].name, 0

    def started(self, placement, now) -> None: ...  # noqa: ANN001

    def ended(self, placement, now, oom) -> None: ...  # noqa: ANN001


@pytest.fixture(scope="module")
def estimator():  # noqa: ANN201
    from estimator.predict import Estimator

    return Estimator.load()


def test_whole_gpu_queue_two_jobs(estimator) -> None:
    world = _world(10, 0.5, {"resnet18": 1000, "resnet34": 1000},
                   {"resnet18": 100, "resnet34": 100}, estimator)
    sim = Simulator(world, [GPU], WholeGpuPolicy("default", heterogeneity_aware=False))
    jobs = [SimJob(0, 0, "resnet18", "train", 8, 1), SimJob(1, 5, "resnet34", "train", 8, 1)]
    out = {o.job.id: o for o in sim.run(jobs)}
    assert (out[0].placed_s, out[0].ended_s) == (0, 110)  # 10 s start-up + 100 s
    assert (out[1].placed_s, out[1].ended_s) == (110, 220)  # waits for the whole GPU
    m = metrics(sim, list(out.values()))
    assert m["makespan_s"] == 220 and m["avg_jct_s"] == (110 + 215) / 2
    assert m["avg_queue_s"] == 52.5 and m["oom_count"] == 0
    assert m["mem_util"] == pytest.approx(1000 * 220 / (4000 * 220))


def test_two_jobs_sharing_one_gpu_slow_each_other(estimator) -> None:
    world = _world(0, 0.5, {"resnet18": 1000, "resnet34": 1000},
                   {"resnet18": 100, "resnet34": 100}, estimator)
    sim = Simulator(world, [GPU], FirstGpu())
    jobs = [SimJob(0, 0, "resnet18", "train", 8, 1), SimJob(1, 0, "resnet34", "train", 8, 1)]
    out = sim.run(jobs)
    assert [o.ended_s for o in out] == pytest.approx([150, 150])  # each at speed 1/1.5
    assert metrics(sim, out)["mem_util"] == pytest.approx(0.5)


def test_a_job_that_does_not_fit_fails_after_30_percent(estimator) -> None:
    world = _world(0, 0.5, {"resnet18": 3000, "resnet34": 3000},
                   {"resnet18": 100, "resnet34": 100}, estimator)
    sim = Simulator(world, [GPU], FirstGpu())
    jobs = [SimJob(0, 0, "resnet18", "train", 8, 1), SimJob(1, 0, "resnet34", "train", 8, 1)]
    first, second = sim.run(jobs)
    assert second.oom and second.ended_s == pytest.approx(45)  # 30 s of work at speed 2/3
    assert not first.oom and first.ended_s == pytest.approx(115)  # then 70 s alone
    m = metrics(sim, [first, second])
    assert m["oom_count"] == 1 and m["avg_jct_s"] == pytest.approx(115)
