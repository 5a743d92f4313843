"""Prioritize right after filter of the same pod scores on the queues that filter read
(kube-scheduler's scheduling cycle), with no Redis round trip; a placement by this
replica, another pod, or the end of the reuse window makes it read them again."""

from __future__ import annotations

from dataclasses import replace

import pytest

from extender.core import prioritizing
from extender.model import JobRecord, NodeGpus
from extender.service import Scheduler
from extender.web.ahead import PricedAhead
from extender.web.app import create_app
from tests.builders import bind_args, filter_args, make_node, make_pod

NODES = [make_node("big", "NVIDIA-GeForce-RTX-3090", memory_mib=24576, replicas=4),
         make_node("fast", "NVIDIA-GeForce-RTX-3090", memory_mib=24576, replicas=4)]


@pytest.fixture
def replicas(settings, binder, clock, estimator, redis_client):
    """Two extender replicas on one Redis: `make(settings)` builds one."""
    def make(config=settings):
        return create_app(config, binder=binder, clock=clock, estimator=estimator).test_client()
    return make


def _filter(client, pod: dict) -> None:
    assert client.post("/filter", json=filter_args(pod, NODES)).get_json()["Error"] == ""


def _scores(client, pod: dict) -> dict[str, int]:
    answer = client.post("/prioritize", json=filter_args(pod, NODES)).get_json()
    return {p["Host"]: p["Score"] for p in answer}


def _busy_big(client) -> None:
    """Another pod placed on `big`: what prioritize reads changes."""
    other = make_pod("other", model="vgg16", task="train", batch=32, epochs=3)
    _filter(client, other)
    assert client.post("/bind", json=bind_args(other, "big")).get_json() == {"Error": ""}


def _cycle(client, name: str = "pod") -> tuple[dict, dict[str, int]]:
    """A pod filtered then prioritized by `client`: the pod and its scores."""
    pod = make_pod(name, model="resnet50", task="train", batch=32, epochs=1)
    _filter(client, pod)
    return pod, _scores(client, pod)


def test_prioritize_in_the_cycle_scores_on_what_filter_read(replicas) -> None:
    here, there = replicas(), replicas()
    pod, idle = _cycle(here)
    _busy_big(there)
    assert _scores(here, pod) == idle  # the cycle's read: no round trip
    fresh = _scores(replicas(), pod)  # a replica that never filtered it reads Redis
    assert fresh != idle and fresh["big"] < idle["big"]
    _filter(here, pod)  # the next cycle reads again
    assert _scores(here, pod) == fresh


def test_another_pod_or_a_placement_here_ends_the_cycle(replicas) -> None:
    here, there = replicas(), replicas()
    pod, idle = _cycle(here)
    _busy_big(there)
    _filter(here, make_pod("another", model="resnet18", task="inference", requests=10))
    assert _scores(here, pod) != idle  # not the pod filtered last: read again

    here = replicas()
    pod, before = _cycle(here, "pod2")
    _busy_big(here)  # this replica places a pod: its own cycle ends
    assert _scores(here, pod) != before


def test_no_reuse_when_the_window_is_zero(replicas, settings) -> None:
    here, there = replicas(replace(settings, prioritize_reuse_s=0.0)), replicas()
    pod, idle = _cycle(here)
    _busy_big(there)
    assert _scores(here, pod) != idle


RTX_3090 = NodeGpus("NVIDIA-GeForce-RTX-3090", "RTX-3090", 1, 24576, share_slots=4)

# In names mode the record bind reads is the pod's demand alone: filter writes it in the
# snapshot's round trip, so a pod's whole cycle is one round trip (it was two).

def _round_trips(redis_client, cycle) -> int:
    """Requests Redis read while `cycle` ran (its own counter; the INFO calls excluded)."""
    before = int(redis_client.info("stats")["total_reads_processed"])
    cycle()
    return int(redis_client.info("stats")["total_reads_processed"]) - before - 1


@pytest.mark.parametrize("node_count", [2, 40])  # node by node, and over arrays
def test_a_names_mode_cycle_is_one_round_trip_and_bind_reads_its_record(
        client, store, redis_client, node_count) -> None:
    nodes = [make_node(f"n{i}", "NVIDIA-GeForce-RTX-3090", memory_mib=24576, replicas=4)
             for i in range(node_count)]
    for name in (n["metadata"]["name"] for n in nodes):
        store.put_node(name, RTX_3090)

    def cycle(pod: dict) -> None:  # filter's answer closed, as a server does once it is sent
        with client.post("/filter", json=filter_args(pod, nodes, names_only=True)) as answer:
            out = answer.get_json()
        assert out["Error"] == "" and len(out["NodeNames"]) == node_count
        assert client.post("/prioritize",
                           json=filter_args(pod, nodes, names_only=True)).status_code == 200

    cycle(make_pod("warm", model="resnet50", task="train", batch=32, epochs=1))
    pod = make_pod("pod", model="resnet50", task="train", batch=32, epochs=1)
    assert _round_trips(redis_client, lambda: cycle(pod)) == 1
    assert 0 < redis_client.ttl(f"st:demand:{pod['metadata']['uid']}") <= 900
    assert client.post("/bind", json=bind_args(pod, "n1")).get_json() == {"Error": ""}
    redis_client.script_flush()  # a restarted Redis: the script is loaded again
    cycle(make_pod("after", model="resnet50", task="train", batch=32, epochs=1))


def test_a_pod_refused_after_the_read_keeps_no_record(client, store, redis_client) -> None:
    store.put_node("small", RTX_3090)
    pod = make_pod("huge", model="resnet50", task="train", batch=32, epochs=1)
    filter_args_ok = filter_args(pod, [make_node("small")], names_only=True)
    assert client.post("/filter", json=filter_args_ok).get_json()["NodeNames"] == ["small"]
    assert redis_client.exists(f"st:demand:{pod['metadata']['uid']}")
    # The same pod, now too large for every GPU (read after the record was written).
    too_big = make_pod("huge", uid=pod["metadata"]["uid"], model="resnet50", task="train",
                       batch=4096, epochs=1)
    out = client.post("/filter", json=filter_args(too_big, [make_node("small")],
                                                  names_only=True)).get_json()
    assert out["NodeNames"] == [] and "small" in out["FailedAndUnresolvableNodes"]
    assert not redis_client.exists(f"st:demand:{pod['metadata']['uid']}")


def _busy_cluster(store, count: int) -> list[dict]:
    """`count` nodes of two kinds (so a large job fails on some), GPUs of some busy (so
    prices differ), as the node watcher and earlier placements left them."""
    kinds = [(RTX_3090, "NVIDIA-GeForce-RTX-3090"),
             (NodeGpus("Tesla-T4", "T4", 1, 15360, share_slots=2), "Tesla-T4")]
    nodes = []
    for i in range(count):
        layout, product = kinds[i % 3 == 2]
        nodes.append(make_node(f"n{i}", product))
        store.put_node(f"n{i}", layout)
    for i in range(0, count, 4):
        record = JobRecord(uid=f"busy{i}", pod=f"busy{i}", namespace="ml", model="vgg16",
                           task="train", node=f"n{i}", gpu_index=0,
                           reserved_mib=4000.0 + 500 * i, predicted_s=60.0 * (i + 1),
                           state="reserved", reserved_at=0.0)
        store.reserve(record, [(0, 1e9, 100)], 0.0, 0.0)
    return nodes


@pytest.mark.parametrize("node_count", [12, 40])  # node by node, and over arrays
def test_the_nodes_that_passed_are_priced_on_filters_work_as_a_fresh_read_prices_them(
        replicas, store, node_count) -> None:
    """Prioritize of the nodes filter passed (or of a part of filter's nodes, in its
    order: ties go to the first in filter's order) scores each as a replica that reads
    them afresh does; a pod that is not the one filtered (same UID, another job) is read
    again."""
    nodes = _busy_cluster(store, node_count)
    here = replicas()
    pod = make_pod("pod", model="resnet50", task="train", batch=64, epochs=1)
    out = here.post("/filter", json=filter_args(pod, nodes, names_only=True)).get_json()
    passing = out["NodeNames"]
    assert 0 < len(passing) < node_count and out["FailedNodes"]

    def scores(client, names: list[str], which: dict = pod) -> list[dict]:
        args = filter_args(which, [n for n in nodes if n["metadata"]["name"] in names],
                           names_only=True)
        args["NodeNames"] = names
        return client.post("/prioritize", json=args).get_json()

    reused = scores(here, passing)
    assert len({p["Score"] for p in reused}) > 1  # prices that differ, not all alike
    assert reused == scores(replicas(), passing)
    part = passing[::2]
    assert scores(here, part) == scores(replicas(), part)
    other = make_pod("pod", uid=pod["metadata"]["uid"], model="vgg16", task="train",
                     batch=16, epochs=1)
    assert scores(here, passing, other) == scores(replicas(), passing, other) != reused


@pytest.mark.parametrize("names_only", [True, False])
@pytest.mark.parametrize("node_count", [12, 40])  # node by node, and over arrays
def test_the_nodes_that_passed_are_priced_once_filters_answer_is_sent(
        replicas, store, monkeypatch, node_count, names_only) -> None:
    """Once filter's answer is sent (its response closed, as a server does), the nodes that
    passed are priced: prioritize of that list answers with those scores, as a replica
    that reads them afresh scores them, and prices nothing again; another list or
    another job is priced as before."""
    nodes = _busy_cluster(store, node_count)
    priced: list[list[str]] = []
    real = prioritizing.decide_scores
    monkeypatch.setattr(prioritizing, "decide_scores",
                        lambda job, names, settings, **kw: priced.append(list(names))
                        or real(job, names, settings, **kw))
    here = replicas()
    pod = make_pod("pod", model="resnet50", task="train", batch=64, epochs=1)
    with here.post("/filter", json=filter_args(pod, nodes, names_only=names_only)) as answer:
        out = answer.get_json()
        assert priced == []  # nothing before the answer is sent
    passing = out["NodeNames"] if names_only else [n["metadata"]["name"]
                                                   for n in out["Nodes"]["items"]]
    assert 0 < len(passing) < node_count and priced == [passing]

    def scores(client, names: list[str], which: dict = pod) -> list[dict]:
        args = filter_args(which, [n for n in nodes if n["metadata"]["name"] in names],
                           names_only=names_only)
        if names_only:
            args["NodeNames"] = names
        return client.post("/prioritize", json=args).get_json()

    reused = scores(here, passing)
    assert priced == [passing] and len({p["Score"] for p in reused}) > 1
    assert [p["Host"] for p in reused] == passing and reused == scores(replicas(), passing)
    part = passing[::2]
    assert scores(here, part) == scores(replicas(), part)
    other = make_pod("pod", uid=pod["metadata"]["uid"], model="vgg16", task="train",
                     batch=16, epochs=1)
    del priced[:]
    assert scores(here, passing, other) == scores(replicas(), passing, other)
    assert priced == [passing, passing]  # here priced it again, as the fresh replica did


@pytest.mark.parametrize("off", [{"price_ahead": False}, {"prioritize_reuse_s": 0.0}])
def test_nothing_is_priced_after_the_answer_when_it_is_off_or_never_reused(
        replicas, settings, store, monkeypatch, off) -> None:
    nodes = _busy_cluster(store, 12)
    priced: list[list[str]] = []
    real = prioritizing.decide_scores
    monkeypatch.setattr(prioritizing, "decide_scores",
                        lambda job, names, settings, **kw: priced.append(list(names))
                        or real(job, names, settings, **kw))
    here = replicas(replace(settings, **off))
    pod = make_pod("pod", model="resnet50", task="train", batch=64, epochs=1)
    with here.post("/filter", json=filter_args(pod, nodes, names_only=True)) as answer:
        passing = answer.get_json()["NodeNames"]
    assert len(passing) > 1 and priced == []
    args = filter_args(pod, nodes, names_only=True)
    args["NodeNames"] = passing
    assert here.post("/prioritize", json=args).status_code == 200 and priced == [passing]


def test_pricing_that_fails_after_the_answer_loses_nothing(replicas, store, monkeypatch,
                                                           capsys) -> None:
    nodes = _busy_cluster(store, 12)
    here = replicas()

    def broken(self, pod, passed):
        raise RuntimeError("broken pricing")

    monkeypatch.setattr(Scheduler, "price_ahead", broken)
    pod = make_pod("pod", model="resnet50", task="train", batch=64, epochs=1)
    with here.post("/filter", json=filter_args(pod, nodes, names_only=True)) as answer:
        passing = answer.get_json()["NodeNames"]
    assert "pricing ahead failed" in capsys.readouterr().err
    args = filter_args(pod, nodes, names_only=True)
    args["NodeNames"] = passing
    assert (here.post("/prioritize", json=args).get_json()
            == replicas().post("/prioritize", json=args).get_json())


def test_when_every_node_passes_prioritize_of_the_answers_list_checks_no_name_again(
        client, store, monkeypatch) -> None:
    """Filter answers every node in the request's order, which is not the order the worker
    first saw the set in (a new one each pod): prioritize of that list checks no name
    again and scores every node."""
    from extender.wire import objects

    nodes = [make_node(f"n{i}", "NVIDIA-GeForce-RTX-3090") for i in range(40)]
    for node in nodes:
        store.put_node(node["metadata"]["name"], RTX_3090)
    checked: list[list[str]] = []
    real = objects.require_names
    monkeypatch.setattr(objects, "require_names",
                        lambda values, what: checked.append(list(values)) or real(values, what))
    first = make_pod("first", model="resnet50", task="train", batch=32, epochs=1)
    client.post("/filter", json=filter_args(first, nodes, names_only=True)).close()
    pod = make_pod("pod", model="resnet50", task="train", batch=32, epochs=1)
    args = filter_args(pod, nodes[::-1], names_only=True)  # the set in another order
    with client.post("/filter", json=args) as answer:
        passed = answer.get_json()["NodeNames"]
    assert passed == args["NodeNames"] and len(checked) == 1  # the same names: known
    scores = client.post("/prioritize", json={**args, "NodeNames": passed}).get_json()
    assert {s["Host"] for s in scores} == set(passed) and len(checked) == 1


def test_the_bytes_kept_answer_only_the_very_scores_priced() -> None:
    ahead = PricedAhead()
    scores = {"a": 1.0, "b": 0.5}
    ahead.keep(scores, b'[{"Host":"a","Score":10},{"Host":"b","Score":5}]')
    assert ahead.body_for(scores) == b'[{"Host":"a","Score":10},{"Host":"b","Score":5}]'
    assert ahead.body_for(dict(scores)) is None  # equal scores priced by another call
