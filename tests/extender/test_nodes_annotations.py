import copy

import pytest

from extender.core.annotations import AnnotationError, parse_demand
from extender.errors import BadRequest
from extender.model import PodInfo
from extender.wire.node_labels import gpus_from_node
from extender.wire.objects import NodeLayouts, decode_node
from tests.builders import make_node


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
