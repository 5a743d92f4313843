"""The lifecycle monitor on recorded pod watch streams, against a real Redis."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from extender.cluster import kube
from extender.cluster.monitor import Monitor, pod_facts
from extender.core.signing import reservation_signature
from extender.model import GPU, PREDICTED_S, RESERVED_MIB, SIGNATURE, NodeGpus
from extender.settings import Settings
from tests.extender.cluster.recorded_api import DROP, RecordedApi

DATA = Path(__file__).resolve().parents[2] / "data" / "pod-watch"
NODE = "gpu-a"
# The recorded node shares its GPUs by time-slicing (two jobs on GPU 0 at once).
LAYOUT = NodeGpus("NVIDIA-GeForce-RTX-3090", "RTX-3090", 2, 24576, share_slots=4)
ENDED = ("Succeeded", "Failed")
KEY = b"test-signing-key-0123456789abcdef"


def signed(obj: dict, key: bytes = KEY) -> dict:
    """A recorded pod as the extender configured with `key` wrote it: the reservation on
    a bound pod signed (the recordings predate signatures)."""
    notes, node = obj["metadata"].get("annotations") or {}, obj.get("spec", {}).get("nodeName")
    if node and GPU in notes:
        notes[SIGNATURE] = reservation_signature(key, obj["metadata"]["uid"], node, notes[GPU],
                                                 notes[RESERVED_MIB], notes[PREDICTED_S])
    return obj


def _events() -> list[dict]:
    return [{**e, "object": signed(e["object"])} for e in
            (json.loads(line) for line in (DATA / "lifecycle.jsonl").read_text().splitlines())]


@pytest.fixture
def settings(redis_url) -> Settings:
    """The extender's (the `client` fixture's app) and the monitor's: one signing key."""
    return Settings(redis_url=redis_url, bind_mode="record", node_watch=False,
                    log_level="WARNING", signing_key=KEY)


@pytest.fixture
def monitor(store, clock, estimator, settings) -> Monitor:
    store.put_node(NODE, LAYOUT)
    return Monitor(store, estimator, clock=clock, settings=settings)


def test_every_reservation_is_released_on_the_event_that_ends_its_pod(monitor, store, clock) -> None:
    clock.now = 1_795_240_000.0  # an hour after the recorded pods were created
    ratios = ("schedtune_prediction_error_ratio_count", {"target": "time"})
    ratios_before = REGISTRY.get_sample_value(*ratios) or 0.0
    warnings = []
    monitor.warn = lambda facts, reason, message: warnings.append((facts.name, reason))
    ended = set()
    for event in _events():
        monitor.on_event(event["type"], event["object"])
        facts = pod_facts(event["object"])
        if facts is None:
            assert store.job(event["object"]["metadata"]["uid"]) is None  # not ours: never tracked
            continue
        if event["type"] == "DELETED" or facts.phase in ENDED:
            ended.add(facts.uid)
        elif facts.node:
            job = store.job(facts.uid)
            assert job is not None and job.node == NODE, "a bound pod always holds a reservation"
            assert job.state == ("running" if facts.running_since else "bound")
        for uid in ended:
            assert store.job(uid) is None
    assert store.jobs() == []
    observed = {o["uid"][:1]: o for o in store.observations()}
    assert sorted(observed) == ["a", "b", "c", "e"]
    assert observed["a"]["outcome"] == "succeeded" and float(observed["a"]["seconds"]) == 600
    assert observed["a"]["gpu_type"] == "RTX-3090" and observed["a"]["units"] == "2"
    assert observed["b"]["outcome"] == "deleted"
    # train-c was OOMKilled: its RAM limit, not its GPU memory
    assert observed["c"]["outcome"] == "ram-oom" and observed["c"]["oom"] == "0"
    assert observed["e"]["outcome"] == "evicted"
    assert REGISTRY.get_sample_value(*ratios) - ratios_before == 1  # a's run: the one succeeded
    assert store.oom_count() == 2  # two OOM-killed container instances, each counted once
    assert warnings == [("train-c", "SchedTuneRAMKilled")] * 2
    assert store.floors() == {}  # a RAM kill raises no GPU floor


def test_running_reservation_carries_the_real_start_time(monitor, store) -> None:
    events = [e for e in _events() if e["object"]["metadata"]["name"] == "train-a"]
    for event in events[:3]:  # added, bound, running
        monitor.on_event(event["type"], event["object"])
    job = store.job(events[0]["object"]["metadata"]["uid"])
    assert job.state == "running" and job.started_at == pod_facts(events[2]["object"]).running_since
    assert (job.gpu_index, job.reserved_mib, job.predicted_s) == (0, 6200, 600.0)


def test_no_reservation_is_lost_across_410_gone(monitor, store, clock) -> None:
    recorded = json.loads((DATA / "gone-410.json").read_text())
    for pod in [p for listing in recorded["listings"] for p in listing["items"]]:
        signed(pod)
    for event in [e for stream in recorded["streams"] for e in stream if "object" in e]:
        signed(event["object"])
    versions = [listing["metadata"]["resourceVersion"] for listing in recorded["listings"]]
    clock.now = 1_795_240_000.0  # an hour after the recorded pods were created
    stop = threading.Event()
    api = RecordedApi(recorded["listings"], recorded["streams"], stop)
    kube.watch_forever(api.list_fn, monitor.reconcile, monitor.on_event, stop, sleep=lambda s: None)
    lists = [c for c in api.calls if not c.get("watch")]
    watches = [c["resource_version"] for c in api.calls if c.get("watch")]
    assert len(lists) == 2  # the 410 forced exactly one re-list
    assert watches[:2] == versions  # each watch starts from its listing's resourceVersion
    # train-a: running before the 410, finished after it: released, observed once.
    # train-b: deleted during the gap (no DELETED event ever came): released by reconcile.
    # train-f: bound during the gap without a reservation: adopted as written on the pod.
    (job,) = store.jobs()
    assert job.pod == "train-f" and (job.gpu_index, job.reserved_mib, job.state) == (1, 3100, "running")
    assert [o["uid"][:1] for o in store.observations()] == ["a"]


def test_dropped_connection_resumes_without_losing_events(monitor, store) -> None:
    added, bound, running = [e for e in _events() if e["object"]["metadata"]["name"] == "train-a"][:3]
    stop = threading.Event()
    listing = {"metadata": {"resourceVersion": "100"}, "items": []}
    api = RecordedApi([listing], [[added, DROP], [bound, running]], stop)
    kube.watch_forever(api.list_fn, monitor.reconcile, monitor.on_event, stop, sleep=lambda s: None)
    assert [c.get("resource_version") for c in api.calls] == [None, "100", added["object"]["metadata"]["resourceVersion"], running["object"]["metadata"]["resourceVersion"]]
    assert store.job(added["object"]["metadata"]["uid"]).state == "running"


def test_reconcile_after_wiping_redis_restores_the_reservations_on_the_pods(
        client, binder, store, redis_client, clock, settings) -> None:
    from tests.builders import bind_args, filter_args, make_node, make_pod

    node = make_node(NODE, count=2, replicas=4)  # time-slicing: 4 pods per GPU
    pods = [make_pod(f"job-{i}", "ml", model=m, batch=b)
            for i, (m, b) in enumerate([("resnet50", 32), ("vgg16", 16), ("mobilenet_v2", 64),
                                        ("bert_base", 8)])]
    for pod in pods:
        assert client.post("/filter", json=filter_args(pod, [node])).get_json()["Error"] == ""
        assert client.post("/bind", json=bind_args(pod, NODE)).get_json() == {"Error": ""}
    before = {j.uid: (j.node, j.gpu_index, j.reserved_mib, round(j.predicted_s, 1)) for j in store.jobs()}
    assert len(before) == 4
    # What the API server holds: the pods, bound, with what bind wrote on them.
    for pod, (_, _, _, node_name, written) in zip(pods, binder.calls, strict=True):
        pod["metadata"]["annotations"].update(written)
        pod["spec"]["nodeName"] = node_name
        pod["spec"]["schedulerName"] = settings.scheduler_name
    redis_client.flushdb()
    store.put_node(NODE, NodeGpus("NVIDIA-GeForce-RTX-3090", "RTX-3090", 2, 24576, 4))  # node watcher
    Monitor(store, clock=clock, settings=settings).reconcile(pods)  # signed: no estimator
    after = {j.uid: (j.node, j.gpu_index, j.reserved_mib, round(j.predicted_s, 1)) for j in store.jobs()}
    assert after == {uid: (n, g, float(round(m)), p) for uid, (n, g, m, p) in before.items()}


def test_unannotated_and_unreadable_pods_are_ignored(monitor, store) -> None:
    monitor.on_event("ADDED", {"metadata": {"name": "x", "uid": "u"}, "spec": {"nodeName": NODE}})
    monitor.on_event("ADDED", {"metadata": {"annotations": {"schedtune.io/model": "resnet50"}}})
    bad = {"metadata": {"name": "y", "uid": "v", "annotations": {"schedtune.io/model": "resnet50",
                                                                 "schedtune.io/batch-size": "-3"}},
           "spec": {"nodeName": NODE}, "status": {"phase": "Running"}}
    monitor.on_event("MODIFIED", bad)  # bad annotations: logged, nothing written
    assert store.jobs() == []
