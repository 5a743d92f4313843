"""Pods no model describes (declared memory) and pods on several GPUs, through the HTTP
verbs with a real Redis; released by the monitor as the API server reports the pod."""

from __future__ import annotations

import copy
from datetime import UTC, datetime

import pytest

from extender.cluster.monitor import Monitor
from extender.model import (
    EXPECTED_S, GPU, GPU_MEMORY, RESERVED_MIB, SIZING, JobRecord, NodeGpus,
)  # fmt: skip
from extender.settings import Settings
from tests.builders import bind_args, filter_args, make_node, make_pod, passed_nodes

OURS = "schedtune-scheduler"
EIGHT = make_node("eight", "NVIDIA-A100-SXM4-40GB", count=8, memory_mib=40960, replicas=4)
EIGHT_LAYOUT = NodeGpus("NVIDIA-A100-SXM4-40GB", "A100-40GB", 8, 40960, share_slots=4)
SMALL = make_node("small", "Tesla-T4", count=1, memory_mib=15360)


def _filter(client, pod: dict, nodes: list[dict]) -> dict:
    res = client.post("/filter", json=filter_args(pod, nodes))
    assert res.status_code == 200
    return res.get_json()


def _bind(client, binder, pod: dict, node: str) -> dict[str, str]:
    assert client.post("/bind", json=bind_args(pod, node)).get_json() == {"Error": ""}
    return binder.calls[-1][4]


def _bound(pod: dict, annotations: dict[str, str], phase: str) -> dict:
    pod = copy.deepcopy(pod)
    pod["metadata"]["annotations"].update(annotations)
    pod["spec"].update(nodeName="eight", schedulerName=OURS)
    pod["status"] = {"phase": phase, "containerStatuses": [{"name": "main", "state": {
        "terminated": {"reason": "Completed", "exitCode": 0,
                       "startedAt": "2026-11-23T10:00:00Z",
                       "finishedAt": "2026-11-23T10:10:00Z"}}}]}
    return pod


def _declared(memory: int, **extra: str) -> dict:
    return make_pod(model=None, **{GPU_MEMORY: str(memory), **extra})


def test_a_declared_pod_is_reserved_exactly_what_it_declares(client, binder, store) -> None:
    pod = _declared(30000, **{EXPECTED_S: "900"})
    out = _filter(client, pod, [EIGHT, SMALL])
    assert passed_nodes(out) == ["eight"]
    assert "30000 MiB" in out["FailedAndUnresolvableNodes"]["small"]  # a T4 can never hold it
    annotations = _bind(client, binder, pod, "eight")
    assert annotations[RESERVED_MIB] == "30000" and "as declared" in annotations[SIZING]
    job = store.job(pod["metadata"]["uid"])
    assert (job.model, job.reserved_mib, job.predicted_s) == ("", 30000.0, 900.0)


def test_a_share_of_each_gpu_is_reserved_on_the_gpu_it_lands_on(client, binder, store) -> None:
    """``50%``: half of whichever GPU bind picks (HAMi's gpumem-percentage, KAI's
    gpu-fraction), rounded down to whole MiB as HAMi does; a 4-way time-sliced T4 holds two such pods, not a third."""
    shared_t4 = make_node("small", "Tesla-T4", count=1, memory_mib=15360, replicas=4)
    pod = make_pod(model=None, **{GPU_MEMORY: " 50% ", EXPECTED_S: "900"})
    assert passed_nodes(_filter(client, pod, [EIGHT, shared_t4])) == ["eight", "small"]
    annotations = _bind(client, binder, pod, "small")
    assert annotations[RESERVED_MIB] == "7680"  # half of 15360
    assert store.job(pod["metadata"]["uid"]).reserved_mib == 7680.0
    second = make_pod(model=None, name="second", **{GPU_MEMORY: "50%"})
    assert passed_nodes(_filter(client, second, [EIGHT, shared_t4])) == ["eight", "small"]
    _bind(client, binder, second, "eight")
    assert store.job(second["metadata"]["uid"]).reserved_mib == 20480.0  # half of 40960
    third = make_pod(model=None, name="third", **{GPU_MEMORY: "60%"})
    _bind(client, binder, make_pod(model=None, name="filler", **{GPU_MEMORY: "50%"}), "small")
    assert passed_nodes(_filter(client, third, [shared_t4])) == []


def test_a_share_is_taken_of_each_card_where_unknown_products_differ_in_size(
        client, binder, store) -> None:
    """Products the catalogue does not know share one GPU type: a 60 % pod fits a 16 GiB
    one (60 % of 16,384 MiB) beside a 32 GiB one, and is reserved 60 % of the card it
    lands on, not of the type's largest (which a 16 GiB card could never hold)."""
    small = make_node("p100", "Tesla-P100-PCIE-16GB", count=1, memory_mib=16384, replicas=4)
    large = make_node("g2", "Alibaba-G2", count=1, memory_mib=32768, replicas=4)
    pod = make_pod(model=None, **{GPU_MEMORY: "60%", EXPECTED_S: "900"})
    assert passed_nodes(_filter(client, pod, [small, large])) == ["p100", "g2"]
    scores = client.post("/prioritize", json=filter_args(pod, [small, large])).get_json()
    assert {entry["Host"] for entry in scores if entry["Score"] > 0} == {"p100", "g2"}
    annotations = _bind(client, binder, pod, "p100")
    assert annotations[RESERVED_MIB] == str(60 * 16384 // 100)
    # What is left of the small card (40 %) takes a 40 % pod, not a 41 % one.
    fits = make_pod(model=None, name="fits", **{GPU_MEMORY: "40%"})
    too_big = make_pod(model=None, name="too-big", **{GPU_MEMORY: "41%"})
    assert passed_nodes(_filter(client, fits, [small, large])) == ["p100", "g2"]
    assert passed_nodes(_filter(client, too_big, [small, large])) == ["g2"]


def test_a_declared_pod_larger_than_every_gpu_says_by_how_much(client) -> None:
    out = _filter(client, _declared(50000), [EIGHT, SMALL])
    reasons = set(out["FailedAndUnresolvableNodes"].values())
    assert len(reasons) == 1 and "9040 MiB short" in reasons.pop()  # 50000 - 40960


def test_declared_and_predicted_the_larger_wins_and_the_pod_is_told(client, binder) -> None:
    small = make_pod(model="resnet18", batch=8, **{GPU_MEMORY: "39000"})
    annotations = _bind(client, binder, small, "eight") if passed_nodes(
        _filter(client, small, [EIGHT])) == ["eight"] else pytest.fail("not placed")
    assert annotations[RESERVED_MIB] == "39000"
    assert annotations[SIZING].startswith("declared 39000 MiB, above the padded prediction")
    big = make_pod(model="vgg16", batch=64, **{GPU_MEMORY: "100"})
    assert passed_nodes(_filter(client, big, [EIGHT])) == ["eight"]
    annotations = _bind(client, binder, big, "eight")
    assert float(annotations[RESERVED_MIB]) > 5000
    assert "above the declared 100 MiB" in annotations[SIZING]


def test_a_declared_pod_is_timed_by_its_owners_earlier_runs(client, binder, store) -> None:
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": "nightly", "uid": "j1",
             "controller": True}
    first = _declared(1000)
    first["metadata"]["ownerReferences"] = [owner]
    _filter(client, first, [EIGHT])
    _bind(client, binder, first, "eight")
    assert store.job(first["metadata"]["uid"]).predicted_s == Settings().declared_default_s
    store.record_owner_run("default/Job/nightly", 120.0)
    store.record_owner_run("default/Job/nightly", 180.0)
    second = _declared(1000)
    second["metadata"]["ownerReferences"] = [owner]
    _filter(client, second, [EIGHT])
    _bind(client, binder, second, "eight")
    assert store.job(second["metadata"]["uid"]).predicted_s == 150.0


def test_the_monitor_records_a_declared_run_for_its_owner(store, clock, estimator) -> None:
    store.put_node("eight", EIGHT_LAYOUT)
    monitor = Monitor(store, estimator, clock=clock, settings=Settings(scheduler_name=OURS))
    pod = _declared(2000)
    pod["metadata"]["ownerReferences"] = [{"kind": "Job", "name": "etl", "controller": True}]
    uid = pod["metadata"]["uid"]
    store.reserve(JobRecord(uid, "job", "default", "", "train", "eight", -1, 2000.0, 60.0,
                            "reserved", clock.now), [(0, 40960.0, 4)], clock.now, 0)
    store.mark_running(uid, datetime(2026, 11, 23, 10, tzinfo=UTC).timestamp())
    monitor.reconcile([_bound(pod, {}, "Succeeded")])
    assert store.job(uid) is None
    assert store.owner_seconds("default/Job/etl") == 600.0  # the container ran ten minutes


@pytest.mark.parametrize("annotation, value, words", [
    (GPU_MEMORY, "0", "schedtune.io/gpu-memory='0' is invalid"),
    (GPU_MEMORY, "lots", "an integer in 1..1048576"),
    (GPU_MEMORY, "101%", "or N% of its memory, N in 1..100"),
    (GPU_MEMORY, "0%", "schedtune.io/gpu-memory='0%' is invalid"),
    (GPU_MEMORY, "12.5%", "N in 1..100"),
    (EXPECTED_S, "-5", "schedtune.io/expected-seconds='-5' is invalid"),
])
def test_bad_declared_values_are_refused_with_what_to_fix(client, annotation, value,
                                                          words) -> None:
    pod = make_pod(model=None, **{GPU_MEMORY: "1000", annotation: value})
    out = _filter(client, pod, [EIGHT])
    assert words in out["FailedAndUnresolvableNodes"]["eight"]


def test_a_four_gpu_pod_holds_four_gpus_and_is_released_whole(client, binder, store, clock,
                                                              estimator) -> None:
    store.put_node("eight", EIGHT_LAYOUT)
    pod = make_pod(model="resnet50", batch=128, gpus=4)
    assert passed_nodes(_filter(client, pod, [EIGHT])) == ["eight"]
    annotations = _bind(client, binder, pod, "eight")
    gpus = [int(i) for i in annotations[GPU].split(",")]
    uid = pod["metadata"]["uid"]
    assert len(set(gpus)) == 4 and store.job(uid).gpus == tuple(gpus)
    assert {i for (node, i), members in store.queues().items() if uid in members} == set(gpus)
    # The per-replica need: batch 32 on each GPU (plus all-reduce buffers), not batch 128.
    one = make_pod(model="resnet50", batch=32)
    _filter(client, one, [EIGHT])
    single = float(_bind(client, binder, one, "eight")[RESERVED_MIB])
    assert single < float(annotations[RESERVED_MIB]) < single + 1024
    monitor = Monitor(store, estimator, clock=clock, settings=Settings(scheduler_name=OURS))
    monitor.reconcile([_bound(pod, annotations, "Succeeded")])
    assert store.job(uid) is None
    assert not any(uid in members for members in store.queues().values())


def _fill(store, gpus: range) -> None:
    for index in gpus:
        store.reserve(JobRecord(f"full-{index}", "p", "default", "vgg16", "train", "eight", -1,
                                40000.0, 60.0, "bound", 1.0), [(index, 40960.0, 4)], 1.0, 0)


def test_filter_passes_a_node_only_with_k_gpus_that_have_room(client, store) -> None:
    store.put_node("eight", EIGHT_LAYOUT)
    _fill(store, range(6))  # two GPUs left
    assert passed_nodes(_filter(client, make_pod(model="resnet50", batch=64, gpus=2), [EIGHT])) == [
        "eight"]
    out = _filter(client, make_pod(model="resnet50", batch=96, gpus=3), [EIGHT])
    assert passed_nodes(out) == [] and "eight" in out["FailedNodes"]  # room may come: resolvable
    assert "3" in out["FailedNodes"]["eight"] and "2" in out["FailedNodes"]["eight"]


def test_a_waiting_multi_gpu_pod_holds_as_many_gpus_as_it_needs(client_with, store,
                                                               clock) -> None:
    """Six of eight GPUs full for another minute: a 3-GPU pod waits; once it has waited
    long enough (30 s here, within that minute), the two free GPUs are held for it with
    the one that frees first, so a long single-GPU pod that does not fit beside it cannot
    take them."""
    client = client_with(hold_after_s=30.0)
    store.put_node("eight", EIGHT_LAYOUT)
    _fill(store, range(6))
    big = make_pod("big", model="resnet50", batch=96, gpus=3)
    assert passed_nodes(_filter(client, big, [EIGHT])) == []
    [waiter] = store.waiters(clock())
    assert waiter.gpus == 3
    clock.now += 31
    _filter(client, big, [EIGHT])  # still waiting: kept fresh
    assert passed_nodes(_filter(client, make_pod("beside", model="resnet50", batch=64), [EIGHT])) \
        == ["eight"]  # a job that fits beside the waiter still goes there
    out = _filter(client, _declared(38000, **{EXPECTED_S: "3600"}), [EIGHT])
    assert passed_nodes(out) == [] and "held for an older waiting pod" in out["FailedNodes"]["eight"]
    told = [d for d in store.decisions(20) if d["kind"] == "held"]
    assert len({d["message"] for d in told}) == 3  # three GPUs held, each told


def test_a_multi_gpu_bind_is_all_or_nothing(client, binder, store) -> None:
    store.put_node("eight", EIGHT_LAYOUT)
    pod = make_pod(model="resnet50", batch=96, gpus=3)
    _filter(client, pod, [EIGHT])
    _fill(store, range(6))  # filled after filter: two GPUs left, the pod needs three
    res = client.post("/bind", json=bind_args(pod, "eight")).get_json()
    assert "fewer than 3 GPUs on eight have room" in res["Error"]
    assert store.job(pod["metadata"]["uid"]) is None
    assert not any(pod["metadata"]["uid"] in m for m in store.queues().values())


def test_a_pod_asking_for_more_gpus_than_any_node_is_told(client) -> None:
    out = _filter(client, make_pod(gpus=65), [EIGHT])
    assert "at most 64" in out["FailedAndUnresolvableNodes"]["eight"]
