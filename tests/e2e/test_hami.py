"""HAMi as the node agent behind the real kube-scheduler: the project deployed with the
k8s/hami component, nodes registered as HAMi's device plugin registers them, and a test
standing in for that plugin (tests/hami_device_plugin.py) reading each pod as the protocol
says: its devices are on the pod before the Binding exists, they decode to the reserved
GPUs' UUIDs and MiB, and its answer is followed."""

from __future__ import annotations

import math
import threading
import uuid

import orjson
import pytest
from kubernetes import watch

from extender.model import GPU
from tests.e2e.cluster import wait_for
from tests.e2e.conftest import POOL_LABEL
from tests.e2e.deployment import Manifests
from tests.hami_device_plugin import NODE_LOCK, TO_ALLOCATE, answer, decode_devices

REGISTER = "hami.io/node-nvidia-register"
SPLIT = 10  # HAMi's deviceSplitCount: nvidia.com/gpu = devices x 10


@pytest.fixture(scope="module")
def hami(cluster):
    """The extender, node watcher and monitor as the k8s/hami component deploys them."""
    base = cluster.deployment.manifests
    admin = cluster.control_plane.api_client()
    cluster.deployment.use(Manifests(base.binaries, base.workdir, (*base.components, "hami")), admin)
    yield cluster
    cluster.deployment.use(base, admin)


@pytest.fixture
def hami_node(hami):
    made = []

    def make(devices: int) -> tuple[dict[str, str], str, list[str]]:
        pool = uuid.uuid4().hex[:6]
        name, uuids = f"{pool}-hami", [f"GPU-{pool}-{i}" for i in range(devices)]
        register = [{"id": u, "index": i, "count": SPLIT, "devmem": 23028, "devcore": 100,
                     "type": "NVIDIA-NVIDIA A10", "numa": 0, "mode": "hami-core",
                     "health": True} for i, u in enumerate(uuids)]
        hami.add_gpu_node(name, "NVIDIA-A10", devices, 23028, replicas=SPLIT,
                          labels={POOL_LABEL: pool},
                          annotations={REGISTER: orjson.dumps(register).decode()})
        made.append(name)
        wait_for(f"{name}'s layout", lambda: hami.layout_known(name))
        return {POOL_LABEL: pool}, name, uuids

    yield make
    for name in made:
        hami.delete_node(name)


def _placed(cluster, namespace: str, pod: dict) -> tuple[dict, list[dict]]:
    """Create the pod and wait for its Binding, watching it the while: the pod as bound,
    and every version of it seen before it was bound."""
    name = pod["metadata"]["name"]
    seen, stream = [], watch.Watch()
    since = cluster.api.list_namespaced_pod(namespace).metadata.resource_version

    def follow() -> None:  # from before the pod exists: no version of it is missed
        for event in stream.stream(cluster.api.list_namespaced_pod, namespace,
                                   field_selector=f"metadata.name={name}",
                                   resource_version=since, timeout_seconds=60):
            obj = cluster.api.api_client.sanitize_for_serialization(event["object"])
            seen.append(obj)
            if obj["spec"].get("nodeName"):
                stream.stop()

    watcher = threading.Thread(target=follow, daemon=True)
    watcher.start()
    cluster.create(pod)
    cluster.wait_bound(namespace, name)
    watcher.join(timeout=30)
    return cluster.read(namespace, name), [p for p in seen if not p["spec"].get("nodeName")]


def _devices(cluster, pod: dict, before: list[dict]) -> list[tuple[str, int]]:
    """The devices HAMi's plugin would hand the pod's one container, checked to be on the
    pod before its Binding."""
    notes = pod["metadata"]["annotations"]
    assert any(TO_ALLOCATE in (p["metadata"].get("annotations") or {}) for p in before), \
        "the devices must be on the pod before the Binding exists"
    [devices] = decode_devices(notes[TO_ALLOCATE])
    return devices


def _reserved_mib(cluster, name: str) -> int:
    [job] = [j for j in cluster.reservations() if j.pod == name]
    return math.ceil(job.reserved_mib)


def test_hami_gets_the_reserved_gpus_uuid_and_mib_and_success_keeps_it(
        hami, namespace, hami_node):
    selector, node, uuids = hami_node(2)
    pod = hami.new_pod(namespace, node_selector=selector, model="resnet50", task="train",
                       batch=32, epochs=1)
    bound, before = _placed(hami, namespace, pod)
    name = pod["metadata"]["name"]
    [(device, mib)] = _devices(hami, bound, before)
    assert device == uuids[int(bound["metadata"]["annotations"][GPU])]
    assert mib == _reserved_mib(hami, name)
    lock = hami.api.read_node(node).metadata.annotations.get(NODE_LOCK, "")
    assert lock.endswith(f",{namespace},{name}")  # taken for this pod's allocation
    answer(hami.api, namespace, name, node, ok=True)
    assert _reserved_mib(hami, name) == mib  # confirmed: kept


def test_two_pods_on_one_gpu_and_a_four_gpu_pod_decode_correctly(hami, namespace, hami_node):
    selector, node, uuids = hami_node(1)
    limits = []
    for batch in (16, 64):
        pod = hami.new_pod(namespace, node_selector=selector, model="resnet50", task="train",
                           batch=batch, epochs=1)
        bound, before = _placed(hami, namespace, pod)
        [(device, mib)] = _devices(hami, bound, before)
        assert device == uuids[0] and mib == _reserved_mib(hami, pod["metadata"]["name"])
        limits.append(mib)
        answer(hami.api, namespace, pod["metadata"]["name"], node, ok=True)
    assert limits[0] < limits[1]  # the same GPU, each its own limit
    selector, node, uuids = hami_node(4)
    pod = hami.new_pod(namespace, node_selector=selector, model="resnet50", task="train",
                       batch=128, epochs=1, gpus=4)
    bound, before = _placed(hami, namespace, pod)
    devices = _devices(hami, bound, before)
    assert sorted(d for d, _ in devices) == sorted(uuids)
    assert {mib for _, mib in devices} == {_reserved_mib(hami, pod["metadata"]["name"])}
    answer(hami.api, namespace, pod["metadata"]["name"], node, ok=True)


def test_a_failed_allocation_releases_the_reservation_and_the_next_pod_is_placed(
        hami, namespace, hami_node):
    selector, node, _ = hami_node(1)
    pod = hami.new_pod(namespace, node_selector=selector, model="resnet50", task="train",
                       batch=32, epochs=1)
    name = pod["metadata"]["name"]
    _placed(hami, namespace, pod)
    answer(hami.api, namespace, name, node, ok=False)
    wait_for("the reservation released",
             lambda: not [j for j in hami.reservations() if j.pod == name], timeout_s=15)
    events = wait_for("the monitor's Warning", lambda: [
        e for e in hami.api.list_namespaced_event(
            namespace, field_selector=f"involvedObject.name={name}").items
        if e.reason == "SchedTuneAllocationFailed"], timeout_s=15)
    assert "answered failed" in events[0].message
    hami.set_phase(namespace, name, "Failed")  # the kubelet's UnexpectedAdmissionError
    again = hami.new_pod(namespace, node_selector=selector, model="resnet50", task="train",
                         batch=32, epochs=1)  # its controller's next pod
    hami.create(again)
    assert hami.wait_bound(namespace, again["metadata"]["name"]) == node
    answer(hami.api, namespace, again["metadata"]["name"], node, ok=True)


def test_an_unanswered_allocation_is_released_and_the_next_pod_is_placed(
        hami, namespace, hami_node):
    # The monitor as the component runs it, but waiting 4 s for the plugin instead of
    # HAMi's 5 minutes (EXTENDER_AGENT_TIMEOUT_S), so the test need not wait 5 minutes.
    hami.deployment.start_monitor(EXTENDER_AGENT_TIMEOUT_S="4")
    try:
        selector, node, _ = hami_node(1)
        pod = hami.new_pod(namespace, node_selector=selector, model="resnet50", task="train",
                           batch=32, epochs=1)
        name = pod["metadata"]["name"]
        _placed(hami, namespace, pod)  # and then no answer, and no event
        wait_for("the reservation released", lambda: not [
            j for j in hami.reservations() if j.pod == name], timeout_s=30)
        wait_for("the node lock dropped", lambda: NODE_LOCK not in (
            hami.api.read_node(node).metadata.annotations or {}), timeout_s=10)
        hami.set_phase(namespace, name, "Failed")
        again = hami.new_pod(namespace, node_selector=selector, model="resnet50",
                             task="train", batch=32, epochs=1)
        hami.create(again)
        assert hami.wait_bound(namespace, again["metadata"]["name"]) == node
        answer(hami.api, namespace, again["metadata"]["name"], node, ok=True)
    finally:
        hami.deployment.start_monitor()
