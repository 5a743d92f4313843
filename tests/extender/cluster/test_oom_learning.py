"""An OOM-killed job's retry never gets the reservation that was killed (real Redis, the
monitor fed the pod as the API server reports it, the extender over its HTTP routes)."""

from __future__ import annotations

import copy
import json

import pytest

from extender.cluster.monitor import Monitor
from extender.core.oom import next_floor
from extender.model import RESERVED_MIB, JobRecord, NodeGpus, job_type
from extender.settings import Settings
from extender.web.app import create_app
from tests.builders import bind_args, bound, filter_args, make_node, make_pod

BIG = make_node("big", "NVIDIA-GeForce-RTX-3090", count=4, memory_mib=24576, replicas=4)
BIG_LAYOUT = NodeGpus("NVIDIA-GeForce-RTX-3090", "RTX-3090", 4, 24576, share_slots=4)
OURS = "schedtune-scheduler"
VGG32 = job_type("vgg16", "train", 32, "RTX-3090")


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


def _oom_killed(pod: dict, restart: int = 0) -> dict:
    pod = copy.deepcopy(pod)
    pod["status"] = {"phase": "Running", "containerStatuses": [{
        "name": "trainer", "restartCount": restart + 1,
        "state": {"running": {"startedAt": "2026-11-23T10:01:00Z"}},
        "lastState": {"terminated": {"reason": "OOMKilled", "exitCode": 137,
                                     "containerID": f"containerd://{restart}",
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
    assert store.floors() == {VGG32: floor}
    assert warned[0][0] == "SchedTuneOOMKilled"
    assert f"now reserves at least {floor:.0f} MiB" in warned[0][1]

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
    assert store.floors() == {VGG32: next_floor(floor)}


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
    assert store.floors()[job_type("resnet50", "train", 32, "RTX-3090")] == next_floor(3000.0)
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
    store.raise_floor(VGG32, 12345.0)
    assert queues.main(["--floors", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == [
        {"model": "vgg16", "task": "train", "batch": "32", "gpu_type": "RTX-3090",
         "floor_mib": 12345.0}]
    assert queues.main(["--floors"]) == 0
    assert "reserves at least    12345 MiB" in capsys.readouterr().out


def test_a_floor_only_rises_and_unreadable_floors_are_ignored(store, redis_client) -> None:
    assert store.raise_floor(VGG32, 9000) == 9000
    assert store.raise_floor(VGG32, 5000) == 9000
    redis_client.hset("st:floors", mapping={"a|train|8|T4": "nan", "b|train|8|T4": "-5",
                                            "c|train|8|T4": "1e300", "d|train|8|T4": "x"})
    assert store.floors() == {VGG32: 9000.0}
    assert store.snapshot({}, 0.0).floors == {VGG32: 9000.0}


def test_an_oom_of_a_pod_we_never_reserved_for_raises_nothing(store, monitor) -> None:
    stranger = make_pod("theirs", model="vgg16", batch=32)
    stranger["spec"].update(nodeName="big", schedulerName="default-scheduler")
    monitor.on_event("MODIFIED", _oom_killed(stranger))
    assert store.floors() == {}
