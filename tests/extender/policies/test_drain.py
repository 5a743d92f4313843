"""`drain`: when the GPU is empty again with the job on it, hand-computed; on arrays as
GPU by GPU, bit for bit."""

import random

import numpy as np
import pytest

from extender.model import GpuState, QueuedJob
from extender.policies.drain import Drain
from extender.policies.marginal import Marginal
from extender.policies.paper import Paper
from extender.policies.timeline import remaining_s
from tests.extender.states import queued


def test_the_gpus_last_completion_is_charged() -> None:
    gpu = GpuState("n", 0, 24576, (queued("a", 100, 4),))
    # Both at speed 1/1.5 until a's 4 s are done (6 s), then our 6 s left alone: 12 s.
    assert Drain(alpha=0.5).cost_s(gpu, 10, 0.0) == pytest.approx(12)
    # Beside a long job: 10 s of ours at 1/1.5 (15 s), then the 990 s it has left: 1005 s,
    # where `marginal` would charge 15 + 5 and `paper` 1010.
    long = GpuState("n", 0, 24576, (queued("a", 100, 1000),))
    assert Drain(alpha=0.5).cost_s(long, 10, 0.0) == pytest.approx(1005)
    assert Drain(alpha=0.5).cost_s(GpuState("n", 1, 24576), 10, 0.0) == 10


def test_a_long_job_is_not_crowded_while_a_gpu_drains_sooner() -> None:
    """The backlog counts: a short job goes where the work ends soonest, not beside the
    long one, even where it alone would finish a little sooner."""
    policy = Drain(alpha=0.47)
    crowded = GpuState("n", 0, 24576, (queued("long", 100, 2000),))
    short = GpuState("n", 1, 24576, (queued("a", 100, 100), queued("b", 100, 150)))
    assert policy.cheapest([crowded, short], 120, 0.0)[1] is short
    assert Marginal(alpha=0.47).cheapest([crowded, short], 120, 0.0)[1] is crowded


@pytest.mark.parametrize("alpha", [1.0, 0.47])
def test_without_a_gain_from_sharing_it_is_the_papers_queue_delay(alpha) -> None:
    """At alpha = 1 (k jobs at 1/k: no throughput gained by sharing) the drain time is the
    paper's Eq. 1-2, the remaining times plus the job's; with a gain it is less."""
    gpu = GpuState("n", 0, 24576, (queued("a", 100, 300, started=10), queued("b", 100, 50)))
    drain, paper = Drain(alpha=alpha).cost_s(gpu, 120, 110.0), Paper(alpha).cost_s(gpu, 120, 110.0)
    assert drain == pytest.approx(paper) if alpha == 1.0 else drain < paper


def test_no_work_left_anywhere_costs_nothing() -> None:
    overrun = GpuState("n", 0, 24576, (queued("a", 100, 50, started=1),))
    assert Drain(alpha=0.47).cost_s(overrun, 0.0, 100.0) == 0.0
    assert Drain(alpha=0.47).cost_s(overrun, 30.0, 100.0) == 30.0


@pytest.mark.parametrize("alpha", [0.47, 0.0, 1.0, 0.13])
def test_costs_on_arrays_equal_the_per_gpu_costs_exactly(alpha) -> None:
    rng, now, policy = random.Random(f"drain{alpha}"), 5000.0, Drain(alpha=alpha)
    gpus = []
    for i in range(400):
        jobs = []
        for j in range(rng.choice([0, 1, 1, 2, 3, 5])):
            predicted = rng.choice([rng.uniform(0.1, 5000), float(rng.randrange(1, 4000)), 0.0])
            started = rng.choice([0.0, now - rng.uniform(0, 2 * predicted + 1), now + 5])
            jobs.append(QueuedJob(f"j{i}-{j}", 100.0, predicted, started))
        gpus.append(GpuState("n", i, 24576, tuple(jobs)))
    width = max(len(g.jobs) for g in gpus)
    remaining = np.array([[remaining_s(j, now) for j in g.jobs] + [0.0] * (width - len(g.jobs))
                          for g in gpus])
    work = np.array([rng.choice([rng.uniform(0.5, 3000), 60.0, 0.0]) for _ in gpus])
    expected = [policy.cost_s(g, w, now) for g, w in zip(gpus, work.tolist(), strict=True)]
    assert policy.costs_s(remaining, work).tolist() == expected
    assert 0.0 in expected and len(set(expected)) > 100
