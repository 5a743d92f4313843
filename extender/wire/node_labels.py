"""A node object (labels, allocatable) -> its GPU layout. Pure; shared by both wire layers.

Sources, in order: GPU Feature Discovery labels (``nvidia.com/gpu.product``,
``nvidia.com/gpu.count``, ``nvidia.com/gpu.memory`` MiB per GPU,
``nvidia.com/gpu.replicas``), then allocatable ``nvidia.com/gpu`` (divided by
the replicas under time-slicing) or Volcano's ``volcano.sh/gpu-number`` and
``volcano.sh/gpu-memory`` (MiB in total), then the catalogue's memory for the
product. Allocatable ``cpu`` comes along (`extender.wire.cpu`; 0 when not readable).
Labels that are missing or not believable give a layout with `problem` set, which the
filter turns into a readable, unresolvable verdict.

Under HAMi (`EXTENDER_NODE_AGENT=hami`) the devices come from its device plugin's register
annotation instead (`gpus_from_hami`): the healthy devices, their UUIDs and memory by
index (GPUs of one node may differ), the labels' product where GFD runs.

Bounds come before conversions: a label value is at most `MAX_LABEL_CHARS` (Kubernetes'
limit), a number at most `MAX_DIGITS` digits; values are shown cut short in problems.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from estimator.catalogue import gpu_for_product
from extender.wire import hami
from extender.wire.cpu import cpu_milli
from extender.model import (
    LABEL_COUNT, LABEL_MEMORY, LABEL_PRODUCT, LABEL_REPLICAS, RESOURCE_GPU,
    RESOURCE_VOLCANO_MEMORY, RESOURCE_VOLCANO_NUMBER, NodeGpus,
)  # fmt: skip

MAX_GPUS_PER_NODE = 64
MAX_GPU_MEMORY_MIB = 1 << 20  # 1 TiB: anything above is a lying label
MAX_REPLICAS = 1024
MAX_LABEL_CHARS = 63
MAX_DIGITS = 12  # a plain integer label or quantity; more is no believable figure
SHOWN_CHARS = 64


def _int(value: Any) -> int | None:
    """A Kubernetes quantity or label as a plain integer (None if it is not one)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and len(value) <= MAX_LABEL_CHARS:
        text = value.strip()
        if 0 < len(text) <= MAX_DIGITS and text.isascii() and text.isdigit():
            return int(text)
    return None


def shown(value: Any) -> str:
    """A value as a message shows it: a string cut to `SHOWN_CHARS`, else its JSON type."""
    if isinstance(value, str):
        return repr(value[:SHOWN_CHARS]) + ("..." if len(value) > SHOWN_CHARS else "")
    if value is None or isinstance(value, bool | int | float):
        return "null" if value is None else repr(value)
    return f"a JSON {type(value).__name__}"


def gpus_from_node(labels: Mapping[str, Any], allocatable: Mapping[str, Any]) -> NodeGpus:
    values = (labels.get(LABEL_PRODUCT), labels.get(LABEL_REPLICAS, 1), labels.get(LABEL_COUNT),
              labels.get(LABEL_MEMORY), allocatable.get(RESOURCE_GPU),
              allocatable.get(RESOURCE_VOLCANO_NUMBER), allocatable.get(RESOURCE_VOLCANO_MEMORY),
              allocatable.get("cpu"))
    try:
        return _layout_cached(*values)
    except TypeError:  # an unhashable (so unusable) label value: judge it uncached
        return _layout(*values)


@lru_cache(maxsize=4096, typed=True)
def _layout_cached(*values: Any) -> NodeGpus:
    """Large clusters repeat a few layouts: each distinct set of label values is parsed once."""
    return _layout(*values)


def _layout(product: Any, replicas_label: Any, count_label: Any, memory_label: Any,
            slots_label: Any, volcano_count_label: Any, volcano_memory_label: Any,
            cpu: Any = None) -> NodeGpus:
    volcano_count = _int(volcano_count_label)
    volcano_memory = _int(volcano_memory_label)
    if not isinstance(product, str) or not product.strip():
        return NodeGpus("", None, 0, 0, problem=f"node has no {LABEL_PRODUCT} label "
                        "(NVIDIA GPU Feature Discovery not running, or no NVIDIA GPU)")
    if len(product) > MAX_LABEL_CHARS:
        return _bad(product[:MAX_LABEL_CHARS], f"{LABEL_PRODUCT} is longer than "
                    f"{MAX_LABEL_CHARS} characters")
    gpu = gpu_for_product(product)
    replicas = _int(replicas_label)
    if replicas is None or not 1 <= replicas <= MAX_REPLICAS:
        return _bad(product, f"{LABEL_REPLICAS}={shown(replicas_label)} is not 1..{MAX_REPLICAS}")
    count = _int(count_label)
    if count is None:
        slots = _int(slots_label)
        count = slots // replicas if slots is not None else volcano_count
    if count is None or not 1 <= count <= MAX_GPUS_PER_NODE:
        return _bad(product, f"GPU count {count!r} from {LABEL_COUNT} / allocatable is not "
                    f"1..{MAX_GPUS_PER_NODE}")
    memory = _int(memory_label)
    if memory is None and volcano_memory is not None:
        memory = volcano_memory // count
    if memory is None and gpu is not None:
        memory = gpu.memory_mib
    if memory is None or not 1 <= memory <= MAX_GPU_MEMORY_MIB:
        return _bad(product, f"{LABEL_MEMORY}={shown(memory_label)} is not a MiB figure")
    share_slots = 0 if volcano_memory is not None else replicas
    return NodeGpus(product, gpu.name if gpu else None, count, memory, share_slots,
                    cpu_milli=cpu_milli(cpu))


def _bad(product: str, problem: str) -> NodeGpus:
    return NodeGpus(product, None, 0, 0, problem=f"unusable GPU labels: {problem}")


def gpus_from_hami(labels: Mapping[str, Any], annotations: Mapping[str, Any],
                   allocatable: Mapping[str, Any]) -> NodeGpus:
    """The node's GPUs as HAMi's device plugin registered them (module docstring): devices
    it cannot believe, unhealthy ones, and all of them once it withdrew them or stopped
    advertising ``nvidia.com/gpu`` are left out. A node HAMi never registered (no
    register annotation) is read from its labels, as without a node agent."""
    labelled = gpus_from_node(labels, allocatable)
    if hami.REGISTER not in annotations:
        return labelled
    devices, refused = hami.decode_register(annotations.get(hami.REGISTER))
    healthy = [d for d in devices if d.healthy]
    product = labelled.product or (hami.product_of(healthy[0].type) if healthy else "")
    gpu = gpu_for_product(product) if product else None
    if hami.withdrawn(annotations.get(hami.HANDSHAKE)) or not _int(allocatable.get(RESOURCE_GPU)):
        return NodeGpus(product, None, 0, 0, problem="HAMi's device plugin is not serving "
                        "this node's GPUs (handshake withdrawn, or no nvidia.com/gpu)")
    if not healthy:
        why = "; ".join(refused) or "no healthy device"
        return NodeGpus(product, None, 0, 0, problem=f"no usable device in {hami.REGISTER}: "
                        f"{why}")
    memories = tuple(d.memory_mib for d in healthy)
    return NodeGpus(product, labelled.gpu_type or (gpu.name if gpu else None), len(healthy),
                    max(memories), min(d.slots for d in healthy),
                    uuids=tuple(d.uuid for d in healthy),
                    memories=memories if len(set(memories)) > 1 else (),
                    cpu_milli=cpu_milli(allocatable.get("cpu")))
