"""The request bodies the README's `curl` examples send (docs/requests/, our own, in the
wire format of k8s.io/kube-scheduler/extender/v1 types.go: ExtenderArgs with the full
v1.NodeList, ExtenderBindingArgs): the filter's pod is the bind's, and the node it binds
to is one the filter passes, so after both the pod holds a GPU there."""

import json
from pathlib import Path

REQUESTS = Path(__file__).resolve().parents[3] / "docs" / "requests"


def test_the_readmes_filter_then_bind_reserve_a_gpu_for_that_pod(client, store) -> None:
    filter_body = json.loads((REQUESTS / "filter.json").read_text())
    bind_body = json.loads((REQUESTS / "bind.json").read_text())
    pod = filter_body["Pod"]["metadata"]
    assert (bind_body["PodName"], bind_body["PodNamespace"], bind_body["PodUID"]) == (
        pod["name"], pod["namespace"], pod["uid"])
    out = client.post("/filter", json=filter_body).get_json()
    assert out["Error"] == ""
    passed = [n["metadata"]["name"] for n in out["Nodes"]["items"]]
    assert bind_body["Node"] in passed
    assert "cpu-0" in out["FailedAndUnresolvableNodes"]  # a node without GPUs says why
    scores = client.post("/prioritize", json=filter_body).get_json()
    assert {s["Host"] for s in scores} == {n["metadata"]["name"]
                                            for n in filter_body["Nodes"]["items"]}
    assert client.post("/bind", json=bind_body).get_json() == {"Error": ""}
    job = store.job(pod["uid"])
    assert job is not None and job.node == bind_body["Node"] and job.model == "resnet50"
