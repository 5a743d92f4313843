"""Bind's plan: the reservation record, the GPUs to try in order, the pod's annotations."""

import pytest

from extender.core.binding import plan_reservation, pod_annotations, reservation_candidates
from extender.errors import Conflict
from extender.model import Limits, Need, NodeState, PodDemand, PodInfo, Reservation
from extender.policies import make_policy
from extender.settings import Settings
from tests.extender.states import node_state, queued

POD = PodInfo("uid-1", "train", "ml")
DEMAND = PodDemand("uid-1", "train", "ml", "resnet50", "train", 64, 3)


def test_bind_reserves_the_gpu_prioritize_costed_not_the_tightest() -> None:
    # GPU 0 is the best fit but shared with a long job; GPU 1 is idle and costs the job alone.
    node = node_state("n", [[queued("a", 16000, 3000, started=5)], []])
    need, policy = Need(4000, 600), make_policy("marginal", 0.47)
    order = reservation_candidates(node, need, Limits(4, {}), policy, 10.0)
    assert [index for index, _, _ in order] == [1, 0]
    # Equal cost keeps best fit: two idle GPUs, the fuller one first.
    pair = node_state("p", [[queued("x", 16000, 0, started=1)], []])
    order = reservation_candidates(pair, need, Limits(4, {}), policy, 10.0)
    assert [index for index, _, _ in order] == [0, 1]
    assert reservation_candidates(pair, need, Limits(4, {}), policy, 10.0,
                                  avoid=frozenset({0})) == [(1, 24576.0, 4)]


def test_the_plan_records_the_pod_the_need_and_the_gpus_to_try() -> None:
    node = node_state("n", [[queued("a", 20000, 100, started=5)], []])
    need = Need(8000.26, 123.4567)
    plan = plan_reservation(POD, DEMAND, node, {"RTX-3090": need}, Settings(), now=50.0)
    record = plan.record
    assert (record.uid, record.pod, record.namespace, record.node) == ("uid-1", "train", "ml", "n")
    assert (record.model, record.task, record.batch, record.units) == ("resnet50", "train", 64, 3)
    assert (record.reserved_mib, record.predicted_s, record.reserved_at) == (8000.3, 123.457, 50.0)
    assert record.state == "reserved" and record.gpu_type == "RTX-3090"
    assert [index for index, _, _ in plan.candidates] == [1, 0]  # GPU 0 lacks room: last
    assert plan.need == need
    assert pod_annotations(Reservation("uid-1", "n", 1, True), need) == {
        "schedtune.io/gpu": "1", "schedtune.io/reserved-mib": "8000",
        "schedtune.io/predicted-seconds": "123.5",
        "schedtune.io/sizing": "pad 0.0 % (family and GPU type seen in training)"}


def test_a_node_without_a_known_layout_is_a_conflict() -> None:
    with pytest.raises(Conflict, match="no GPU layout known for this pod: it did not pass"):
        plan_reservation(POD, DEMAND, NodeState("ghost", None), {}, Settings(), now=0.0)
