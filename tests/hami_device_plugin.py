"""A stand-in for HAMi's device plugin in tests: reads a pod's devices exactly as the
protocol documents them (tests/data/hami/README.md) and answers as the plugin does. Written
from the format, not with extender.wire.hami, so the two can disagree."""

from __future__ import annotations

from typing import Any

TO_ALLOCATE = "hami.io/vgpu-devices-to-allocate"
BIND_PHASE = "hami.io/bind-phase"
NODE_LOCK = "hami.io/mutex.lock"


def decode_devices(value: str) -> list[list[tuple[str, int]]]:
    """Per container of spec.containers, its devices as (UUID, MiB limit)."""
    containers = value.split(";")
    assert containers[-1] == "", "every container's list ends with ';'"
    out = []
    for container in containers[:-1]:
        assert container == "" or container.endswith(":"), container
        devices = []
        for device in (d for d in container.split(":") if d):
            uuid, vendor, mib, cores = device.split(",")
            assert vendor == "NVIDIA" and cores.isdigit(), device
            devices.append((uuid, int(mib)))
        out.append(devices)
    return out


def answer(api: Any, namespace: str, name: str, node: str, ok: bool) -> None:
    """What the plugin does once Allocate ran: bind-phase success or failed on the pod, and
    its node lock dropped."""
    api.patch_namespaced_pod(name, namespace, {"metadata": {"annotations": {
        BIND_PHASE: "success" if ok else "failed"}}})
    api.patch_node(node, {"metadata": {"annotations": {NODE_LOCK: None}}})
