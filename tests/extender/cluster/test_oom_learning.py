"""A job that ran out of GPU memory is never retried with the reservation that was killed,
in its namespace; what one namespace's kills can do to others is bounded; a RAM kill
(OOMKilled) teaches nothing about GPU memory (real Redis, the monitor fed the pod as the
API server reports it, the extender over its HTTP routes)."""

from __future__ import annotations

import copy
import json

import pytest

from extender.cluster.monitor import Monitor
from extender.core.oom import next_floor
from extender.model import RESERVED_MIB, JobRecord, NodeGpus, PodDemand, job_type
from extender.settings import Settings
from extender.web.app import create_app
from tests.builders import bind_args, bound, filter_args, make_node, make_pod

BIG = make_node("big", "NVIDIA-GeForce-RTX-3090", count=4, memory_mib=24576, replicas=4)
BIG_LAYOUT = NodeGpus("NVIDIA-GeForce-RTX-3090", "RTX-3090", 4, 24576, share_slots=4)
OURS = "schedtune-scheduler"
VGG32 = job_type("vgg16", "train", 32, "RTX-3090")
IN_DEFAULT = f"default|{VGG32}"  # the floor of namespace default's pods of the type
# What PyTorch prints when a CUDA allocation fails (the log tail kubelet keeps as the
# termination message under terminationMessagePolicy: FallbackToLogsOnError).
TORCH_OOM = ("Traceback (most recent call last):\n  ...\ntorch.OutOfMemoryError: CUDA out "
             "of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.68 GiB "
             "of which 1.12 GiB is free.")


@pytest.fixture
def monitor(store, clock, estimator) -> Monitor:
    store.put_node("big", BIG_LAYOUT)
    return Monitor(store, estimator, clock=clock, settings=Settings(scheduler_name=OURS))


def _reserve(client, binder, name: str, batch: int = 32) -> tuple[dict, float]:
    """Filter and bind a vgg16 training; the pod as then bound, and the MiB reserved."""
    pod = make_pod(name, model="vgg16", batch=batch, epochs=1)
    out = client.post("/filter", json=filter_args(pod, [BIG])).get_json()
    assert [n["metadata"]["name"] for n in out["Nodes"]["items"]] == ["big"], out["FailedNodes"]
    assert client.post("/bind", json=bind_args(pod, "big")).get_json() == {"Error": ""}
    return bound(pod, "big", binder.calls[-1][4], OURS), float(binder.calls[-1][4][RESERVED_MIB])


def _oom_killed(pod: dict, restart: int = 0, gpu: bool = True) -> dict:
    """The pod restarted after its container ran out of GPU memory (PyTorch's error exit),
    or with `gpu` False after the kernel OOM-killed it at its RAM limit."""
    pod = copy.deepcopy(pod)
    ended = ({"reason": "Error", "exitCode": 1, "message": TORCH_OOM} if gpu
             else {"reason": "OOMKilled", "exitCode": 137})
    pod["status"] = {"phase": "Running", "containerStatuses": [{
        "name": "trainer", "restartCount": restart + 1,
        "state": {"running": {"startedAt": "2026-11-23T10:01:00Z"}},
        "lastState": {"terminated": {**ended, "containerID": f"containerd://{restart}",
                                     "startedAt": "2026-11-23T10:00:00Z",
                                     "finishedAt": "2026-11-23T10:00:50Z"}}}]}
    return pod


def test_the_retry_of_a_killed_job_reserves_more_in_every_replica(
        client, binder, store, monitor, settings, estimator, clock) -> None:
    warned = []
    monitor.warn = lambda facts, reason, message: warned.append((reason, message))
    first, _ = _reserve(client, binder, "train-0")
    killed_mib = store.job(first["metadata"]["uid"]).reserved_mib
    monitor.on_event("MODIFIED", _oom_killed(first))
    floor = next_floor(killed_mib)
    assert floor >= killed_mib + 1024
    assert store.floors() == {IN_DEFAULT: floor}
    assert warned[0][0] == "SchedTuneOOMKilled"
    assert f"now reserves at least {floor:.0f} MiB in namespace default" in warned[0][1]

    retry, _ = _reserve(client, binder, "train-0-retry")
    assert store.job(retry["metadata"]["uid"]).reserved_mib == floor > killed_mib
    told = [d for d in store.decisions(5) if d["pod"] == "default/train-0-retry"]
    assert told and "the floor an earlier OOM kill of this job set" in told[0]["message"]
    # Another replica (its own app and Redis client, the same Redis) reserves it too.
    other = create_app(settings, binder=binder, clock=clock, estimator=estimator).test_client()
    again, _ = _reserve(other, binder, "train-0-again")
    assert store.job(again["metadata"]["uid"]).reserved_mib == floor
    # Another batch is another job type: its own estimate, untouched.
    _, small_mib = _reserve(client, binder, "train-16", batch=16)
    assert small_mib < killed_mib

    # Killed again at the floor: the floor rises again; the same kill seen twice does not.
    monitor.on_event("MODIFIED", _oom_killed(retry))
    monitor.on_event("MODIFIED", _oom_killed(retry))
    assert store.floors() == {IN_DEFAULT: next_floor(floor)}


def _beside(store, clock, uid: str, gpu: int, mib: float, running: bool = True) -> None:
    """A job placed on `big`'s GPU `gpu` directly in the store: running, or only reserved
    by a filter whose bind has not come (it holds no GPU memory yet)."""
    record = JobRecord(uid=uid, pod=uid, namespace="default", model="resnet50", task="train",
                       node="big", gpu_index=gpu, reserved_mib=mib, predicted_s=600.0,
                       state="reserved", reserved_at=clock(), gpu_type="RTX-3090", batch=32)
    store.reserve(record, [(gpu, 24576, 4)], now=clock(), ttl_s=0 if running else 300)
    if running:
        store.mark_running(uid, clock())


def test_the_jobs_beside_a_killed_one_grow_until_its_gpu_shows_no_more_room_than_it_held(
        client, binder, store, monitor, clock, monkeypatch, redis_url, capsys) -> None:
    from scripts import queues

    warned = []
    monitor.warn = lambda facts, reason, message: warned.append(message)
    victim_pod, _ = _reserve(client, binder, "train-0")
    victim = store.job(victim_pod["metadata"]["uid"])
    victim_mib = victim.reserved_mib
    gpu, other_gpu = victim.gpu_index, (victim.gpu_index + 1) % 4
    _beside(store, clock, "a", gpu, 3000.0)
    _beside(store, clock, "b", gpu, 1000.0)
    _beside(store, clock, "starting", gpu, 500.0, running=False)
    _beside(store, clock, "elsewhere", other_gpu, 2000.0)
    short = 24576 - victim_mib - 4000.0  # what the running pair is taken to overrun by
    assert short > 500.0

    monitor.on_event("MODIFIED", _oom_killed(victim_pod))
    grown_a = store.job("a")
    assert grown_a.reserved_mib == pytest.approx(3000.0 + short * 3 / 4)
    assert (grown_a.own_mib, grown_a.grown_mib) == pytest.approx((3000.0, short * 3 / 4))
    assert store.job("b").reserved_mib == pytest.approx(1000.0 + short / 4)
    assert store.job("starting").reserved_mib == 500.0  # not on the GPU yet: not a suspect
    assert store.job("elsewhere").reserved_mib == 2000.0
    assert "the 2 job(s) beside it on big now reserve" in warned[0]

    # Released, the killed job leaves its GPU no more room than it held; the retry (at its
    # floor) goes to another GPU while the jobs that may have overrun still run.
    store.release(victim.uid)
    gpus = store.snapshot({"big": BIG_LAYOUT}, clock()).nodes["big"].gpu_states
    assert gpus[gpu].free_mib == pytest.approx(victim_mib - 500.0)
    retry, _ = _reserve(client, binder, "train-0-retry")
    assert store.job(retry["metadata"]["uid"]).gpu_index != gpu
    monkeypatch.setenv("REDIS_URL", redis_url)
    assert queues.main([]) == 0
    assert f"(+{short * 3 / 4:.0f} MiB beside an OOM kill)" in capsys.readouterr().out

    # A grown job killed in turn: its floor and its censored observation go by what its
    # own sizing reserved, not by what it was grown to for its neighbours.
    pod_a = make_pod("a", uid="a", model="resnet50", batch=32)
    pod_a["spec"].update(nodeName="big", schedulerName=OURS)
    killed_a = _oom_killed(pod_a)
    monitor.on_event("MODIFIED", killed_a)
    resnet = job_type("resnet50", "train", 32, "RTX-3090")
    assert store.floors()[f"default|{resnet}"] == next_floor(3000.0)
    killed_a["status"]["phase"] = "Failed"
    monitor.on_event("MODIFIED", killed_a)
    [seen] = [o for o in store.observations() if o["uid"] == "a"]
    assert float(seen["reserved_mib"]) == pytest.approx(3000.0)


def test_queues_shows_the_corrections_oom_kills_made(store, monkeypatch, redis_url,
                                                     capsys) -> None:
    from scripts import queues

    monkeypatch.setenv("REDIS_URL", redis_url)
    assert queues.main(["--floors"]) == 0
    assert "no OOM corrections" in capsys.readouterr().out
    _raise(store, "ml", 12345.0)
    assert queues.main(["--floors", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == [
        {"namespace": "ml", "model": "vgg16", "task": "train", "batch": "32",
         "gpu_type": "RTX-3090", "floor_mib": 12345.0}]
    assert queues.main(["--floors"]) == 0
    assert "reserves at least    12345 MiB in namespace ml" in capsys.readouterr().out


def _raise(store, namespace: str, mib: float, now: float = 1000.0, cap: float = 24576.0,
           raises: int = 3):
    return store.raise_floor(VGG32, namespace, mib, cap, now, 86400.0, raises)


def test_a_floor_only_rises_and_unreadable_floors_are_ignored(store, redis_client) -> None:
    assert _raise(store, "default", 9000).namespace_mib == 9000
    assert _raise(store, "default", 5000).namespace_mib == 9000
    redis_client.hset("st:floor:vgg16|train|32", mapping={
        "T4": "nan", "default|A10": "-5", "L4": "1e300", "other|L4": "x"})
    assert store.floors() == {IN_DEFAULT: 9000.0}
    vgg = PodDemand("u", "p", "default", "vgg16", "train", 32, 1)
    assert store.snapshot({}, 0.0, floors_of=vgg).floors == {IN_DEFAULT: 9000.0}
    # A filter reads only the floors of the job it prices.
    other = PodDemand("u", "p", "default", "vgg16", "train", 16, 1)
    assert store.snapshot({}, 0.0, floors_of=other).floors == {}
    assert store.snapshot({}, 0.0).floors == {}


def test_one_namespace_raises_its_own_floor_a_bounded_number_of_times_never_past_the_gpu(
        store) -> None:
    raised = [_raise(store, "tenant-a", 20000.0 + 5000 * i, now=1000.0 + i) for i in range(7)]
    assert [r.counted for r in raised] == [True] * 3 + [False] * 4
    assert raised[-1].namespace_mib == 24576.0  # capped at the largest GPU of the type
    assert raised[-1].everyone_mib == 0.0  # one namespace alone: nobody else's floor
    assert store.floors() == {f"tenant-a|{VGG32}": 24576.0}
    # A window later its budget is back; so it is once a run of the type succeeded there.
    assert _raise(store, "tenant-a", 1000.0, now=1000.0 + 86400 + 1).counted
    for i in range(2):
        _raise(store, "tenant-a", 1000.0, now=90_000.0 + i)
    assert not _raise(store, "tenant-a", 1000.0, now=90_003.0).counted  # 3 in this window
    assert store.floor_held(VGG32, "tenant-a", now=90_004.0)
    assert _raise(store, "tenant-a", 1000.0, now=90_005.0).counted


def test_everyones_floor_needs_kills_from_two_namespaces_and_takes_the_lower(store) -> None:
    _raise(store, "tenant-a", 20000.0)
    second = _raise(store, "tenant-b", 9000.0, now=1001.0)
    assert (second.namespace_mib, second.everyone_mib) == (9000.0, 9000.0)
    assert store.floors()[VGG32] == 9000.0  # tenant-a's 20000 does not speak for tenant-b
    # A kill older than the window no longer counts towards everyone's floor.
    late = _raise(store, "tenant-c", 15000.0, now=1000.0 + 86400 + 5)
    assert late.everyone_mib == 9000.0


def test_seven_gpu_oom_kills_in_one_namespace_leave_other_namespaces_pods_placeable(
        client, binder, store, monitor) -> None:
    _, killed_mib = _reserve(client, binder, "train-0")
    floor = killed_mib
    for attempt in range(7):  # a Job with backoffLimit: 6 in namespace default: 7 pods
        pod, _ = _reserve(client, binder, f"train-{attempt}-retry")
        reserved = store.job(pod["metadata"]["uid"]).own_mib
        monitor.on_event("MODIFIED", _oom_killed(pod))
        if attempt < 3:  # its namespace's budget: 3 raises a window
            floor = min(next_floor(reserved), 24576.0)
        assert store.floors() == {IN_DEFAULT: floor}
        store.release(pod["metadata"]["uid"])
    assert floor > killed_mib
    pod = make_pod("theirs", namespace="other", model="vgg16", batch=32, epochs=1)
    out = client.post("/filter", json=filter_args(pod, [BIG])).get_json()
    assert [n["metadata"]["name"] for n in out["Nodes"]["items"]] == ["big"]
    assert client.post("/bind", json=bind_args(pod, "big")).get_json() == {"Error": ""}
    assert float(binder.calls[-1][4][RESERVED_MIB]) == pytest.approx(killed_mib, abs=1)


def test_a_ram_kill_raises_no_gpu_floor_and_grows_no_neighbour(
        client, binder, store, monitor, clock) -> None:
    warned = []
    monitor.warn = lambda facts, reason, message: warned.append(reason)
    pod, _ = _reserve(client, binder, "train-0")
    victim = store.job(pod["metadata"]["uid"])
    _beside(store, clock, "a", victim.gpu_index, 3000.0)
    monitor.on_event("MODIFIED", _oom_killed(pod, gpu=False))
    assert store.floors() == {}
    assert store.job("a").reserved_mib == 3000.0
    assert warned == ["SchedTuneRAMKilled"]


def test_an_oom_of_a_pod_we_never_reserved_for_raises_nothing(store, monitor) -> None:
    stranger = make_pod("theirs", model="vgg16", batch=32)
    stranger["spec"].update(nodeName="big", schedulerName="default-scheduler")
    monitor.on_event("MODIFIED", _oom_killed(stranger))
    assert store.floors() == {}
