"""Behind the real kube-scheduler with the extender registered for every pod (no
``managedResources``): pods asking no GPU are sent to it, pass filter and bind untouched,
and go where their CPU strands no GPU (docs/2026-12-07-openb-no-gpu-pods.md)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from extender.model import GPU_MEMORY
from extender.wire.builders import LABEL_HOSTNAME
from tests.e2e.cluster import Cluster
from tests.e2e.conftest import POOL_LABEL


@pytest.fixture
def every_pod(cluster: Cluster) -> Iterator[None]:
    """kube-scheduler restarted with the extender registered for every pod, then as k8s/
    deploys it again."""
    cluster.supervisor.stop("kube-scheduler")
    cluster.deployment.start_scheduler(every_pod=True)
    try:
        yield
    finally:
        cluster.supervisor.stop("kube-scheduler")
        cluster.deployment.start_scheduler()


def test_pods_asking_no_gpu_keep_off_the_node_whose_free_gpu_their_cpu_would_strand(
        cluster, namespace, gpu_pool, every_pod) -> None:
    selector = gpu_pool({"T4": 2}, replicas=4)  # one T4 each, 64 cores each
    short, full = (f"{selector[POOL_LABEL]}-t4-{i}" for i in range(2))
    # "short": a half-GPU pod asking 56 of its 64 cores (8 left, half its GPU free);
    # "full": two half-GPU pods asking 4 each (its GPU full). The mix: half-GPU pods asking
    # the median, 4 cores.
    for node, cpu in ((short, "56"), (full, "4"), (full, "4")):
        pod = cluster.new_pod(namespace, node_selector={LABEL_HOSTNAME: node}, cpu=cpu,
                              annotations={GPU_MEMORY: "50%"})
        cluster.create(pod)
        assert cluster.wait_bound(namespace, pod["metadata"]["name"]) == node
    # 6 cores more on "short" leave 2: no half-GPU pod could use its free half. On "full"
    # nothing is free to strand. Without the extender's score, each pod is a coin toss.
    placed = []
    for _ in range(6):
        pod = cluster.new_pod(namespace, node_selector=selector, gpus=None, cpu="6")
        cluster.create(pod)
        placed.append(cluster.wait_bound(namespace, pod["metadata"]["name"]))
        notes = cluster.read(namespace, pod["metadata"]["name"])["metadata"].get(
            "annotations") or {}
        assert not [k for k in notes if k.startswith("schedtune.io/")]
    assert placed == [full] * 6
    assert len([j for j in cluster.reservations() if j.node == full]) == 2  # nothing added
