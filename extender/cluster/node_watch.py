"""Keeps the store's node layouts (`st:nodes`) current from the Kubernetes API.

Needed for kube-scheduler's ``nodeCacheCapable: true`` mode and Volcano, where
requests name nodes without their labels. Started by gunicorn's master as one
process per replica (`start_in_background`), or run alone:
``schedtune node-watch``.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
from typing import Any

from extender.cluster import kube
from extender.wire.node_labels import gpus_from_hami, gpus_from_node
from extender.settings import Settings
from extender.state.embedded_redis import open_store
from extender.state.store import RedisStore

log = logging.getLogger(__name__)


def apply_event(store: RedisStore, event_type: str, node: dict[str, Any],
                agent: str = "none") -> None:
    """One watch event (a Node as the API's JSON) -> the node's layout in the store: from
    its GPU Feature Discovery labels, or under HAMi (`agent`) from its device register."""
    meta = node.get("metadata") or {}
    if event_type == "DELETED":
        store.put_node(meta["name"], None)
        return
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    labels = meta.get("labels") or {}
    layout = (gpus_from_hami(labels, meta.get("annotations") or {}, allocatable)
              if agent == "hami" else gpus_from_node(labels, allocatable))
    store.put_node(meta["name"], layout)


def apply_listing(store: RedisStore, nodes: list[dict[str, Any]], agent: str = "none") -> None:
    """A full listing: record every node, forget the ones gone while we were not watching."""
    listed = {n["metadata"]["name"] for n in nodes}
    for name in set(store.node_names()) - listed:
        store.put_node(name, None)
    for node in nodes:
        apply_event(store, "ADDED", node, agent)


def run(settings: Settings, stop: threading.Event | None = None) -> None:
    if not kube.load_config(settings.kubeconfig):
        log.warning("node watch: no cluster configuration; not watching nodes")
        return
    store = open_store(settings)
    api = kube.client.CoreV1Api()
    agent = settings.node_agent
    kube.watch_forever(api.list_node, lambda nodes: apply_listing(store, nodes, agent),
                       lambda kind, obj: apply_event(store, kind, obj, agent),
                       stop or threading.Event())


def start_in_background(settings: Settings) -> subprocess.Popen[bytes] | None:
    """`python -m extender.cluster.node_watch` as a child process of gunicorn's master (a plain
    subprocess: workers forked later must not inherit it as a multiprocessing child)."""
    if not settings.node_watch:
        return None
    return subprocess.Popen([sys.executable, "-m", "extender.cluster.node_watch"])


def main(argv: list[str] | None = None) -> int:
    """Watch nodes until stopped (configured by the environment: see extender/settings.py)."""
    import argparse

    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args(argv)
    run(Settings.from_env(os.environ))
    return 0


if __name__ == "__main__":
    sys.exit(main())
