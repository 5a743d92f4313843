"""Waiters requeued on release (real Redis, injected clock, recorded watch events).

The monitor releases a reservation as soon as the API says its pod is going
(``deletionTimestamp``, Succeeded/Failed, DELETED), then updates each waiting
pod that now fits on the freed GPU, oldest first, once, so kube-scheduler
retries it at once instead of at its 5-minute flush.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from extender.cluster.monitor import Monitor
from extender.model import FilterRecord, JobRecord, Limits, NodeGpus, PodDemand, Waiter
from extender.settings import Settings
from tests.builders import bind_args, filter_args, make_node, make_pod

DATA = Path(__file__).resolve().parents[2] / "data" / "pod-watch"
BIG = make_node("big", "NVIDIA-GeForce-RTX-3090", memory_mib=24576, replicas=4)
SMALL = make_node("small", "NVIDIA-GeForce-RTX-3070", memory_mib=8192, replicas=4)
BIG_LAYOUT = NodeGpus("NVIDIA-GeForce-RTX-3090", "RTX-3090", 1, 24576, share_slots=4)
SMALL_LAYOUT = NodeGpus("NVIDIA-GeForce-RTX-3070", "RTX-3070", 1, 8192, share_slots=4)
OURS = "schedtune-scheduler"


@pytest.fixture
def requeued() -> list[tuple[str, str, str, float]]:
    return []


@pytest.fixture
def monitor(store, clock, estimator, requeued) -> Monitor:
    store.put_node("big", BIG_LAYOUT)  # the node watcher's
    store.put_node("small", SMALL_LAYOUT)
    return Monitor(store, estimator, clock=clock, settings=Settings(scheduler_name=OURS),
                   requeue=lambda *call: requeued.append(call))


def _filter(client, pod: dict, nodes: list[dict]) -> set[str]:
    out = client.post("/filter", json=filter_args(pod, nodes)).get_json()
    assert out["Error"] == ""
    return {n["metadata"]["name"] for n in (out["Nodes"] or {}).get("items", [])}


def _bound(client, binder, pod: dict, node: str) -> dict:
    """Filter and bind through the extender; returns the pod as the API server then has it."""
    assert node in _filter(client, pod, [BIG, SMALL])
    assert client.post("/bind", json=bind_args(pod, node)).get_json() == {"Error": ""}
    pod = copy.deepcopy(pod)
    pod["metadata"]["annotations"].update(binder.calls[-1][4])
    pod["spec"].update(nodeName=node, schedulerName=OURS)
    return pod


def _ending(pod: dict, how: str) -> tuple[str, dict]:
    pod = copy.deepcopy(pod)
    if how == "terminating":
        pod["metadata"].update(deletionTimestamp="2026-11-21T05:00:00Z",
                               deletionGracePeriodSeconds=30)
        return "MODIFIED", pod
    if how == "succeeded":
        pod["status"] = {"phase": "Succeeded"}
        return "MODIFIED", pod
    return "DELETED", pod


@pytest.mark.parametrize("how", ["terminating", "succeeded", "deleted"])
def test_the_waiter_that_now_fits_is_requeued_and_binds(client, binder, store, clock, monitor,
                                                        requeued, how) -> None:
    fillers = [_bound(client, binder, make_pod(f"fill-{i}", model="vgg16", batch=32, epochs=1),
                      "big") for i in range(2)]
    giant = make_pod("giant", model="vgg16", batch=64, epochs=1)
    assert _filter(client, giant, [BIG, SMALL]) == set()  # fits nowhere: it waits
    clock.now += 5
    _bound(client, binder, make_pod("small-fill", model="resnet50", batch=32, epochs=1), "small")
    elsewhere = make_pod("elsewhere", model="resnet50", batch=32, epochs=1)
    assert _filter(client, elsewhere, [SMALL]) == set()  # waits, for a 3070 only
    assert len(store.waiters(clock())) == 2
    clock.now += 60
    kind, ended = _ending(fillers[0], how)
    monitor.on_event(kind, ended)
    assert store.job(fillers[0]["metadata"]["uid"]) is None  # released on this event
    assert requeued == [("default", "giant", giant["metadata"]["uid"], clock())]
    assert "big" in _filter(client, giant, [BIG, SMALL])  # kube-scheduler's retry: it fits
    assert client.post("/bind", json=bind_args(giant, "big")).get_json() == {"Error": ""}
    if how != "deleted":
        monitor.on_event("MODIFIED", ended)  # still terminating / finished: no re-adoption
        monitor.on_event("DELETED", ended)
    assert store.job(fillers[0]["metadata"]["uid"]) is None
    assert len(requeued) == 1  # once per release


def _waiter(store, clock, uid: str, since: float, needs: dict[str, tuple[float, float]]) -> None:
    record = FilterRecord(PodDemand(uid, uid, "ml", "resnet50", "train", 32, 1))
    store.record_filter(record, 60, Waiter(uid, since, needs, f"ml/{uid}"), clock(), 600)


def _holder(store, node: str = "big", mib: float = 20_000) -> str:
    store.reserve(JobRecord("holder", "holder", "ml", "vgg16", "train", node, -1, mib, 600,
                            "reserved", 0), [(0, 24576.0, 4)], now=100, ttl_s=0)
    return "holder"


def _holder_pod() -> dict:
    pod = make_pod("holder", "ml", uid="holder", model="vgg16")
    pod["spec"].update(nodeName="big", schedulerName=OURS)
    return pod


@pytest.mark.parametrize("limit, expected", [(4, ["w0", "w1", "w4"]), (2, ["w0", "w1"])])
def test_exactly_the_waiters_that_now_fit_are_requeued_oldest_first(
        store, clock, estimator, requeued, limit, expected) -> None:
    store.put_node("big", BIG_LAYOUT)
    _holder(store)
    for uid, since, needs in [
            ("w2", 30, {"RTX-3090": (5_000, 60)}),  # after w0 and w1: 1576 MiB left
            ("w0", 10, {"RTX-3090": (15_000, 60), "T4": (15_500, 90)}),
            ("w3", 40, {"T4": (1_000, 60)}),  # another GPU type only
            ("w1", 20, {"RTX-3090": (8_000, 60)}),
            ("w4", 50, {"RTX-3090": (1_000, 60)}),
            ("w5", 60, {"RTX-3090": (30_000, 60)})]:  # never fits this card
        _waiter(store, clock, uid, clock() - 1000 + since, needs)
    monitor = Monitor(store, estimator, clock=clock,
                      settings=Settings(collocation=Limits(limit, {})),
                      requeue=lambda *call: requeued.append(call))
    monitor.on_event("DELETED", _holder_pod())
    assert requeued == [("ml", uid, uid, clock()) for uid in expected]


def test_nothing_is_requeued_while_the_gpu_is_still_too_full(store, clock, estimator,
                                                             requeued) -> None:
    store.put_node("big", BIG_LAYOUT)
    _holder(store, mib=2_000)
    store.reserve(JobRecord("stays", "stays", "ml", "vgg16", "train", "big", -1, 20_000, 600,
                            "reserved", 0), [(0, 24576.0, 4)], now=100, ttl_s=0)
    _waiter(store, clock, "w0", clock() - 100, {"RTX-3090": (10_000, 60)})
    Monitor(store, estimator, clock=clock, requeue=lambda *call: requeued.append(call)
            ).on_event("DELETED", _holder_pod())
    assert store.job("holder") is None and requeued == []


def test_a_requeue_that_fails_never_blocks_the_release_or_the_others(store, clock, estimator,
                                                                     requeued) -> None:
    store.put_node("big", BIG_LAYOUT)
    _holder(store)
    for i in range(3):
        _waiter(store, clock, f"w{i}", clock() - 100 + i, {"RTX-3090": (1_000, 60)})

    def requeue(namespace: str, name: str, uid: str, now: float) -> None:
        requeued.append((namespace, name, uid, now))
        if uid == "w0":
            raise ConnectionError("API server unreachable")

    def count(outcome: str) -> float:
        return REGISTRY.get_sample_value("schedtune_waiters_requeued_total",
                                         {"outcome": outcome}) or 0.0

    before = count("requeued"), count("failed")
    Monitor(store, estimator, clock=clock, requeue=requeue).on_event("DELETED", _holder_pod())
    assert store.job("holder") is None
    assert [call[2] for call in requeued] == ["w0", "w1", "w2"]
    assert (count("requeued"), count("failed")) == (before[0] + 2, before[1] + 1)


def test_reconcile_requeues_after_releasing_a_vanished_pod(store, clock, estimator,
                                                           requeued) -> None:
    store.put_node("big", BIG_LAYOUT)
    _holder(store)
    _waiter(store, clock, "w0", clock() - 100, {"RTX-3090": (10_000, 60)})
    Monitor(store, estimator, clock=clock, requeue=lambda *call: requeued.append(call)
            ).reconcile([])
    assert store.jobs() == [] and [call[2] for call in requeued] == ["w0"]


def test_a_terminating_pod_is_released_on_the_event_that_says_so(store, clock,
                                                                estimator) -> None:
    """The recorded train-b, running on gpu-a, then deleted: released at its
    deletionTimestamp, not at the DELETED event that follows its grace period."""
    store.put_node("gpu-a", NodeGpus("NVIDIA-GeForce-RTX-3090", "RTX-3090", 2, 24576, 4))
    events = [json.loads(line) for line in (DATA / "lifecycle.jsonl").read_text().splitlines()]
    train_b = [e for e in events if e["object"]["metadata"]["name"] == "train-b"]
    monitor = Monitor(store, estimator, clock=clock)
    for event in train_b[:-1]:  # added, bound, running
        monitor.on_event(event["type"], event["object"])
    uid = train_b[0]["object"]["metadata"]["uid"]
    assert store.job(uid).state == "running"
    terminating = copy.deepcopy(train_b[-1]["object"])
    terminating["metadata"]["deletionTimestamp"] = "2026-11-21T05:00:00Z"
    monitor.on_event("MODIFIED", terminating)
    assert store.job(uid) is None
    [observed] = store.observations()
    assert observed["outcome"] == "deleted"
    monitor.on_event("MODIFIED", terminating)  # the kubelet's status updates while it stops
    monitor.reconcile([terminating])  # a listing while it stops
    assert store.job(uid) is None
    monitor.on_event("DELETED", train_b[-1]["object"])
    assert len(store.observations()) == 1
