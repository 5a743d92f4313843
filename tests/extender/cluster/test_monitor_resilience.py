"""Bad values never fail a request or a reconcile (real Redis, written with the real client).

Whatever a job hash holds (NaN, infinities, text, a 20-digit GPU index), filter
and prioritize answer 200 and the job keeps counting (a broken reservation fills
its GPU: it never makes room); reconcile completes and releases it once its pod
is gone. One pod that cannot be applied never stops the others.
"""

from __future__ import annotations

import uuid

import pytest
from prometheus_client import REGISTRY

from extender.cluster.monitor import Monitor
from extender.errors import StoreUnavailable
from extender.model import JobRecord, NodeGpus
from extender.settings import Settings
from extender.state.store import RedisStore
from extender.wire.builders import pod_object
from tests.builders import filter_args, make_node, make_pod

NODE = "gpu-a"
LAYOUT = NodeGpus("NVIDIA-GeForce-RTX-3090", "RTX-3090", 1, 24576, share_slots=4)
BAD = ["nan", "NaN", "inf", "-inf", "1e999", "-5", "", "garbage", "userdata: (nil)",
       "0x10", "1" * 5000]


def _reserve(store: RedisStore, uid: str, mib: float = 4000) -> None:
    store.reserve(JobRecord(uid, f"pod-{uid}", "ml", "resnet50", "train", NODE, -1, mib, 600,
                            "reserved", 0), [(0, 24576.0, 4)], now=100, ttl_s=0)


def _requests_answer(client, pod: dict) -> dict:
    body = filter_args(pod, [make_node(NODE, count=1, replicas=4)])
    prio = client.post("/prioritize", json=body)
    assert prio.status_code == 200 and all(isinstance(p["Score"], int) for p in prio.get_json())
    out = client.post("/filter", json=body)
    assert out.status_code == 200 and out.get_json()["Error"] == ""
    return out.get_json()


@pytest.mark.parametrize("field", ["reserved_mib", "predicted_s", "started_at", "expires_at",
                                   "reserved_at", "gpu_index", "batch", "units"])
@pytest.mark.parametrize("value", BAD)
def test_bad_values_in_a_job_hash_never_fail_requests_or_reconcile(
        client, store, redis_client, clock, estimator, field, value) -> None:
    store.put_node(NODE, LAYOUT)
    _reserve(store, "broken")
    redis_client.hset("st:job:broken", field, value)
    out = _requests_answer(client, make_pod("next", model="resnet18", batch=8))
    if field == "reserved_mib":  # unreadable: it fills the GPU, so nothing else fits
        assert NODE in out["FailedNodes"]
        assert store.snapshot({NODE: None}, clock()).nodes[NODE].gpu_states[0].free_mib == 0
    [job] = store.jobs()  # readable for bookkeeping, whatever the hash holds
    assert job.uid == "broken" and all(
        x == x and abs(x) != float("inf")  # finite
        for x in (job.reserved_mib, job.predicted_s, job.started_at, job.expires_at))
    clock.now += 3600  # the pod is gone: the next listing releases it
    Monitor(store, estimator, clock=clock).reconcile([])
    assert store.jobs() == []
    _requests_answer(client, make_pod("after", model="resnet18", batch=8))


@pytest.mark.parametrize("value", ["0", "1e300", "24577"])
def test_an_impossible_reservation_fills_its_gpu(client, store, redis_client, value) -> None:
    """Readable, but no reservation the store makes: it never makes room, nor goes negative."""
    store.put_node(NODE, LAYOUT)
    _reserve(store, "broken")
    redis_client.hset("st:job:broken", "reserved_mib", value)
    assert NODE in _requests_answer(client, make_pod("next", model="resnet18", batch=8))[
        "FailedNodes"]
    assert store.snapshot({NODE: None}, 0).nodes[NODE].gpu_states[0].free_mib == 0


def test_bad_values_written_after_a_worker_synced_never_fail_it(client, store, redis_client,
                                                                 clock) -> None:
    store.put_node(NODE, LAYOUT)
    _reserve(store, "ok")
    _requests_answer(client, make_pod("first", model="resnet18", batch=8))
    _reserve(store, "broken")  # the queue changes again: every worker re-reads it
    redis_client.hset("st:job:broken", mapping={"reserved_mib": "nan", "predicted_s": "inf"})
    redis_client.zadd("st:changed", {"st:gpu:no-index": redis_client.incr("st:rev")})
    out = _requests_answer(client, make_pod("next", model="resnet18", batch=8))
    assert NODE in out["FailedNodes"]


def test_a_deleted_pod_with_a_broken_record_is_released(store, redis_client, clock,
                                                        estimator) -> None:
    store.put_node(NODE, LAYOUT)
    uid = str(uuid.uuid4())
    _reserve(store, uid)
    redis_client.hset(f"st:job:{uid}", mapping={"started_at": "nan", "predicted_s": "x",
                                                "gpu_index": "9" * 20})
    pod = pod_object("job", "ml", uid, model="resnet50", scheduler_name="schedtune-scheduler")
    pod["spec"]["nodeName"] = NODE
    Monitor(store, estimator, clock=clock).on_event("DELETED", pod)
    assert store.jobs() == [] and store.observations() == []  # no start time: no observation


def test_the_store_refuses_to_adopt_impossible_values(store) -> None:
    record = JobRecord("u", "p", "ml", "resnet50", "train", NODE, 0, float("nan"), 60, "bound",
                       100)
    for mib in (float("nan"), float("inf"), 0.0, -1.0, 24577.0):
        assert store.adopt(JobRecord(**{**record.__dict__, "reserved_mib": mib}), 24576.0, 4,
                           100) == ("invalid", "")
    assert store.jobs() == [] and store.queues() == {}


def _pod(name: str, uid: str | None = None) -> dict:
    pod = pod_object(name, "ml", uid or str(uuid.uuid4()), model="resnet50", batch=32,
                     epochs=1, scheduler_name="schedtune-scheduler",
                     created_at="2026-11-21T04:38:00Z", phase="Running")
    pod["spec"]["nodeName"] = NODE
    return pod


def test_one_bad_pod_never_blocks_reconcile_of_the_others(store, clock, estimator) -> None:
    store.put_node(NODE, LAYOUT)
    clock.now = 1_795_240_000.0
    _reserve(store, "vanished")
    bad = _pod("bad")
    bad["status"]["containerStatuses"] = [{"name": "main", "state": {"terminated": "junk"}}]
    good = [_pod("good-0"), _pod("good-1")]
    errors = REGISTRY.get_sample_value("schedtune_monitor_pod_errors_total") or 0.0
    Monitor(store, estimator, clock=clock).reconcile([good[0], bad, good[1]])
    assert {j.pod for j in store.jobs()} == {"good-0", "good-1"}  # vanished one released
    assert REGISTRY.get_sample_value("schedtune_monitor_pod_errors_total") == errors + 1


def test_a_listed_pod_that_fails_keeps_its_reservation(store, clock, estimator) -> None:
    """It exists: its reservation is not released as vanished because its event failed."""
    store.put_node(NODE, LAYOUT)
    clock.now = 1_795_240_000.0
    bad = _pod("bad", uid="held")
    _reserve(store, "held")
    bad["status"]["containerStatuses"] = [{"name": "main", "state": {"terminated": "junk"}}]
    Monitor(store, estimator, clock=clock).reconcile([bad])
    assert [j.uid for j in store.jobs()] == ["held"]


def test_an_unreachable_redis_stops_the_listing(tmp_path, clock) -> None:
    """Not a pod's fault: the watch re-lists once Redis answers again."""
    store = RedisStore.from_url(f"unix://{tmp_path / 'none.sock'}", timeout_s=0.05)
    monitor = Monitor(store, clock=clock, settings=Settings())
    with pytest.raises(StoreUnavailable):
        monitor.reconcile([_pod("job")])


def test_a_key_of_the_wrong_type_is_that_pods_problem_not_an_outage(store, redis_client,
                                                                     clock, estimator) -> None:
    """Redis refuses the one pod's key (written by hand as a string): that pod is skipped
    and counted, the others are applied and vanished ones released."""
    store.put_node(NODE, LAYOUT)
    clock.now = 1_795_240_000.0
    _reserve(store, "done")
    _reserve(store, "vanished")
    redis_client.set("st:job:bad", "written by hand")
    finished = _pod("done", uid="done")
    finished["status"]["phase"] = "Succeeded"
    errors = REGISTRY.get_sample_value("schedtune_monitor_pod_errors_total") or 0.0
    Monitor(store, estimator, clock=clock).reconcile([_pod("bad", uid="bad"), finished])
    assert store.jobs() == []  # done released as finished, vanished as vanished
    assert REGISTRY.get_sample_value("schedtune_monitor_pod_errors_total") == errors + 1
