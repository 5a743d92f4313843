"""The benchmark's world: v1.Node objects as kube-scheduler sends them, the node watcher's
layouts and running jobs in Redis, annotated pods, and the bodies of their verbs."""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Iterator

import orjson

from extender.model import JobRecord
from extender.state.store import RedisStore
from extender.wire.builders import gfd_node, pod_object

PRODUCTS = [("NVIDIA-GeForce-RTX-3090", 24576), ("NVIDIA-A100-SXM4-40GB", 40960),
            ("Tesla-T4", 15360), ("NVIDIA-H100-80GB-HBM3", 81559), ("NVIDIA-L4", 23034)]
MODELS = ["resnet50", "vgg16", "densenet121", "bert_base", "vit_b_16", "mobilenet_v2"]
def make_nodes(n: int, rng: random.Random, gpus: int = 0) -> list[dict]:
    """v1.Node objects shaped like the ones kube-scheduler sends (the captured
    fixtures' shape and size, about 2.9 KB each): GFD labels, managedFields,
    capacity, conditions, addresses, nodeInfo. `gpus` per node (0: 1, 2, 4 or 8 at
    random)."""
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
        count = gpus or rng.choice([1, 2, 4, 8])
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


def node_orders(nodes: list[dict], pods: int, how: str,
                rng: random.Random) -> Iterator[list[dict]]:
    """The node list each pod's filter is sent: "shuffled", a new order each pod, as
    kube-scheduler lists nodes as its parallel filters finish; "fixed", the same order."""
    for _ in range(pods):
        yield rng.sample(nodes, len(nodes)) if how == "shuffled" else nodes


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


def prioritize_body(filter_body: bytes, filter_answer: bytes) -> bytes:
    """The ExtenderArgs kube-scheduler sends prioritize after this filter answer: the same
    pod, and only the nodes that passed (names, or node objects in full mode)."""
    args, answer = orjson.loads(filter_body), orjson.loads(filter_answer)
    if args.get("NodeNames") is not None:
        args["NodeNames"] = answer["NodeNames"] or []
    else:
        args["Nodes"] = {**args["Nodes"], "items": (answer["Nodes"] or {}).get("items") or []}
    return orjson.dumps(args)
