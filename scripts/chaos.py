"""Load, race and fault scenarios against real processes on 127.0.0.1, with figures.

    schedtune chaos --json                       # 10,000 fuzz cases, 10,000 binds
    schedtune chaos --fuzz 500 --binds 500       # a short run

Starts one redis-server (AOF) and two extender services (gunicorn, two workers each) on
the same Redis. Then, in this order:

1. fuzz: mutated kube-scheduler and Volcano bodies to both replicas (any 5xx is a
   server error; 503 with a retriable error is not);
2. race: threads send filter to one replica and bind to the other for pods that compete
   for the same few GPUs, while one replica is killed with SIGKILL and restarted, Redis
   is restarted (persistence on), and Redis is made unreachable for a while (annotated
   pods must get a clear retriable error, unannotated pods must pass through);
3. audit: no GPU over capacity or over its collocation limit, no pod reserved twice or
   on two GPUs, every bind that succeeded still held (none lost).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests

from extender.state.embedded_redis import EmbeddedRedis
from extender.state.store import RedisStore
from extender.wire.builders import gfd_node, pod_object
from extender.wire.kube import encode_binding_args, encode_extender_args
from extender.wire.volcano import (
    encode_event_request, encode_predicate_request, encode_prioritize_request,
)  # fmt: skip
from scripts.bench_extender import free_port, serve

GPUS_PER_NODE, NODES, LIMIT, MEMORY = 2, 4, 3, 24576
MODELS = ["resnet50", "vgg16", "densenet121", "mobilenet_v2", "bert_base", "resnet18"]


def node_objects() -> list[dict]:
    return [gfd_node(f"gpu-{i}", "NVIDIA-GeForce-RTX-3090", GPUS_PER_NODE, MEMORY, 4)
            for i in range(NODES)]


def pod(annotated: bool = True, rng: random.Random | None = None) -> dict:
    """A pod whose spec carries a secret (env) that must never reach a log line."""
    rng = rng or random.Random()
    model, batch = (rng.choice(MODELS), rng.choice([8, 16, 32, 64])) if annotated else (None, None)
    return pod_object(f"p-{uuid.uuid4().hex[:10]}", "chaos", str(uuid.uuid4()), model=model,
                      batch=batch, image="x", gpus=None, env={"TOKEN": "chaos-secret"})


def mutated(rng: random.Random, nodes: list[dict]) -> tuple[str, object]:
    """A valid body with random damage: dropped or retyped keys, absurd values, nesting."""
    p = pod(rng.random() < 0.8, rng)
    junk = [None, True, -1, 0, 10**12, 1e308, "", "\u202e\u0000\ud7ff", [], {}, [[[[]]]],
            {"a": {"b": {"c": [1, {"d": None}]}}}, "x" * 5000]
    if rng.random() < 0.5:
        p["metadata"]["annotations"][rng.choice(["schedtune.io/batch-size", "schedtune.io/model",
                                                 "schedtune.io/task", "schedtune.io/epochs"])] = \
            rng.choice(junk + ["0", "-5", "1000000000000", "nope", "inference"])
    node = json.loads(json.dumps(rng.choice(nodes)))
    if rng.random() < 0.4:
        node["metadata"]["labels"][rng.choice(list(node["metadata"]["labels"]))] = rng.choice(junk)
    verb = rng.choice(["filter", "prioritize", "bind", "volcano/predicate", "volcano/prioritize",
                       "volcano/allocate", "volcano/deallocate"])
    body: dict = {
        "filter": encode_extender_args(p, [node]),
        "prioritize": encode_extender_args(p, node_names=["gpu-0", "ghost"]),
        "bind": encode_binding_args(p, "gpu-0"),
        "volcano/predicate": encode_predicate_request(p, node),
        "volcano/prioritize": encode_prioritize_request(p, [node]),
        "volcano/allocate": encode_event_request(p, "gpu-0"),
        "volcano/deallocate": encode_event_request(p, "gpu-0"),
    }[verb]
    for key in list(body):
        roll = rng.random()
        if roll < 0.1:
            del body[key]
        elif roll < 0.2:
            body[key] = rng.choice(junk)
    if rng.random() < 0.05:
        return verb, rng.choice(junk)
    return verb, body


class Replicas:
    def __init__(self, tmp: Path, redis_url: str) -> None:
        self.env = {**os.environ, "REDIS_URL": redis_url, "EXTENDER_WORKERS": "2",
                    "EXTENDER_BIND": "record", "EXTENDER_NODE_WATCH": "0",
                    "EXTENDER_LOG_LEVEL": "ERROR", "EXTENDER_COLLOCATION_LIMIT": str(LIMIT),
                    "EXTENDER_REDIS_TIMEOUT_S": "0.5", "PROMETHEUS_MULTIPROC_DIR": str(tmp)}
        self.ports = [free_port(), free_port()]
        self.procs = [self._start(port) for port in self.ports]

    def _start(self, port: int) -> subprocess.Popen:
        return serve("extender.web.app:create_app()", port, self.env)

    def url(self, i: int) -> str:
        return f"http://127.0.0.1:{self.ports[i]}"

    def kill_and_restart(self, i: int) -> None:
        self.procs[i].kill()  # SIGKILL to the gunicorn master; its workers follow
        self.procs[i].wait()
        time.sleep(0.5)
        self.procs[i] = self._start(self.ports[i])

    def stop(self) -> None:
        for proc in self.procs:
            proc.terminate()
            proc.wait(timeout=15)


def fuzz(replicas: Replicas, cases: int, seed: int) -> tuple[int, list[str]]:
    rng = random.Random(seed)
    nodes = node_objects()
    bodies = [mutated(rng, nodes) for _ in range(cases)]
    errors: list[str] = []

    def send(item: tuple[int, tuple[str, object]]) -> None:
        i, (verb, body) = item
        with requests.Session() as http:
            res = http.post(f"{replicas.url(i % 2)}/{verb}", data=json.dumps(body),
                            headers={"Content-Type": "application/json"}, timeout=10)
        if res.status_code >= 500 and res.status_code != 503:
            errors.append(f"{verb} -> {res.status_code}")

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(send, enumerate(bodies)))
    return cases, errors


def race(replicas: Replicas, redis: EmbeddedRedis, binds: int, seed: int) -> dict:
    nodes, rng = node_objects(), random.Random(seed)
    pods = [pod(True, rng) for _ in range(max(1, binds // 2))]  # each pod binds twice
    store = RedisStore.from_url(redis.url)
    stats: Counter = Counter()
    bound: dict[str, str] = {}
    lock = threading.Lock()
    outage = threading.Event()
    release_gate = threading.Lock()

    def attempt(p: dict) -> None:
        side = rng.randrange(2)
        try:
            with requests.Session() as http:
                filt = http.post(f"{replicas.url(side)}/filter", timeout=10,
                                 json=encode_extender_args(p, nodes))
                with lock:
                    stats["requests"] += 1
                if filt.status_code >= 500:
                    with lock:
                        stats["server_errors"] += 1
                    return
                result = filt.json()
                if result.get("Error"):
                    with lock:
                        stats["retriable_errors"] += 1
                    return
                passing = [n["metadata"]["name"] for n in (result["Nodes"] or {}).get("items", [])]
                # No room: bind anyway, as a replica acting on a stale filter would; it must
                # be refused, never over-commit.
                node = rng.choice(passing or [n["metadata"]["name"] for n in nodes])
                meta = p["metadata"]
                body = encode_binding_args(p, node)
                held = False
                for _ in range(2):  # kube-scheduler may retry a bind: it must be idempotent
                    res = http.post(f"{replicas.url(1 - side)}/bind", json=body, timeout=10)
                    with lock:
                        stats["requests"] += 1
                        stats["bind_attempts"] += 1
                    if res.status_code >= 500:
                        with lock:
                            stats["server_errors"] += 1
                    elif res.json() == {"Error": ""}:
                        held = True
                if held:  # only a pod whose binding is over can end (no release mid-bind)
                    with lock:
                        bound[meta["uid"]] = node
                finish_one()
        except requests.ConnectionError:
            with lock:
                stats["connection_refused"] += 1  # the killed replica: kube-scheduler retries

    def finish_one() -> None:
        """Half the time a running pod ends (the monitor releases it): GPUs stay contested."""
        if rng.random() < 0.5:
            return
        with release_gate:  # a release never spans the Redis stop: its outcome is known
            if outage.is_set():
                return
            with lock:
                if not bound:
                    return
                uid = rng.choice(list(bound))
                node = bound.pop(uid)
            try:
                store.release(uid)
            except Exception:  # noqa: BLE001  (Redis restarting: it stays bound)
                with lock:
                    bound[uid] = node

    recovery: dict[str, float] = {}

    def faults() -> None:
        time.sleep(1.0)
        replicas.kill_and_restart(0)
        time.sleep(1.0)
        with release_gate:
            outage.set()
            redis.stop()  # graceful: AOF flushed
        time.sleep(1.0)
        with requests.Session() as http:  # while Redis is down
            plain = http.post(f"{replicas.url(1)}/filter", timeout=10,
                              json=encode_extender_args(pod(False), nodes))
            annotated = http.post(f"{replicas.url(1)}/filter", timeout=10,
                                  json=encode_extender_args(pod(True), nodes))
        passed = (plain.json().get("Nodes") or {}).get("items", [])
        recovery["passthrough_ok"] = float(len(passed) == NODES)
        recovery["retriable_error_ok"] = float("retry" in annotated.json().get("Error", ""))
        restarted = time.monotonic()
        redis.start()
        outage.clear()
        with requests.Session() as http:
            while time.monotonic() - restarted < 30:
                res = http.post(f"{replicas.url(1)}/filter", timeout=10,
                                json=encode_extender_args(pod(True), nodes))
                if res.status_code == 200 and not res.json().get("Error"):
                    break
                time.sleep(0.01)
        recovery["recovery_s"] = time.monotonic() - restarted

    fault_thread = threading.Thread(target=faults)
    fault_thread.start()
    cursor = iter(range(10**9))

    def worker() -> None:
        """Bind pods until all were tried and the faults are over (the stream spans them)."""
        while True:
            with lock:
                i = next(cursor)
            enough = i >= len(pods) and stats["bind_attempts"] >= binds
            if (enough or i >= 4 * len(pods)) and not fault_thread.is_alive():
                return
            attempt(pods[i] if i < len(pods) else pod(True, rng))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    fault_thread.join()
    return {"stats": stats, "bound": bound, **recovery}


def audit(redis_url: str, bound: dict[str, str]) -> dict[str, int]:
    store = RedisStore.from_url(redis_url)
    jobs = store.jobs()
    per_gpu: dict[tuple[str, int], list] = {}
    for job in jobs:
        per_gpu.setdefault((job.node, job.gpu_index), []).append(job)
    overcommits = sum(1 for js in per_gpu.values()
                      if sum(j.reserved_mib for j in js) > MEMORY or len(js) > LIMIT)
    queues = Counter(uid for members in store.queues().values() for uid in members)
    doubles = sum(1 for n in queues.values() if n > 1) + sum(
        1 for j in jobs if bound.get(j.uid, j.node) != j.node)
    held = {j.uid for j in jobs}
    lost = sum(1 for uid in bound if uid not in held)
    return {"overcommits": overcommits, "double_reservations": doubles, "lost_reservations": lost,
            "reservations": len(jobs)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fuzz", type=int, default=10_000)
    parser.add_argument("--binds", type=int, default=10_000, help="pods racing for the GPUs")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if not 0 <= args.fuzz <= 1_000_000 or not 10 <= args.binds <= 1_000_000:
        parser.error("--fuzz 0..1000000, --binds 10..1000000")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="schedtune-chaos-") as tmp:
        redis = EmbeddedRedis(Path(tmp) / "redis")
        redis_url = redis.start()
        replicas = Replicas(Path(tmp), redis_url)
        try:
            cases, fuzz_errors = fuzz(replicas, args.fuzz, args.seed)
            raced = race(replicas, redis, args.binds, args.seed)
            checked = audit(redis_url, raced["bound"])
        finally:
            replicas.stop()
            redis.stop()
    stats = raced["stats"]
    result = {
        "requests": cases + stats["requests"], "fuzz_cases": cases,
        "server_errors": len(fuzz_errors) + stats["server_errors"],
        "overcommits": checked["overcommits"],
        "double_reservations": checked["double_reservations"],
        "lost_reservations": checked["lost_reservations"],
        "recovery_s": round(raced.get("recovery_s", -1), 3),
        "bind_attempts": stats["bind_attempts"], "binds_held": len(raced["bound"]),
        "retriable_errors_during_outage": stats["retriable_errors"],
        "connection_refused_while_killed": stats["connection_refused"],
        "passthrough_during_outage": bool(raced.get("passthrough_ok")),
        "retriable_error_during_outage": bool(raced.get("retriable_error_ok")),
        "wall_s": round(time.monotonic() - started, 1),
    }
    if fuzz_errors:
        result["server_error_samples"] = fuzz_errors[:5]
    print(json.dumps(result, indent=None if args.json else 2))
    clean = not (result["server_errors"] or result["overcommits"] or
                 result["double_reservations"] or result["lost_reservations"])
    return 0 if clean else 1


if __name__ == "__main__":
    sys.exit(main())
