"""Which gang a pod belongs to, as the gang schedulers mark it, and how many members it has.

A pod joins a gang in one of four ways, read in this order (the first found wins):

* Kubernetes v1.36's in-tree gang scheduling (`GenericWorkload` / `GangScheduling`
  gates): ``spec.schedulingGroup.podGroupName`` names a ``PodGroup`` of
  ``scheduling.k8s.io/v1alpha2`` whose ``spec.schedulingPolicy.gang.minCount`` is the
  gang's size (pkg/apis/scheduling/v1alpha2 in kubernetes v1.36);
* Volcano: the ``scheduling.k8s.io/group-name`` annotation (Volcano's
  KubeGroupNameAnnotationKey, apis/pkg/apis/scheduling) names a ``PodGroup`` of
  ``scheduling.volcano.sh/v1beta1``, size ``spec.minMember``;
* scheduler-plugins' coscheduling: the ``scheduling.x-k8s.io/pod-group`` label names a
  ``PodGroup`` of ``scheduling.x-k8s.io/v1alpha1``, size ``spec.minMember``;
* ours, only where none of those exists: ``schedtune.io/gang`` (the name) and
  ``schedtune.io/gang-size``.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from extender.model import GANG, GANG_SIZE, GroupRef

VOLCANO_GROUP = "scheduling.k8s.io/group-name"
COSCHEDULING_LABEL = "scheduling.x-k8s.io/pod-group"
OBJECT_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")  # a DNS subdomain
MAX_GANG = 256  # members: beyond this, a gang is not one we plan at once


class PodGroupApi(NamedTuple):
    """Where a kind of gang keeps its PodGroup objects."""

    group: str
    version: str
    plural: str = "podgroups"


POD_GROUP_APIS = {
    "workload": PodGroupApi("scheduling.k8s.io", "v1alpha2"),
    "volcano": PodGroupApi("scheduling.volcano.sh", "v1beta1"),
    "coscheduling": PodGroupApi("scheduling.x-k8s.io", "v1alpha1"),
}


def group_of(meta: dict[str, Any], spec: Any) -> GroupRef | None:
    """The gang a pod's metadata and spec place it in (None: none). Raises ValueError for a
    reference that is not a name, or our annotations malformed."""
    scheduling_group = spec.get("schedulingGroup") if isinstance(spec, dict) else None
    if isinstance(scheduling_group, dict) and scheduling_group.get("podGroupName"):
        return GroupRef("workload", _name(scheduling_group["podGroupName"], "podGroupName"))
    annotations = meta.get("annotations") or {}
    labels = meta.get("labels") or {}
    if not isinstance(annotations, dict) or not isinstance(labels, dict):
        raise ValueError("metadata annotations and labels must be objects")  # noqa: TRY004
    if annotations.get(VOLCANO_GROUP):
        return GroupRef("volcano", _name(annotations[VOLCANO_GROUP], VOLCANO_GROUP))
    if labels.get(COSCHEDULING_LABEL):
        return GroupRef("coscheduling", _name(labels[COSCHEDULING_LABEL], COSCHEDULING_LABEL))
    if not annotations.get(GANG):
        if GANG_SIZE in annotations:
            raise ValueError(f"{GANG_SIZE} needs {GANG} (the gang's name) beside it")
        return None
    return GroupRef("schedtune", _name(annotations[GANG], GANG),
                    gang_size(annotations.get(GANG_SIZE), GANG_SIZE))


def size_of_pod_group(kind: str, group: Any) -> int:
    """Members of a gang as its PodGroup object says; ValueError when it says none."""
    spec = group.get("spec") if isinstance(group, dict) else None
    if not isinstance(spec, dict):
        raise ValueError("the PodGroup has no spec")  # noqa: TRY004  (callers: bad object)
    if kind == "workload":
        policy = spec.get("schedulingPolicy") or {}
        gang = policy.get("gang") if isinstance(policy, dict) else None
        if not isinstance(gang, dict):
            raise ValueError("the PodGroup's schedulingPolicy is not a gang (basic policy: "
                             "its pods are placed one by one)")
        return gang_size(gang.get("minCount"), "spec.schedulingPolicy.gang.minCount")
    return gang_size(spec.get("minMember"), "spec.minMember")


def gang_size(value: Any, where: str) -> int:
    try:
        size = int(str(value).strip())
    except ValueError:
        raise ValueError(f"{where} must be a whole number of members, not {value!r}") from None
    if not 1 <= size <= MAX_GANG:
        raise ValueError(f"{where} must be in 1..{MAX_GANG}, not {size}")
    return size


def _name(value: Any, where: str) -> str:
    name = str(value)
    if not OBJECT_NAME.fullmatch(name):
        raise ValueError(f"{where} must be an object name (lowercase letters, digits, '-', "
                         f"'.'), not {name[:60]!r}")
    return name
