"""Prioritize's decision: nodes priced by the configured policy, ties packed."""

import pytest

from extender.core.job import NotOurs, PodJob, Refused
from extender.core.prioritizing import decide_scores, node_placement, score_nodes
from extender.model import ClusterSnapshot, Limits, Need, PodDemand, Waiter
from extender.policies import make_policy
from extender.policies.base import TIED_SCORE, Placement
from extender.settings import Settings
from tests.extender.states import LIMITS, node_state, queued


def _busy_and_idle() -> ClusterSnapshot:
    busy = node_state("busy", [[queued("long", 1000, 3600, started=100)]])
    return ClusterSnapshot(now=200.0, nodes={"busy": busy, "idle": node_state("idle", [[]])})


def test_scores_prefer_the_sooner_completion_under_every_policy() -> None:
    snap, need = _busy_and_idle(), {"RTX-3090": Need(1000, 600)}
    for name in ("marginal", "shared"):
        scores = score_nodes(snap, need, LIMITS, make_policy(name, 0.47))
        assert scores["idle"] == 1.0 and 0 < scores["busy"] < 1.0
    paper = score_nodes(snap, need, LIMITS, make_policy("paper", 0.47))
    assert paper["busy"] == pytest.approx(600 / (3500 + 600))  # Eq. 1-2: delay added
    marginal = score_nodes(snap, need, LIMITS, make_policy("marginal", 0.47))
    assert marginal["busy"] == pytest.approx(600 / (882 + 282))


def test_the_decision_uses_the_configured_policy_and_scores_0_for_pods_not_placed() -> None:
    snap, need = _busy_and_idle(), {"RTX-3090": Need(1000, 600)}
    job = PodJob(PodDemand("p", "n", "ns", "resnet50", "train", 32, 1), snap, need)
    for name in ("paper", "marginal"):
        settings = Settings(collocation=LIMITS, scoring=name)
        assert decide_scores(job, snap.nodes, settings) == score_nodes(
            snap, need, LIMITS, settings.policy)
    assert decide_scores(NotOurs(), ["a", "b"], Settings()) == {"a": 0.0, "b": 0.0}
    assert decide_scores(Refused("bad"), ["a"], Settings()) == {"a": 0.0}


@pytest.mark.parametrize("name", ["paper", "shared", "marginal"])
def test_nodes_tied_for_the_soonest_completion_go_to_the_tightest_fit(name) -> None:
    # Same type, same work left on each: equal completion; "full" would be left with 4576 MiB
    # free, "roomy" with 16576, "slow" is later. Only the tightest fit keeps the top score.
    full = node_state("full", [[queued("a", 16000, 100, started=10)]])
    roomy = node_state("roomy", [[queued("b", 4000, 100, started=10)]])
    slow = node_state("slow", [[queued("c", 4000, 100, started=10),
                                queued("d", 1000, 900, started=10)]])
    snap = ClusterSnapshot(now=10.0, nodes={"roomy": roomy, "full": full, "slow": slow})
    need = {"RTX-3090": Need(4000, 60)}
    policy = make_policy(name, 0.47)
    scores = score_nodes(snap, need, Limits(4, {}), policy)
    assert scores["full"] == 1.0
    assert scores["roomy"] == TIED_SCORE
    assert scores["slow"] < 1.0 and scores["slow"] == pytest.approx(
        policy.cost_s(full.gpu_states[0], 60, 10) / policy.cost_s(slow.gpu_states[0], 60, 10))
    # No tie, no change: a sooner node keeps its normalised score whatever its fit.
    alone = ClusterSnapshot(now=10.0, nodes={"roomy": roomy, "idle": node_state("idle", [[]])})
    assert score_nodes(alone, need, Limits(4, {}), policy)["idle"] == 1.0


def test_a_node_is_priced_on_the_gpu_bind_will_reserve() -> None:
    node = node_state("n", [[queued("a", 16000, 3000, started=5)], []])
    need = Need(4000, 600)
    policy = make_policy("marginal", 0.47)
    placement = node_placement(node, {"RTX-3090": need}, LIMITS, 10.0, policy)
    assert placement == Placement(600, 24576 - 4000)  # the idle GPU, not the best fit


@pytest.mark.parametrize("arrays", [False, True])
def test_idle_first_prices_sharing_as_lasting_only_while_an_idle_gpu_could_take_the_job(
        monkeypatch, arrays) -> None:
    from extender.core import gpu_table

    if arrays:  # two nodes judged at once, as a large request is
        monkeypatch.setattr(gpu_table, "ARRAYS_FROM", 1)
    # A fast GPU running a job with 2000 s left; an idle GPU three times slower.
    fast = node_state("fast", [[queued("k", 1000, 2000, started=100)]], gpu_type="A100-80GB",
                      memory=81920)
    slow = node_state("slow", [[]], gpu_type="T4", memory=15360)
    need = {"A100-80GB": Need(1000, 1000), "T4": Need(1000, 3000)}
    snap = ClusterSnapshot(now=100.0, nodes={"fast": fast, "slow": slow})
    drain = score_nodes(snap, need, Limits(4, {}), make_policy("drain", 0.91))
    idle_first = score_nodes(snap, need, Limits(4, {}), make_policy("idle-first", 0.91))
    # drain: the fast GPU empties after 1,910 + 1,000 s, before 3,000 s on the slow one.
    assert drain["fast"] == 1.0 and drain["slow"] < 1.0
    # idle-first: 1,910 s of ours plus 1,820 s of delay to k, against 3,000 s alone.
    assert idle_first["slow"] == 1.0 and idle_first["fast"] == pytest.approx(3000 / 3730)
    # With the slow GPU busy too, no idle GPU competes: busy GPUs priced as drain prices them.
    busy_slow = node_state("slow", [[queued("m", 1000, 50, started=100)]], gpu_type="T4",
                           memory=15360)
    both_busy = ClusterSnapshot(now=100.0, nodes={"fast": fast, "slow": busy_slow})
    assert score_nodes(both_busy, need, Limits(4, {}), make_policy("idle-first", 0.91)) \
        == score_nodes(both_busy, need, Limits(4, {}), make_policy("drain", 0.91))


@pytest.mark.parametrize("arrays", [False, True])
def test_keeping_up_prices_as_idle_first_until_a_pod_waits(monkeypatch, arrays) -> None:
    from extender.core import gpu_table

    if arrays:
        monkeypatch.setattr(gpu_table, "ARRAYS_FROM", 1)
    fast = node_state("fast", [[queued("k", 1000, 2000, started=100)]], gpu_type="A100-80GB",
                      memory=81920)
    slow = node_state("slow", [[]], gpu_type="T4", memory=15360)
    need = {"A100-80GB": Need(1000, 1000), "T4": Need(1000, 3000)}
    nodes = {"fast": fast, "slow": slow}

    def scores(policy: str, waiting: tuple[Waiter, ...] = ()) -> dict[str, float]:
        snap = ClusterSnapshot(now=100.0, nodes=nodes, waiting=waiting)
        return dict(score_nodes(snap, need, Limits(4, {}), make_policy(policy, 0.91)))

    # No pod waits: the cluster keeps up, and the idle slow GPU wins as under idle-first.
    assert scores("keeping-up") == scores("idle-first") != scores("drain")
    # A pod waits (any pod: it fit nowhere, or waits for a better GPU): drain's prices.
    waiter = Waiter("w", 50.0, {"T4": (20000, 100)}, "ns/w")
    assert scores("keeping-up", (waiter,)) == scores("drain", (waiter,))
    assert scores("keeping-up", (waiter,))["fast"] == 1.0
