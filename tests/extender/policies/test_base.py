"""What every registered policy shares: the registry, the cheapest GPU, scores and ties."""

import pytest

from extender.model import GpuState
from extender.policies import DEFAULT_POLICY, POLICIES, make_policy
from extender.policies.base import TIED_SCORE, Placement, ScoringPolicy
from extender.settings import Settings, SettingsError
from tests.extender.states import queued


def test_settings_accept_exactly_the_registered_policies() -> None:
    assert set(POLICIES) == {"marginal", "shared", "paper", "drain", "settled", "idle-first",
                             "keeping-up"}
    assert DEFAULT_POLICY == "keeping-up"
    for name in POLICIES:
        env = {"EXTENDER_SCORING": name, "EXTENDER_INTERFERENCE_ALPHA": "0.3"}
        settings = Settings.from_env(env)
        assert settings.policy.name == name and settings.policy.alpha == 0.3
        assert isinstance(settings.policy, ScoringPolicy)
    with pytest.raises(SettingsError, match="marginal, shared, paper, drain, settled, idle-first, keeping-up"):
        Settings.from_env({"EXTENDER_SCORING": "fastest"})
    with pytest.raises(KeyError, match="registered: marginal"):
        make_policy("fastest", 0.47)


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_cheapest_is_the_minimum_and_a_gpu_at_the_jobs_own_time_ends_the_search(name) -> None:
    policy = make_policy(name, 0.47)
    busy = GpuState("n", 0, 24576, (queued("a", 100, 50),))
    busier = GpuState("n", 1, 24576, (queued("a", 100, 50), queued("b", 100, 500)))
    idle = GpuState("n", 2, 24576)
    assert policy.cheapest([busier, busy], 100, 0) == (policy.cost_s(busy, 100, 0), busy)
    assert policy.cost_s(busy, 100, 0) > 100
    assert policy.cheapest([busier, idle, busy], 100, 0) == (100, idle)
    assert policy.cost_s(idle, 100, 0) == 100  # the invariant `cheapest` relies on
    # A job past its prediction counts as ending now: its GPU costs the job alone too, and
    # comes first when listed first (best fit); but to `settled`, which prices sharing as
    # lasting, it still shares the GPU, and the idle one is cheaper.
    overrun = GpuState("n", 3, 24576, (queued("c", 100, 50, started=1),))
    expected = idle if name == "settled" else overrun
    assert policy.cheapest([overrun, idle], 100, 60) == (100, expected)
    with pytest.raises(ValueError):
        policy.cheapest([], 100, 0)


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_scores_normalise_and_ties_go_to_the_tightest_fit(name) -> None:
    # "full" and "also" are alike in time and fit: both keep 1, kube-scheduler picks one.
    policy = make_policy(name, 0.47)
    scores = policy.scores({"roomy": Placement(100, 16576), "full": Placement(100, 4576),
                            "slow": Placement(400, 0), "also": Placement(100, 4576)})
    assert scores == {"roomy": TIED_SCORE, "full": 1.0, "slow": 0.25, "also": 1.0}
    assert policy.scores({"only": Placement(100, 9)}) == {"only": 1.0}
    assert policy.scores({}) == {}
    assert policy.scores({"instant": Placement(0, 1), "later": Placement(5, 1)})["instant"] == 1.0
