"""Learning the collocation slowdown per GPU type from observed runs, and deciding with it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from extender.core import gpu_table
from extender.core.gpu_table import GpuTable
from extender.core.interference import (
    MIN_RUNS, TENANT_BOUND, Alphas, ObservedRun, company, fit_alpha, learn_alphas, runs_from_jobs,
    runs_from_observations,
)  # fmt: skip
from extender.core.prioritizing import score_nodes
from extender.model import (
    ClusterSnapshot, GpuState, JobRecord, Limits, Need, NodeGpus, NodeState, QueuedJob,
)  # fmt: skip
from extender.policies import make_policy

FAST = NodeGpus("NVIDIA-GeForce-RTX-3090", "RTX-3090", 1, 24576, share_slots=4)
SLOW = NodeGpus("NVIDIA-GeForce-RTX-2070-SUPER", "RTX-2070S", 1, 8192, share_slots=2)


def _synthetic(alpha: float, runs: int, noise: float, bias: float, seed: int
               ) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    company_x = rng.choice([0.0, 0.0, 0.3, 0.7, 1.0, 2.0], size=runs)
    log_ratio = bias + np.log1p(alpha * company_x) + rng.normal(0.0, noise, runs)
    return company_x, log_ratio


@pytest.mark.parametrize("truth", [0.0, 0.5, 1.0, 1.6])
def test_the_fit_recovers_the_slowdown_through_a_biased_time_estimate(truth) -> None:
    x, y = _synthetic(truth, 300, noise=0.2, bias=0.25, seed=int(truth * 10))
    assert fit_alpha(x, y, prior=0.47) == pytest.approx(truth, abs=0.15)


def test_with_few_runs_or_no_variety_in_company_the_fit_stays_near_the_prior() -> None:
    x, y = _synthetic(1.5, 4, noise=0.3, bias=0.0, seed=1)
    assert abs(fit_alpha(x, y, prior=0.47) - 0.47) < abs(fit_alpha(x, y, prior=0.47) - 1.5)
    same_company = np.full(50, 1.0)  # every run had one neighbour: alpha and bias confound
    assert fit_alpha(same_company, np.full(50, math.log(2.5)), prior=0.47) == 0.47
    assert fit_alpha(np.array([1.0]), np.array([3.0]), prior=0.6) == 0.6


def test_one_wild_run_does_not_carry_the_fit() -> None:
    x, y = _synthetic(0.5, 60, noise=0.05, bias=0.0, seed=3)
    y[0], x[0] = 25.0, 2.0  # a run that hung for hours
    assert fit_alpha(x, y, prior=0.47) == pytest.approx(0.5, abs=0.1)


def test_company_is_the_mean_number_of_others_on_the_same_gpu_while_a_run_ran() -> None:
    runs = [ObservedRun("RTX-3090", (("a", 0),), 0.0, 100.0, 50.0),
            ObservedRun("RTX-3090", (("a", 0),), 50.0, 150.0, 50.0),
            ObservedRun("RTX-3090", (("a", 1),), 0.0, 100.0, 50.0),  # another GPU
            ObservedRun("RTX-3090", (("a", 0), ("a", 1)), 0.0, 200.0)]  # both GPUs, throughout
    # The last: 200 s of company over 200 s on GPU 0, 100 s on GPU 1; the busier counts.
    assert company(runs).tolist() == [1.5, 1.5, 1.0, 1.0]


def test_observations_become_samples_only_when_they_time_a_model_alone_on_one_gpu() -> None:
    base = {"model": "resnet18", "gpu_type": "RTX-3090", "node": "a", "gpus": "0",
            "started_at": "1000.0", "seconds": "120.0", "predicted_s": "100.0",
            "outcome": "succeeded"}
    runs = runs_from_observations([
        base,
        {**base, "outcome": "oom"},  # company only
        {**base, "gpus": "0,1"},  # multi-GPU: company only
        {**base, "model": ""},  # declared memory: its time is a guess
        {**base, "seconds": "1", "predicted_s": "0.8"},  # too short to time
        {**base, "gpus": "x"}, {**base, "started_at": "nan"},  # unreadable: left out
        {k: v for k, v in base.items() if k != "started_at"},  # an older record
    ])
    assert [r.predicted_s for r in runs] == [100.0, 0.0, 0.0, 0.0, 0.0]
    assert runs[0] == ObservedRun("RTX-3090", (("a", 0),), 1000.0, 1120.0, 100.0, "|resnet18")
    assert runs_from_observations([{**base, "batch": "32", "owner": "ml/Job/x"}])[0][-2:] == (
        32, "ml/Job/x")
    assert runs[2].gpus == (("a", 0), ("a", 1))
    running = JobRecord("u", "p", "ns", "m", "train", "a", 1, 100.0, 60.0, "running", 0.0,
                        started_at=900.0, gpu_type="RTX-3090")
    waiting = JobRecord("w", "p", "ns", "m", "train", "a", 1, 100.0, 60.0, "bound", 0.0)
    assert runs_from_jobs([running, waiting], now=1000.0) == [
        ObservedRun("RTX-3090", (("a", 1),), 900.0, 1000.0)]


def _pairs(together_s: float, owner: str = "ns/Job/a", count: int = MIN_RUNS,
           node: str = "fast") -> list[ObservedRun]:
    """Pairs on a 3090 that each took `together_s` (100 s alone), and a run alone after."""
    runs = []
    for i in range(count):
        start = 1000.0 * i
        runs += [ObservedRun("RTX-3090", ((node, 0),), start, start + together_s, 100.0,
                             owner=owner),
                 ObservedRun("RTX-3090", ((node, 0),), start, start + together_s, 100.0,
                             owner=owner),
                 ObservedRun("RTX-3090", ((node, 0),), start + 500, start + 600.0, 100.0,
                             owner=owner)]
    return runs


@pytest.mark.parametrize(("together_s", "published"), [(160.0, 0.6), (220.0, 0.47 + 0.25)])
def test_alphas_are_published_per_gpu_type_once_it_has_enough_runs(together_s,
                                                                   published) -> None:
    """Each of a pair took 1.6x (alpha 0.6) or 2.2x (1.2) its time alone: learned, within
    `TENANT_BOUND` / 2 of the prior (0.47)."""
    runs = _pairs(together_s)
    runs += [ObservedRun("RTX-2070S", (("slow", 0),), 0.0, 100.0, 100.0)] * (MIN_RUNS - 1)
    fits = learn_alphas(runs, prior=0.47)
    assert list(fits) == ["RTX-3090"]  # the 2070 SUPER has one run too few
    assert fits["RTX-3090"].alpha == pytest.approx(published, abs=0.05)
    assert (fits["RTX-3090"].runs, fits["RTX-3090"].shared_runs) == (3 * MIN_RUNS, 2 * MIN_RUNS)


@pytest.mark.parametrize("together_s", [100.0, 2000.0])  # sharing free, or thrashing
def test_one_owners_crafted_runs_move_the_alpha_at_most_the_bound(together_s) -> None:
    """32 crafted pairs of one tenant beside another tenant's honest runs (alpha 0.6)."""
    honest = _pairs(160.0)
    crafted = _pairs(together_s, owner="evil/Job/flood", count=32, node="other")
    before = learn_alphas(honest, prior=0.47)["RTX-3090"].alpha
    after = learn_alphas(honest + crafted, prior=0.47)["RTX-3090"].alpha
    assert abs(after - before) <= TENANT_BOUND + 1e-9
    alone = learn_alphas(crafted, prior=0.47)["RTX-3090"].alpha  # no honest runs at all
    assert abs(alone - 0.47) <= TENANT_BOUND / 2 + 1e-9


def _busy_and_idle(now: float) -> ClusterSnapshot:
    long_job = QueuedJob("long", 4000.0, 600.0, started_at=now - 500)  # 100 s left
    busy = NodeState("fast", FAST, (GpuState("fast", 0, 24576, (long_job,)),))
    idle = NodeState("slow", SLOW, (GpuState("slow", 0, 8192),))
    return ClusterSnapshot(now, {"fast": busy, "slow": idle})


def test_a_gpu_type_where_sharing_gains_nothing_is_priced_as_such() -> None:
    """A job of 200 s alone on the busy 3090 (beside 100 s of work left: drained after
    200 + alpha 100 s) or 280 s on the idle 2070 SUPER. At the prior alpha the shared 3090
    drains sooner (247 s); once the 3090 is known to share at alpha 1.2 (320 s), the idle
    card is the better offer."""
    snap = _busy_and_idle(1000.0)
    needs = {"RTX-3090": Need(2000.0, 200.0), "RTX-2070S": Need(2000.0, 280.0)}
    policy, limits = make_policy("drain", 0.47), Limits(4, {})
    prior = score_nodes(snap, needs, limits, policy, alphas=Alphas(0.47))
    learned = score_nodes(snap, needs, limits, policy, alphas=Alphas(0.47, {"RTX-3090": 1.2}))
    assert prior["fast"] == 1.0 > prior["slow"]
    assert learned["slow"] == 1.0 > learned["fast"]


def test_per_type_alphas_decide_the_same_on_arrays_as_node_by_node(monkeypatch) -> None:
    rng = np.random.default_rng(5)
    now, nodes = 5000.0, {}
    for i in range(40):
        layout = (FAST, SLOW)[i % 2]
        jobs = tuple(QueuedJob(f"j{i}-{k}", 1000.0, float(rng.uniform(10, 3000)),
                               started_at=float(rng.choice([0.0, now - 100])))
                     for k in range(int(rng.integers(0, 3))))
        nodes[f"n{i}"] = NodeState(f"n{i}", layout, (GpuState(f"n{i}", 0, layout.memory_mib,
                                                              jobs),))
    snap = ClusterSnapshot(now, nodes)
    needs = {"RTX-3090": Need(1500.0, 300.0), "RTX-2070S": Need(1500.0, 700.0)}
    alphas = Alphas(0.47, {"RTX-3090": 1.3, "RTX-2070S": 0.2})
    assert isinstance(alphas.rows(GpuTable.from_states(nodes)), np.ndarray)
    assert Alphas(0.47).rows(GpuTable.from_states(nodes)) == 0.47  # one float: today's arithmetic
    for name in ("drain", "marginal", "shared", "paper"):
        policy = make_policy(name, 0.47)
        on_arrays = dict(score_nodes(snap, needs, Limits(4, {}), policy, alphas=alphas))
        monkeypatch.setattr(gpu_table, "ARRAYS_FROM", 10**6)
        node_by_node = dict(score_nodes(snap, needs, Limits(4, {}), policy, alphas=alphas))
        monkeypatch.undo()
        assert on_arrays == node_by_node
        if name != "paper":  # the paper's sums play nothing forward: alpha never reaches it
            assert on_arrays != dict(score_nodes(snap, needs, Limits(4, {}), policy))


def test_types_not_learned_yet_are_priced_at_their_architectures_measured_slowdown():
    from extender.core.interference import MEASURED_ALPHA, prior_alpha

    assert prior_alpha("V100-16GB", 0.3) == MEASURED_ALPHA["Volta"] == 0.47  # Gavel's pairs
    assert prior_alpha("K80", 0.3) == 0.87
    assert prior_alpha("H200", 0.3) == prior_alpha("A100-80GB", 0.3) == 0.90  # the H200's
    assert prior_alpha("no-such-gpu", 0.3) == 0.3
    a100 = NodeGpus("NVIDIA-A100-SXM4-80GB", "A100-80GB", 8, 81920)
    assert Alphas(0.47).of(a100) == 0.47  # priors off: one alpha everywhere
    assert Alphas(0.47, priors=True).of(a100) == 0.90
    assert Alphas(0.47, {"A100-80GB": 0.6}, priors=True).of(a100) == 0.6  # learned wins


def test_the_environment_turns_priors_on_unless_an_alpha_is_given():
    from extender.settings import Settings

    assert Settings.from_env({}).interference_priors
    assert not Settings.from_env({"EXTENDER_INTERFERENCE_ALPHA": "0.47"}).interference_priors
    assert not Settings.from_env({"EXTENDER_INTERFERENCE_PRIORS": "0"}).interference_priors
