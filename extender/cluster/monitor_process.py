"""`schedtune monitor`: the monitor's process (`extender.cluster.monitor` says what it
does): the Kubernetes API client, the Event poster, the hand-over checks under a node agent,
and the watch that feeds `Monitor`."""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from estimator.predict import Estimator
from extender import logs
from extender.cluster.monitor import Monitor
from extender.cluster.monitor import __doc__ as monitor_doc
from extender.cluster.pods import PodFacts
from extender.model import REQUEUED_AT
from extender.settings import Settings

log = logging.getLogger("extender.cluster.monitor")


def _check_handovers_forever(monitor: Monitor, read_pod: Callable[[str, str], Any],
                             stop: threading.Event, every_s: float) -> None:
    while not stop.wait(every_s):
        try:
            monitor.check_handovers(read_pod)
        except Exception as exc:  # noqa: BLE001  (Redis or the API away: the next round)
            log.warning("hand-over check failed: %s", type(exc).__name__)


def main(argv: list[str] | None = None) -> int:
    """Run the monitor (configured by the environment: see extender/settings.py)."""
    import argparse

    from prometheus_client import start_http_server

    from extender.cluster import kube
    from extender.cluster.events import EventPoster
    from extender.redis_url import display
    from extender.state.embedded_redis import open_store

    argparse.ArgumentParser(description=monitor_doc.split("\n\n")[0]).parse_args(argv)
    settings = Settings.from_env(os.environ)
    logs.configure(settings.log_level)
    if not kube.load_config(settings.kubeconfig):
        print("error: no cluster configuration (in-cluster service account or KUBECONFIG); "
              "the monitor follows pods through the Kubernetes API", file=sys.stderr)
        return 2
    store = open_store(settings)
    api = kube.client.CoreV1Api()

    def warn(facts: PodFacts, reason: str, message: str) -> None:
        kube.pod_event(facts.namespace, facts.name, facts.uid, reason, message, api)

    def post(namespace: str, name: str, uid: str, reason: str, message: str) -> bool:
        return kube.pod_event(namespace, name, uid, reason, message, api, kind="Normal")

    def requeue(namespace: str, name: str, uid: str, now: float) -> None:
        # The uid makes it a precondition: a new pod of the same name is never touched
        # ("": a gang's member, whichever pod has its name now).
        stamp = datetime.fromtimestamp(now, UTC).isoformat(timespec="milliseconds")
        meta: dict[str, Any] = {"annotations": {REQUEUED_AT: stamp}}
        if uid:
            meta["uid"] = uid
        api.patch_namespaced_pod(name, namespace, {"metadata": meta},
                                 _preload_content=False, _request_timeout=2)

    monitor = Monitor(store, Estimator.load(settings.models_dir, design=settings.estimator_design),
                      warn=warn, settings=settings, requeue=requeue,
                      unlock=kube.NodeLocks(api).release if settings.node_agent == "hami"
                      else None)
    start_http_server(settings.monitor_port)
    stop = threading.Event()
    poster = EventPoster(store, post, settings.event_rate, settings.event_burst)
    threading.Thread(target=poster.run_forever, args=(stop,), name="event-poster",
                     daemon=True).start()
    log.info("monitor started", extra={"redis": display(settings.store_url),
                                       "reconcile_s": settings.reconcile_s,
                                       "scheduler": settings.scheduler_name,
                                       "signed_reservations": settings.signing_key is not None})
    if settings.node_agent != "none":
        every_s = min(30.0, settings.agent_timeout_s / 4)
        threading.Thread(target=_check_handovers_forever, name="handovers", daemon=True,
                         args=(monitor, lambda ns, name: kube.pod_json(api, ns, name),
                               stop, every_s)).start()
    # Survives API trouble and Redis outages: a failed event triggers a re-list and reconcile.
    kube.watch_forever(api.list_pod_for_all_namespaces, monitor.reconcile, monitor.on_event,
                       stop, relist_every_s=settings.reconcile_s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
