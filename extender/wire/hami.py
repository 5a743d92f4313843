"""HAMi's node-agent protocol: the annotations its device plugin reads and writes. Pure.

Formats as HAMi v2.10.0 defines them (Project-HAMi/HAMi: pkg/util/types.go,
pkg/device/devices.go, pkg/device/nvidia/device.go, pkg/util/nodelock/nodelock.go; read
there, written here from their description):

* node ``hami.io/node-nvidia-register``: the devices its device plugin found, as JSON (a
  list of objects with ``id`` (UUID), ``index``, ``count`` (tasks it may hold), ``devmem``
  (MiB), ``devcore``, ``type``, ``numa``, ``mode``, ``health``), or in releases before the
  JSON form, ``id,count,devmem,devcore,type,numa,health[,index,mode]`` per device, each
  followed by ``:``;
* node ``hami.io/node-handshake``: ``Requesting_<time>`` (its scheduler asked) or
  ``Deleted_<time>`` (the devices were withdrawn); the device plugin's liveness is the
  node's allocatable ``nvidia.com/gpu``;
* node ``hami.io/mutex.lock``: ``<RFC 3339 time>,<namespace>,<pod>``, the pod whose
  devices are being allocated on the node; a lock older than 5 minutes is void;
* pod ``hami.io/vgpu-devices-to-allocate`` and ``hami.io/vgpu-devices-allocated``: per
  container of ``spec.containers`` in order, ``<UUID>,NVIDIA,<MiB>,<cores %>:`` for each of
  its devices, every container's list followed by ``;`` (an empty list for a container
  with none). The device plugin hands a container its devices when the kubelet calls
  Allocate and removes them from the first; HAMi-core caps the container's memory on
  each device at the MiB (``CUDA_DEVICE_MEMORY_LIMIT_<i>``);
* pod ``hami.io/vgpu-node`` (the node), ``hami.io/vgpu-time`` and ``hami.io/bind-time``
  (Unix seconds), ``hami.io/bind-phase``: ``allocating`` until the device plugin answers
  ``success`` or ``failed``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import orjson

REGISTER = "hami.io/node-nvidia-register"
HANDSHAKE = "hami.io/node-handshake"
NODE_LOCK = "hami.io/mutex.lock"
TO_ALLOCATE = "hami.io/vgpu-devices-to-allocate"
ALLOCATED = "hami.io/vgpu-devices-allocated"
ASSIGNED_NODE = "hami.io/vgpu-node"
ASSIGNED_TIME = "hami.io/vgpu-time"
BIND_TIME = "hami.io/bind-time"
BIND_PHASE = "hami.io/bind-phase"
ALLOCATING, SUCCESS, FAILED = "allocating", "success", "failed"
VENDOR = "NVIDIA"
LOCK_TIMEOUT_S = 300.0  # HAMi's NodeLockTimeout: a lock older than this is void
MAX_DEVICES = 64
MAX_DEVICE_MIB = 1 << 20


@dataclass(frozen=True)
class Device:
    """One GPU as the device plugin registered it."""

    uuid: str
    index: int
    slots: int  # tasks it may hold at once (HAMi's deviceSplitCount)
    memory_mib: int
    type: str
    healthy: bool


def _device(uuid: Any, index: Any, slots: Any, memory: Any, kind: Any,
            health: Any) -> Device | None:
    """A device from its fields, or None when one is not believable."""
    if any(isinstance(v, bool) or isinstance(v, float) for v in (index, slots, memory)):
        return None
    try:
        index, slots, memory = int(index), int(slots), int(memory)
    except (TypeError, ValueError):
        return None
    if (not isinstance(uuid, str) or not uuid or any(c in uuid for c in ",:;")
            or len(uuid) > 128 or not 0 <= index < MAX_DEVICES or not 1 <= slots <= 1024
            or not 0 < memory <= MAX_DEVICE_MIB or not isinstance(kind, str)
            or not isinstance(health, bool)):
        return None
    return Device(uuid, index, slots, memory, kind[:128], health)


def decode_register(raw: Any) -> tuple[list[Device], list[str]]:
    """The registered devices in index order, and a problem per device refused (a device
    that cannot be believed is left out, never the whole node unless nothing decodes)."""
    if not isinstance(raw, str) or not raw.strip():
        return [], ["no device registered"]
    devices: list[Device] = []
    problems: list[str] = []
    text = raw.strip()
    if text.startswith("["):
        try:
            entries = orjson.loads(text)
        except orjson.JSONDecodeError:
            return [], [f"{REGISTER} is not JSON"]
        for n, entry in enumerate(entries if isinstance(entries, list) else ()):
            device = _device(entry.get("id"), entry.get("index", 0), entry.get("count"),
                             entry.get("devmem"), entry.get("type", ""),
                             entry.get("health", False)) \
                if isinstance(entry, Mapping) else None
            (devices.append(device) if device else problems.append(f"device {n} refused"))
    else:
        for n, segment in enumerate(s for s in text.split(":") if s):
            fields = segment.split(",")
            device = None
            if len(fields) in (7, 9) and fields[6] in ("true", "false"):
                device = _device(fields[0], fields[7] if len(fields) == 9 else n, fields[1],
                                 fields[2], fields[4], fields[6] == "true")
            (devices.append(device) if device else problems.append(f"device {n} refused"))
    if len({d.index for d in devices}) != len(devices) or len({d.uuid for d in devices}) \
            != len(devices):
        return [], problems + ["devices repeat an index or a UUID"]
    return sorted(devices, key=lambda d: d.index)[:MAX_DEVICES], problems


def product_of(device_type: str) -> str:
    """A registered device type as GPU Feature Discovery names the product: HAMi writes
    its vendor, a dash and NVML's name ("NVIDIA-Tesla T4", "NVIDIA-NVIDIA A10"); GFD the
    name with dashes for spaces ("Tesla-T4", "NVIDIA-A10")."""
    name = device_type.removeprefix(f"{VENDOR}-").strip()
    return "-".join(name.split())


def withdrawn(handshake: Any) -> bool:
    """The handshake says the node's devices were withdrawn."""
    return isinstance(handshake, str) and handshake.startswith("Deleted")


def container_devices(containers: Sequence[int], uuids: Sequence[str], mib: float) -> str:
    """The devices-to-allocate value: `containers` holds each container's GPU count in
    ``spec.containers`` order; the containers that ask for GPUs take `uuids` in turn, each
    device capped at `mib` (rounded up: a limit below the reservation would kill it)."""
    cap, given, parts = int(math.ceil(mib)), 0, []
    for wanted in containers:
        own = uuids[given:given + wanted]
        given += wanted
        parts.append("".join(f"{uuid},{VENDOR},{cap},0:" for uuid in own) + ";")
    return "".join(parts)


def handed_uuids(annotations: Mapping[str, Any]) -> list[str]:
    """The UUIDs of every device the pod's devices-to-allocate hands over, in order."""
    value = annotations.get(TO_ALLOCATE)
    if not isinstance(value, str):
        return []
    return [device.split(",")[0] for container in value.split(";")
            for device in container.split(":") if device]


def lock_value(now: float, namespace: str, name: str) -> str:
    at = datetime.fromtimestamp(now, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return f"{at},{namespace},{name}"


def lock_holder(value: Any, now: float) -> tuple[str, str] | None:
    """(namespace, pod) holding a node lock that is still in force; None when there is no
    lock, it expired, or it cannot be read (HAMi treats an unreadable lock as an error;
    a lock we cannot read holds nobody's allocation we could wait for)."""
    if not isinstance(value, str) or value.count(",") != 2:
        return None
    at, namespace, name = value.split(",")
    try:
        taken = datetime.fromisoformat(at.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
    if now - taken > LOCK_TIMEOUT_S or not namespace or not name:
        return None
    return namespace, name


def bind_annotations(node: str, containers: Sequence[int], uuids: Sequence[str], mib: float,
                     now: float) -> dict[str, str]:
    """What the extender writes on the pod before its Binding: the devices, the node, the
    times and ``bind-phase: allocating``."""
    devices = container_devices(containers, uuids, mib)
    stamp = str(int(now))
    return {TO_ALLOCATE: devices, ALLOCATED: devices, ASSIGNED_NODE: node,
            ASSIGNED_TIME: stamp, BIND_TIME: stamp, BIND_PHASE: ALLOCATING}


def allocation_outcome(annotations: Mapping[str, Any], now: float,
                       timeout_s: float = LOCK_TIMEOUT_S) -> str:
    """What the device plugin said of a pod we handed devices to: "" (not handed over
    through HAMi), "allocating", "success", "failed", or "unanswered" (still allocating
    after `timeout_s`, HAMi's own lock timeout by default)."""
    phase = annotations.get(BIND_PHASE)
    if phase not in (ALLOCATING, SUCCESS, FAILED) or TO_ALLOCATE not in annotations:
        return ""
    if phase != ALLOCATING:
        return phase
    try:
        since = float(annotations.get(BIND_TIME, ""))
    except ValueError:
        return "unanswered"  # a bind time we cannot read: no answer can be awaited
    return "unanswered" if now - since > timeout_s else ALLOCATING
