"""What the model registry costs a replica, on a real (embedded) Redis:

    python -m scripts.bench_registry [--models 200]

the first load of N registered models, a reload after one entry changed, one after an
unusable entry was added, and filter latency (p50 of 40) for a pod naming a built-in
model, a registered one and a stale entry (stored under another key than its name).
Entries hold built-in models' features under new names (no torch)."""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from chaos.registry import entry_like
from estimator.predict import Estimator
from extender.registry import ModelRegistry
from extender.settings import Settings
from extender.sizing import Sizer
from extender.state.embedded_redis import EmbeddedRedis
from extender.state.store import RedisStore
from extender.web.app import create_app
from extender.wire.builders import gfd_node, pod_object
from extender.wire.kube import encode_extender_args

BASES = ("resnet50", "vgg16", "mobilenet_v2")
NODE = gfd_node("a100", "NVIDIA-A100-SXM4-40GB", 2, 40960, 4)


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 1)


def reloads(store: RedisStore, models: int) -> dict[str, float]:
    registry = ModelRegistry(store, Sizer(Estimator.load()))
    started = time.perf_counter()
    registry.sync(now=True)
    first = time.perf_counter() - started
    changed = []
    for k in range(5):
        store.models.publish(f"net{k}", entry_like("densenet121", f"net{k}").to_json())
        started = time.perf_counter()
        registry.sync(now=True)
        changed.append(time.perf_counter() - started)
    store.models.publish("unusable", b"{")
    started = time.perf_counter()
    registry.sync(now=True)
    unusable = time.perf_counter() - started
    store.models.remove("unusable")
    return {f"first_load_of_{models}_ms": _ms(first),
            "reload_after_one_changed_ms": _ms(statistics.median(changed)),
            "reload_after_one_unusable_added_ms": _ms(unusable)}


def filters(url: str) -> dict[str, float]:
    client = create_app(Settings(redis_url=url, bind_mode="record", node_watch=False,
                                 log_level="ERROR")).test_client()

    def p50(model: str) -> float:
        times = []
        for i in range(40):
            body = encode_extender_args(pod_object(f"p{i}", "bench", f"uid-{model}-{i}",
                                                   model=model, batch=32), [NODE])
            started = time.perf_counter()
            client.post("/filter", json=body)
            times.append(time.perf_counter() - started)
        return _ms(statistics.median(times))

    return {"filter_p50_builtin_ms": p50("resnet50"), "filter_p50_registered_ms": p50("net7"),
            "filter_p50_stale_entry_ms": p50("moved")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=int, default=200)
    args = parser.parse_args(argv)
    if not 10 <= args.models <= 10_000:
        parser.error("--models 10..10000")
    with tempfile.TemporaryDirectory(prefix="schedtune-bench-") as tmp:
        redis = EmbeddedRedis(Path(tmp) / "redis")
        url = redis.start()
        try:
            store = RedisStore.from_url(url)
            for i in range(args.models):
                name = f"net{i}"
                store.models.publish(name, entry_like(BASES[i % len(BASES)], name).to_json())
            store.models.publish("moved", entry_like("resnet50", "elsewhere").to_json())
            figures = {**reloads(store, args.models), **filters(url)}
        finally:
            redis.stop()
    for name, value in figures.items():
        print(f"{name}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
