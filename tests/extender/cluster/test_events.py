"""Events on pods: what `kubectl describe pod` shows, as the API server received them.

The extender logs its decisions in Redis while it decides; the monitor's poster posts
them through the real kubernetes client to an HTTP server on 127.0.0.1 that records
every Event created (and refuses those of one namespace, as an API server without
permission would).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from kubernetes import client as k8s
from prometheus_client import REGISTRY

from extender.cluster import kube
from extender.cluster.events import EventPoster
from extender.cluster.monitor import Monitor
from extender.model import Decision, NodeGpus
from extender.settings import Settings
from extender.state.store import RedisStore
from tests.builders import bind_args, bound, filter_args, make_node, make_pod

BIG = make_node("big", "NVIDIA-GeForce-RTX-3090", memory_mib=24576, replicas=4)
BIG_LAYOUT = NodeGpus("NVIDIA-GeForce-RTX-3090", "RTX-3090", 1, 24576, share_slots=4)
OURS = "schedtune-scheduler"
REFUSED_NAMESPACE = "locked"


class _EventsApi(BaseHTTPRequestHandler):
    received: list[dict] = []

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        match = re.fullmatch(r"/api/v1/namespaces/([^/]+)/events", self.path)
        status = 404 if match is None else 403 if match[1] == REFUSED_NAMESPACE else 201
        if status == 201:
            self.received.append(body)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(json.dumps(body if status == 201 else {"kind": "Status"}).encode())

    def log_message(self, *args: object) -> None: ...


@pytest.fixture
def api() -> Iterator[tuple[k8s.CoreV1Api, list[dict]]]:
    received: list[dict] = []
    handler = type("Handler", (_EventsApi,), {"received": received})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    config = k8s.Configuration()
    config.host = f"http://127.0.0.1:{server.server_port}"
    yield k8s.CoreV1Api(k8s.ApiClient(config)), received
    server.shutdown()


def _poster(store, api, **options) -> EventPoster:
    core, _ = api
    return EventPoster(store, lambda ns, name, uid, reason, message: kube.pod_event(
        ns, name, uid, reason, message, core, kind="Normal"), **options)


def _said(received: list[dict]) -> list[tuple[str, str, str]]:
    return [(e["involvedObject"]["name"], e["reason"], e["message"]) for e in received]


def _filter(client, pod: dict) -> set[str]:
    out = client.post("/filter", json=filter_args(pod, [BIG])).get_json()
    assert out["Error"] == ""
    return {n["metadata"]["name"] for n in (out["Nodes"] or {}).get("items", [])}


def _bind(client, binder, pod: dict) -> dict:
    assert _filter(client, pod) == {"big"}
    assert client.post("/bind", json=bind_args(pod, "big")).get_json() == {"Error": ""}
    return bound(pod, "big", binder.calls[-1][4], OURS)


def _count(reason: str, outcome: str) -> float:
    return REGISTRY.get_sample_value("schedtune_events_total",
                                     {"reason": reason, "outcome": outcome}) or 0.0


def test_describe_says_where_why_and_for_how_long(client_with, binder, store, clock, estimator,
                                                  api) -> None:
    client = client_with(hold_after_s=300.0)  # holds after one retry
    store.put_node("big", BIG_LAYOUT)
    poster = _poster(store, api)
    poster.run_once()  # nothing logged yet: starts from now
    fillers = [_bind(client, binder, make_pod(f"fill-{i}", model="vgg16", batch=32, epochs=1))
               for i in range(2)]
    giant = make_pod("giant", model="vgg16", batch=64, epochs=1)
    for _ in range(3):  # kube-scheduler retries a refused pod: it is told once
        assert _filter(client, giant) == set()
        clock.now += 10
    clock.now += 400  # the waiter is old enough to hold a GPU
    assert _filter(client, make_pod("newer", model="vgg16", batch=64, epochs=1)) == set()
    monitor = Monitor(store, estimator, clock=clock, settings=Settings(scheduler_name=OURS))
    monitor.on_event("DELETED", fillers[0])
    assert poster.run_once() == 6

    _, received = api
    said = _said(received)
    mib, seconds = r"\d+ MiB", r"\d+ s"
    for name, (pod, reason, message) in zip(("fill-0", "fill-1"), said[:2], strict=True):
        assert (pod, reason) == (name, "SchedTuneReserved")
        assert re.fullmatch(rf"reserved {mib} of 24576 on GPU 0 \(RTX-3090\) of big; predicted "
                            rf"{seconds}; pad \d+\.\d % \(family and GPU type seen in training\)", message)
    assert said[2][:2] == ("giant", "SchedTuneWaiting")
    assert re.fullmatch(rf"waiting for GPU memory: no GPU has room now; needs RTX-3090 {mib} "
                        rf"\({seconds}\)", said[2][2])
    assert said[3][:2] == ("giant", "SchedTuneGPUHeld")  # the newer pod's filter holds it
    assert re.fullmatch(rf"GPU 0 \(RTX-3090\) of big is held for this pod: {mib} kept from "
                        r"newer pods until it fits", said[3][2])
    assert said[4][:2] == ("newer", "SchedTuneWaiting")
    assert said[5][:2] == ("fill-0", "SchedTuneReleased")
    assert re.fullmatch(rf"released {mib} on GPU 0 of big \(pod deleted\)", said[5][2])
    for event, pod in zip(received, [*fillers, giant], strict=False):
        assert event["type"] == "Normal"
        assert event["involvedObject"]["uid"] == pod["metadata"]["uid"]
        assert event["involvedObject"]["namespace"] == "default"
        assert event["source"]["component"] == "schedtune-monitor"
        assert event["count"] == 1 and event["firstTimestamp"]
    # Another monitor replica shares the log: nothing is posted twice.
    assert _poster(store, api, name="replica-2").run_once() == 0 and len(received) == 6


def test_over_the_rate_events_are_dropped_and_counted_never_queued(store, clock, api) -> None:

    poster = _poster(store, api, rate=0.001, burst=2)
    poster.run_once()
    before = _count("SchedTuneWaiting", "dropped")
    store.log_decisions([Decision("waiting", f"u{i}", f"ml/p{i}", "waits") for i in range(5)],
                        clock())
    assert poster.run_once() == 5
    assert len(api[1]) == 2
    assert _count("SchedTuneWaiting", "dropped") - before == 3


def test_a_refused_event_is_counted_and_the_others_still_posted(store, clock, api) -> None:

    poster = _poster(store, api)
    poster.run_once()
    before = _count("SchedTuneReleased", "failed")
    store.log_decisions([Decision("released", "u1", f"{REFUSED_NAMESPACE}/p1", "released"),
                         Decision("released", "u2", "ml/p2", "released")], clock())
    assert poster.run_once() == 2
    assert _said(api[1]) == [("p2", "SchedTuneReleased", "released")]
    assert _count("SchedTuneReleased", "failed") - before == 1


def test_a_decision_with_a_once_key_is_told_once_per_repeat_period(store, clock) -> None:

    told = Decision("waiting", "u1", "ml/p1", "waits", once_key="waiting:u1")
    for _ in range(3):
        store.log_decisions([told], clock(), repeat_s=600)
    store.log_decisions([Decision("released", "u1", "ml/p1", "released")], clock())
    assert [d["kind"] for d in store.decisions(10)] == ["released", "waiting"]
    assert store.decisions(1)[0]["pod"] == "ml/p1"


def test_two_replicas_post_each_decision_once_and_take_over_a_dead_ones(store, clock,
                                                                         api) -> None:
    first, second = _poster(store, api, name="m1"), _poster(store, api, name="m2")
    first.run_once()  # the group starts at the log's end
    store.log_decisions([Decision("released", f"u{i}", f"ml/p{i}", "released")
                         for i in range(4)], clock())
    # m1 dies holding two decisions it claimed but never posted.
    taken = store.claim_decisions("m1", 2)
    assert len(taken) == 2
    assert second.run_once() == 2  # the other two, new
    assert second.run_once() == 0  # m1's are not stale yet
    assert {name for name, _, _ in _said(api[1])} == {"p2", "p3"}
    assert len(store.claim_decisions("m2", 10, stale_ms=0)) == 2  # stale: taken over


def test_a_decision_whose_delivery_was_lost_comes_back_to_the_same_poster_at_once(
        store, clock, api) -> None:
    poster = _poster(store, api, name="m1")
    poster.run_once()  # the group starts at the log's end
    store.log_decisions([Decision("released", "u1", "ml/p1", "released")], clock())
    # Delivered to m1, but the reply never reached it (a socket timeout): unacknowledged.
    assert len(store.claim_decisions("m1", 10)) == 1
    assert poster.run_once() == 1  # not a minute later, when it would be stale
    assert _said(api[1]) == [("p1", "SchedTuneReleased", "released")]
    assert poster.run_once() == 0


def test_an_idle_wait_for_decisions_never_outlasts_the_socket_timeout(redis_url, clock,
                                                                        api) -> None:
    store = RedisStore.from_url(redis_url, timeout_s=1.0)  # the service's default
    poster = _poster(store, api, name="idle")
    for _ in range(2):  # asked to block 5 s on a 1 s socket: no StoreUnavailable
        assert poster.run_once(block_ms=5000) == 0
