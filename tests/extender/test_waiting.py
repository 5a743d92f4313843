"""Waiting pods end to end (HTTP, real Redis): a pod that fits nowhere waits, and once it
has waited `hold_after_s` the GPU where it fits soonest is held for it; a long pod waits
for a much faster GPU that frees soon rather than take a slow one now."""

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


def _waiters_world(store, clock, rng, count: int) -> list[str]:
    """Nodes with jobs on them and `count` waiters of random age, needs and expiry (some
    expired, some sharing one `since`), written as filter writes them."""
    from extender.model import FilterRecord, JobRecord, NodeGpus, PodDemand, Waiter

    layouts = [NodeGpus("NVIDIA-GeForce-RTX-3090", "RTX-3090", 4, 24576, 0),
               NodeGpus("Tesla-T4", "T4", 1, 15360, 1)]
    for i in range(40):
        store.put_node(f"node-{i}", layouts[i % 2])
        for gpu in range(layouts[i % 2].count):
            if rng.random() < 0.7:
                uid = f"job-{i}-{gpu}"
                record = JobRecord(uid=uid, pod=uid, namespace="ml", model="m", task="train",
                                   node=f"node-{i}", gpu_index=gpu,
                                   reserved_mib=rng.choice([4000.0, 9000.0, 14000.0]),
                                   predicted_s=rng.uniform(10, 900), state="reserved",
                                   reserved_at=clock())
                store.reserve(record, [(gpu, 1e9, 100)], clock(), 0)
                store.mark_running(uid, clock() - rng.uniform(0, 300))
    uids, start = [], clock.now
    for i in range(count):
        clock.now = start + rng.choice([0.0, 0.0, rng.uniform(0, 5000)])  # ties in `since`
        uid = f"wait-{i:03d}"
        needs = {"RTX-3090": (rng.uniform(2000, 24000), rng.uniform(10, 900)),
                 "T4": (rng.uniform(2000, 15000), rng.uniform(10, 900))}
        waiter = Waiter(uid, clock(), needs, f"ml/{uid}", rng.choice([1, 1, 1, 2]))
        record = FilterRecord(PodDemand(uid, uid, "ml", "resnet50", "train", 32, 1))
        store.record_filter(record, 60, waiter, clock(), rng.choice([100.0, 6000.0, 90000.0]))
        uids.append(uid)
    clock.now = start + 6000  # some waiters expired by now
    return uids


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("short_first", [0.0, 4.0])
def test_a_request_reads_its_own_entry_and_the_oldest_waiters_and_decides_as_with_all(
        store, clock, seed, short_first) -> None:
    """Holds read only the oldest waiters, the shortest (with `short_first`) and the pod's
    own `since`: filter and prioritize decide the same on the few a request reads as on
    every waiter."""
    import random

    from extender.core.filtering import decide_filter
    from extender.core.filtering.holds import SHORT_HOLDS
    from extender.core.job import PodJob
    from extender.core.prioritizing import decide_scores
    from extender.model import Limits, Need, PodDemand
    from extender.settings import Settings
    from extender.state.store import WaitersRead

    rng = random.Random(seed)
    uids = _waiters_world(store, clock, rng, 120)
    every = store.snapshot({f"node-{i}": None for i in range(40)}, clock())
    assert 20 < len(every.waiting) < 120  # some expired
    nodes = {f"node-{i}": None for i in range(40)}
    needs = {"RTX-3090": Need(6000, 300), "T4": Need(5000, 200)}
    held_somewhere = shorter_held = 0
    shortest = SHORT_HOLDS if short_first else 0
    for hold_for in (1, 2, 5):
        settings = Settings(hold_for=hold_for, hold_after_s=rng.choice([0.0, 900.0]),
                            collocation=Limits(4, {"T4": 2}), short_first=short_first)
        for uid in [*rng.sample(uids, 6), "not-waiting"]:
            read = WaitersRead(uid, hold_for + 1, shortest=shortest)
            few = store.snapshot(nodes, clock(), waiters=read)
            expected = {w.uid: w for w in every.waiting if w.uid == uid}
            expected.update((w.uid, w) for w in every.waiting[:hold_for + 1])
            expected.update((w.uid, w) for w in sorted(
                every.waiting, key=lambda w: (w.shortest_s, w.uid))[:shortest])
            assert few.waiting == tuple(sorted(expected.values(),
                                               key=lambda w: (w.since, w.uid)))
            pod = PodDemand(uid, uid, "ml", "resnet50", "train", 32, 1)
            jobs = [PodJob(pod, snapshot, needs) for snapshot in (few, every)]
            filtered = [decide_filter(job, nodes, settings) for job in jobs]
            assert dict(filtered[0].verdicts) == dict(filtered[1].verdicts)
            assert filtered[0].record == filtered[1].record
            assert filtered[0].waiter == filtered[1].waiter
            assert filtered[0].told == filtered[1].told
            held_somewhere += bool(filtered[1].record.held)
            shorter_held += any("kept from longer pods" in d.message for d in filtered[1].told)
            assert dict(decide_scores(jobs[0], nodes, settings)) == dict(
                decide_scores(jobs[1], nodes, settings))
    assert held_somewhere  # the holds were in play
    assert bool(shorter_held) == bool(short_first)


def test_waiters_leave_the_order_when_placed_released_or_expired_and_older_ones_join_it(
        store, redis_client, clock) -> None:
    """The order and expiry sets follow the hash: a placement, a release or an expiry takes
    a waiter out of all three; entries written before there was an order (or by hand)
    join it, or go when unreadable, a few per new waiter."""
    import json

    from extender.model import FilterRecord, JobRecord, NodeGpus, PodDemand, Waiter
    from extender.state.store import WaitersRead

    def wait(uid: str, ttl: float = 600.0) -> None:
        store.record_filter(FilterRecord(PodDemand(uid, uid, "ml", "resnet50", "train", 32, 1)),
                            60, Waiter(uid, clock(), {"T4": (100.0, 1.0)}), clock(), ttl)

    def keys() -> list[set[str]]:
        return [set(redis_client.hkeys("st:waiting")),
                set(redis_client.zrange("st:waiting:order", 0, -1)),
                set(redis_client.zrange("st:waiting:expiry", 0, -1)),
                set(redis_client.zrange("st:waiting:short", 0, -1))]

    store.put_node("n", NodeGpus("Tesla-T4", "T4", 1, 15360, 1))
    for uid in ("a", "b", "c"):
        wait(uid, ttl=50.0 if uid == "c" else 600.0)
        clock.now += 1
    record = JobRecord(uid="a", pod="a", namespace="ml", model="m", task="train", node="n",
                       gpu_index=0, reserved_mib=100.0, predicted_s=1.0, state="reserved",
                       reserved_at=clock())
    store.reserve(record, [(0, 1e9, 100)], clock(), 0)  # placed: no longer waits
    assert keys() == [{"b", "c"}] * 4
    clock.now += 100  # c expired: the next waiter's write drops it
    wait("d")
    assert keys() == [{"b", "d"}] * 4
    store.release("a")
    legacy = {f"old-{i}": json.dumps({"uid": f"old-{i}", "pod": "ml/old", "since": 5.0 + i,
                                      "expires_at": clock() + 600, "needs": {"T4": [1, 1]}})
              for i in range(70)}
    redis_client.hset("st:waiting", mapping={**legacy, "junk": "{not json"})
    for i in range(6):  # 32 entries looked at per write: the whole hash within a few
        wait(f"new-{i}")
    hash_keys, order, expiry, short = keys()
    assert "junk" not in hash_keys and hash_keys == order == expiry == short
    assert set(legacy) <= order
    oldest = store.snapshot({"n": None}, clock(), waiters=WaitersRead("", 3)).waiting
    assert [w.uid for w in oldest] == ["old-0", "old-1", "old-2"]
    assert redis_client.zscore("st:waiting:short", "old-0") == 1.0  # its needs' shortest


def test_prioritize_reusing_filters_read_still_has_the_oldest_live_waiters(store,
                                                                            clock) -> None:
    """Waiters that expire between filter and prioritize (which reuses filter's read for up
    to `prioritize_reuse_s`) do not count towards the oldest read, so the next oldest is
    there when prioritize looks."""
    from extender.model import FilterRecord, PodDemand, Waiter
    from extender.state.store import WaitersRead

    start = clock.now
    for uid, ttl in (("w1", 0.5), ("w2", 0.5), ("w3", 600.0)):
        store.record_filter(FilterRecord(PodDemand(uid, uid, "ml", "resnet50", "train", 32, 1)),
                            60, Waiter(uid, clock(), {"T4": (100.0, 1.0)}), clock(), ttl)
        clock.now += 0.001
    read = WaitersRead("p", 2, live_for_s=1.0)
    at_filter = store.snapshot({}, start + 0.1, waiters=read)
    assert [w.uid for w in at_filter.waiting] == ["w1", "w2", "w3"]
    reused = store.snapshot({}, start + 1.0, sync=False, waiters=read)
    assert [w.uid for w in reused.waiting] == ["w3"] == [w.uid for w in store.waiters(start + 1)]


def test_unreadable_entries_never_take_the_oldest_places_and_binds_drop_expired_ones(
        store, redis_client, clock) -> None:
    import json

    from extender.model import FilterRecord, JobRecord, NodeGpus, PodDemand, Waiter
    from extender.state.store import WaitersRead

    def entry(uid: str, since: float, **more) -> str:
        return json.dumps({"uid": uid, "since": since, "expires_at": clock() + 600,
                           "needs": {"T4": [100, 1]}, **more})

    redis_client.hset("st:waiting", mapping={"zero": entry("zero", 0.5, gpus=0),
                                             "many": entry("many", 0.6, gpus=65),
                                             "old": entry("old", 0.7)})
    store.record_filter(FilterRecord(PodDemand("new", "new", "ml", "resnet50", "train", 32, 1)),
                        60, Waiter("new", clock(), {"T4": (100.0, 1.0)}), clock(), 5.0)
    assert set(redis_client.zrange("st:waiting:order", 0, -1)) == {"old", "new"}
    oldest = store.snapshot({}, clock(), waiters=WaitersRead("", 2)).waiting
    assert [w.uid for w in oldest] == ["old", "new"]
    clock.now += 10  # "new" expired; no pod waits after it, but binds go on
    store.put_node("n", NodeGpus("Tesla-T4", "T4", 1, 15360, 1))
    store.reserve(JobRecord(uid="j", pod="j", namespace="ml", model="m", task="train", node="n",
                            gpu_index=0, reserved_mib=100.0, predicted_s=1.0, state="reserved",
                            reserved_at=clock()), [(0, 1e9, 100)], clock(), 0)
    assert set(redis_client.zrange("st:waiting:order", 0, -1)) == {"old"}
    assert "new" not in redis_client.hkeys("st:waiting")



@pytest.mark.parametrize("short_first", [0.0, 4.0])
def test_with_short_first_a_long_job_leaves_the_slot_a_much_shorter_waiter_needs(
        client_with, store, clock, estimator, short_first) -> None:
    """EXTENDER_SHORT_FIRST=4: an inference request that found both slots of the only GPU
    taken waits; when a slot frees, a training predicted to run far longer is refused it
    (told why) and the request gets it (the default). Off, the training takes it."""
    node = make_node("one", "NVIDIA-GeForce-RTX-3090", memory_mib=24576, replicas=2)
    request = make_pod("request", model="resnet18", task="inference", requests=200)
    training = make_pod("training", model="resnet50", task="train", batch=32, epochs=4)
    short_s = estimator.estimate(Job("resnet18", "inference", 1, 200),
                                 gpus=["RTX-3090"])["RTX-3090"].predicted_s
    long_s = estimator.estimate(Job("resnet50", "train", 32, 4),
                                gpus=["RTX-3090"])["RTX-3090"].predicted_s
    assert long_s > 4 * short_s
    client = client_with(short_first=short_first)

    def filtered(pod: dict) -> dict:
        out = client.post("/filter", json=filter_args(pod, [node])).get_json()
        assert out["Error"] == ""
        return out

    fillers = [make_pod(f"fill-{i}", model="resnet50", task="train", batch=32, epochs=2)
               for i in range(2)]
    for pod in fillers:
        assert _passing(filtered(pod)) == {"one"}
        assert client.post("/bind", json=bind_args(pod, "one")).get_json() == {"Error": ""}
    assert _passing(filtered(request)) == set()  # both slots taken: it waits
    assert [w.uid for w in store.waiters(clock())] == [request["metadata"]["uid"]]
    store.release(fillers[0]["metadata"]["uid"])
    out = filtered(training)
    if not short_first:
        assert _passing(out) == {"one"}
        return
    assert _passing(out) == set()
    assert "held for a shorter waiting pod" in out["FailedNodes"]["one"]
    assert _passing(filtered(request)) == {"one"}


def test_a_long_job_waits_for_the_faster_gpu_that_frees_soon(client, store, clock) -> None:
    """resnet152 b8 x5 epochs: ~3900 s on the idle 3070, ~2200 s on the 3090 (exclusive
    here) once a ~36 s inference request leaves it: it waits, then takes the 3090."""
    fast = make_node("fast", "NVIDIA-GeForce-RTX-3090", memory_mib=24576, replicas=1)
    nodes = [fast, SMALL]
    request = make_pod("infer", model="resnet18", task="inference", requests=100)
    out = client.post("/filter", json=filter_args(request, nodes)).get_json()
    assert "fast" in _passing(out)
    assert client.post("/bind", json=bind_args(request, "fast")).get_json() == {"Error": ""}
    long = make_pod("long", model="resnet152", task="train", batch=8, epochs=5)
    out = client.post("/filter", json=filter_args(long, nodes)).get_json()
    assert _passing(out) == set()
    assert out["FailedNodes"]["small"].startswith("waiting for a faster GPU: done in ~")
    assert "GPU 0 (RTX-3090) of fast once it frees" in out["FailedNodes"]["small"]
    assert [w.uid for w in store.waiters(clock())] == [long["metadata"]["uid"]]
    store.release(request["metadata"]["uid"])  # the request is done: the 3090 is free
    out = client.post("/filter", json=filter_args(long, nodes)).get_json()
    assert _passing(out) == {"fast", "small"}
    prio = client.post("/prioritize", json=filter_args(long, nodes)).get_json()
    scores = {p["Host"]: p["Score"] for p in prio}
    assert scores["fast"] > scores["small"]


def test_waiting_for_a_faster_gpu_can_be_switched_off(client_with) -> None:
    client = client_with(wait_for_faster=0)
    fast = make_node("fast", "NVIDIA-GeForce-RTX-3090", memory_mib=24576, replicas=1)
    request = make_pod("infer", model="resnet18", task="inference", requests=100)
    client.post("/filter", json=filter_args(request, [fast, SMALL]))
    assert client.post("/bind", json=bind_args(request, "fast")).get_json() == {"Error": ""}
    long = make_pod("long", model="resnet152", task="train", batch=8, epochs=5)
    out = client.post("/filter", json=filter_args(long, [fast, SMALL])).get_json()
    assert _passing(out) == {"small"}
