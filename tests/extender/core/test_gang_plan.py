"""The gang planner (pure): one GPU type where it fits whole, the all-reduce across nodes,
mixed only when no type can, the type-blind baseline, and a gang waiter's holds."""

from __future__ import annotations

import math

import pytest

from extender.core.filtering.holds import held_gpus
from extender.core.gang_plan import Communication, plan_gang, training_steps
from extender.core.interference import Alphas
from extender.model import ClusterSnapshot, Limits, Need, Waiter
from extender.policies import make_policy
from tests.extender.states import node_state, queued

LIMITS = Limits(default=1, per_type={})
POLICY = make_policy("drain", 0.47)
NEEDS = {"A100": Need(10_000, 400.0), "T4": Need(10_000, 1600.0)}


def _plan(nodes, size, needs=NEEDS, **kwargs):
    states = {n.name: n for n in nodes}
    return plan_gang(size, needs, states, LIMITS, POLICY, lambda _: 0.47, 0.0, **kwargs)


def _idle(name, gpus, gpu_type):
    return node_state(name, [[] for _ in range(gpus)], gpu_type, memory=40_000)


def test_the_fast_type_wins_when_it_fits_the_gang_whole():
    plan = _plan([_idle("t4", 8, "T4"), _idle("a100", 4, "A100")], 4)
    assert plan.gpu_type == "A100" and plan.nodes == ("a100",)
    assert plan.compute_s == pytest.approx(400.0 / 4)  # each member trains on a quarter


def test_the_all_reduce_across_nodes_can_outweigh_faster_cards():
    nodes = [_idle("t4", 4, "T4"), _idle("a-0", 2, "A100"), _idle("a-1", 2, "A100")]
    cheap = _plan(nodes, 4, communication=Communication(100.0, 10, 25.0))
    assert cheap.gpu_type == "A100" and len(cheap.nodes) == 2
    dear = _plan(nodes, 4, communication=Communication(100.0, 10_000, 1.0))
    assert dear.gpu_type == "T4" and dear.nodes == ("t4",) and dear.communication_s == 0


def test_a_gang_too_big_for_any_type_is_mixed_and_priced_at_its_slowest_member():
    plan = _plan([_idle("t4", 2, "T4"), _idle("a100", 2, "A100")], 3)
    assert plan.gpu_type == "mixed" and plan.compute_s == pytest.approx(1600.0 / 3)
    assert len({(s.node, s.gpus) for s in plan.slots}) == 3


def test_no_plan_when_the_gang_does_not_fit_whole_now():
    busy = node_state("a100", [[queued("x", 30_000, 100.0)], []], "A100", memory=40_000)
    assert _plan([busy], 2) is None
    assert _plan([busy], 1).slots[0].gpus == (1,)


def test_blind_packs_the_roomiest_node_whatever_its_type():
    plan = _plan([_idle("a100", 4, "A100"), _idle("t4", 8, "T4")], 4, blind=True)
    assert plan.gpu_type == "T4"


def test_members_on_several_gpus_take_them_on_one_node():
    needs = {"A100": Need(10_000, 400.0, gpus=2)}
    plan = _plan([_idle("a", 3, "A100"), _idle("b", 4, "A100")], 2, needs=needs)
    assert [s.node for s in plan.slots] == ["b", "b"]
    assert sorted(g for s in plan.slots for g in s.gpus) == [0, 1, 2, 3]


def test_ring_all_reduce_time():
    comm = Communication(grad_mib=100.0, steps=1000, network_gbps=25.0)
    assert comm.seconds(1) == 0
    assert comm.seconds(2) == pytest.approx(1000 * 1 * 100 * 2**20 * 8 / 25e9)
    assert comm.seconds(4) == pytest.approx(1000 * 1.5 * 100 * 2**20 * 8 / 25e9)
    assert training_steps(epochs=2, batch=32, size=4) == math.ceil(2 * 50_000 / 128)


def test_a_waiting_gang_holds_a_slot_for_every_member():
    nodes = {n.name: n for n in (
        node_state("a", [[queued("x", 30_000, 100.0)], [queued("y", 30_000, 300.0)]], "A100",
                   memory=40_000),
        node_state("b", [[queued("z", 30_000, 200.0)], []], "A100", memory=40_000))}
    gang = Waiter("gang:ns/g", 0.0, {"A100": (20_000.0, 100.0)}, "ns/g-0", 1, 3)
    snapshot = ClusterSnapshot(10.0, nodes, (gang,))
    holds = held_gpus(snapshot, LIMITS, Alphas(0.47), "other", 1)
    assert sorted(holds) == [("a", 0), ("b", 0), ("b", 1)]  # the 3 that free soonest
    assert {h.uid for h in holds.values()} == {"gang:ns/g"}
