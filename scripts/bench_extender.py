"""Extender latency against a no-op extender, measured in the same run on the same machine.

    schedtune bench --nodes 100 --mode full --json
    schedtune bench --nodes 1000 --mode names --pods 200

Starts both under gunicorn (same worker count) on 127.0.0.1, then replays
filter + prioritize for a stream of annotated pods against each, one pod at a
time as kube-scheduler does. Prints per-pod milliseconds, the ratio and p99.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import requests

# Run as `python scripts/bench_extender.py`, Python puts scripts/ first on the path, where
# scripts/chaos.py would shadow the `chaos` package: the checkout goes before it.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from chaos.processes import free_port  # noqa: E402
from extender.state.embedded_redis import EmbeddedRedis  # noqa: E402
from extender.model import JobRecord  # noqa: E402
from extender.wire.builders import gfd_node, pod_object  # noqa: E402
from extender.wire.kube import encode_extender_args  # noqa: E402
from extender.wire.node_labels import gpus_from_node  # noqa: E402
from extender.state.store import RedisStore  # noqa: E402

PRODUCTS = [("NVIDIA-GeForce-RTX-3090", 24576), ("NVIDIA-A100-SXM4-40GB", 40960),
            ("Tesla-T4", 15360), ("NVIDIA-H100-80GB-HBM3", 81559), ("NVIDIA-L4", 23034)]
MODELS = ["resnet50", "vgg16", "densenet121", "bert_base", "vit_b_16", "mobilenet_v2"]
ROOT = Path(__file__).resolve().parent.parent  # gunicorn's working directory


def make_nodes(n: int, rng: random.Random) -> list[dict]:
    """v1.Node objects shaped like the ones kube-scheduler sends (the captured
    fixtures' shape and size, about 2.9 KB each): GFD labels, managedFields,
    capacity, conditions, addresses, nodeInfo."""
    nodes = []
    stamp = "2026-01-01T00:00:00Z"
    conditions = [{"type": kind, "status": "True" if kind == "Ready" else "False",
                   "lastHeartbeatTime": stamp, "lastTransitionTime": stamp,
                   "reason": "KubeletReady" if kind == "Ready" else f"KubeletHasNo{kind}",
                   "message": f"kubelet reports {kind}"}
                  for kind in ("MemoryPressure", "DiskPressure", "PIDPressure",
                               "NetworkUnavailable", "Ready")]  # fmt: skip
    for i in range(n):
        product, mem = PRODUCTS[i % len(PRODUCTS)]
        count = rng.choice([1, 2, 4, 8])
        name = f"gpu-node-{i}"
        resources = {"cpu": "64", "ephemeral-storage": "500Gi", "memory": "512Gi",
                     "nvidia.com/gpu": str(count), "pods": "110"}
        node = gfd_node(
            name, product, count, mem,
            labels={"kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux",
                    "nvidia.com/cuda.driver.major": "550", "nvidia.com/cuda.runtime.major": "12",
                    "nvidia.com/gpu.family": "ampere", "nvidia.com/gpu.machine": "bench",
                    "nvidia.com/gpu.present": "true"},
            metadata={"uid": str(uuid.UUID(int=rng.getrandbits(128))),
                      "resourceVersion": str(rng.randrange(1, 10**7)), "creationTimestamp": stamp},
            spec={}, allocatable=resources,
            status={
                "capacity": dict(resources), "conditions": conditions,
                "addresses": [{"type": "InternalIP", "address": f"10.0.{i // 250}.{i % 250}"},
                              {"type": "Hostname", "address": name}],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                "nodeInfo": {"machineID": "", "systemUUID": "", "bootID": "",
                             "kernelVersion": "6.8.0-45-generic", "osImage": "Ubuntu 24.04 LTS",
                             "containerRuntimeVersion": "containerd://1.7.22",
                             "kubeletVersion": "v1.36.2", "kubeProxyVersion": "",
                             "operatingSystem": "linux", "architecture": "amd64"},
            })  # fmt: skip
        labels = node["metadata"]["labels"]
        node["metadata"]["managedFields"] = [{
            "manager": "gpu-feature-discovery", "operation": "Update", "apiVersion": "v1",
            "time": stamp, "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:labels": {".": {}, **{f"f:{k}": {} for k in labels}}}},
        }]  # fmt: skip
        nodes.append(node)
    return nodes


def make_pod(rng: random.Random) -> dict:
    return pod_object("job", "ml", str(uuid.uuid4()), model=rng.choice(MODELS),
                      batch=rng.choice([8, 16, 32]), gpus=None)


def occupy(store: RedisStore, nodes: list[dict], fraction: float, rng: random.Random) -> int:
    """Put a running job on `fraction` of the GPUs, so snapshots carry real queues."""
    placed = 0
    for n in nodes:
        name = n["metadata"]["name"]
        for index in range(int(n["metadata"]["labels"]["nvidia.com/gpu.count"])):
            if rng.random() >= fraction:
                continue
            uid = str(uuid.uuid4())
            record = JobRecord(uid=uid, pod=f"busy-{placed}", namespace="ml", model="resnet50",
                               task="train", node=name, gpu_index=index, reserved_mib=6000,
                               predicted_s=rng.uniform(60, 3600), state="reserved",
                               reserved_at=time.time())  # fmt: skip
            store.reserve(record, [(index, 1e9, 100)], now=time.time(), ttl_s=0)
            store.mark_running(uid, time.time())
            placed += 1
    return placed


def serve(app: str, port: int, env: dict[str, str]) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "gunicorn", "-c",
           str(ROOT / "extender" / "web" / "gunicorn.conf.py"), "--bind", f"127.0.0.1:{port}", app]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            requests.post(f"http://127.0.0.1:{port}/prioritize", timeout=1,
                          json=encode_extender_args(make_pod(random.Random(0)), node_names=[]))
            return proc
        except requests.RequestException:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"{app} did not start on port {port}")


def replay(port: int, bodies: list[bytes]) -> list[float]:
    session = requests.Session()
    headers = {"Content-Type": "application/json"}
    times = []
    for body in bodies:
        started = time.perf_counter()
        for verb in ("filter", "prioritize"):
            res = session.post(f"http://127.0.0.1:{port}/{verb}", data=body, headers=headers,
                               timeout=30)
            res.raise_for_status()
        times.append((time.perf_counter() - started) * 1e3)
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--mode", choices=("full", "names"), default="full")
    parser.add_argument("--pods", type=int, default=200)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--busy", type=float, default=0.3,
                        help="fraction of GPUs that already run a job (default 0.3)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if not 1 <= args.nodes <= 20000 or not 1 <= args.pods <= 100000:
        parser.error("--nodes must be 1..20000 and --pods 1..100000")
    if not 0 <= args.busy <= 1:
        parser.error("--busy must be a fraction in 0..1")

    rng = random.Random(42)
    nodes = make_nodes(args.nodes, rng)
    bodies = []
    for _ in range(args.pods):
        pod = make_pod(rng)
        body = (encode_extender_args(pod, nodes) if args.mode == "full" else
                encode_extender_args(pod, node_names=[n["metadata"]["name"] for n in nodes]))
        bodies.append(json.dumps(body).encode())

    with tempfile.TemporaryDirectory() as tmp:
        redis = EmbeddedRedis(Path(tmp) / "redis")
        url = redis.start()
        store = RedisStore.from_url(url)
        for n in nodes:  # what the node watcher would have recorded
            store.put_node(n["metadata"]["name"], gpus_from_node(n["metadata"]["labels"],
                                                                 n["status"]["allocatable"]))
        busy_gpus = occupy(store, nodes, args.busy, rng)
        env = {**os.environ, "REDIS_URL": url, "EXTENDER_WORKERS": str(args.workers),
               "EXTENDER_BIND": "record", "EXTENDER_NODE_WATCH": "0",
               "EXTENDER_LOG_LEVEL": "WARNING", "PROMETHEUS_MULTIPROC_DIR": tmp}
        ours_port, noop_port = free_port(), free_port()
        procs = [serve("extender.web.app:create_app()", ours_port, env),
                 serve("scripts.noop_extender:create_app()", noop_port, env)]
        try:
            replay(noop_port, bodies[:10])  # warm both
            replay(ours_port, bodies[:10])
            noop = replay(noop_port, bodies)
            ours = replay(ours_port, bodies)
        finally:
            for proc in procs:
                proc.terminate()
                proc.wait(timeout=10)
            redis.stop()

    ours.sort()
    result = {
        "nodes": args.nodes, "mode": args.mode, "pods": args.pods, "busy_gpus": busy_gpus,
        "body_kb": round(sum(map(len, bodies)) / len(bodies) / 1024, 1),
        "noop_ms_per_pod": round(sum(noop) / len(noop), 2),
        "extender_ms_per_pod": round(sum(ours) / len(ours), 2),
        "ratio": round(sum(ours) / sum(noop), 2),
        "p99_ms": round(ours[min(len(ours) - 1, int(0.99 * len(ours)))], 2),
    }
    print(json.dumps(result) if args.json else
          "\n".join(f"{k:>20}: {v}" for k, v in result.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
