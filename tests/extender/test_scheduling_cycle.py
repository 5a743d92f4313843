"""Prioritize right after filter of the same pod scores on the queues that filter read
(kube-scheduler's scheduling cycle), with no Redis round trip; a placement by this
replica, another pod, or the end of the reuse window makes it read them again."""

from __future__ import annotations

from dataclasses import replace

import pytest

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
