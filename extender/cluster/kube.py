"""Kubernetes API access (the only module that imports the kubernetes client).

Cluster access is resolved the standard way: the in-cluster service account,
else ``KUBECONFIG`` (or ~/.kube/config). `Binder` reads a pod as the API server
has it, creates a pod's Binding and writes the reservation onto the pod as
annotations; `watch_forever` follows a
resource for the node watcher and the monitor (list, then watch from the
list's resourceVersion; on 410 Gone re-list; on a dropped connection
reconnect with backoff).
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime, timezone
from collections.abc import Callable, Mapping
from typing import Any

import orjson
from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException

from extender.core.binding import LivePod
from extender.errors import BindFailed, Conflict
from extender.wire import gangs, hami
from extender.wire.objects import container_gpus, controller_of, gpus_requested

log = logging.getLogger(__name__)
WATCH_TIMEOUT_S = 300
MAX_BACKOFF_S = 30.0


def load_config(kubeconfig: str | None) -> bool:
    """True when a cluster is configured (in-cluster first, then the kubeconfig)."""
    try:
        config.load_incluster_config()
        return True
    except config.ConfigException:
        pass
    try:
        config.load_kube_config(config_file=kubeconfig)
        return True
    except (config.ConfigException, OSError, TypeError):
        return False


class Binder:
    """Reads pods and creates Bindings through the API server; a bind that hands devices
    over through HAMi (its annotations) takes HAMi's node lock first, and drops it again
    when the Binding fails (HAMi's device plugin drops it once it answered)."""

    def __init__(self, api: client.CoreV1Api | None = None) -> None:
        self._api = api or client.CoreV1Api()
        self._locks = NodeLocks(self._api)

    def read_pod(self, namespace: str, name: str) -> LivePod:
        """One GET of the pod (its JSON, no model classes). Raises `Conflict` when it does
        not exist, `BindFailed` when the API server cannot say."""
        try:
            response = self._api.read_namespaced_pod(name, namespace, _preload_content=False)
        except ApiException as exc:
            if exc.status == 404:
                raise Conflict(f"pod {namespace}/{name} does not exist") from exc
            raise BindFailed(f"reading pod {namespace}/{name}: {exc.status} {exc.reason}") from exc
        try:
            pod = orjson.loads(response.data)
            meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
            annotations = meta.get("annotations") or {}
            return LivePod(str(meta.get("uid") or ""), str(spec.get("schedulerName") or ""),
                           str(spec.get("nodeName") or ""),
                           {str(k): str(v) for k, v in annotations.items()},
                           gpus_requested(spec), controller_of(meta), container_gpus(spec))
        except (orjson.JSONDecodeError, AttributeError, TypeError, ValueError) as exc:
            raise BindFailed(f"reading pod {namespace}/{name}: unreadable answer") from exc

    def bind(self, namespace: str, name: str, uid: str, node: str,
             annotations: Mapping[str, str]) -> None:
        if hami.BIND_PHASE not in annotations:
            self._bind(namespace, name, uid, node, annotations)
            return
        self._locks.take(node, namespace, name, time.time())
        try:
            self._bind(namespace, name, uid, node, annotations)
        except BindFailed:
            self._locks.release(node, namespace, name)
            raise

    def _bind(self, namespace: str, name: str, uid: str, node: str,
              annotations: Mapping[str, str]) -> None:
        if annotations:
            try:
                self._api.patch_namespaced_pod(name, namespace,
                                               {"metadata": {"annotations": dict(annotations)}})
            except ApiException as exc:
                raise BindFailed(f"annotating pod {namespace}/{name}: {exc.status} {exc.reason}") from exc
        body = client.V1Binding(
            metadata=client.V1ObjectMeta(name=name, namespace=namespace, uid=uid),
            target=client.V1ObjectReference(api_version="v1", kind="Node", name=node),
        )
        try:
            # The pod's binding subresource (POST pods/{name}/binding), as kube-scheduler
            # binds: RBAC grants it as pods/binding (the `bindings` collection is another
            # resource). The response is a Status the client cannot deserialise.
            self._api.create_namespaced_pod_binding(name, namespace, body,
                                                    _preload_content=False)
        except ApiException as exc:
            raise BindFailed(f"binding {namespace}/{name} to {node}: {exc.status} {exc.reason}") from exc


class NodeLocks:
    """HAMi's node lock (`extender.wire.hami`): one pod's allocation at a time per node,
    taken with the node's resourceVersion so two binds never both take it."""

    def __init__(self, api: client.CoreV1Api | None = None) -> None:
        self._api = api or client.CoreV1Api()

    def take(self, node: str, namespace: str, name: str, now: float) -> None:
        """Lock `node` for the pod; `Conflict` while another pod's lock is in force."""
        try:
            answer = self._api.read_node(node, _preload_content=False)
            meta = orjson.loads(answer.data).get("metadata") or {}
        except (ApiException, orjson.JSONDecodeError) as exc:
            raise BindFailed(f"reading node {node} for its lock: {exc}") from exc
        holder = hami.lock_holder((meta.get("annotations") or {}).get(hami.NODE_LOCK), now)
        if holder is not None and holder != (namespace, name):
            raise Conflict(f"node {node} is locked by {holder[0]}/{holder[1]}'s device "
                           "allocation; the pod will be retried")
        patch = {"metadata": {"resourceVersion": meta.get("resourceVersion"),
                              "annotations": {hami.NODE_LOCK: hami.lock_value(now, namespace,
                                                                              name)}}}
        try:
            self._api.patch_node(node, patch)
        except ApiException as exc:
            if exc.status == 409:
                raise Conflict(f"node {node} changed while its lock was taken; the pod will "
                               "be retried") from exc
            raise BindFailed(f"locking node {node}: {exc.status} {exc.reason}") from exc

    def release(self, node: str, namespace: str, name: str) -> bool:
        """Drop the node's lock when it is the pod's (best effort); True when dropped."""
        try:
            meta = orjson.loads(self._api.read_node(node, _preload_content=False).data)
            value = ((meta.get("metadata") or {}).get("annotations") or {}).get(hami.NODE_LOCK)
            if not isinstance(value, str) or value.split(",")[1:] != [namespace, name]:
                return False
            self._api.patch_node(node, {"metadata": {"annotations": {hami.NODE_LOCK: None}}})
            return True
        except (ApiException, orjson.JSONDecodeError, IndexError) as exc:
            log.warning("could not release node lock of %s: %s", node, type(exc).__name__)
            return False


class PodGroupSizes:
    """Reads how many members a gang has from its PodGroup object (`extender.wire.gangs`),
    each group's answer kept `keep_s` seconds: a gang's members are filtered together, and
    an infeasible in-tree gang is retried in a tight loop."""

    def __init__(self, api: client.CustomObjectsApi | None = None, keep_s: float = 15.0) -> None:
        self._api = api or client.CustomObjectsApi()
        self._keep_s = keep_s
        self._known: dict[tuple[str, str, str], tuple[float, int]] = {}

    def size(self, kind: str, namespace: str, name: str) -> int:
        """Raises LookupError when the PodGroup does not exist or cannot be read, ValueError
        when it names no size."""
        key, now = (kind, namespace, name), time.monotonic()
        known = self._known.get(key)
        if known is not None and now - known[0] < self._keep_s:
            return known[1]
        api = gangs.POD_GROUP_APIS[kind]
        try:
            group = self._api.get_namespaced_custom_object(api.group, api.version, namespace,
                                                           api.plural, name)
        except ApiException as exc:
            said = "does not exist" if exc.status == 404 else f"unreadable ({exc.status})"
            raise LookupError(f"PodGroup {namespace}/{name} ({api.group}/{api.version}) "
                              f"{said}") from exc
        size = gangs.size_of_pod_group(kind, group)
        if len(self._known) > 4096:
            self._known.clear()
        self._known[key] = (now, size)
        return size


def pod_json(api: client.CoreV1Api, namespace: str, name: str) -> dict[str, Any] | None:
    """The pod as the API's JSON; None when it does not exist."""
    try:
        answer = api.read_namespaced_pod(name, namespace, _preload_content=False)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return orjson.loads(answer.data)


def pod_event(namespace: str, pod: str, uid: str, reason: str, message: str,
              api: client.CoreV1Api | None = None, kind: str = "Warning") -> bool:
    """An event (`kind` Warning or Normal) on a pod, shown by `kubectl describe pod`.
    Best effort: False when the API server refused it."""
    now = datetime.now(timezone.utc)
    body = client.CoreV1Event(
        metadata=client.V1ObjectMeta(generate_name=f"{pod}.", namespace=namespace),
        involved_object=client.V1ObjectReference(api_version="v1", kind="Pod", name=pod,
                                                 namespace=namespace, uid=uid),
        reason=reason, message=message[:1000], type=kind, count=1,
        first_timestamp=now, last_timestamp=now,
        source=client.V1EventSource(component="schedtune-monitor"),
    )  # fmt: skip
    try:
        (api or client.CoreV1Api()).create_namespaced_event(namespace, body, _preload_content=False)
    except ApiException as exc:
        log.warning("could not post event %s on %s/%s: %s", reason, namespace, pod, exc.status)
        return False
    return True


def list_objects(list_fn: Callable[..., Any]) -> tuple[list[dict[str, Any]], str]:
    """One LIST as plain API dicts (no model deserialisation): (items, resourceVersion)."""
    response = list_fn(_preload_content=False)
    listing = orjson.loads(response.data)
    return listing.get("items") or [], listing["metadata"]["resourceVersion"]


def watch_forever(list_fn: Callable[..., Any], on_list: Callable[[list[dict[str, Any]]], None],
                  on_event: Callable[[str, dict[str, Any]], None], stop: threading.Event,
                  sleep: Callable[[float], None] = time.sleep,
                  relist_every_s: float = 0.0, clock: Callable[[], float] = time.monotonic) -> None:
    """List then watch a resource until `stop`, surviving 410 Gone and dropped connections.

    Objects are the API's JSON as dicts. `on_list(items)` gets every full listing
    (at start, after a 410, and every `relist_every_s` if set): the caller
    reconciles against it, since a watch that restarts misses deletions.
    `on_event(type, obj)` gets ``ADDED``/``MODIFIED``/``DELETED`` in order; the
    watch resumes from the last resourceVersion seen.
    """
    backoff, version, listed_at = 1.0, None, 0.0
    while not stop.is_set():
        try:
            if version is None or (relist_every_s and clock() - listed_at >= relist_every_s):
                items, listed_version = list_objects(list_fn)
                listed_at = clock()
                _handled(on_list, items)
                version = listed_version
            stream = _RawWatch()
            for event in stream.stream(list_fn, resource_version=version,
                                       allow_watch_bookmarks=True, timeout_seconds=WATCH_TIMEOUT_S):
                if stop.is_set():
                    stream.stop()
                    return
                obj = event.get("object") or {}
                if event.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                    _handled(on_event, event["type"], obj)
                version = (obj.get("metadata") or {}).get("resourceVersion") or version
            backoff = 1.0
        except HandlerFailed as exc:
            # The event was not applied: rebuild from a full listing once the handler works.
            log.warning("handler failed: %s; re-listing in %.0f s", exc, backoff)
            version = None
            sleep(backoff)
            backoff = min(MAX_BACKOFF_S, backoff * 2)
        except ApiException as exc:
            if exc.status == 410:  # resourceVersion too old: re-list at once
                log.info("watch expired (410 Gone); re-listing")
                version = None
                continue
            log.warning("watch failed: %s %s; retrying in %.0f s", exc.status, exc.reason, backoff)
            sleep(backoff)
            backoff = min(MAX_BACKOFF_S, backoff * 2)
        except Exception as exc:  # noqa: BLE001  (connection errors of urllib3 and friends)
            log.warning("watch connection lost: %s; retrying in %.0f s", type(exc).__name__, backoff)
            sleep(backoff)
            backoff = min(MAX_BACKOFF_S, backoff * 2)


class _RawWatch(watch.Watch):
    """Events carry the API's JSON dicts, not model classes. (The client's own
    ``deserialize=False`` breaks on ERROR events: it then lacks ``raw_object``.)"""

    def get_return_type(self, func: Callable[..., Any]) -> None:  # noqa: ARG002
        return None


class HandlerFailed(Exception):
    """`on_list` or `on_event` raised: what it was given is not applied."""


def _handled(handler: Callable[..., None], *args: Any) -> None:
    try:
        handler(*args)
    except Exception as exc:  # noqa: BLE001
        raise HandlerFailed(f"{type(exc).__name__}: {str(exc)[:200]}") from exc
