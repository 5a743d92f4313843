"""What bind, allocate and deallocate may believe: one placement per pod (idempotent per
(UID, node)), deallocate scoped to Volcano's own unconfirmed allocation, layouts capped at
the node watcher's, and in api mode the pod as the API server has it (unannotated pods:
no Redis at all). Redis is real; the Kubernetes API is a small recording stand-in."""

from __future__ import annotations

import socket
from types import SimpleNamespace
from typing import Any

import orjson
import pytest
from kubernetes.client.exceptions import ApiException

from extender.cluster.kube import Binder
from extender.core.binding import LivePod, check_live_pod, trusted_layout
from extender.errors import Conflict
from extender.model import NodeGpus, PodInfo
from extender.settings import Settings
from extender.web.app import create_app
from extender.wire.volcano import encode_event_request, encode_predicate_request
from tests.builders import bind_args, filter_args, make_node, make_pod

RTX = NodeGpus("NVIDIA-GeForce-RTX-3090", "RTX-3090", 1, 24576)
SHARED = NodeGpus("NVIDIA-GeForce-RTX-3090", "RTX-3090", 1, 24576, share_slots=4)
OURS = "schedtune-scheduler"


# --- pure rules -----------------------------------------------------------------------

@pytest.mark.parametrize(("claimed", "watched", "expected"), [
    (None, None, None),
    (RTX, None, RTX),  # never seen: the claim is all there is
    (None, RTX, RTX),  # names mode
    (RTX, RTX, RTX),
    (NodeGpus("NVIDIA-GeForce-RTX-3090", "RTX-3090", 8, 1 << 20, 0), RTX, RTX),  # 1 TiB, 8 GPUs
    (NodeGpus("NVIDIA-A100-SXM4-80GB", "A100-80G", 1, 81920), RTX, RTX),  # another product
    (NodeGpus("x", "RTX-3090", 1, 20000, 2), NodeGpus("x", "RTX-3090", 2, 24576, 0),
     NodeGpus("x", "RTX-3090", 1, 20000, 2)),  # a smaller claim stays smaller
    (NodeGpus("x", "RTX-3090", 2, 24576, 0), NodeGpus("x", "RTX-3090", 2, 24576, 4),
     NodeGpus("x", "RTX-3090", 2, 24576, 4)),  # "no slot limit" does not lift a limit
    (RTX, NodeGpus("x", None, 0, 0, 1, "labels missing"), NodeGpus("x", None, 0, 0, 1,
                                                                    "labels missing")),
])  # fmt: skip
def test_trusted_layout_caps_a_claim_at_what_the_watcher_saw(claimed, watched, expected) -> None:
    assert trusted_layout(claimed, watched) == expected


def test_check_live_pod() -> None:
    pod = PodInfo("u1", "job", "ml")
    unbound = LivePod("u1", OURS, "", {})
    assert check_live_pod(pod, unbound, "n1", OURS) is False
    assert check_live_pod(pod, LivePod("u1", OURS, "n1", {}), "n1", OURS) is True  # a retry
    for live, words in [(LivePod("u2", OURS, "", {}), "uid u2"),
                        (LivePod("u1", "default-scheduler", "", {}), "default-scheduler"),
                        (LivePod("u1", OURS, "n0", {}), "already bound to n0")]:
        with pytest.raises(Conflict, match=words):
            check_live_pod(pod, live, "n1", OURS)


# --- one placement per pod --------------------------------------------------------------

def test_a_pod_is_never_bound_to_a_second_node(client, binder, store) -> None:
    pod = make_pod(model="resnet50", batch=32)
    uid = pod["metadata"]["uid"]
    nodes = [make_node("gpu-node-0"), make_node("gpu-node-1")]
    client.post("/filter", json=filter_args(pod, nodes))
    assert client.post("/bind", json=bind_args(pod, "gpu-node-0")).get_json() == {"Error": ""}
    assert client.post("/bind", json=bind_args(pod, "gpu-node-0")).get_json() == {"Error": ""}
    res = client.post("/bind", json=bind_args(pod, "gpu-node-1"))
    assert res.status_code == 200 and "already holds a reservation on node gpu-node-0" in \
        res.get_json()["Error"]
    assert store.job(uid).node == "gpu-node-0" and store.job_uids() == [uid]
    assert {call[3] for call in binder.calls} == {"gpu-node-0"}


def test_volcano_allocate_is_idempotent_per_node_and_unconfirmed(client, store, clock) -> None:
    pod = make_pod(model="resnet50", batch=32)
    uid = pod["metadata"]["uid"]
    for name in ("a", "b"):
        client.post("/volcano/predicate", json=encode_predicate_request(pod, make_node(name)))
        client.post("/volcano/allocate", json=encode_event_request(pod, name))
    job = store.job(uid)  # allocated to "a" first: "b" is refused
    assert job.node == "a" and job.state == "reserved"
    assert job.expires_at == clock.now + Settings().reservation_ttl_s  # never forever
    again = client.post("/volcano/allocate", json=encode_event_request(pod, "a"))
    other = client.post("/volcano/allocate", json=encode_event_request(pod, "b"))
    assert again.status_code == 200 and again.get_json() == {}
    assert other.status_code == 503 and "already holds a reservation on node a" in \
        other.get_json()["error"]
    # Not seen bound: gone once the TTL passes, with no write.
    assert store.snapshot({"a": RTX}, clock.now + 121).nodes["a"].idle
    # The monitor saw the pod bound on "a": confirmed, kept for good.
    assert not store.confirm_placement(uid, "b", clock.now + 10)
    assert store.confirm_placement(uid, "a", clock.now + 10)
    assert store.confirm_placement(uid, "a", clock.now + 11)  # idempotent
    assert store.job(uid).state == "bound" and store.job(uid).expires_at == 0
    assert not store.snapshot({"a": RTX}, clock.now + 10_000).nodes["a"].idle


def test_volcano_deallocate_releases_only_its_own_unconfirmed_allocation(client, store) -> None:
    bound = make_pod(model="resnet50", batch=32)  # bound through kube-scheduler
    client.post("/filter", json=filter_args(bound, [make_node("a")]))
    assert client.post("/bind", json=bind_args(bound, "a")).get_json() == {"Error": ""}
    for node in ("a", "b"):
        res = client.post("/volcano/deallocate", json=encode_event_request(bound, node))
        assert res.status_code == 200
    assert store.job(bound["metadata"]["uid"]).state == "bound"

    allocated = make_pod(model="resnet50", batch=32)
    uid = allocated["metadata"]["uid"]
    client.post("/volcano/predicate", json=encode_predicate_request(allocated, make_node("c")))
    client.post("/volcano/allocate", json=encode_event_request(allocated, "c"))
    client.post("/volcano/deallocate", json=encode_event_request(allocated, "a"))  # not there
    assert store.job(uid).node == "c"
    client.post("/volcano/deallocate", json=encode_event_request(allocated, "c"))
    assert store.job(uid) is None


def test_a_made_up_uid_allocated_without_predicate_reserves_nothing(client, redis_client) -> None:
    pod = make_pod(model="resnet50")
    assert client.post("/volcano/allocate", json=encode_event_request(pod, "a")).status_code == 200
    assert redis_client.keys("st:job:*") == []


# --- layouts bind may believe ---------------------------------------------------------

def _bind_many(client, layout_node: dict[str, Any], count: int) -> list[str]:
    errors = []
    for _ in range(count):
        pod = make_pod(model="vgg16", batch=64)
        client.post("/filter", json=filter_args(pod, [layout_node]))
        errors.append(client.post("/bind", json=bind_args(pod, "gpu-node-0")).get_json()["Error"])
    return errors


def test_a_claimed_layout_never_exceeds_what_the_watcher_saw(client, store, clock) -> None:
    store.put_node("gpu-node-0", SHARED)
    liar = make_node("gpu-node-0", "NVIDIA-GeForce-RTX-3090", memory_mib=1 << 20,  # 1 TiB
                     replicas=4)
    errors = _bind_many(client, liar, 4)
    gpu = store.snapshot({"gpu-node-0": None}, clock.now).nodes["gpu-node-0"].gpu_states[0]
    assert gpu.capacity_mib == 24576 and gpu.reserved_mib <= 24576
    assert errors[0] == "" and any("no GPU on gpu-node-0 has room" in e for e in errors)


def test_a_node_the_watcher_never_saw_takes_the_claimed_layout(client, store, clock) -> None:
    big = make_node("gpu-node-0", "NVIDIA-GeForce-RTX-3090", memory_mib=1 << 20, replicas=4)
    assert _bind_many(client, big, 4) == [""] * 4  # nothing to check the claim against
    layout = NodeGpus("NVIDIA-GeForce-RTX-3090", "RTX-3090", 1, 1 << 20, share_slots=4)
    gpu = store.snapshot({"gpu-node-0": layout}, clock.now).nodes["gpu-node-0"].gpu_states[0]
    assert gpu.reserved_mib > 24576


def test_the_filter_record_keeps_the_passing_nodes_only_and_stays_small(client, redis_client,
                                                                       store) -> None:
    pod = make_pod(model="vgg16", batch=64)
    uid = pod["metadata"]["uid"]
    nodes = [make_node(f"gpu-node-{i:04d}", "NVIDIA-GeForce-RTX-3090") if i % 2 else
             make_node(f"gpu-node-{i:04d}", "NVIDIA-GeForce-RTX-3070", memory_mib=7982)
             for i in range(1000)]  # fmt: skip
    passing = client.post("/filter", json=filter_args(pod, nodes)).get_json()["Nodes"]["items"]
    assert len(passing) == 500
    record = store.filter_record(uid)
    assert set(record.layouts) == {n["metadata"]["name"] for n in passing}
    assert redis_client.strlen(f"st:demand:{uid}") < 10_000  # 67,656 bytes before
    assert 0 < redis_client.ttl(f"st:demand:{uid}") <= Settings().demand_ttl_s == 900


# --- api mode: the pod as the API server has it -----------------------------------------

class FakeCoreV1:
    """The CoreV1Api calls `kube.Binder` makes, over pods kept as API JSON dicts."""

    def __init__(self, *pods: dict[str, Any]) -> None:
        self.pods = {(p["metadata"]["namespace"], p["metadata"]["name"]): p for p in pods}
        self.calls: list[tuple[str, ...]] = []

    def read_namespaced_pod(self, name: str, namespace: str, **_: Any) -> SimpleNamespace:
        self.calls.append(("read", name))
        if (namespace, name) not in self.pods:
            raise ApiException(status=404, reason="Not Found")
        return SimpleNamespace(data=orjson.dumps(self.pods[namespace, name]))

    def patch_namespaced_pod(self, name: str, namespace: str, body: dict[str, Any]) -> None:
        self.calls.append(("patch", name))
        self.pods[namespace, name]["metadata"]["annotations"].update(
            body["metadata"]["annotations"])

    def create_namespaced_pod_binding(self, name: str, namespace: str, body: Any,
                                      **_: Any) -> None:
        assert name == body.metadata.name  # the pod's own binding subresource
        self.calls.append(("bind", body.metadata.name, body.target.name))
        self.pods[namespace, body.metadata.name]["spec"]["nodeName"] = body.target.name


def _ours(pod: dict[str, Any], scheduler: str = OURS) -> dict[str, Any]:
    pod["spec"]["schedulerName"] = scheduler
    return pod


@pytest.fixture
def api_client(settings, clock, estimator, redis_client):
    def build(*pods: dict[str, Any], redis_url: str | None = None):
        api = FakeCoreV1(*pods)
        config = settings if redis_url is None else Settings(
            redis_url=redis_url, node_watch=False, log_level="WARNING", redis_timeout_s=0.2)
        app = create_app(config, binder=Binder(api=api), clock=clock, estimator=estimator)
        return app.test_client(), api

    return build


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_api_mode_binds_an_unannotated_pod_with_redis_unreachable(api_client) -> None:
    plain, annotated = _ours(make_pod("plain", model=None)), _ours(make_pod("gpu-job"))
    client, api = api_client(plain, annotated,
                             redis_url=f"redis://127.0.0.1:{_closed_port()}/0")
    assert client.post("/filter", json=filter_args(plain, [make_node("n1")])).get_json()[
        "Error"] == ""
    assert client.post("/bind", json=bind_args(plain, "n1")).get_json() == {"Error": ""}
    assert api.calls == [("read", "plain"), ("bind", "plain", "n1")]
    out = client.post("/bind", json=bind_args(annotated, "n1")).get_json()  # needs Redis
    assert "state store unreachable" in out["Error"] and ("bind", "gpu-job", "n1") not in api.calls


def test_api_mode_binds_an_annotated_pod_only_through_its_filter_record(api_client,
                                                                        store) -> None:
    pod = _ours(make_pod(model="resnet50", batch=32))
    client, api = api_client(pod)
    out = client.post("/bind", json=bind_args(pod, "n1")).get_json()
    assert "filter it first" in out["Error"] and api.calls == [("read", "job")]
    client.post("/filter", json=filter_args(pod, [make_node("n1"), make_node("n2")]))
    assert client.post("/bind", json=bind_args(pod, "n1")).get_json() == {"Error": ""}
    assert api.calls[-2:] == [("patch", "job"), ("bind", "job", "n1")]
    assert store.job(pod["metadata"]["uid"]).state == "bound"
    assert "schedtune.io/reserved-mib" in api.pods["default", "job"]["metadata"]["annotations"]
    calls = len(api.calls)
    assert client.post("/bind", json=bind_args(pod, "n1")).get_json() == {"Error": ""}  # retry
    out = client.post("/bind", json=bind_args(pod, "n2")).get_json()
    assert "already bound to n1" in out["Error"]
    assert api.calls[calls:] == [("read", "job"), ("read", "job")]  # nothing created


def test_api_mode_refuses_a_request_the_pod_contradicts(api_client, store) -> None:
    foreign = _ours(make_pod("foreign", model=None), scheduler="default-scheduler")
    changed = _ours(make_pod("changed", model="resnet50", batch=32))
    client, api = api_client(foreign, changed)
    replaced = {**bind_args(changed, "n1"), "PodUID": "another-uid"}
    assert "not another-uid" in client.post("/bind", json=replaced).get_json()["Error"]
    assert "default-scheduler" in client.post(
        "/bind", json=bind_args(foreign, "n1")).get_json()["Error"]
    missing = make_pod("gone")
    assert "does not exist" in client.post("/bind", json=bind_args(missing, "n1")).get_json()[
        "Error"]
    # Filtered as batch 32, the pod now says 64 (or a forged body described it).
    client.post("/filter", json=filter_args(changed, [make_node("n1")]))
    api.pods["default", "changed"]["metadata"]["annotations"]["schedtune.io/batch-size"] = "64"
    assert "filter it again" in client.post(
        "/bind", json=bind_args(changed, "n1")).get_json()["Error"]
    assert not [c for c in api.calls if c[0] != "read"] and store.job_uids() == []
