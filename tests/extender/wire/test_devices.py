"""extender/wire/objects.py `asks_no_device`: whether a pod asks any device, read from its
spec as kube-scheduler reads extended resources (k8s.io/api core/v1 ``IsExtendedResourceName``
and ``IsNativeResource``: a name with a domain prefix outside ``kubernetes.io`` is extended;
``cpu``, ``memory``, ``ephemeral-storage`` and ``hugepages-*`` are native) and dynamic
resource claims (``spec.resourceClaims``, Kubernetes v1.36)."""

from __future__ import annotations

import pytest

from extender.wire.builders import pod_object
from extender.wire.objects import asks_no_device, decode_pod


def _spec(**resources) -> dict:
    return {"containers": [{"name": "main", "resources": resources}]}


@pytest.mark.parametrize("spec", [
    _spec(requests={"cpu": "4", "memory": "8Gi", "ephemeral-storage": "1Gi"}),
    _spec(limits={"hugepages-2Mi": "1Gi", "cpu": "2"}),
    _spec(requests={"kubernetes.io/custom": "1"}),
    {"containers": [{"name": "main"}]},
])
def test_native_resources_ask_no_device(spec) -> None:
    assert asks_no_device(spec)


@pytest.mark.parametrize("spec", [
    _spec(limits={"nvidia.com/gpu": "1"}),
    _spec(limits={"nvidia.com/gpu": "0"}),  # stated, even at 0: not read as "none"
    _spec(limits={"amd.com/gpu": "1"}),
    _spec(limits={"nvidia.com/mig-1g.5gb": "1"}),
    _spec(requests={"volcano.sh/gpu-memory": "4096"}),
    _spec(requests={"rdma/hca": "1"}),
    {"containers": [{"name": "main"}],
     "initContainers": [{"name": "init", "resources": {"limits": {"example.com/fpga": "1"}}}]},
    {"containers": [{"name": "main"}], "resourceClaims": [{"name": "gpu",
                                                             "resourceClaimName": "gpu-0"}]},
    None, "spec", {"containers": "main"}, _spec(limits=["nvidia.com/gpu"]),
    {"containers": [{"name": "main", "resources": "cpu"}]},
])
def test_any_extended_resource_or_claim_or_an_unreadable_spec_is_not_no_device(spec) -> None:
    assert not asks_no_device(spec)


def test_the_decoded_pod_says_it() -> None:
    cpu_pod = pod_object("p", "default", "u1", gpus=None, cpu="2")
    gpu_pod = pod_object("q", "default", "u2", gpus=1, cpu="2")
    assert decode_pod(cpu_pod).no_devices and not decode_pod(gpu_pod).no_devices
