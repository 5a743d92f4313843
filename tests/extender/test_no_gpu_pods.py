"""Pods that ask no GPU, through the HTTP verbs with a real Redis: not ours, so filter and
bind pass them through untouched (no record, no reservation), and prioritize keeps them off
the nodes whose free GPUs their CPU would leave short for the jobs the cluster takes
(`Scheduler._steers`; FGD's measure, `extender.core.fragmentation.cpu_delta`). kube-scheduler
sends them only when the extender is registered without ``managedResources``."""

from __future__ import annotations

import uuid

from extender.model import GPU_MEMORY
from extender.wire.builders import gfd_node, pod_object
from extender.wire.objects import decode_node
from tests.builders import bind_args, filter_args, passed_nodes

# Two T4s each, shared by up to 4 pods; "short" has 10 cores, "roomy" 64.
SHORT = gfd_node("short", "Tesla-T4", 2, 15360, 4, resources={"cpu": "10"})
ROOMY = gfd_node("roomy", "Tesla-T4", 2, 15360, 4, resources={"cpu": "64"})


def _pod(cpu: str, share: str | None = None) -> dict:
    """A pod asking `cpu`, and `share` of one GPU (None: no GPU, no annotation)."""
    return pod_object(f"p-{uuid.uuid4().hex[:8]}", "default", str(uuid.uuid4()),
                      annotations={GPU_MEMORY: share} if share else {},
                      gpus=1 if share else None, cpu=cpu)


def _place(client, pod: dict, node: dict) -> None:
    assert passed_nodes(client.post("/filter", json=filter_args(pod, [node])).get_json()) \
        == [node["metadata"]["name"]]
    assert client.post("/bind", json=bind_args(pod, node["metadata"]["name"])).get_json() \
        == {"Error": ""}


def _scores(client, pod: dict) -> dict[str, int]:
    res = client.post("/prioritize", json=filter_args(pod, [SHORT, ROOMY]))
    assert res.status_code == 200
    return {entry["Host"]: entry["Score"] for entry in res.get_json()}


def test_a_pod_asking_no_gpu_goes_where_its_cpu_strands_no_gpu(client, client_with, binder,
                                                                store) -> None:
    for node in (SHORT, ROOMY):  # one 50 % job asking 4 cores on each: the mix
        _place(client, _pod("4", "50%"), node)
    # 3 cores on "short" leave 3 of 10: no 50 % job (4 cores) fits its free GPUs any more,
    # and all 150 % of a GPU free there strands: FGD's score 18 of the best's 50, 0.36.
    pod = _pod("3")
    assert _scores(client, pod) == {"short": 4, "roomy": 10}
    assert _scores(client, _pod("2")) == {"short": 10, "roomy": 10}  # 4 cores left: fits
    assert _scores(client_with(tie_break="best-fit"), pod) == {"short": 0, "roomy": 0}
    # Filter and bind pass it through: every node, no record, no reservation, no annotation.
    out = client.post("/filter", json=filter_args(pod, [SHORT, ROOMY])).get_json()
    assert passed_nodes(out) == ["short", "roomy"] and not out["FailedNodes"]
    assert client.post("/bind", json=bind_args(pod, "roomy")).get_json() == {"Error": ""}
    assert binder.calls[-1][3:] == ("roomy", {})
    uid = pod["metadata"]["uid"]
    assert store.filter_record(uid) is None and store.job(uid) is None


def test_a_pod_asking_a_device_or_carrying_our_annotation_is_not_steered(client) -> None:
    for node in (SHORT, ROOMY):
        _place(client, _pod("4", "50%"), node)
    rdma = _pod("3")
    rdma["spec"]["containers"][0]["resources"]["limits"] = {"rdma/hca": "1"}
    assert _scores(client, rdma) == {"short": 0, "roomy": 0}
    broken = _pod("3")
    broken["metadata"]["annotations"][GPU_MEMORY] = "lots"  # ours, refused: scored 0
    assert _scores(client, broken) == {"short": 0, "roomy": 0}


def test_in_names_mode_a_node_without_gpus_is_among_the_best(client, store) -> None:
    # The node watcher's layouts (names mode): "short" and "roomy" as above; "cpu-0" is a
    # node it never recorded (no GPUs): nothing there to strand.
    for node in (SHORT, ROOMY):
        store.put_node(*decode_node(node, "node"))
        _place(client, _pod("4", "50%"), node)
    res = client.post("/prioritize", json=filter_args(_pod("3"), [SHORT, ROOMY, {
        "metadata": {"name": "cpu-0"}}], names_only=True))
    assert {e["Host"]: e["Score"] for e in res.get_json()} == {"short": 4, "roomy": 10,
                                                                "cpu-0": 10}
