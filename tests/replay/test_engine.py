"""The replay simulator's bookkeeping on hand-computed cases, and a small run through HTTP."""

from __future__ import annotations

import json

import pytest

from scripts import replay
from scripts.sim_engine import SimNode, Simulator, metrics
from scripts.sim_policies import WholeGpuPolicy
from scripts.sim_world import SimJob, World

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


def test_paper_trace_and_cluster_parse(data_dir) -> None:
    jobs = replay.paper_workload(data_dir)
    assert len(jobs) == 360 and sum(j.task == "train" for j in jobs) == 48
    assert 1000 < max(j.arrival_s for j in jobs) < 1200
    nodes = replay.parse_cluster(replay.PAPER_CLUSTER)
    assert sorted(n.gpu_type for n in nodes) == ["RTX-2070S", "RTX-2070S", "RTX-3070",
                                                 "RTX-3070", "RTX-3090"]
    with pytest.raises(replay.ReplayError, match="TYPE:NODESxGPUS"):
        replay.parse_cluster("H100:2")


def test_shuffled_order_keeps_the_arrival_times_and_the_jobs() -> None:
    jobs = replay.generated_workload(50, 10.0, seed=3, train_fraction=0.5)
    shuffled = replay.shuffle_order(jobs, 1)
    assert [(j.id, j.arrival_s) for j in shuffled] == [(j.id, j.arrival_s) for j in jobs]
    shape = lambda j: (j.model, j.task, j.batch, j.units)  # noqa: E731
    assert sorted(map(shape, shuffled)) == sorted(map(shape, jobs))
    assert list(map(shape, shuffled)) != list(map(shape, jobs))
    assert replay.shuffle_order(jobs, 1) == shuffled != replay.shuffle_order(jobs, 2)


def test_generated_replay_through_the_http_extender(capsys, tmp_path) -> None:
    code = replay.main(["--workload", "generated", "--jobs", "40", "--rate", "60",
                        "--cluster", "T4:2x2,A100-80GB:1x2", "--data", str(tmp_path), "--json",
                        "--policies", "default", "ours"])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert report["world"].startswith("predicted")  # no reference data in tmp_path
    ours = report["policies"]["ours"]
    assert ours["oom_count"] == 0 and ours["unscheduled"] == 0 and ours["decisions"] >= 40
    assert set(ours) >= {"makespan_s", "avg_jct_s", "p95_jct_s", "avg_queue_s", "mem_util",
                         "oom_count", "unscheduled"}


def test_bad_user_files_are_clear_errors(tmp_path, capsys) -> None:
    jobs = tmp_path / "jobs.csv"
    jobs.write_text("arrival_s,model,task,batch,units\n0,resnet50,train,32,1\n5,nope,train,8,1\n")
    assert replay.main(["--jobs-file", str(jobs), "--cluster", "T4:1x1", "--json"]) == 2
    assert "jobs.csv:3" in capsys.readouterr().err
