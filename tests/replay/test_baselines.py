"""The baselines users would pick instead: declared memory as KAI/HAMi users run it, and
the perfect-knowledge greedy oracle."""

from __future__ import annotations

import pytest

from replay.baselines import DeclaredMemoryPolicy, OraclePolicy, WholeGpuPolicy
from replay.engine import SimNode, Simulator, metrics
from replay.interference import Uniform
from replay.world import SimJob, World

SMALL = SimNode("small", "RTX-2070S", "NVIDIA-GeForce-RTX-2070-SUPER", 1, 7982, slots=2)
LARGE = SimNode("large", "RTX-3090", "NVIDIA-GeForce-RTX-3090", 1, 24576, slots=4)


@pytest.fixture(scope="module")
def world() -> World:
    from estimator.predict import Estimator

    w = World("hand-made", startup_s=0, interference=Uniform(0.5), time_noise=0.0,
              memory_noise=0.0, estimator=Estimator.load())
    for gpu, mib, secs in (("RTX-2070S", 2500.0, 400.0), ("RTX-3090", 2600.0, 100.0)):
        w.measured_mib["resnet18", "train", 8, gpu] = mib
        w.measured_unit_s["resnet18", "train", 8, gpu] = secs
    return w


def _jobs(n: int) -> list[SimJob]:
    return [SimJob(i, 0, "resnet18", "train", 8, 1) for i in range(n)]


def test_declared_memory_rounds_the_true_peak_up_to_a_gib(world) -> None:
    policy = DeclaredMemoryPolicy("declared")
    sim = Simulator(world, [SMALL, LARGE], policy)
    assert policy.declared_mib(_jobs(1)[0], LARGE, sim) == 3072  # 2600 MiB -> 3 GiB
    fraction = DeclaredMemoryPolicy("declared-fraction", fraction=True)
    # a quarter of the smallest card (1995 MiB) is too little, a half (3991) holds it,
    # reserved as half of whichever card it lands on
    assert fraction.declared_mib(_jobs(1)[0], SMALL, sim) == pytest.approx(3991)
    assert fraction.declared_mib(_jobs(1)[0], LARGE, sim) == pytest.approx(12288)


def test_declared_memory_packs_blind_to_gpu_type_within_the_limits(world) -> None:
    sim = Simulator(world, [SMALL, LARGE], DeclaredMemoryPolicy("declared"))
    out = sim.run(_jobs(7))
    on_small = [o for o in out if o.node == "small" and o.placed_s == 0]
    on_large = [o for o in out if o.node == "large" and o.placed_s == 0]
    # best fit: the small card first (2 fit by memory and by its limit of 2), then the
    # large one up to its limit of 4; the seventh waits
    assert len(on_small) == 2 and len(on_large) == 4
    assert metrics(sim, out)["oom_count"] == 0


def test_the_oracle_goes_where_the_job_ends_soonest(world) -> None:
    sim = Simulator(world, [SMALL, LARGE], OraclePolicy())
    out = sim.run(_jobs(3))
    # the 3090 is 4x faster alone. The third job there: 200 s (speed 1/2) plus 50 s added
    # to each neighbour (speed 2/3 -> 1/2 over its 100 s) = 300 s, against 400 s alone on
    # the 2070S: all three share the 3090
    assert {o.node for o in out} == {"large"}
    assert max(o.ended_s for o in out) == pytest.approx(200)


def test_gpu_types_a_job_may_not_run_on_are_left_alone(world) -> None:
    job = SimJob(0, 0, "resnet18", "train", 8, 1, gpu_types=("RTX-2070S",))
    for policy in (WholeGpuPolicy("gavel-like", heterogeneity_aware=True), OraclePolicy(),
                   DeclaredMemoryPolicy("declared")):
        (outcome,) = Simulator(world, [LARGE, SMALL], policy).run([job])
        assert outcome.node == "small", policy.name


class _AskedPerShape(WholeGpuPolicy):
    """The default scheduler asked once per job shape, as the engine asks a policy that
    names no answer key, counting the answers that `answer_key` would have spared."""

    def __init__(self) -> None:
        super().__init__("default")
        self.asked: list[tuple[int, bool]] = []

    def answer_key(self, job: SimJob) -> tuple:
        return job.shape

    def place(self, job, now, sim):  # type: ignore[no-untyped-def]
        choice = super().place(job, now, sim)
        self.asked.append((job.id, choice is None))
        return choice


def test_the_default_scheduler_is_asked_once_per_gpu_count_in_a_round(world) -> None:
    """Jobs of many shapes wait for the one GPU: asked per shape, each is refused again at
    every job end; asked per GPU count (its answer key), one is, and every job still starts
    and ends as before."""
    jobs = [SimJob(i, 0, "resnet18", "train", 8, 1 + i % 5) for i in range(12)]
    per_shape = _AskedPerShape()
    shaped = Simulator(world, [SMALL], per_shape)
    by_shape = shaped.run(jobs)
    keyed = Simulator(world, [SMALL], WholeGpuPolicy("default"))
    by_key = keyed.run(jobs)
    assert [(o.placed_s, o.ended_s) for o in by_key] == [(o.placed_s, o.ended_s)
                                                         for o in by_shape]
    refused_again = sum(refused for _, refused in per_shape.asked)
    assert refused_again > 11  # five shapes wait at each of the first ends
    assert keyed.decisions == shaped.decisions - refused_again + 11  # one refusal per end
