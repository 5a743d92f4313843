"""extender/metrics.py: the state read at scrape time from a real Redis, what /metrics
renders with and without gunicorn's multi-process directory, prediction errors."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.values import MultiProcessValue

from extender import metrics
from extender.model import FilterRecord, JobRecord, Limits, NodeGpus, PodDemand, Waiter
from extender.state.store import RedisStore

NOW = 1_000.0
LIMITS = Limits(4, {})
RTX_3090 = NodeGpus("NVIDIA-GeForce-RTX-3090", "RTX-3090", 2, 24576)
T4 = NodeGpus("Tesla-T4", "T4", 1, 15360)
ODD = NodeGpus("Some-Future-GPU", None, 1, 8192)  # a product the catalogue does not know


def _job(uid: str, node: str, mib: float) -> JobRecord:
    return JobRecord(uid=uid, pod=f"pod-{uid}", namespace="ml", model="resnet50", task="train",
                     node=node, gpu_index=-1, reserved_mib=mib, predicted_s=600,
                     state="reserved", reserved_at=0)


def _reserve(store: RedisStore, uid: str, node: str, mib: float, now: float = NOW) -> None:
    store.reserve(_job(uid, node, mib), [(0, 24576.0, 4), (1, 24576.0, 4)], now, ttl_s=60)


def _fill(store: RedisStore) -> None:
    """Two types and a product nobody knows; jobs in every state, one expired, one on a
    node the watcher never saw; one waiting pod."""
    for name, layout in (("a1", RTX_3090), ("a2", RTX_3090), ("t1", T4), ("x1", ODD)):
        store.put_node(name, layout)
    _reserve(store, "reserved", "a1", 10_000)
    _reserve(store, "running", "a1", 5_000)
    store.mark_running("running", started_at=NOW)
    _reserve(store, "on-t4", "t1", 7_000)
    _reserve(store, "expired", "t1", 3_000, now=NOW - 120)  # its 60 s ran out: not counted
    _reserve(store, "ghost", "gone", 2_000)
    waiting = FilterRecord(PodDemand("w", "w", "ml", "resnet50", "train", 32, 1))
    store.record_filter(waiting, ttl_s=30, waiter=Waiter("w", NOW, {"T4": (1.0, 2.0)}),
                        now=NOW, wait_ttl_s=100)


def _samples(collector: metrics.StateCollector) -> dict[tuple[str, tuple[str, ...]], float]:
    return {(s.name, tuple(sorted(s.labels.values()))): s.value
            for family in collector.collect() for s in family.samples}


def test_state_gauges_per_gpu_type_from_redis(store: RedisStore) -> None:
    _fill(store)
    samples = _samples(metrics.StateCollector(store, LIMITS, clock=lambda: NOW))
    assert samples == {
        ("schedtune_state_up", ()): 1,
        ("schedtune_gpu_capacity_mib", ("RTX-3090",)): 4 * 24576,
        ("schedtune_gpu_capacity_mib", ("T4",)): 15360,
        ("schedtune_gpu_capacity_mib", ("unknown",)): 8192,
        ("schedtune_gpu_capacity_mib", ("no-layout",)): 0,
        ("schedtune_gpu_reserved_mib", ("RTX-3090",)): 15_000,
        ("schedtune_gpu_reserved_mib", ("T4",)): 7_000,
        ("schedtune_gpu_reserved_mib", ("unknown",)): 0,
        ("schedtune_gpu_reserved_mib", ("no-layout",)): 2_000,
        ("schedtune_gpus", ("RTX-3090",)): 4,
        ("schedtune_gpus", ("T4",)): 1,
        ("schedtune_gpus", ("unknown",)): 1,
        ("schedtune_gpus", ("no-layout",)): 0,
        ("schedtune_jobs", ("RTX-3090", "reserved")): 1,
        ("schedtune_jobs", ("RTX-3090", "running")): 1,
        ("schedtune_jobs", ("T4", "reserved")): 1,
        ("schedtune_jobs", ("no-layout", "reserved")): 1,
        ("schedtune_waiting_pods", ()): 1,
    }


def test_state_of_an_empty_cluster_is_zero_not_absent(store: RedisStore) -> None:
    samples = _samples(metrics.StateCollector(store, LIMITS, clock=lambda: NOW))
    assert samples == {("schedtune_state_up", ()): 1, ("schedtune_waiting_pods", ()): 0}


def test_redis_unreachable_gives_state_up_zero_and_nothing_else() -> None:
    unreachable = RedisStore.from_url("redis://127.0.0.1:1/0", timeout_s=0.2)
    families = list(metrics.StateCollector(unreachable, LIMITS).collect())
    assert [(f.name, [s.value for s in f.samples]) for f in families] == [
        ("schedtune_state_up", [0])]


def _parsed(body: bytes) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(body.decode()) for s in family.samples}


def test_render_adds_the_state_to_this_process_metrics(store, monkeypatch) -> None:
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)
    store.put_node("t1", T4)
    body, content_type = metrics.render([metrics.StateCollector(store, LIMITS)])
    samples = _parsed(body)
    assert content_type.startswith("text/plain")
    assert samples[("schedtune_gpus", (("gpu_type", "T4"),))] == 1
    assert ("schedtune_oom_kills_total", ()) in samples  # this process's own registry
    assert ("schedtune_gpus", (("gpu_type", "T4"),)) not in _parsed(metrics.render()[0])


def test_render_in_multiprocess_mode_aggregates_worker_files_and_adds_the_state(
        store, monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    for pid in (101, 102):  # two workers' files, as gunicorn's workers write them
        value = MultiProcessValue(lambda pid=pid: pid)(
            "counter", "schedtune_binds", "schedtune_binds_total", ("outcome",), ("bound",),
            "Bind outcomes")
        value.inc(pid - 100)
    store.put_node("t1", T4)
    samples = _parsed(metrics.render([metrics.StateCollector(store, LIMITS)])[0])
    assert samples[("schedtune_binds_total", (("outcome", "bound"),))] == 3
    assert samples[("schedtune_gpus", (("gpu_type", "T4"),))] == 1
    assert ("schedtune_oom_kills_total", ()) not in samples  # not the in-process registry


def _prediction_samples() -> dict[str, float]:
    """Count, sum and the cumulative buckets of `target="time"`."""
    return {f"{s.name}{s.labels.get('le', '')}": s.value
            for family in REGISTRY.collect() if family.name == "schedtune_prediction_error_ratio"
            for s in family.samples if s.labels.get("target") == "time"}


def test_observe_prediction_records_the_ratio() -> None:
    before = _prediction_samples()
    metrics.observe_prediction(observed_s=900.0, predicted_s=600.0)  # 1.5: took longer
    metrics.observe_prediction(observed_s=300.0, predicted_s=600.0)  # 0.5
    after = _prediction_samples()
    added = {k: after[k] - before.get(k, 0.0) for k in after}
    name = "schedtune_prediction_error_ratio"
    assert added[f"{name}_count"] == 2 and added[f"{name}_sum"] == pytest.approx(2.0)
    assert (added[f"{name}_bucket0.25"], added[f"{name}_bucket0.5"]) == (0, 1)
    assert (added[f"{name}_bucket1.25"], added[f"{name}_bucket1.5"]) == (1, 2)


@pytest.mark.parametrize(("observed_s", "predicted_s"), [
    (0.0, 600.0), (-5.0, 600.0), (math.nan, 600.0), (math.inf, 600.0),
    (600.0, 0.0), (600.0, -1.0), (600.0, math.nan), (600.0, math.inf), (1e308, 1e-308),
])  # fmt: skip
def test_observe_prediction_ignores_values_that_are_no_measurement(observed_s, predicted_s) -> None:
    before = _prediction_samples()
    metrics.observe_prediction(observed_s, predicted_s)
    assert _prediction_samples() == before


def test_the_service_metrics_endpoint_serves_the_state(client, store) -> None:
    store.put_node("n1", NodeGpus("NVIDIA-GeForce-RTX-3090", "RTX-3090", 2, 24576, 4))
    families = {f.name: f for f in text_string_to_metric_families(
        client.get("/metrics").get_data(as_text=True))}
    assert families["schedtune_state_up"].samples[0].value == 1
    (capacity,) = families["schedtune_gpu_capacity_mib"].samples
    assert capacity.labels == {"gpu_type": "RTX-3090"} and capacity.value == 2 * 24576
