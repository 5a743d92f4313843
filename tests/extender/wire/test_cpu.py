"""extender/wire/cpu.py: CPU quantities and a pod's request as kube-scheduler charges it.

The request rule is k8s.io/component-helpers/resource ``PodRequests`` (Kubernetes v1.36):
containers summed, sidecars (init containers with ``restartPolicy: Always``) added, each
one-shot init container beside the sidecars started before it, the larger of the two,
then ``spec.overhead``; the pod-level ``spec.resources`` instead when set.
"""

from __future__ import annotations

import pytest

from extender.wire.builders import gfd_node, pod_object
from extender.wire.cpu import cpu_milli, cpu_requested
from extender.wire.node_labels import gpus_from_node
from extender.wire.objects import decode_node, decode_pod


@pytest.mark.parametrize(("quantity", "milli"), [
    ("96", 96000), ("95500m", 95500), ("1.5", 1500), ("0.1", 100), (2, 2000),
    ("100n", 1), ("2k", 2_000_000), ("1e2", 100_000), ("1Ki", 1_024_000), (" 4 ", 4000),
])
def test_quantities_in_millicores_rounded_up(quantity, milli) -> None:
    assert cpu_milli(quantity) == milli


@pytest.mark.parametrize("junk", [None, True, "", "abc", "-1", "0", "1K", "5mi", "1e999",
                                  "1Ei", "nan", float("inf"), "1" * 65, ["4"], {"cpu": 4}])
def test_what_is_no_believable_cpu_reads_as_not_known(junk) -> None:
    assert cpu_milli(junk) == 0


def _container(cpu: str | None, kind: str = "requests", **extra) -> dict:
    return {"name": "c", **({"resources": {kind: {"cpu": cpu}}} if cpu else {}), **extra}


def test_containers_are_summed_limits_standing_in_for_requests() -> None:
    spec = {"containers": [_container("500m"), _container("2", "limits"), _container(None)]}
    assert cpu_requested(spec) == 2500


def test_init_containers_sidecars_and_overhead() -> None:
    spec = {"containers": [_container("1")],
            "initContainers": [_container("3"),  # alone: 3 cores
                               _container("500m", restartPolicy="Always"),  # a sidecar
                               _container("2")],  # beside the sidecar: 2.5
            "overhead": {"cpu": "250m"}}
    # The containers run with the sidecar: 1.5; the largest init step: 3. Then overhead.
    assert cpu_requested(spec) == 3000 + 250
    spec["containers"] = [_container("4")]
    assert cpu_requested(spec) == 4500 + 250


def test_pod_level_resources_win() -> None:
    spec = {"resources": {"requests": {"cpu": "8"}}, "containers": [_container("1")]}
    assert cpu_requested(spec) == 8000


@pytest.mark.parametrize("spec", [None, [], {"containers": "x"}, {"containers": [1, None]},
                                  {"containers": [{"resources": {"requests": {"cpu": "x"}}}]}])
def test_an_unreadable_spec_asks_no_cpu(spec) -> None:
    assert cpu_requested(spec) == 0


def test_a_decoded_pod_and_node_carry_their_cpu() -> None:
    pod = pod_object("p", "ml", "u1", model="resnet50", cpu="1500m")
    assert decode_pod(pod).cpu_milli == 1500
    _, layout = decode_node(gfd_node("n", "Tesla-T4", 2, resources={"cpu": "63800m"}), "node")
    assert layout.cpu_milli == 63800
    assert gpus_from_node({"nvidia.com/gpu.product": "Tesla-T4"}, {"cpu": "junk"}).cpu_milli == 0
