"""Replays of request bodies captured from real kube-scheduler v1.36.2 and v1.30.12."""

import json

import pytest
from prometheus_client import REGISTRY

from tests.builders import FIXTURES, bind_args, filter_args, make_node, make_pod

VERSIONS = sorted(p.name for p in (FIXTURES / "kube-scheduler").glob("v*"))


def _fixture(version: str, name: str) -> dict:
    path = FIXTURES / "kube-scheduler" / version / f"{name}.request.json"
    if not path.exists():
        pytest.skip(f"{path} not captured")
    return json.loads(path.read_text())


@pytest.mark.parametrize("version", VERSIONS)
def test_filter_full_nodes_answers_nodes(client, version) -> None:
    body = _fixture(version, "filter-full-nodes")
    res = client.post("/filter", json=body)
    assert res.status_code == 200
    out = res.get_json()
    assert set(out) == {"Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error"}
    assert out["Error"] == "" and out["NodeNames"] is None
    sent = {n["metadata"]["name"] for n in body["Nodes"]["items"]}
    kept = {n["metadata"]["name"] for n in out["Nodes"]["items"]}
    assert kept | set(out["FailedNodes"]) | set(out["FailedAndUnresolvableNodes"]) == sent
    assert kept  # resnet50 at the default batch fits a 24-40 GB GPU
    # Node objects come back as they were sent.
    assert out["Nodes"]["items"][0] in body["Nodes"]["items"]


@pytest.mark.parametrize("version", VERSIONS)
def test_filter_and_prioritize_node_names(client, store, version) -> None:
    body = _fixture(version, "filter-node-names")
    full = _fixture(version, "filter-full-nodes")
    # Names mode reads layouts the node watcher recorded; without them nodes are unknown.
    out = client.post("/filter", json=body).get_json()
    assert out["NodeNames"] == [] and out["Nodes"] is None
    assert all("unknown to the extender" in r for r in out["FailedAndUnresolvableNodes"].values())
    from extender.wire.objects import decode_node

    for item in full["Nodes"]["items"]:
        store.put_node(*decode_node(item, "node"))
    out = client.post("/filter", json=body).get_json()
    assert set(out["NodeNames"]) <= set(body["NodeNames"]) and out["NodeNames"]
    prio = client.post("/prioritize", json=_fixture(version, "prioritize-full-nodes")).get_json()
    assert {p["Host"] for p in prio} == {n["metadata"]["name"] for n in full["Nodes"]["items"]}
    assert all(isinstance(p["Score"], int) and 0 <= p["Score"] <= 10 for p in prio)
    assert max(p["Score"] for p in prio) == 10


@pytest.mark.parametrize("version", VERSIONS)
def test_prioritize_of_the_names_filter_passed_does_not_check_them_again(
        client, store, version, monkeypatch) -> None:
    from extender.wire import objects

    full = _fixture(version, "filter-full-nodes")
    for item in full["Nodes"]["items"]:
        store.put_node(*objects.decode_node(item, "node"))
    checked = []
    real = objects.require_names
    monkeypatch.setattr(objects, "require_names",
                        lambda values, what: checked.append(list(values)) or real(values, what))
    body = _fixture(version, "filter-node-names")
    body["NodeNames"].append("gpu-node-never-seen")  # refused: filter passes a part
    with client.post("/filter", json=body) as answer:  # closed, as a server does once sent
        passed = answer.get_json()["NodeNames"]
    assert passed and len(passed) < len(body["NodeNames"]) and checked == [body["NodeNames"]]
    prio = client.post("/prioritize", json={**body, "NodeNames": passed}).get_json()
    assert [p["Host"] for p in prio] == passed and checked == [body["NodeNames"]]
    client.post("/prioritize", json={**body, "NodeNames": passed[::-1]})  # names checked
    assert checked == [body["NodeNames"]]
    client.post("/prioritize", json={**body, "NodeNames": [*passed, "gpu-node-new"]})
    assert checked == [body["NodeNames"], [*passed, "gpu-node-new"]]


@pytest.mark.parametrize("version", VERSIONS)
def test_bind_fixture_reserves_once(client, binder, store, version) -> None:
    pod = _fixture(version, "filter-full-nodes")
    bind = _fixture(version, "bind")
    pod["Pod"]["metadata"]["uid"] = bind["PodUID"]
    assert client.post("/filter", json=pod).status_code == 200
    for _ in range(2):  # a retried bind is idempotent
        res = client.post("/bind", json=bind)
        assert res.status_code == 200 and res.get_json() == {"Error": ""}
    assert store.job_uids() == [bind["PodUID"]]
    assert binder.calls[0][3] == bind["Node"]
    assert "schedtune.io/reserved-mib" in binder.calls[0][4]


def test_vgg16_training_refused_by_8gb_accepted_by_24gb(client) -> None:
    pod = make_pod(model="vgg16", task="train", batch=64)
    nodes = [make_node("small-2070s", "NVIDIA-GeForce-RTX-2070-SUPER", memory_mib=7982),
             make_node("small-3070", "NVIDIA-GeForce-RTX-3070", memory_mib=7982),
             make_node("big-3090", "NVIDIA-GeForce-RTX-3090", memory_mib=24576)]
    out = client.post("/filter", json=filter_args(pod, nodes)).get_json()
    assert [n["metadata"]["name"] for n in out["Nodes"]["items"]] == ["big-3090"]
    reasons = out["FailedAndUnresolvableNodes"]
    assert set(reasons) == {"small-2070s", "small-3070"}
    assert "MiB padded, more than the 7982 MiB of one RTX-3070" in reasons["small-3070"]


def test_second_job_on_a_two_gpu_node_gets_the_idle_gpu_not_the_tightest(client, binder) -> None:
    node = make_node("pair", count=2, memory_mib=24576, replicas=4)  # time-sliced: shareable
    gpus = []
    for name in ("first", "second"):
        pod = make_pod(name, model="resnet50", task="train", batch=32, epochs=5)
        assert client.post("/filter", json=filter_args(pod, [node])).status_code == 200
        assert client.post("/bind", json=bind_args(pod, "pair")).get_json() == {"Error": ""}
        gpus.append(binder.calls[-1][4]["schedtune.io/gpu"])
    # Best fit alone would put the second beside the first (the tighter GPU) and slow both.
    assert sorted(gpus) == ["0", "1"]


def test_unannotated_pods_pass_through_without_redis(client, redis_client) -> None:
    pod = make_pod(model=None)
    nodes = [make_node("a"), make_node("b", product=None)]
    out = client.post("/filter", json=filter_args(pod, nodes)).get_json()
    assert [n["metadata"]["name"] for n in out["Nodes"]["items"]] == ["a", "b"]
    prio = client.post("/prioritize", json=filter_args(pod, nodes, names_only=True)).get_json()
    assert prio == [{"Host": "a", "Score": 0}, {"Host": "b", "Score": 0}]
    assert redis_client.dbsize() == 0


@pytest.mark.parametrize(("annotations", "needle"), [
    ({"batch": "-4"}, "schedtune.io/batch-size"),
    ({"batch": "1000000000000"}, "1..4096"),
    ({"task": "finetune"}, "train, inference"),
    ({"epochs": "zero"}, "schedtune.io/epochs"),
    ({"model": "no-such-net"}, "schedtune models add no-such-net"),
])
def test_malformed_annotations_leave_the_pod_pending_with_a_reason(client, redis_client,
                                                                   annotations, needle) -> None:
    pod = make_pod(**{"model": "resnet50", **annotations})
    out = client.post("/filter", json=filter_args(pod, [make_node("a"), make_node("b")])).get_json()
    assert out["Nodes"]["items"] == [] and out["Error"] == ""
    assert all(needle in r for r in out["FailedAndUnresolvableNodes"].values())
    assert redis_client.dbsize() == 0


@pytest.mark.parametrize("body", [b"", b"{", b"[]", b'{"Pod": 3}', b'{"Pod": {"metadata": {}}}',
                                  b'{"Pod": {"metadata": {"uid": "u", "name": "n"}}}',
                                  b'{"Pod": {"metadata": {"uid": "u", "name": "n"}}, "NodeNames": 5}'])
def test_bad_bodies_get_a_4xx_with_the_contract_shape(client, redis_client, body) -> None:
    res = client.post("/filter", data=body, content_type="application/json")
    assert res.status_code == 400
    assert res.get_json()["Error"]
    assert redis_client.dbsize() == 0


def test_bind_of_unknown_pod_without_demand_just_binds(client, binder) -> None:
    """Bound as it is, and counted apart from the binds that reserve (a chaos run counts
    its annotated pods bound so: none may be)."""
    def binds(outcome: str) -> float:
        return REGISTRY.get_sample_value("schedtune_binds_total", {"outcome": outcome}) or 0.0

    before = binds("passed_through"), binds("bound")
    pod = make_pod(model=None)
    assert client.post("/bind", json=bind_args(pod, "a")).get_json() == {"Error": ""}
    assert binder.calls[0][3] == "a" and binder.calls[0][4] == {}
    assert (binds("passed_through"), binds("bound")) == (before[0] + 1, before[1])


def test_failed_binding_releases_the_reservation(client, binder, store) -> None:
    pod = make_pod(model="resnet18", batch=8)
    client.post("/filter", json=filter_args(pod, [make_node("a")]))
    binder.fail = True
    out = client.post("/bind", json=bind_args(pod, "a")).get_json()
    assert "API server said no" in out["Error"]
    assert store.job_uids() == []


def test_huge_body_is_refused(app, client) -> None:
    app.config["MAX_CONTENT_LENGTH"] = 1024
    res = client.post("/filter", data=b"{" + b" " * 4096 + b"}", content_type="application/json")
    assert res.status_code == 413 and "larger than" in res.get_json()["Error"]


def test_health_and_metrics(client) -> None:
    assert client.get("/healthz").status_code == 200
    assert client.get("/readyz").get_json()["status"] == "ready"
    client.post("/filter", json=filter_args(make_pod(model=None), [make_node("a")])).close()
    assert b"schedtune_passthrough_total" in client.get("/metrics").data


def test_refused_nodes_are_counted_by_kind(client) -> None:
    def too_small() -> float:
        labels = {"reason": "exceeds_gpu"}
        return REGISTRY.get_sample_value("schedtune_filter_denials_total", labels) or 0.0

    small = [make_node(f"small-{i}", memory_mib=1000 + i) for i in range(3)]  # 3 reasons, 1 kind
    before = too_small()
    with client.post("/filter", json=filter_args(make_pod(model="vgg16", batch=64), small)):
        assert too_small() == before  # counted once the answer is sent: off its path
    assert too_small() - before == 3
