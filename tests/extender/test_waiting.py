"""Starvation guard end to end (HTTP, real Redis): a pod that fits nowhere waits, and
once it has waited `hold_after_s` the GPU where it fits soonest is held for it."""

from __future__ import annotations

import pytest

from estimator.predict import Job
from tests.builders import bind_args, filter_args, make_node, make_pod

BIG = make_node("big", "NVIDIA-GeForce-RTX-3090", memory_mib=24576, replicas=4)
SMALL = make_node("small", "NVIDIA-GeForce-RTX-3070", memory_mib=8192, replicas=4)


def _filter(client, pod: dict) -> dict:
    out = client.post("/filter", json=filter_args(pod, [BIG, SMALL])).get_json()
    assert out["Error"] == ""
    return out


def _passing(out: dict) -> set[str]:
    return {n["metadata"]["name"] for n in (out["Nodes"] or {}).get("items", [])}


def _place(client, pod: dict, node: str) -> None:
    assert node in _passing(_filter(client, pod))
    assert client.post("/bind", json=bind_args(pod, node)).get_json() == {"Error": ""}


@pytest.fixture
def giant(estimator) -> dict:
    """vgg16 b64 training: too big for the 8 GB card, and for what two b32 runs leave."""
    needs = estimator.estimate(Job("vgg16", "train", 64, 1), gpus=["RTX-3090", "RTX-3070"])
    filler = estimator.estimate(Job("vgg16", "train", 32, 1), gpus=["RTX-3090"])["RTX-3090"]
    assert needs["RTX-3070"].padded_mib > 8192
    assert 24576 - 2 * filler.padded_mib < needs["RTX-3090"].padded_mib < 24576
    return make_pod("giant", model="vgg16", task="train", batch=64, epochs=1)


def test_a_pod_that_fits_nowhere_waits_then_holds_its_gpu(client, store, clock, settings,
                                                          giant) -> None:
    fillers = [make_pod(f"fill-{i}", model="vgg16", task="train", batch=32, epochs=1)
               for i in range(2)]
    for pod in fillers:
        _place(client, pod, "big")
    refused = _filter(client, giant)
    assert _passing(refused) == set() and "big" in refused["FailedNodes"]
    [waiter] = store.waiters(clock())
    assert waiter.uid == giant["metadata"]["uid"] and waiter.since == clock()

    inference = make_pod("infer", model="resnet18", task="inference", requests=1000)
    assert _passing(_filter(client, inference)) == {"big", "small"}  # not held yet
    waited = 0.0
    while waited < settings.hold_after_s:  # kube-scheduler retries it every 5 minutes
        assert _passing(_filter(client, inference)) == {"big", "small"}  # not held yet
        clock.now += 300
        waited += 300
        assert _passing(_filter(client, giant)) == set()  # still waiting: `since` kept
        assert store.waiters(clock())[0].since == waiter.since
    out = _filter(client, inference)
    assert _passing(out) == {"small"}
    assert "held for an older waiting pod" in out["FailedNodes"]["big"]
    # A short job is backfilled: it is gone before the giant could fit anyway.
    quick = make_pod("quick", model="resnet18", task="inference", requests=100)
    assert _passing(_filter(client, quick)) == {"big", "small"}
    prio = client.post("/prioritize", json=filter_args(inference, [BIG, SMALL])).get_json()
    assert {p["Host"]: p["Score"] for p in prio}["big"] == 0

    store.release(fillers[0]["metadata"]["uid"])  # one filler ends: the giant fits now
    _place(client, giant, "big")
    assert store.waiters(clock()) == ()
    assert _passing(_filter(client, inference)) == {"big", "small"}


def test_waiters_go_when_deleted_or_no_longer_filtered(client, store, clock, settings,
                                                        giant) -> None:
    for i in range(2):
        _place(client, make_pod(f"fill-{i}", model="vgg16", task="train", batch=32, epochs=1),
               "big")
    _filter(client, giant)
    assert len(store.waiters(clock())) == 1
    store.release(giant["metadata"]["uid"])  # the monitor saw the pod deleted
    assert store.waiters(clock()) == ()
    _filter(client, giant)
    clock.now += settings.wait_ttl_s + 1  # never retried: no longer holds anything
    assert store.waiters(clock()) == ()
    inference = make_pod("infer", model="resnet18", task="inference", requests=100)
    assert _passing(_filter(client, inference)) == {"big", "small"}


def test_holds_can_be_switched_off(client_with, clock, giant) -> None:
    client = client_with(hold_for=0)
    for i in range(2):
        _place(client, make_pod(f"fill-{i}", model="vgg16", task="train", batch=32, epochs=1),
               "big")
    _filter(client, giant)
    clock.now += 1000
    inference = make_pod("infer", model="resnet18", task="inference", requests=100)
    assert _passing(_filter(client, inference)) == {"big", "small"}


def test_unreadable_waiter_entries_are_skipped_and_pruned(store, redis_client, clock) -> None:
    from extender.model import FilterRecord, PodDemand, Waiter

    redis_client.hset("st:waiting", mapping={"junk": "{not json", "old": '{"uid": 1}'})
    assert store.waiters(clock()) == ()
    record = FilterRecord(PodDemand("u", "n", "ns", "resnet50", "train", 32, 1))
    store.record_filter(record, 60, Waiter("u", clock(), {"T4": (100.0, 1.0)}), clock(), 60)
    assert set(redis_client.hkeys("st:waiting")) == {"u"}
    assert store.waiters(clock()) == (Waiter("u", clock(), {"T4": (100.0, 1.0)}),)


def test_queues_cli_lists_waiting_pods(client, store, clock, redis_url, capsys, monkeypatch,
                                       giant) -> None:
    import json

    from scripts import queues

    for i in range(2):
        _place(client, make_pod(f"fill-{i}", model="vgg16", task="train", batch=32, epochs=1),
               "big")
    _filter(client, giant)
    monkeypatch.setattr(queues.time, "time", lambda: clock.now + 42)
    assert queues.main(["--redis", redis_url, "--waiting", "--json"]) == 0
    [entry] = json.loads(capsys.readouterr().out)
    assert entry["pod"] == "default/giant" and entry["waiting_s"] == 42
    assert set(entry["needs"]) == {"RTX-3090", "RTX-3070"}
    assert queues.main(["--redis", redis_url, "--waiting"]) == 0
    assert capsys.readouterr().out.startswith("default/giant")
