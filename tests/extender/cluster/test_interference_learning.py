"""The monitor learns a GPU type's collocation slowdown from the runs it sees end, and every
worker's next decision plays that type forward at it (real Redis, the extender over its
HTTP routes, the monitor fed the pods as the API server reports them)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime

import pytest

from extender.cluster.monitor import Monitor
from extender.core.interference import MIN_RUNS
from extender.metrics import StateCollector
from extender.model import Limits, NodeGpus
from extender.settings import Settings
from tests.builders import bind_args, bound, filter_args, make_node, make_pod

NODE = make_node("solo", "NVIDIA-GeForce-RTX-3090", count=1, memory_mib=24576, replicas=4)
LAYOUT = NodeGpus("NVIDIA-GeForce-RTX-3090", "RTX-3090", 1, 24576, share_slots=4)
OURS = "schedtune-scheduler"
TRUE_ALPHA = 0.65  # two jobs together each take 1.65x their time alone (within the bound)


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.fixture
def monitor(store, clock, estimator) -> Monitor:
    store.put_node("solo", LAYOUT)
    return Monitor(store, estimator, clock=clock, settings=Settings(scheduler_name=OURS))


def _placed(client, binder, name: str) -> dict:
    pod = make_pod(name, model="resnet18", batch=32, epochs=3)
    out = client.post("/filter", json=filter_args(pod, [NODE])).get_json()
    assert [n["metadata"]["name"] for n in out["Nodes"]["items"]] == ["solo"], out
    assert client.post("/bind", json=bind_args(pod, "solo")).get_json() == {"Error": ""}
    return bound(pod, "solo", binder.calls[-1][4], OURS)


def _running(pod: dict, at: float) -> dict:
    pod = copy.deepcopy(pod)
    pod["status"] = {"phase": "Running", "containerStatuses": [
        {"name": "trainer", "restartCount": 0, "state": {"running": {"startedAt": _iso(at)}}}]}
    return pod


def _succeeded(pod: dict, began: float, ended: float) -> dict:
    pod = copy.deepcopy(pod)
    pod["status"] = {"phase": "Succeeded", "containerStatuses": [
        {"name": "trainer", "restartCount": 0, "state": {"terminated": {
            "reason": "Completed", "exitCode": 0, "startedAt": _iso(began),
            "finishedAt": _iso(ended)}}}]}
    return pod


def _run(client, binder, monitor, clock, names: list[str], slowdown: float) -> None:
    """Place `names` together on the one GPU, run them from the same instant, and end each
    after its estimated time (before any learned time bias) times `slowdown`."""
    pods = [_placed(client, binder, name) for name in names]
    began = clock.now = float(int(clock.now) + 1)
    for pod in pods:
        monitor.on_event("MODIFIED", _running(pod, began))
    jobs = [monitor.store.job(p["metadata"]["uid"]) for p in pods]
    predicted = [job.predicted_s / job.time_factor for job in jobs]
    for pod, seconds in sorted(zip(pods, predicted, strict=True), key=lambda p: p[1]):
        clock.now = began + round(seconds * slowdown)
        monitor.on_event("MODIFIED", _succeeded(pod, began, clock.now))
    clock.now += 60


def test_runs_that_slow_down_together_teach_every_worker_their_gpu_types_alpha(
        client, binder, monitor, store, clock, redis_url, capsys) -> None:
    from scripts import queues

    assert store.learned_alphas() == {}
    for i in range(MIN_RUNS // 2):
        _run(client, binder, monitor, clock, [f"alone-{i}"], 1.0)
        if 3 * i + 1 < MIN_RUNS:
            assert store.learned_alphas() == {}, "published before enough runs"
        _run(client, binder, monitor, clock, [f"pair-{i}-a", f"pair-{i}-b"], 1.0 + TRUE_ALPHA)
    learned = store.learned_alphas()
    assert list(learned) == ["RTX-3090"]
    assert learned["RTX-3090"] == pytest.approx(TRUE_ALPHA, abs=0.1)
    observed = store.observations()
    assert len(observed) == 3 * (MIN_RUNS // 2)
    assert {o["gpus"] for o in observed} == {"0"} and all(float(o["started_at"]) > 0
                                                          for o in observed)
    # The next decision's snapshot carries it, and operators see it in the metrics.
    assert store.snapshot({"solo": None}, clock.now).alphas == learned
    gauges = {s.labels["gpu_type"]: s.value for m in StateCollector(store, Limits(4, {}),
                                                                     clock).collect()
              if m.name == "schedtune_interference_alpha" for s in m.samples}
    assert gauges == learned
    capsys.readouterr()
    assert queues.main(["--redis", redis_url, "--interference"]) == 0
    shown = capsys.readouterr().out
    assert f"RTX-3090       alpha {learned['RTX-3090']:.2f} (learned" in shown
    assert "every other GPU type: its architecture's measured alpha (Kepler 0.87, Volta 0.47" in shown


def test_a_failed_run_teaches_nothing_and_unreadable_alphas_are_ignored(
        client, binder, monitor, store, clock, redis_client) -> None:
    pod = _placed(client, binder, "crashes")
    monitor.on_event("MODIFIED", _running(pod, clock.now))
    failed = _succeeded(pod, clock.now, clock.now + 30)
    failed["status"]["phase"] = "Failed"
    monitor.on_event("MODIFIED", failed)
    assert store.observations()[0]["outcome"] == "failed"
    assert store.learned_alphas() == {}
    redis_client.hset("st:interference", mapping={"RTX-3090": "nan", "K80": "-1", "T4": "x",
                                                  "A100": "99", "V100": "0.8",
                                                  "V100|runs": "12 (5 shared)"})
    assert store.learned_alphas() == {"V100": 0.8}
    assert store.snapshot({"solo": None}, clock.now).alphas == {"V100": 0.8}


def _nightly(name: str) -> dict:
    """A pod of the same Job type each night: its controller is its owner."""
    pod = make_pod(name, namespace="ml", model="resnet18", batch=32, epochs=3)
    pod["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "CronJob",
                                           "name": "nightly", "uid": "c-1", "controller": True}]
    return pod


def test_a_job_type_is_predicted_within_ten_percent_after_three_runs_by_either_replica(
        client, client_with, binder, monitor, store, clock, redis_url, capsys) -> None:
    """Three runs of one owner's job type, each 1.7x the estimate, placed by two replicas in
    turn and followed by the monitor: the next pod, on either replica, is predicted within
    10 % of what the runs took, and the record, the pod's annotation and `queues` say which
    correction applied."""
    from scripts import queues

    replicas = [client, client_with()]
    slowdown = 1.7
    for night in range(3):
        pod = _nightly(f"night-{night}")
        replica = replicas[night % 2]
        out = replica.post("/filter", json=filter_args(pod, [NODE])).get_json()
        assert out["Error"] == "", out
        assert replica.post("/bind", json=bind_args(pod, "solo")).get_json() == {"Error": ""}
        placed = bound(pod, "solo", binder.calls[-1][4], OURS)
        began = clock.now = float(int(clock.now) + 1)
        monitor.on_event("MODIFIED", _running(placed, began))
        job = store.job(pod["metadata"]["uid"])
        estimate = job.predicted_s / job.time_factor
        clock.now = began + round(estimate * slowdown)
        monitor.on_event("MODIFIED", _succeeded(placed, began, clock.now))
        clock.now += 60
    assert {o["owner"] for o in store.observations()} == {"ml/CronJob/nightly"}
    for replica in replicas:
        pod = _nightly(f"tonight-{id(replica)}")
        replica.post("/filter", json=filter_args(pod, [NODE]))
        assert replica.post("/bind", json=bind_args(pod, "solo")).get_json() == {"Error": ""}
        job = store.job(pod["metadata"]["uid"])
        truth = job.predicted_s / job.time_factor * slowdown
        assert abs(job.predicted_s - truth) / truth <= 0.10
        assert job.time_correction == "RTX-3090|train|resnet18|32@ml/CronJob/nightly"
        annotation = binder.calls[-1][4]["schedtune.io/time-correction"]
        assert annotation.startswith(f"x{job.time_factor:.2f} learned from observed runs (")
    # Another owner's pod of the same model is corrected by the bounded shared value only.
    stranger = make_pod("stranger", namespace="other", model="resnet18", batch=32, epochs=3)
    client.post("/filter", json=filter_args(stranger, [NODE]))
    assert client.post("/bind", json=bind_args(stranger, "solo")).get_json() == {"Error": ""}
    assert store.job(stranger["metadata"]["uid"]).time_factor <= 1.5 ** 0.5 + 1e-3
    capsys.readouterr()
    assert queues.main(["--redis", redis_url]) == 0
    shown = capsys.readouterr().out
    assert shown.count("learned: RTX-3090|train|resnet18|32@ml/CronJob/nightly)") == 2
    assert "learned: RTX-3090|train|resnet18|32)" in shown  # the stranger: shared, bounded
