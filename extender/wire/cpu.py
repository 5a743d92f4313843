"""CPU in millicores: a Kubernetes quantity, a node's allocatable CPU, a pod's request. Pure.

Only the fragmentation tie-break reads CPU (a node whose CPU is taken strands its GPUs:
`extender.core.fragmentation`); kube-scheduler filters on it. So a value that cannot be
read is 0, "not known", never an error: a node without a known CPU never strands.

A pod's request is what kube-scheduler's NodeResourcesFit charges a node with
(k8s.io/component-helpers/resource ``PodRequests``, v1.36): the pod-level
``spec.resources`` when set, else its containers' sum, sidecars (init containers that
restart always) added to it, or the largest of its one-shot init containers with the
sidecars started before each, whichever is more; then ``spec.overhead``. A container
that states limits and no requests is charged its limits, as the API server defaults it.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, DecimalException
from typing import Any

MAX_MILLI = 10**9  # a million cores: beyond it a quantity is no believable CPU figure
MAX_CHARS = 64
_QUANTITY = re.compile(r"([+-]?(?:\d+\.?\d*|\.\d+))(?:[eE]([+-]?\d{1,3})|([numkKMGTPE]i?))?")
_SCALE = {"": Decimal(1), "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"),
          "k": Decimal(10**3), "M": Decimal(10**6), "G": Decimal(10**9), "T": Decimal(10**12),
          "P": Decimal(10**15), "E": Decimal(10**18), "Ki": Decimal(2**10),
          "Mi": Decimal(2**20), "Gi": Decimal(2**30), "Ti": Decimal(2**40),
          "Pi": Decimal(2**50), "Ei": Decimal(2**60)}


def cpu_milli(value: Any) -> int:
    """A CPU quantity ("96", "95500m", "1.5", 2) in millicores, rounded up as Kubernetes
    rounds a milli value; 0 when absent or not a believable quantity."""
    if isinstance(value, bool) or value is None:
        return 0
    text = str(value) if isinstance(value, int | float) else value
    if not isinstance(text, str) or len(text) > MAX_CHARS:
        return 0
    match = _QUANTITY.fullmatch(text.strip())
    if match is None:
        return 0
    number, exponent, suffix = match.groups()
    scale = Decimal(10) ** int(exponent) if exponent else _SCALE.get(suffix or "")
    if scale is None:
        return 0
    try:
        milli = Decimal(number) * scale * 1000
    except DecimalException:
        return 0
    if not milli.is_finite() or milli <= 0 or milli > MAX_MILLI:
        return 0
    return math.ceil(milli)


def cpu_requested(spec: Any) -> int:
    """The millicores a v1.PodSpec asks of its node (module docstring); 0 when it asks
    none or the spec cannot be read."""
    if not isinstance(spec, dict):
        return 0
    overhead = _requests_cpu({"requests": spec.get("overhead")})
    pod_level = _requests_cpu(spec.get("resources"))
    if pod_level:
        return pod_level + overhead
    containers = spec.get("containers")
    total = sum(map(_container_cpu, containers)) if isinstance(containers, list) else 0
    sidecars = init_peak = 0
    inits = spec.get("initContainers")
    for init in inits if isinstance(inits, list) else ():
        cpu = _container_cpu(init)
        if isinstance(init, dict) and init.get("restartPolicy") == "Always":
            sidecars += cpu
            init_peak = max(init_peak, sidecars)
        else:
            init_peak = max(init_peak, cpu + sidecars)
    return max(total + sidecars, init_peak) + overhead


def _container_cpu(container: Any) -> int:
    return _requests_cpu(container.get("resources") if isinstance(container, dict) else None)


def _requests_cpu(resources: Any) -> int:
    """``requests.cpu`` of a resources object, else ``limits.cpu`` (the API server's
    default for a request left out), in millicores."""
    if not isinstance(resources, dict):
        return 0
    for kind in ("requests", "limits"):
        quantities = resources.get(kind)
        if isinstance(quantities, dict) and "cpu" in quantities:
            return cpu_milli(quantities["cpu"])
    return 0
