"""Which gang a pod is in, as each gang scheduler marks it, and a PodGroup's size.

Shapes: Kubernetes v1.36 pkg/apis/scheduling/v1alpha2 (Pod spec.schedulingGroup,
PodGroup spec.schedulingPolicy.gang.minCount), Volcano's apis/pkg/apis/scheduling
(KubeGroupNameAnnotationKey, PodGroup spec.minMember), scheduler-plugins'
apis/scheduling/v1alpha1 (PodGroupLabel, spec.minMember)."""

from __future__ import annotations

import pytest

from extender.model import GANG, GANG_SIZE, GroupRef
from extender.wire.gangs import group_of, size_of_pod_group


def _meta(annotations=None, labels=None):
    return {"name": "w-0", "namespace": "ml", "annotations": annotations or {},
            "labels": labels or {}}


def test_each_gang_schedulers_mark_is_read():
    assert group_of(_meta(), {"schedulingGroup": {"podGroupName": "pg"}}) == GroupRef(
        "workload", "pg")
    assert group_of(_meta({"scheduling.k8s.io/group-name": "vc"}), {}) == GroupRef(
        "volcano", "vc")
    assert group_of(_meta(labels={"scheduling.x-k8s.io/pod-group": "co"}), {}) == GroupRef(
        "coscheduling", "co")
    assert group_of(_meta({GANG: "mine", GANG_SIZE: "8"}), {}) == GroupRef("schedtune", "mine", 8)
    assert group_of(_meta(), {}) is None


def test_a_gang_schedulers_mark_wins_over_ours():
    meta = _meta({GANG: "mine", GANG_SIZE: "8", "scheduling.k8s.io/group-name": "vc"})
    assert group_of(meta, {"schedulingGroup": {"podGroupName": "pg"}}).kind == "workload"
    assert group_of(meta, {}).kind == "volcano"


@pytest.mark.parametrize(("annotations", "spec", "said"), [
    ({GANG_SIZE: "3"}, {}, "needs schedtune.io/gang"),
    ({GANG: "g"}, {}, "whole number"),
    ({GANG: "g", GANG_SIZE: "257"}, {}, "1..256"),
    ({"scheduling.k8s.io/group-name": "UPPER"}, {}, "object name"),
    ({}, {"schedulingGroup": {"podGroupName": "a/b"}}, "object name"),
])
def test_malformed_marks_are_errors(annotations, spec, said):
    with pytest.raises(ValueError, match=said):
        group_of(_meta(annotations), spec)


def test_pod_group_sizes():
    assert size_of_pod_group("workload", {"spec": {"schedulingPolicy": {
        "gang": {"minCount": 4}}}}) == 4
    assert size_of_pod_group("volcano", {"spec": {"minMember": 2}}) == 2
    assert size_of_pod_group("coscheduling", {"spec": {"minMember": "3"}}) == 3
    with pytest.raises(ValueError, match="not a gang"):
        size_of_pod_group("workload", {"spec": {"schedulingPolicy": {"basic": {}}}})
    with pytest.raises(ValueError, match="no spec"):
        size_of_pod_group("volcano", {"status": {}})
    with pytest.raises(ValueError, match="whole number"):
        size_of_pod_group("volcano", {"spec": {}})
