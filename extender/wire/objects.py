"""Kubernetes objects inside request bodies (v1.Pod, v1.Node) -> domain types. Pure.

Shared by both wire formats. Names are checked by Kubernetes' rules before they
go further (they become Redis keys): node and pod names are DNS-1123 subdomains
(<= 253 chars), namespaces DNS-1123 labels (<= 63), pod UIDs at most 128 chars of
``A-Za-z0-9._-``; anything else is a `BadRequest`. `NodeLayouts` remembers node
layouts by (name, uid, resourceVersion); each app owns one, bounded and locked
(threaded workers share it), so nothing grows in a module global.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np

from extender.errors import BadRequest
from extender.wire.gangs import group_of
from extender.model import RESOURCE_GPU, NodeGpus, PodInfo
from extender.wire.cpu import cpu_requested
from extender.wire.node_labels import gpus_from_node, shown

MAX_NAME_CHARS = 253
MAX_VERSION_CHARS = 253  # a node's uid and resourceVersion, as remembered by NodeLayouts
NodeVersion = tuple[Any, Any, Any]
_LABEL = r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?"  # its length is the rule's max_chars


@dataclass(frozen=True)
class NameRule:
    """A naming rule: at most `max_chars` characters matching `pattern` in full."""

    pattern: re.Pattern[str]
    max_chars: int
    description: str


DNS_SUBDOMAIN = NameRule(re.compile(rf"{_LABEL}(?:\.{_LABEL})*"), MAX_NAME_CHARS,
                         "a DNS-1123 subdomain (lower-case letters, digits, '-' and '.', "
                         "starting and ending alphanumeric)")
DNS_LABEL = NameRule(re.compile(_LABEL), 63, "a DNS-1123 label (lower-case letters, digits "
                     "and '-', starting and ending alphanumeric)")
POD_UID = NameRule(re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*"), 128,
                   "a UID (letters, digits, '.', '_' and '-')")


NAME_LISTS_KEPT = 4  # node-name lists a worker remembers as checked


class NodeLayouts:
    """Layouts of node versions seen in requests, least recently used dropped first, and
    the last few lists of node names checked.

    The API server gives every change to an object a new resourceVersion and
    kube-scheduler resends the same nodes, so a version is parsed once; in names mode
    it sends the same names pod after pod (to filter, and their passing part to
    prioritize), so a list is checked once.
    """

    def __init__(self, max_entries: int = 1 << 16) -> None:
        self.max_entries = max_entries
        self._layouts: OrderedDict[NodeVersion, NodeGpus] = OrderedDict()
        self._lock = threading.Lock()  # move_to_end and popitem race between threads
        # (list, its names as a read-only mapping), most recently used last; replaced whole
        self._names: tuple[tuple[list[str], Mapping[str, None]], ...] = ()
        self._valid: set[str] = set()  # names checked lately, at most `max_entries`

    def names(self, values: list[Any], what: str) -> Mapping[str, None]:
        """`values` checked by `require_names`, as a read-only mapping of the names in order
        (the same as `dict.fromkeys`); equal to a list checked lately, it is not checked
        again and the same mapping comes back, and names each checked lately (up to
        `max_entries`) are not checked again in another list or order."""
        kept = self._names
        for i in range(len(kept) - 1, -1, -1):
            if kept[i][0] == values:
                hit = kept[i]
                self._names = (*kept[:i], *kept[i + 1:], hit)
                return hit[1]
        try:
            nodes = dict.fromkeys(values)
        except TypeError:  # an unhashable value: `require_names` refuses it, naming it
            nodes = dict.fromkeys(require_names(values, what))
        # the same names in a new order (a new one each pod): each was checked before
        if not self._valid.issuperset(nodes):
            require_names(values, what)
            if len(self._valid) + len(nodes) > self.max_entries:
                self._valid.clear()
            self._valid.update(nodes)
        return self._keep_checked(values, nodes)

    def passed(self, names: list[str]) -> Mapping[str, None]:
        """Remember `names`, the part of a list checked here that filter passed, as checked:
        kube-scheduler sends prioritize that very list (the nodes that passed, in the order
        filter answered them). Returns the mapping `names` will return for it."""
        return self._keep_checked(list(names), dict.fromkeys(names))

    def _keep_checked(self, values: list[str], nodes: dict[str, None]) -> Mapping[str, None]:
        kept, view = self._names, MappingProxyType(nodes)
        self._names = (*kept[max(0, len(kept) + 1 - NAME_LISTS_KEPT):], (values, view))
        return view

    def __len__(self) -> int:
        return len(self._layouts)

    def get(self, version: NodeVersion) -> NodeGpus | None:
        try:
            hash(version)
        except TypeError:  # an unhashable (so invalid) value: the full decode reports it
            return None
        with self._lock:
            layout = self._layouts.get(version)
            if layout is not None:
                self._layouts.move_to_end(version)
        return layout

    def known(self, nodes: list[Any]) -> list[tuple[str, NodeGpus]] | None:
        """(name, layout) of every node in `nodes` when each is a v1.Node version already
        parsed, else None (and `decode_node` judges them one by one): a full-nodes request
        resends the same versions pod after pod, so one lock and one loop answer it."""
        found = []
        with self._lock:
            layouts = self._layouts
            for node in nodes:
                version = _version_of(node)
                if version is None:
                    return None
                try:
                    layout = layouts.get(version)
                except TypeError:  # unhashable, so not a version
                    return None
                if layout is None:
                    return None
                layouts.move_to_end(version)
                found.append((version[0], layout))
        return found

    def put(self, version: NodeVersion, layout: NodeGpus) -> None:
        with self._lock:
            self._layouts[version] = layout
            self._layouts.move_to_end(version)
            while len(self._layouts) > self.max_entries:
                self._layouts.popitem(last=False)


def require_object(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):  # orjson decodes every JSON object to a dict
        raise BadRequest(f"{what} must be a JSON object")
    return value


def require_name(value: Any, what: str, rule: NameRule = DNS_SUBDOMAIN,
                 required: bool = True) -> str:
    """`value` if it is a string following `rule`; "" for an absent (None or "") value that is
    not `required`. Raises `BadRequest` naming `what` and the rule."""
    if not required and value in (None, ""):
        return ""
    if not (isinstance(value, str) and 0 < len(value) <= rule.max_chars
            and rule.pattern.fullmatch(value)):
        raise BadRequest(f"{what} must be {rule.description}, 1..{rule.max_chars} chars; got "
                         f"{shown(value)}")
    return value


def require_names(values: list[Any], what: str) -> list[str]:
    """`values` if every one is a DNS-1123 subdomain (`DNS_SUBDOMAIN`), checked at C speed on
    the names joined by newlines (which no valid name holds): allowed characters only, at
    most `MAX_NAME_CHARS` each, and no label empty or starting or ending with '-'. Raises
    `BadRequest` naming `what`, the rule and the first offending value."""
    if values and _all_subdomains(values):
        return values
    for value in values:
        require_name(value, what)
    return values


def _all_subdomains(values: list[Any]) -> bool:
    try:
        joined = "\n".join(values)
    except TypeError:
        return False
    if not joined.isascii():
        return False
    text = np.frombuffer(joined.encode(), dtype=np.uint8)
    if not len(text) or not _SUBDOMAIN_BYTE[text].all():
        return False
    breaks = np.flatnonzero(text == _NEWLINE)
    if len(breaks) != len(values) - 1:
        return False
    lengths = np.diff(np.concatenate(([-1], breaks, [len(text)]))) - 1
    separator = (text == _DOT) | (text == _NEWLINE)
    dash = text == _DASH
    edge = separator | dash  # may neither start nor end a label
    return bool(lengths.max() <= DNS_SUBDOMAIN.max_chars and not edge[0] and not edge[-1]
                and not (separator[:-1] & edge[1:]).any() and not (dash[:-1] & separator[1:]).any())


_NEWLINE, _DOT, _DASH = ord("\n"), ord("."), ord("-")
_SUBDOMAIN_BYTE = np.zeros(256, dtype=bool)
_SUBDOMAIN_BYTE[list(b"abcdefghijklmnopqrstuvwxyz0123456789-.\n")] = True


def decode_pod(pod: Any) -> PodInfo:
    pod = require_object(pod, "Pod")
    meta = require_object(pod.get("metadata"), "Pod.metadata")
    annotations = meta.get("annotations") or {}
    if not isinstance(annotations, dict):
        raise BadRequest("Pod.metadata.annotations must be an object")
    try:
        spec = pod.get("spec")
        gpus, owner, group = gpus_requested(spec), controller_of(meta), group_of(meta, spec)
    except ValueError as exc:
        raise BadRequest(f"Pod: {exc}") from exc
    return PodInfo(
        uid=require_name(meta.get("uid"), "Pod.metadata.uid", POD_UID),
        name=require_name(meta.get("name"), "Pod.metadata.name"),
        namespace=require_name(meta.get("namespace"), "Pod.metadata.namespace", DNS_LABEL,
                               required=False) or "default",
        annotations=annotations, gpus=gpus, owner=owner, group=group,
        cpu_milli=cpu_requested(spec), no_devices=asks_no_device(spec),
    )


MAX_GPU_DIGITS = 4  # an nvidia.com/gpu quantity beyond 9999 is not a request


def gpus_requested(spec: Any) -> int:
    """The ``nvidia.com/gpu`` a v1.PodSpec's containers ask for together (limits, else
    requests: extended resources must have them equal), as kubelet counts a pod: the
    larger of the containers' sum and any one init container. Raises ValueError for a
    quantity that is not a whole number of GPUs."""
    if spec is None:
        return 0
    if not isinstance(spec, dict):
        raise ValueError("spec must be an object")

    def count(containers: Any) -> list[int]:
        if containers is None:
            return []
        if not isinstance(containers, list):
            raise ValueError("spec containers must be a list")
        return [_container_gpus(c) for c in containers]

    return max([sum(count(spec.get("containers"))), *count(spec.get("initContainers"))])


def asks_no_device(spec: Any) -> bool:
    """Whether a v1.PodSpec asks no device: no extended resource (a resource name with a
    domain outside ``kubernetes.io``, as k8s.io/api ``IsExtendedResourceName`` reads it:
    GPUs of any vendor, their shares and MIG slices, RDMA, FPGAs) in any container's,
    init container's or the pod's own requests or limits, and no dynamic resource claim
    (``spec.resourceClaims``). False when the spec cannot be read: not known."""
    if not isinstance(spec, dict) or spec.get("resourceClaims"):
        return False
    holders = [spec]
    for key in ("containers", "initContainers"):
        containers = spec.get(key) or []
        if not isinstance(containers, list):
            return False
        holders.extend(containers)
    for holder in holders:
        resources = holder.get("resources") if isinstance(holder, dict) else None
        if resources is None:
            continue
        if not isinstance(resources, dict):
            return False
        for kind in ("limits", "requests"):
            quantities = resources.get(kind) or {}
            if not isinstance(quantities, dict) or any(map(_is_extended, quantities)):
                return False
    return True


def _is_extended(name: Any) -> bool:
    if not isinstance(name, str):
        return True  # not a resource name: not known, so not "no device"
    domain, slash, _ = name.partition("/")
    return bool(slash) and not domain.endswith("kubernetes.io")


def container_gpus(spec: Any) -> tuple[int, ...]:
    """Each of ``spec.containers``' ``nvidia.com/gpu``, in order (a node agent hands each
    container its own devices); () when the spec lists none readable."""
    containers = spec.get("containers") if isinstance(spec, dict) else None
    if not isinstance(containers, list):
        return ()
    try:
        return tuple(_container_gpus(c) for c in containers)
    except ValueError:
        return ()


def _container_gpus(container: Any) -> int:
    resources = container.get("resources") if isinstance(container, dict) else None
    if not isinstance(resources, dict):
        return 0
    for kind in ("limits", "requests"):
        quantities = resources.get(kind)
        if isinstance(quantities, dict) and RESOURCE_GPU in quantities:
            value = quantities[RESOURCE_GPU]
            text = str(value) if isinstance(value, int) and not isinstance(value, bool) else value
            if not (isinstance(text, str) and 0 < len(text) <= MAX_GPU_DIGITS
                    and text.isascii() and text.isdigit()):
                raise ValueError(f"{RESOURCE_GPU} must be a whole number of GPUs, got "
                                 f"{shown(value)}")
            return int(text)
    return 0


def controller_of(meta: dict[str, Any]) -> str:
    """kind/name of the pod's controller (its ownerReference with controller true), ""
    when it has none or the reference is not readable."""
    refs = meta.get("ownerReferences")
    for ref in refs if isinstance(refs, list) else ():
        if isinstance(ref, dict) and ref.get("controller") is True:
            kind, name = ref.get("kind"), ref.get("name")
            if (isinstance(kind, str) and kind.isascii() and kind.isalnum() and len(kind) <= 63
                    and isinstance(name, str) and len(name) <= MAX_NAME_CHARS
                    and DNS_SUBDOMAIN.pattern.fullmatch(name)):
                return f"{kind}/{name}"
    return ""


def decode_node(node: Any, where: str, layouts: NodeLayouts | None = None) -> tuple[str, NodeGpus]:
    """A v1.Node object -> (name, GPU layout); a version `layouts` knows is not parsed again."""
    if layouts is not None and (version := _version_of(node)) is not None:
        known = layouts.get(version)
        if known is not None:
            return version[0], known
    node = require_object(node, where)
    meta = require_object(node.get("metadata"), f"{where}.metadata")
    name = require_name(meta.get("name"), f"{where}.metadata.name")
    labels = meta.get("labels") or {}
    status = node.get("status") or {}
    allocatable = status.get("allocatable") or {} if isinstance(status, dict) else {}
    if not isinstance(labels, dict) or not isinstance(allocatable, dict):
        raise BadRequest(f"{where}: labels and status.allocatable must be objects")
    layout = gpus_from_node(labels, allocatable)
    version = (name, meta.get("uid"), meta.get("resourceVersion"))
    if layouts is not None and _is_version(version):
        layouts.put(version, layout)
    return name, layout


def _version_of(node: Any) -> NodeVersion | None:
    """(name, uid, resourceVersion) as a v1.Node object states them (unchecked: they may
    be of any JSON type); None when `node` or its metadata is not an object."""
    meta = node.get("metadata") if isinstance(node, dict) else None
    if not isinstance(meta, dict):
        return None
    return meta.get("name"), meta.get("uid"), meta.get("resourceVersion")


def _is_version(version: NodeVersion) -> bool:
    _, uid, resource_version = version
    return (isinstance(uid, str) and isinstance(resource_version, str)
            and 0 < len(uid) <= MAX_VERSION_CHARS
            and 0 < len(resource_version) <= MAX_VERSION_CHARS)
