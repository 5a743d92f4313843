"""Volcano extender-plugin verbs with bodies of its TaskInfo/NodeInfo shape."""

from extender.wire.volcano import (
    encode_event_request, encode_predicate_request, encode_prioritize_request,
)  # fmt: skip
from tests.builders import make_node, make_pod


def test_predicate_per_task_and_node(client) -> None:
    pod = make_pod(model="vgg16", batch=64)
    small = make_node("s", "NVIDIA-GeForce-RTX-3070", memory_mib=7982)
    big = make_node("b", "NVIDIA-GeForce-RTX-3090")
    no = client.post("/volcano/predicate", json=encode_predicate_request(pod, small))
    yes = client.post("/volcano/predicate", json=encode_predicate_request(pod, big))
    assert no.get_json()["code"] == 3 and "RTX-3070" in no.get_json()["status"]
    assert yes.get_json() == {"status": "", "code": 0}


def test_prioritize_and_allocate_deallocate(client, store) -> None:
    pod = make_pod(model="resnet50", batch=32)
    nodes = [make_node("a", "Tesla-T4"), make_node("b", "NVIDIA-A100-SXM4-40GB", memory_mib=40960)]
    out = client.post("/volcano/prioritize", json=encode_prioritize_request(pod, nodes)).get_json()
    assert set(out) == {"nodeScore", "errorMessage"} and out["errorMessage"] == ""
    assert set(out["nodeScore"]) == {"a", "b"} and max(out["nodeScore"].values()) == 100.0
    client.post("/volcano/predicate", json=encode_predicate_request(pod, nodes[1]))
    assert client.post("/volcano/allocate", json=encode_event_request(pod, "b")).status_code == 200
    assert store.job(pod["metadata"]["uid"]).node == "b"
    released = client.post("/volcano/deallocate", json=encode_event_request(pod, "b"))
    assert released.status_code == 200
    assert store.job_uids() == []


def test_bad_volcano_bodies(client, redis_client) -> None:
    res = client.post("/volcano/predicate", json={"task": {"UID": 5}, "node": {}})
    assert res.status_code == 400 and res.get_json()["code"] == 1
    res = client.post("/volcano/prioritize", json={"task": None, "nodes": "x"})
    assert res.status_code == 400 and res.get_json()["errorMessage"]
    unplaced = encode_event_request(make_pod(), node_name="")  # allocated to no node: refused
    assert client.post("/volcano/allocate", json=unplaced).status_code == 400
    assert redis_client.dbsize() == 0
