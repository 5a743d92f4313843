"""Behind the real kube-scheduler: where an annotated pod lands, what it carries, and what
happens to pods that are not ours or whose annotations are wrong."""

from __future__ import annotations

import pytest

from estimator.catalogue import CATALOGUE
from estimator.predict import Estimator, Job
from extender.model import GPU, PREDICTED_S, RESERVED_MIB, SIGNATURE
from tests.e2e.cluster import wait_for

TYPES = {"T4": 1, "A100-80GB": 1}


@pytest.fixture(scope="module")
def estimator() -> Estimator:
    return Estimator.load()


def test_an_annotated_training_pod_lands_on_the_gpu_type_the_estimator_prefers(
        cluster, namespace, gpu_pool, estimator):
    selector = gpu_pool(TYPES)
    job = Job("resnet50", "train", 32, 2)
    times = {t: e.predicted_s for t, e in estimator.estimate(job, gpus=TYPES).items()}
    preferred = min(times, key=times.get)
    pod = cluster.new_pod(namespace, node_selector=selector, model="resnet50", task="train",
                          batch=32, epochs=2)
    cluster.create(pod)
    node = cluster.wait_bound(namespace, pod["metadata"]["name"])
    assert cluster.gpu_product(node) == CATALOGUE[preferred].products[0], (node, times)
    notes = cluster.read(namespace, pod["metadata"]["name"])["metadata"]["annotations"]
    assert notes[GPU] == "0" and float(notes[RESERVED_MIB]) > 0 and notes[SIGNATURE]
    assert float(notes[PREDICTED_S]) == pytest.approx(times[preferred], rel=0.05)
    [job_record] = [j for j in cluster.reservations() if j.pod == pod["metadata"]["name"]]
    assert (job_record.node, job_record.gpu_type) == (node, preferred)
    assert job_record.reserved_mib == pytest.approx(float(notes[RESERVED_MIB]), abs=1)


def test_an_unannotated_pod_of_our_scheduler_passes_through_untouched(
        cluster, namespace, gpu_pool):
    selector = gpu_pool({"T4": 1})
    pod = cluster.new_pod(namespace, node_selector=selector)
    cluster.create(pod)
    cluster.wait_bound(namespace, pod["metadata"]["name"])
    notes = cluster.read(namespace, pod["metadata"]["name"])["metadata"].get("annotations") or {}
    assert not [k for k in notes if k.startswith("schedtune.io/")]
    assert not [j for j in cluster.reservations() if j.pod == pod["metadata"]["name"]]


def test_a_malformed_annotation_leaves_the_pod_pending_with_our_reason(
        cluster, namespace, gpu_pool):
    selector = gpu_pool({"T4": 1})
    pod = cluster.new_pod(namespace, node_selector=selector, model="resnet50", task="train",
                          batch="lots", epochs=1)
    cluster.create(pod)
    name = pod["metadata"]["name"]
    condition = wait_for("the PodScheduled condition",
                         lambda: cluster.scheduled_condition(namespace, name))
    assert condition["status"] == "False" and condition["reason"] == "Unschedulable"
    assert "batch" in condition["message"], condition
    assert cluster.bound_node(namespace, name) is None


def test_the_monitor_posts_our_decisions_as_events_and_never_cries_outage(
        cluster, namespace, gpu_pool):
    logged_before = len(cluster.log("schedtune-monitor"))  # an earlier test's outage aside
    selector = gpu_pool({"T4": 1})
    pod = cluster.new_pod(namespace, node_selector=selector, model="resnet18", task="train",
                          batch=16, epochs=1)
    cluster.create(pod)
    name = pod["metadata"]["name"]
    cluster.wait_bound(namespace, name)

    def reserved_event() -> list:
        events = cluster.api.list_namespaced_event(
            namespace, field_selector=f"involvedObject.name={name}").items
        return [e for e in events if e.reason == "SchedTuneReserved"]

    [event] = wait_for("the SchedTuneReserved event", reserved_event, timeout_s=15)
    assert event.source.component == "schedtune-monitor" and event.message
    # no idle-wait warnings
    assert "event poster" not in cluster.log("schedtune-monitor")[logged_before:]
