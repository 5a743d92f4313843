import copy

import pytest

from extender.core.annotations import AnnotationError, parse_demand
from extender.errors import BadRequest
from extender.model import PodInfo
from extender.wire.kube import decode_args
from extender.wire.node_labels import gpus_from_node
from extender.wire.objects import (
    DNS_LABEL, DNS_SUBDOMAIN, POD_UID, NodeLayouts, decode_node, require_name,
)  # fmt: skip
from tests.builders import make_node, make_pod


def test_gfd_labels_time_slicing_and_volcano_memory() -> None:
    t4 = gpus_from_node({"nvidia.com/gpu.product": "Tesla-T4-SHARED", "nvidia.com/gpu.count": "2",
                         "nvidia.com/gpu.replicas": "4", "nvidia.com/gpu.memory": "15360"}, {})
    assert (t4.gpu_type, t4.count, t4.memory_mib, t4.share_slots) == ("T4", 2, 15360, 4)
    sliced = gpus_from_node({"nvidia.com/gpu.product": "NVIDIA-L4", "nvidia.com/gpu.replicas": "2"},
                            {"nvidia.com/gpu": "8"})
    assert sliced.count == 4 and sliced.memory_mib == 23034  # catalogue memory
    vol = gpus_from_node({"nvidia.com/gpu.product": "NVIDIA-A10"},
                         {"volcano.sh/gpu-number": "2", "volcano.sh/gpu-memory": "46056"})
    assert (vol.count, vol.memory_mib, vol.share_slots) == (2, 23028, 0)


@pytest.mark.parametrize(("labels", "needle"), [
    ({}, "no nvidia.com/gpu.product"),
    ({"nvidia.com/gpu.product": "Tesla-T4", "nvidia.com/gpu.count": "-1"}, "GPU count"),
    ({"nvidia.com/gpu.product": "Tesla-T4", "nvidia.com/gpu.count": "1",
      "nvidia.com/gpu.memory": "99999999999"}, "gpu.memory"),
    ({"nvidia.com/gpu.product": "NVIDIA-B9000", "nvidia.com/gpu.count": "1"}, "gpu.memory"),
])
def test_missing_or_lying_labels_are_problems_not_crashes(labels, needle) -> None:
    gpus = gpus_from_node(labels, {})
    assert gpus.count == 0 and needle in gpus.problem


def test_unknown_product_with_memory_label_is_usable_as_unknown_type() -> None:
    gpus = gpus_from_node({"nvidia.com/gpu.product": "NVIDIA-B9000", "nvidia.com/gpu.count": "8",
                           "nvidia.com/gpu.memory": "196608"}, {})
    assert gpus.gpu_type is None and gpus.count == 8 and not gpus.problem


def _pod(annotations: dict) -> PodInfo:
    return PodInfo("u", "n", "ns", annotations)


def test_annotation_defaults_and_errors() -> None:
    d = parse_demand(_pod({"schedtune.io/model": "bert_base", "schedtune.io/task": "inference"}))
    assert (d.batch, d.units) == (1, 1000)
    assert parse_demand(_pod({})) is None
    with pytest.raises(AnnotationError, match="schedtune.io/requests"):
        parse_demand(_pod({"schedtune.io/model": "x", "schedtune.io/task": "inference",
                           "schedtune.io/requests": "١٢"}))  # non-ASCII digits


def test_node_layout_is_parsed_once_per_resource_version() -> None:
    layouts = NodeLayouts()
    node = make_node("n-rv", product="Tesla-T4", count=2)
    node["metadata"].update(uid="3b813596-dd97-4bef-a2bd-216a429259f7", resourceVersion="70")
    assert decode_node(node, "n", layouts)[1].count == 2
    same_version = copy.deepcopy(node)
    same_version["metadata"]["labels"]["nvidia.com/gpu.count"] = "4"
    assert decode_node(same_version, "n", layouts)[1].count == 2  # same version: remembered layout
    same_version["metadata"]["resourceVersion"] = "71"
    assert decode_node(same_version, "n", layouts)[1].count == 4  # a change has a new version
    unversioned = make_node("n-rv", product="Tesla-T4", count=8)
    assert decode_node(unversioned, "n", layouts)[1].count == 8  # no version: always parsed
    bad = copy.deepcopy(node)
    bad["metadata"]["uid"] = ["not", "hashable"]
    assert decode_node(bad, "n", layouts)[1].count == 2  # parsed, not remembered, no crash
    bad["metadata"]["name"] = ""
    with pytest.raises(BadRequest, match="metadata.name"):
        decode_node(bad, "n", layouts)


def test_a_request_of_remembered_versions_is_answered_in_one_pass() -> None:
    layouts = NodeLayouts()
    nodes = [make_node(f"n{i}", product="Tesla-T4", count=i + 1) for i in range(3)]
    for i, node in enumerate(nodes):
        node["metadata"].update(uid=f"uid-{i}", resourceVersion="5")
    assert layouts.known(nodes) is None  # nothing parsed yet
    body = {"Pod": make_pod(), "Nodes": {"items": nodes}}
    first = decode_args(body, layouts).nodes
    assert layouts.known(nodes) == list(first.items())
    assert decode_args(body, layouts).nodes == first
    changed = copy.deepcopy(nodes)
    changed[2]["metadata"]["resourceVersion"] = "6"
    changed[2]["metadata"]["labels"]["nvidia.com/gpu.count"] = "8"
    assert layouts.known(changed) is None  # one new version: judged node by node
    assert decode_args({**body, "Nodes": {"items": changed}}, layouts).nodes["n2"].count == 8
    unhashable = copy.deepcopy(nodes)
    unhashable[1]["metadata"]["uid"] = ["not", "hashable"]
    assert layouts.known(unhashable) is None
    assert decode_args({**body, "Nodes": {"items": unhashable}}, layouts).nodes == first
    for broken in ({"metadata": "x"}, "x", {"metadata": {**nodes[1]["metadata"], "name": ""}}):
        assert layouts.known([nodes[0], broken]) is None
        with pytest.raises(BadRequest, match=r"Nodes.items\[1\]"):
            decode_args({**body, "Nodes": {"items": [nodes[0], broken]}}, layouts)


def test_remembered_node_layouts_are_bounded_least_recently_used_first() -> None:
    layouts = NodeLayouts(max_entries=2)
    versions = [(f"n{i}", f"uid-{i}", "1") for i in range(3)]
    for i, version in enumerate(versions[:2]):
        node = make_node(version[0], product="Tesla-T4", count=i + 1)
        node["metadata"].update(uid=version[1], resourceVersion=version[2])
        decode_node(node, "n", layouts)
    assert layouts.get(versions[0]).count == 1  # used: n1 is now the oldest
    node = make_node("n2", product="Tesla-T4", count=3)
    node["metadata"].update(uid="uid-2", resourceVersion="1")
    decode_node(node, "n", layouts)
    assert len(layouts) == 2 and layouts.get(versions[1]) is None
    assert layouts.get(versions[0]).count == 1 and layouts.get(versions[2]).count == 3


@pytest.mark.parametrize(("annotations", "needle"), [
    ({"schedtune.io/batch-size": "0" * 5000 + "32"}, "schedtune.io/batch-size"),
    ({"schedtune.io/batch-size": "00000032"}, "an integer in 1..4096"),  # 8 chars: past 7
    ({"schedtune.io/epochs": "1000001"}, "1..1000000"),
    ({"schedtune.io/epochs": 12}, "a JSON int"),  # annotations are strings
    ({"schedtune.io/task": "x" * 300}, "schedtune.io/task"),
    ({"schedtune.io/task": ""}, "one of train, inference"),
])
def test_annotation_values_are_bounded_before_conversion(annotations, needle) -> None:
    with pytest.raises(AnnotationError, match=needle) as refused:
        parse_demand(_pod({"schedtune.io/model": "resnet50", **annotations}))
    assert len(str(refused.value)) < 200  # the value is shown cut short


def test_annotation_integers_within_bounds() -> None:
    d = parse_demand(_pod({"schedtune.io/model": "resnet50", "schedtune.io/batch-size": " 0064 ",
                           "schedtune.io/epochs": "1000000"}))
    assert (d.batch, d.units) == (64, 1_000_000)


@pytest.mark.parametrize("name", ["resnet50", "bert_base", "vit_b_16", "llama-3.1-8b",
                                  "Llama-3.1-8B", "m" * 63])
def test_model_names_registry_style_and_later_ones_parse(name) -> None:
    assert parse_demand(_pod({"schedtune.io/model": name})).model == name


@pytest.mark.parametrize("name", ["", " ", "-resnet", "resnet.", "a b", "st:gpu:x", "a/b",
                                  "m" * 64, "r\u00e9snet", ["resnet50"]])
def test_model_names_outside_the_charset_or_bound_are_refused(name) -> None:
    with pytest.raises(AnnotationError, match="schedtune.io/model"):
        parse_demand(_pod({"schedtune.io/model": name}))


@pytest.mark.parametrize(("rule", "good", "bad"), [
    (DNS_SUBDOMAIN, ["gpu-node-0", "ip-10-0-0-1.ec2.internal", "a", "n" * 253],
     ["", "Node", "-a", "a-", "a..b", "a_b", "n" * 254, "a:b", ".a"]),
    (DNS_LABEL, ["default", "team-a", "n" * 63], ["", "a.b", "Team", "n" * 64, "-a"]),
    (POD_UID, ["3b813596-dd97-4bef-a2bd-216a429259f7", "u1", "U_1.x", "u" * 128],
     ["", "u:1", "u 1", "*", "u" * 129, "-u", "u\u00e9"]),
])
def test_kubernetes_name_rules(rule, good, bad) -> None:
    assert all(require_name(name, "x", rule) == name for name in good)
    for name in bad:
        with pytest.raises(BadRequest, match="x must be"):
            require_name(name, "x", rule)
    assert require_name(None, "x", rule, required=False) == ""
    for junk in (None, 5, ["a"], {"a": 1}):
        with pytest.raises(BadRequest, match="x must be"):
            require_name(junk, "x", rule)


@pytest.mark.parametrize("labels", [
    {"nvidia.com/gpu.product": "Tesla-T4", "nvidia.com/gpu.count": "0" * 5000 + "1"},
    {"nvidia.com/gpu.product": "NVIDIA-B9000", "nvidia.com/gpu.count": "1",
     "nvidia.com/gpu.memory": "9" * 5000},  # not a figure, and no catalogue memory to use
    {"nvidia.com/gpu.product": "T" * 100_000, "nvidia.com/gpu.count": "1"},
    {"nvidia.com/gpu.product": "Tesla-T4", "nvidia.com/gpu.replicas": [[[["4"]]]]},
])
def test_oversized_label_values_are_problems_with_short_messages(labels) -> None:
    gpus = gpus_from_node(labels, {})
    assert gpus.count == 0 and gpus.problem and len(gpus.problem) < 300


def test_a_memory_label_that_is_no_figure_falls_back_to_the_catalogue() -> None:
    gpus = gpus_from_node({"nvidia.com/gpu.product": "Tesla-T4", "nvidia.com/gpu.count": "1",
                           "nvidia.com/gpu.memory": "9" * 5000}, {})
    assert (gpus.count, gpus.memory_mib, gpus.problem) == (1, 15360, "")
