"""The request encoders (what kube-scheduler and Volcano send) against the decoders and
against bodies captured from real kube-scheduler releases."""

from __future__ import annotations

import json

import pytest

from extender.model import NodeGpus, PodInfo
from extender.wire.builders import gfd_node, pod_object
from extender.wire.kube import (
    BindingArgs, decode_args, decode_binding, encode_binding_args, encode_extender_args,
)  # fmt: skip
from extender.wire.volcano import (
    TASK_PENDING, TaskArgs, decode_event, decode_predicate, decode_prioritize,
    encode_event_request, encode_predicate_request, encode_prioritize_request, encode_task_info,
)  # fmt: skip
from tests.builders import FIXTURES

KUBE = FIXTURES / "kube-scheduler"
VERSIONS = sorted(p.name for p in KUBE.glob("v*")) if KUBE.is_dir() else []

POD = pod_object("train-1", "ml", "uid-1", model="resnet50", task="train", batch=32, epochs=2)
NODES = [gfd_node("a", "Tesla-T4", 2, replicas=4),
         gfd_node("b", "NVIDIA-A100-SXM4-40GB", 1, 40960, labels={"team": "ml"})]
POD_INFO = PodInfo(uid="uid-1", name="train-1", namespace="ml",
                   annotations={"schedtune.io/model": "resnet50", "schedtune.io/task": "train",
                                "schedtune.io/batch-size": "32", "schedtune.io/epochs": "2"},
                   gpus=1)
LAYOUTS = {"a": NodeGpus("Tesla-T4", "T4", 2, 15360, 4),
           "b": NodeGpus("NVIDIA-A100-SXM4-40GB", "A100-40GB", 1, 40960, 1)}


def test_extender_args_round_trip_in_both_node_cache_modes() -> None:
    full = decode_args(encode_extender_args(POD, NODES))
    assert full.pod == POD_INFO and full.nodes == LAYOUTS and full.node_items == NODES
    names = decode_args(encode_extender_args(POD, node_names=["a", "b"]))
    assert names.pod == POD_INFO and names.nodes == {"a": None, "b": None}
    assert names.node_items is None


def test_extender_args_carry_nodes_or_names_never_both() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        encode_extender_args(POD, NODES, node_names=["a"])
    with pytest.raises(ValueError, match="exactly one"):
        encode_extender_args(POD)


def test_binding_args_round_trip() -> None:
    assert decode_binding(encode_binding_args(POD, "b")) == BindingArgs("train-1", "ml", "uid-1",
                                                                        "b")


def test_volcano_requests_round_trip() -> None:
    assert decode_predicate(encode_predicate_request(POD, NODES[1])) == (POD_INFO,
                                                                         {"b": LAYOUTS["b"]})
    assert decode_prioritize(encode_prioritize_request(POD, NODES)) == (POD_INFO, LAYOUTS)
    assert decode_event(encode_event_request(POD, "a")) == TaskArgs(POD_INFO, "a")


def test_volcano_task_info_has_go_field_names() -> None:
    pending, placed = encode_task_info(POD), encode_task_info(POD, "a", job="ml/pg-1", status=4)
    assert set(pending) == {"UID", "Job", "Name", "Namespace", "NodeName", "Status", "Pod"}
    assert (pending["Job"], pending["NodeName"], pending["Status"]) == ("ml/train-1", "",
                                                                        TASK_PENDING)
    assert (placed["Job"], placed["NodeName"], placed["Status"]) == ("ml/pg-1", "a", 4)


def test_builders_write_what_the_api_server_stores() -> None:
    pod = pod_object("p", "ns", "u", model="vgg16", batch=8, gpus=2, scheduler_name="s",
                     created_at="2026-01-01T00:00:00Z", phase="Pending")
    assert pod["metadata"]["annotations"] == {"schedtune.io/model": "vgg16",
                                              "schedtune.io/batch-size": "8"}
    assert pod["metadata"]["creationTimestamp"] == "2026-01-01T00:00:00Z"
    assert pod["spec"]["schedulerName"] == "s" and pod["status"] == {"phase": "Pending"}
    assert pod["spec"]["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": "2"}}
    plain = pod_object("p", "ns", "u", gpus=None)
    assert plain["metadata"]["annotations"] == {}
    assert "resources" not in plain["spec"]["containers"][0]
    assert set(plain) == {"metadata", "spec"}
    node = gfd_node("n", None, count=None, allocatable={"volcano.sh/gpu-number": "2"})
    assert node["metadata"]["labels"] == {"kubernetes.io/hostname": "n"}
    assert node["status"] == {"allocatable": {"volcano.sh/gpu-number": "2"}}
    assert NODES[0]["status"]["allocatable"] == {"nvidia.com/gpu": "8"}  # 2 GPUs x 4 replicas


def _captured(version: str, name: str) -> dict:
    path = KUBE / version / f"{name}.request.json"
    if not path.exists():
        pytest.skip(f"{path} not captured")
    return json.loads(path.read_text())


@pytest.mark.skipif(not VERSIONS, reason=f"{KUBE} not found")
@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("verb", ["filter", "prioritize"])
def test_full_nodes_args_are_the_bodies_kube_scheduler_sends(version: str, verb: str) -> None:
    captured = _captured(version, f"{verb}-full-nodes")
    assert encode_extender_args(captured["Pod"], captured["Nodes"]["items"]) == captured
    ours = encode_extender_args(POD, NODES)
    assert set(ours) == set(captured) and set(ours["Nodes"]) == set(captured["Nodes"])


@pytest.mark.skipif(not VERSIONS, reason=f"{KUBE} not found")
@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("verb", ["filter", "prioritize"])
def test_node_names_args_are_the_bodies_kube_scheduler_sends(version: str, verb: str) -> None:
    captured = _captured(version, f"{verb}-node-names")
    assert encode_extender_args(captured["Pod"], node_names=captured["NodeNames"]) == captured
    assert set(encode_extender_args(POD, node_names=["a"])) == set(captured)


@pytest.mark.skipif(not VERSIONS, reason=f"{KUBE} not found")
@pytest.mark.parametrize("version", VERSIONS)
def test_binding_args_are_the_body_kube_scheduler_sends(version: str) -> None:
    bind = _captured(version, "bind")
    pod = pod_object(bind["PodName"], bind["PodNamespace"], bind["PodUID"])
    assert encode_binding_args(pod, bind["Node"]) == bind
