"""Kubernetes API access (the only module that imports the kubernetes client).

Cluster access is resolved the standard way: the in-cluster service account,
else ``KUBECONFIG`` (or ~/.kube/config). `Binder` creates a pod's Binding and
writes the reservation onto the pod as annotations; `watch_nodes` keeps the
store's node layouts current (list, then watch from the list's
resourceVersion; on 410 Gone re-list; on a dropped connection reconnect with
backoff).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException

from extender.errors import BindFailed

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
    """Creates Bindings through the API server."""

    def __init__(self, api: client.CoreV1Api | None = None) -> None:
        self._api = api or client.CoreV1Api()

    def bind(self, namespace: str, name: str, uid: str, node: str,
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
            # The response is a Status the client cannot deserialise into V1Binding.
            self._api.create_namespaced_binding(namespace, body, _preload_content=False)
        except ApiException as exc:
            raise BindFailed(f"binding {namespace}/{name} to {node}: {exc.status} {exc.reason}") from exc


def watch_forever(list_fn: Callable[..., Any], handle: Callable[[str, Any], None],
                  stop: threading.Event, sleep: Callable[[float], None] = time.sleep) -> None:
    """List then watch a resource until `stop`, surviving 410 Gone and dropped connections.

    `handle(event_type, obj)` gets ``ADDED`` for every listed object (a re-list
    replays them all), then the watch's ``ADDED``/``MODIFIED``/``DELETED``.
    """
    backoff = 1.0
    while not stop.is_set():
        try:
            listing = list_fn()
            for item in listing.items:
                handle("ADDED", item)
            version = listing.metadata.resource_version
            stream = watch.Watch()
            for event in stream.stream(list_fn, resource_version=version,
                                       timeout_seconds=WATCH_TIMEOUT_S):
                if stop.is_set():
                    stream.stop()
                    return
                handle(event["type"], event["object"])
            backoff = 1.0
        except ApiException as exc:
            if exc.status == 410:  # resourceVersion too old: re-list at once
                log.info("watch expired (410 Gone); re-listing")
                continue
            log.warning("watch failed: %s %s; retrying in %.0f s", exc.status, exc.reason, backoff)
            sleep(backoff)
            backoff = min(MAX_BACKOFF_S, backoff * 2)
        except Exception as exc:  # noqa: BLE001  (connection errors of urllib3 and friends)
            log.warning("watch connection lost: %s; retrying in %.0f s", type(exc).__name__, backoff)
            sleep(backoff)
            backoff = min(MAX_BACKOFF_S, backoff * 2)
