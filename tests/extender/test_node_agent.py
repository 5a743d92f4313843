"""Under HAMi (EXTENDER_NODE_AGENT=hami), through the HTTP verbs with a real Redis: the node
watcher's layouts come from HAMi's device register, bind hands the reserved GPUs to the pod
in HAMi's annotations (decoded here as its device plugin reads them), and the monitor
releases a reservation whose hand-over failed or went unanswered. Under Volcano's
GPU-share device plugin (volcano) likewise with its annotations."""

from __future__ import annotations

import copy
import math

import orjson
import pytest

from extender.cluster import node_watch
from extender.cluster.monitor import Monitor
from extender.model import GPU, RESERVED_MIB, NodeGpus
from extender.settings import Settings
from extender.wire import hami
from tests.builders import bind_args, filter_args, make_node, make_pod
from tests.hami_device_plugin import decode_devices

OURS = "schedtune-scheduler"
UUIDS = [f"GPU-5c0ffee0-0000-4000-8000-00000000000{i}" for i in range(4)]


def _hami_node(name: str, devices: int = 4, healthy: int | None = None) -> dict:
    """A node HAMi's device plugin registered (its JSON register, v2.10.0's form)."""
    node = make_node(name, "NVIDIA-A10", count=devices, memory_mib=23028,
                     allocatable={"nvidia.com/gpu": str(devices * 10), "cpu": "32"})
    register = [{"id": UUIDS[i], "index": i, "count": 10, "devmem": 23028, "devcore": 100,
                 "type": "NVIDIA-NVIDIA A10", "numa": 0, "mode": "hami-core",
                 "health": healthy is None or i < healthy} for i in range(devices)]
    node["metadata"]["annotations"] = {hami.REGISTER: orjson.dumps(register).decode()}
    return node


@pytest.fixture
def hami_client(client_with, store):
    def make(*nodes: dict):
        for node in nodes:
            node_watch.apply_event(store, "ADDED", node, agent="hami")
        return client_with(node_agent="hami")
    return make


def _reserved(store, pod: dict) -> int:
    """The MiB the reservation holds on each GPU, as a whole MiB limit (rounded up)."""
    return math.ceil(store.job(pod["metadata"]["uid"]).reserved_mib)


def _bound_pending(pod: dict, node: str, annotations: dict[str, str]) -> dict:
    """The pod as the API reports it once bound, its containers not started yet (the
    device plugin's Allocate comes first), carrying `annotations`."""
    seen = copy.deepcopy(pod)
    seen["metadata"]["annotations"].update(annotations)
    seen["spec"].update(nodeName=node, schedulerName=OURS)
    seen["status"] = {"phase": "Pending"}
    return seen


def _place(client, binder, pod: dict, node: str) -> dict[str, str]:
    out = client.post("/filter", json=filter_args(pod, [{"metadata": {"name": node}}],
                                                  names_only=True)).get_json()
    assert [n for n in out["NodeNames"]] == [node], out
    assert client.post("/bind", json=bind_args(pod, node)).get_json() == {"Error": ""}
    return binder.calls[-1][4]


def test_a_pods_annotations_decode_to_the_reserved_gpus_uuid_and_mib(hami_client, binder,
                                                                    store):
    client = hami_client(_hami_node("a10"))
    pod = make_pod("train", model="resnet50", batch=32)
    notes = _place(client, binder, pod, "a10")
    [[(uuid, mib)]] = decode_devices(notes[hami.TO_ALLOCATE])
    assert uuid == UUIDS[int(notes[GPU])]
    assert mib == _reserved(store, pod) and abs(mib - float(notes[RESERVED_MIB])) <= 1
    assert notes[hami.ALLOCATED] == notes[hami.TO_ALLOCATE]
    assert notes[hami.ASSIGNED_NODE] == "a10" and notes[hami.BIND_PHASE] == "allocating"
    assert notes[hami.BIND_TIME] == notes[hami.ASSIGNED_TIME]


def test_two_pods_on_one_gpu_get_its_uuid_and_each_its_own_limit(hami_client, binder, store):
    client = hami_client(_hami_node("one", devices=1))
    pods = make_pod("small", model="resnet18", batch=16), make_pod("large", model="resnet50",
                                                                     batch=64)
    [[(uuid_small, mib_small)]], [[(uuid_large, mib_large)]] = (
        decode_devices(_place(client, binder, pod, "one")[hami.TO_ALLOCATE]) for pod in pods)
    assert uuid_small == uuid_large == UUIDS[0]
    assert (mib_small, mib_large) == tuple(_reserved(store, pod) for pod in pods)
    assert mib_small < mib_large


def test_a_four_gpu_pod_lists_its_four_devices(hami_client, binder, store):
    client = hami_client(_hami_node("four"))
    notes = _place(client, binder, make_pod("ddp", model="resnet50", batch=128, gpus=4),
                   "four")
    [devices] = decode_devices(notes[hami.TO_ALLOCATE])
    assert sorted(uuid for uuid, _ in devices) == sorted(UUIDS)
    assert notes[GPU] == "0,1,2,3"
    job = store.job(binder.calls[-1][2])
    assert job.device_uuids == tuple(uuid for uuid, _ in devices)  # the reservation says which


def test_unhealthy_devices_are_never_handed_out(hami_client, binder, store):
    client = hami_client(_hami_node("sick", devices=4, healthy=1))
    assert store.node_layouts()["sick"].uuids == (UUIDS[0],)
    pod = make_pod("train", model="resnet50", batch=32)
    notes = _place(client, binder, pod, "sick")
    assert decode_devices(notes[hami.TO_ALLOCATE]) == [[(UUIDS[0], _reserved(store, pod))]]


def test_a_node_hami_never_registered_is_placed_on_as_without_a_node_agent(hami_client,
                                                                          binder, store):
    plain = make_node("plain", "NVIDIA-A10", count=1, memory_mib=23028, replicas=4)
    client = hami_client(plain)
    notes = _place(client, binder, make_pod("p"), "plain")
    assert hami.TO_ALLOCATE not in notes and hami.BIND_PHASE not in notes and GPU in notes
    assert store.overdue_handovers(1e12) == []  # nothing to wait for


@pytest.mark.parametrize("register", ["junk", "[]", '[{"id": "GPU-1"}]'])
def test_a_node_whose_register_cannot_be_read_is_refused_with_the_reason(hami_client, binder,
                                                                         register):
    node = _hami_node("broken")
    node["metadata"]["annotations"][hami.REGISTER] = register
    client = hami_client(node)
    out = client.post("/filter", json=filter_args(make_pod("p"), [{"metadata": {"name":
                                                                                "broken"}}],
                                                  names_only=True)).get_json()
    assert out["NodeNames"] == [] and "hami.io/node-nvidia-register" in str(
        out["FailedAndUnresolvableNodes"] or out["FailedNodes"])


@pytest.mark.parametrize(("answer", "after_s", "released"), [
    ("failed", 1, True), ("allocating", 301, True), ("allocating", 100, False),
    ("success", 10_000, False)])
def test_the_monitor_follows_the_device_plugins_answer(hami_client, binder, store, clock,
                                                       estimator, answer, after_s, released):
    client = hami_client(_hami_node("a10"))
    pod = make_pod("train", model="resnet50", batch=32)
    notes = _place(client, binder, pod, "a10")
    warned, unlocked = [], []
    monitor = Monitor(store, estimator, clock=clock,
                      settings=Settings(scheduler_name=OURS, node_agent="hami"),
                      warn=lambda facts, reason, message: warned.append(reason),
                      unlock=lambda *where: unlocked.append(where))
    seen = _bound_pending(pod, "a10", {**notes, hami.BIND_PHASE: answer})
    clock.now += after_s
    monitor.on_event("MODIFIED", seen)
    assert (store.job(pod["metadata"]["uid"]) is None) == released
    assert warned == (["SchedTuneAllocationFailed"] if released else [])
    assert unlocked == ([("a10", "default", "train")] if released else [])
    monitor.on_event("MODIFIED", seen)  # seen again: never adopted again
    assert (store.job(pod["metadata"]["uid"]) is None) == released


@pytest.mark.parametrize(("assigned", "after_s", "released"), [
    ("false", 301, True), ("false", 10, False), ("true", 10_000, False)])
def test_volcanos_device_plugin_gets_the_reserved_gpu_indices(
        client_with, binder, store, clock, estimator, assigned, after_s, released):
    from extender.wire import gpushare

    four = make_node("four", "NVIDIA-A10", count=4, memory_mib=23028, replicas=4)
    node_watch.apply_event(store, "ADDED", four)
    client = client_with(node_agent="volcano")
    pod = make_pod("ddp", model="resnet50", batch=64, gpus=2)
    notes = _place(client, binder, pod, "four")
    assert notes[gpushare.GPU_INDEX] == notes[GPU] and len(notes[GPU].split(",")) == 2
    assert int(notes[gpushare.PREDICATE_TIME]) == int(clock.now * 1e9)
    assert notes[gpushare.GPU_ASSIGNED] == "false"
    monitor = Monitor(store, estimator, clock=clock,
                      settings=Settings(scheduler_name=OURS, node_agent="volcano"))
    clock.now += after_s
    monitor.on_event("MODIFIED", _bound_pending(pod, "four",
                                                {**notes, gpushare.GPU_ASSIGNED: assigned}))
    assert (store.job(pod["metadata"]["uid"]) is None) == released


def test_gpus_of_one_node_may_differ_and_each_is_filled_only_to_its_own_memory(
        hami_client, binder, store):
    node = _hami_node("mixed", devices=2)
    register = orjson.loads(node["metadata"]["annotations"][hami.REGISTER])
    register[0]["devmem"] = 8000  # GPU 0 is the small one
    node["metadata"]["annotations"][hami.REGISTER] = orjson.dumps(register).decode()
    client = hami_client(node)
    layout = store.node_layouts()["mixed"]
    assert (layout.memories, layout.memory_mib) == ((8000, 23028), 23028)
    placed = []
    for i in range(8):  # resnet50 training, batch 64: about 9 GiB padded, more than GPU 0
        pod = make_pod(f"big-{i}", model="resnet50", batch=64)
        out = client.post("/filter", json=filter_args(pod, [{"metadata": {"name": "mixed"}}],
                                                      names_only=True)).get_json()
        if out["NodeNames"] != ["mixed"]:
            break
        assert client.post("/bind", json=bind_args(pod, "mixed")).get_json() == {"Error": ""}
        placed.append(binder.calls[-1][4])
    assert placed and {notes[GPU] for notes in placed} == {"1"}  # never on the 8000 MiB GPU
    held = sum(store.job(call[2]).reserved_mib for call in binder.calls)
    assert held <= 23028


def test_a_hand_over_nobody_answers_is_looked_at_again_when_it_is_due(hami_client, binder,
                                                                     store, clock, estimator):
    client = hami_client(_hami_node("a10"))
    pod = make_pod("train", model="resnet50", batch=32)
    notes = _place(client, binder, pod, "a10")
    uid = pod["metadata"]["uid"]
    monitor = Monitor(store, estimator, clock=clock,
                      settings=Settings(scheduler_name=OURS, node_agent="hami"),
                      unlock=lambda *where: None)
    as_api_has_it = _bound_pending(pod, "a10", notes)  # no answer, and no event since
    read = lambda namespace, name: as_api_has_it  # noqa: E731
    clock.now += 100
    assert monitor.check_handovers(read) == 0  # not due yet
    assert store.job(uid) is not None
    clock.now += 201  # past EXTENDER_AGENT_TIMEOUT_S (300) after the bind
    assert monitor.check_handovers(read) == 1
    assert store.job(uid) is None and store.overdue_handovers(clock.now + 1e6) == []


def test_an_answered_hand_over_is_not_looked_at_again(hami_client, binder, store, clock,
                                                       estimator):
    client = hami_client(_hami_node("a10"))
    pod = make_pod("train", model="resnet50", batch=32)
    notes = _place(client, binder, pod, "a10")
    monitor = Monitor(store, estimator, clock=clock,
                      settings=Settings(scheduler_name=OURS, node_agent="hami"))
    monitor.on_event("MODIFIED", _bound_pending(pod, "a10", {**notes, hami.BIND_PHASE:
                                                                   hami.SUCCESS}))
    assert store.overdue_handovers(clock.now + 1e6) == []
    assert store.job(pod["metadata"]["uid"]).handed_over_at == 0


def test_a_pod_that_says_failed_but_runs_keeps_its_gpus_counted(hami_client, binder, store,
                                                                clock, estimator):
    """A tenant who writes bind-phase: failed on a pod that runs cannot make its GPU look
    free: once its containers run, it is counted like any bound pod."""
    client = hami_client(_hami_node("a10"))
    pod = make_pod("train", model="resnet50", batch=32)
    notes = _place(client, binder, pod, "a10")
    monitor = Monitor(store, estimator, clock=clock,
                      settings=Settings(scheduler_name=OURS, node_agent="hami"),
                      unlock=lambda *where: None)
    lying = _bound_pending(pod, "a10", {**notes, hami.BIND_PHASE: hami.FAILED})
    monitor.on_event("MODIFIED", lying)
    assert store.job(pod["metadata"]["uid"]) is None  # failed, as far as anyone can tell
    lying["status"] = {"phase": "Running", "containerStatuses": [{
        "name": "main", "state": {"running": {"startedAt": "2026-12-01T10:00:00Z"}}}]}
    monitor.on_event("MODIFIED", lying)
    job = store.job(pod["metadata"]["uid"])
    assert job is not None and job.node == "a10" and job.state == "running"
