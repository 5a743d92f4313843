"""Adoption trusts only what the extender wrote (real Redis, injected clock).

A bound pod is adopted only if our scheduler placed it; the reservation on it
is taken as written only when the extender's signature verifies for that pod
and node and the values fit the node; anything else is estimated again. No
adoption makes room for others, and one that does not fit is reported.
"""

from __future__ import annotations

import math
import uuid

import pytest
from prometheus_client import REGISTRY

from estimator.predict import Job
from extender.cluster.monitor import Monitor
from extender.errors import Conflict
from extender.core.signing import reservation_signature
from extender.model import GPU, PREDICTED_S, RESERVED_MIB, SIGNATURE, JobRecord, NodeGpus
from extender.settings import Settings
from extender.wire.builders import pod_object
from tests.builders import bind_args, filter_args, make_node, make_pod

NODE = "gpu-a"
LAYOUT = NodeGpus("NVIDIA-GeForce-RTX-3090", "RTX-3090", 2, 24576, share_slots=4)
KEY = b"test-signing-key-0123456789abcdef"
OURS = "schedtune-scheduler"


def bound(name: str = "job", scheduler: str | None = OURS, node: str = NODE,
          key: bytes | None = None, gpu: str | None = None, mib: str | None = None,
          seconds: str | None = None, model: str = "resnet50") -> dict:
    """A pod bound to `node` carrying the given reservation, signed with `key` if given."""
    uid = str(uuid.uuid4())
    notes = {k: v for k, v in ((GPU, gpu), (RESERVED_MIB, mib), (PREDICTED_S, seconds))
             if v is not None}
    if key is not None:
        notes[SIGNATURE] = reservation_signature(key, uid, node, gpu or "", mib or "",
                                                 seconds or "")
    pod = pod_object(name, "ml", uid, model=model, batch=32, epochs=1, annotations=notes,
                     scheduler_name=scheduler, created_at="2026-11-21T04:38:00Z",
                     phase="Pending")
    pod["spec"]["nodeName"] = node
    return pod


def _uid(pod: dict) -> str:
    return pod["metadata"]["uid"]


def _adoptions(status: str) -> float:
    return REGISTRY.get_sample_value("schedtune_reservations_adopted_total",
                                     {"status": status}) or 0.0


@pytest.fixture
def estimate(estimator):
    """resnet50 b32, one epoch, on the node's RTX 3090: what an estimated adoption records."""
    need = estimator.estimate(Job("resnet50", "train", 32, 1), gpus=["RTX-3090"])["RTX-3090"]
    return round(need.padded_mib, 1), round(need.predicted_s, 3)


@pytest.fixture
def settings(redis_url) -> Settings:
    return Settings(redis_url=redis_url, bind_mode="record", node_watch=False,
                    log_level="WARNING", signing_key=KEY)


@pytest.fixture
def events() -> list[tuple[str, str, str]]:
    return []


def _monitor(store, estimator, clock, events, key: bytes | None) -> Monitor:
    store.put_node(NODE, LAYOUT)
    return Monitor(store, estimator, clock=clock,
                   settings=Settings(signing_key=key, scheduler_name=OURS),
                   warn=lambda facts, reason, message: events.append((facts.name, reason,
                                                                      message)))


@pytest.fixture(params=[None, KEY], ids=["no-key", "key"])
def monitor(request, store, estimator, clock, events) -> Monitor:
    return _monitor(store, estimator, clock, events, request.param)


@pytest.fixture
def keyed(store, estimator, clock, events) -> Monitor:
    return _monitor(store, estimator, clock, events, KEY)


@pytest.mark.parametrize("scheduler", [None, "default-scheduler", "volcano", OURS.upper()])
def test_pods_of_another_scheduler_are_never_adopted(monitor, store, scheduler) -> None:
    pod = bound(scheduler=scheduler, key=KEY, gpu="0", mib="4000", seconds="60.0")
    monitor.reconcile([pod])
    monitor.on_event("MODIFIED", pod)
    assert store.jobs() == []


def test_a_reservation_of_another_schedulers_pod_is_still_released(monitor, store) -> None:
    pod = bound(scheduler="default-scheduler")
    store.reserve(JobRecord(_uid(pod), "job", "ml", "resnet50", "train", NODE, -1, 4000, 60,
                            "reserved", 0), [(0, 24576.0, 4)], now=100, ttl_s=0)
    monitor.on_event("DELETED", pod)
    assert store.jobs() == []


def test_an_allocation_seen_bound_there_is_confirmed_not_adopted(monitor, store, clock) -> None:
    """Volcano's allocate reserves without confirming; the pod bound there confirms it."""
    pod, late = bound(scheduler="volcano"), bound("late", scheduler="volcano")
    for uid, ttl in ((_uid(pod), 120), (_uid(late), 120)):
        store.reserve(JobRecord(uid, "job", "ml", "resnet50", "train", NODE, -1, 4000, 60,
                                "reserved", 0), [(1, 24576.0, 4)], now=clock(), ttl_s=ttl,
                      source="volcano")
    monitor.on_event("MODIFIED", pod)
    clock.now += 121  # seen bound only after its allocation expired: not ours to adopt
    monitor.on_event("MODIFIED", late)
    live = store.snapshot({NODE: None}, clock()).nodes[NODE].gpu_states[1].jobs
    assert [(j.uid, j.expires_at) for j in live] == [(_uid(pod), 0)]


@pytest.mark.parametrize("gpu, mib, seconds", [
    ("0", "1", "1.0"),  # room for an over-commit
    ("1", "1e300", "60.0"),  # blocks a GPU
    ("999", "4000", "60.0"),  # a GPU nobody counts
    ("0", "nan", "60.0"), ("0", "inf", "60.0"), ("0", "-4000", "60.0"),
    ("0", "4000", "nan"), ("0", "4000", "inf"), ("0", "4000", "-1"), ("0", "4000", "1e999"),
    ("99999999999999999999", "4000", "60.0"), ("-1", "4000", "60.0"), ("0x1", "4000", "60.0"),
    ("0", "4000" + "0" * 5000, "60.0"), ("", "", ""),
])
def test_forged_values_are_estimated_again(monitor, store, estimate, gpu, mib, seconds) -> None:
    pod = bound(gpu=gpu, mib=mib, seconds=seconds)  # written by the user: unsigned
    monitor.reconcile([pod])
    job = store.job(_uid(pod))
    assert (job.reserved_mib, job.predicted_s) == estimate
    assert job.gpu_index in (0, 1) and job.node == NODE and job.gpu_type == "RTX-3090"


@pytest.mark.parametrize("signing", ["another key", "other values", "another pod", "another node",
                                     "no signature", "junk"])
def test_badly_signed_values_are_estimated_again(keyed, store, estimate, signing) -> None:
    pod = bound(gpu="1", mib="1", seconds="1.0",
                key=b"not-the-extenders-key-0123456789" if signing == "another key" else KEY)
    notes = pod["metadata"]["annotations"]
    if signing == "other values":  # signed for 9000 MiB, then edited down
        notes[SIGNATURE] = reservation_signature(KEY, _uid(pod), NODE, "1", "9000", "1.0")
    elif signing == "another pod":
        notes[SIGNATURE] = reservation_signature(KEY, str(uuid.uuid4()), NODE, "1", "1", "1.0")
    elif signing == "another node":
        notes[SIGNATURE] = reservation_signature(KEY, _uid(pod), "gpu-b", "1", "1", "1.0")
    elif signing == "no signature":
        del notes[SIGNATURE]
    elif signing == "junk":
        notes[SIGNATURE] = "z" * 100_000
    keyed.reconcile([pod])
    assert (store.job(_uid(pod)).reserved_mib, store.job(_uid(pod)).predicted_s) == estimate


@pytest.mark.parametrize("gpu, mib, seconds", [
    ("2", "4000", "60.0"), ("0", "24577", "60.0"), ("0", "nan", "60.0"), ("0", "inf", "60.0"),
    ("0", "0", "60.0"), ("0", "4000", "nan"), ("0", "4000", "-inf"), ("0", "4000", "-5"),
    ("99999999999999999999", "4000", "60.0"), ("０", "4000", "60.0"),
])
def test_signed_values_out_of_range_are_estimated_again(keyed, store, estimate, gpu, mib,
                                                        seconds) -> None:
    """Signed, yet impossible on this node (its layout changed, or the key leaked)."""
    pod = bound(key=KEY, gpu=gpu, mib=mib, seconds=seconds)
    keyed.reconcile([pod])
    assert (store.job(_uid(pod)).reserved_mib, store.job(_uid(pod)).predicted_s) == estimate


def test_values_signed_by_the_extenders_bind_are_adopted_as_written(
        client, binder, store, redis_client, clock, estimator, settings) -> None:
    node = make_node(NODE, count=2, replicas=4)
    pod = make_pod("job", "ml", model="vgg16", batch=16)
    assert client.post("/filter", json=filter_args(pod, [node])).get_json()["Error"] == ""
    assert client.post("/bind", json=bind_args(pod, NODE)).get_json() == {"Error": ""}
    (_, _, _, node_name, written), = binder.calls
    assert SIGNATURE in written
    pod["metadata"]["annotations"].update(written)  # what the API server now holds
    pod["spec"].update(nodeName=node_name, schedulerName=settings.scheduler_name)
    redis_client.flushdb()  # Redis lost
    store.put_node(NODE, LAYOUT)
    Monitor(store, estimator, clock=clock, settings=settings).reconcile([pod])
    job = store.job(_uid(pod))
    assert (job.gpu_index, job.reserved_mib, job.predicted_s) == (
        int(written[GPU]), float(written[RESERVED_MIB]), float(written[PREDICTED_S]))


def test_no_adoption_makes_room_for_an_overcommit(store, monitor, estimate) -> None:
    """Three pods claiming 1 MiB each: each is counted at its estimate, so the GPU fills."""
    pods = [bound(f"tiny-{i}", gpu="0", mib="1", seconds="1.0") for i in range(4)]
    monitor.reconcile(pods)
    gpus = store.snapshot({NODE: None}, 0).nodes[NODE].gpu_states
    assert sum(g.reserved_mib for g in gpus) == pytest.approx(4 * estimate[0])
    assert [len(g.jobs) for g in gpus] == [2, 2]  # spread over the GPUs with room


def test_an_adoption_that_does_not_fit_is_recorded_reported_and_counted(keyed, store,
                                                                        events) -> None:
    for i in range(2):
        store.reserve(JobRecord(f"filler-{i}", f"filler-{i}", "ml", "vgg16", "train", NODE, -1,
                                10_000, 600, "reserved", 0), [(0, 24576.0, 4)], 100, ttl_s=0)
    before = _adoptions("overcommit")
    overcommits = REGISTRY.get_sample_value("schedtune_adoption_overcommit_total") or 0.0
    pod = bound("late", key=KEY, gpu="0", mib="8000", seconds="60.0")  # honest, but too big
    keyed.on_event("MODIFIED", pod)
    job = store.job(_uid(pod))
    assert (job.gpu_index, job.reserved_mib) == (0, 8000)  # the pod is there: counted in full
    assert _adoptions("overcommit") == before + 1
    assert REGISTRY.get_sample_value("schedtune_adoption_overcommit_total") == overcommits + 1
    [(name, reason, message)] = events
    assert (name, reason) == ("late", "SchedTuneOvercommit")
    assert "GPU 0" in message and "20000 of 24576 MiB in 2 job(s)" in message
    gpu0 = store.snapshot({NODE: None}, 0).nodes[NODE].gpu_states[0]
    assert gpu0.free_mib < 0  # shows full: nothing more goes there until jobs leave
    with pytest.raises(Conflict):
        store.reserve(JobRecord("next", "next", "ml", "resnet18", "train", NODE, -1, 100, 60,
                                "reserved", 0), [(0, 24576.0, 4)], 100, ttl_s=0)
    keyed.on_event("MODIFIED", pod)  # adopted once: no second event
    assert len(events) == 1


def test_an_adoption_beyond_the_collocation_limit_is_an_overcommit(store, estimator, clock,
                                                                   events) -> None:
    store.put_node(NODE, NodeGpus("NVIDIA-GeForce-RTX-3090", "RTX-3090", 1, 24576, 1))
    monitor = Monitor(store, estimator, clock=clock, settings=Settings(signing_key=KEY),
                      warn=lambda facts, reason, message: events.append((facts.name, reason)))
    first, second = (bound(f"job-{i}", key=KEY, gpu="0", mib="1000", seconds="9.0")
                     for i in range(2))
    monitor.reconcile([first, second])
    assert len(store.jobs()) == 2 and events == [("job-1", "SchedTuneOvercommit")]


def test_estimated_values_are_capped_at_the_gpu(store, estimator, clock) -> None:
    """A job larger than the card cannot hold more than all of it."""
    store.put_node(NODE, NodeGpus("Tesla-T4", "T4", 1, 4096, 4))
    monitor = Monitor(store, estimator, clock=clock)
    pod = bound(model="vgg16")
    monitor.reconcile([pod])
    job = store.job(_uid(pod))
    assert job.reserved_mib == 4096 and math.isfinite(job.predicted_s)


def test_no_layout_no_adoption_until_the_node_is_known(store, estimator, clock) -> None:
    monitor = Monitor(store, estimator, clock=clock)
    pod = bound(node="unknown-node")
    monitor.reconcile([pod])
    assert store.jobs() == []
    store.put_node("unknown-node", LAYOUT)
    monitor.reconcile([pod])
    assert store.job(_uid(pod)).node == "unknown-node"
