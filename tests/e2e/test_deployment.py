"""The deployment itself: the extender's verbs only for clients of its CA (mutual TLS), the
extender's loss (annotated pods wait, then are placed), the Redis master's loss under
k8s/redis-ha (pods placed across the failover), and every object of `kubectl kustomize
k8s/` accepted by the API server."""

from __future__ import annotations

import ssl
import time
import urllib.error

import pytest

from tests.e2e.apply import server_side_apply
from tests.e2e.cluster import wait_for
from tests.e2e.control_plane import https_get
from tests.e2e.deployment import Manifests
from tests.e2e.pki import ControlPlanePki, identities


def test_a_client_without_the_deployments_certificate_reaches_no_verb(cluster, tmp_path):
    deployment = cluster.deployment
    _, _, ca = deployment.scheduler_client_cert()
    stranger = ControlPlanePki(tmp_path / "stranger", identities([]))  # another CA's cert
    for verb in ("/filter", "/prioritize", "/bind", "/readyz"):
        with pytest.raises((ssl.SSLError, urllib.error.URLError, ConnectionError)):
            https_get(deployment.extender_url(verb), ca)  # no client certificate
        with pytest.raises((ssl.SSLError, urllib.error.URLError, ConnectionError)):
            https_get(deployment.extender_url(verb), ca,
                      cert=(stranger.server_cert, stranger.server_key))
    cert, key, _ = deployment.scheduler_client_cert()
    assert https_get(deployment.extender_url("/readyz"), ca, cert=(cert, key))[0] == 200


def test_annotated_pods_wait_while_the_extender_is_down_and_are_placed_once_it_is_back(
        cluster, namespace, gpu_pool, measured):
    selector = gpu_pool({"T4": 2})
    cluster.supervisor.kill("schedtune-serve")
    try:
        pods = [cluster.new_pod(namespace, node_selector=selector, model="resnet18",
                                task="train", batch=32, epochs=1) for _ in range(2)]
        for pod in pods:
            cluster.create(pod)
        for pod in pods:
            name = pod["metadata"]["name"]
            condition = wait_for(f"{name} refused while the extender is down",
                                 lambda: cluster.scheduled_condition(namespace, name))
            assert condition["status"] == "False", condition
            assert "/filter" in condition["message"], condition  # the extender's call failed
            assert cluster.bound_node(namespace, name) is None  # ignorable: false
    finally:
        cluster.supervisor.restart("schedtune-serve", ready=cluster.deployment.extender_ready,
                                   timeout_s=120)
    back = time.monotonic()
    for pod in pods:  # kube-scheduler's backoff retries them (at most 10 s apart)
        cluster.wait_bound(namespace, pod["metadata"]["name"], timeout_s=60)
    measured("extender back to pods bound (s)", round(time.monotonic() - back, 2))
    assert {j.pod for j in cluster.reservations()} >= {p["metadata"]["name"] for p in pods}


def test_pods_are_placed_across_a_redis_master_failover(cluster, namespace, gpu_pool, measured):
    """With k8s/redis-ha: the master SIGKILLed between two rounds of pods. The first
    round's reservations survive on the promoted replica; the second round, created while
    no master is named, is placed once one is (the verbs' retriable errors meanwhile)."""
    sentinels = cluster.deployment.sentinels
    if sentinels is None:
        pytest.skip("one Redis: the failover is the sentinel run's")
    selector = gpu_pool({"A10": 3}, gpus_per_node=2)  # a GPU of its own for each pod
    first = [cluster.new_pod(namespace, node_selector=selector, model="resnet18", task="train",
                             batch=32, epochs=1) for _ in range(3)]
    for pod in first:
        cluster.create(pod)
    names = {p["metadata"]["name"] for p in first}
    wait_for("the first round bound and confirmed", lambda: {
        j.pod for j in cluster.reservations()
        if j.namespace == namespace and j.expires_at == 0} == names or None)
    old = sentinels.kill_master()
    killed = time.monotonic()
    try:
        second = [cluster.new_pod(namespace, node_selector=selector, model="resnet18",
                                  task="train", batch=32, epochs=1) for _ in range(3)]
        for pod in second:
            cluster.create(pod)
        measured("redis master failover (s)", round(sentinels.wait_for_new_master(old), 2))
        for pod in second:
            cluster.wait_bound(namespace, pod["metadata"]["name"], timeout_s=60)
        measured("master killed to pods bound (s)", round(time.monotonic() - killed, 2))
    finally:
        sentinels.restart(old)
        sentinels.wait_until_rejoined(old)
    names |= {p["metadata"]["name"] for p in second}
    wait_for("every reservation held", lambda: {
        j.pod for j in cluster.reservations() if j.namespace == namespace} == names or None)


@pytest.mark.parametrize("components", [(), ("hami",), ("gang-scheduling",), ("redis-ha",),
                                        ("gang-scheduling", "hami")])
def test_every_object_of_the_kustomization_is_accepted_by_the_api_server(cluster, components):
    base = cluster.deployment.manifests
    objects = Manifests(base.binaries, base.workdir, components).objects
    kinds = {o["kind"] for o in objects}
    assert {"Deployment", "StatefulSet", "Service", "Secret", "ConfigMap", "ClusterRole",
            "NetworkPolicy"} <= kinds, kinds
    accepted = server_side_apply(cluster.control_plane.api_client(), objects, dry_run=True)
    assert accepted == len(objects)
