"""Extender latency against a no-op extender, measured in the same run on the same machine.

    schedtune bench --nodes 100 --mode full --json
    schedtune bench --nodes 1000 5000 --mode names --pods 200

Per case (node count), starts both under gunicorn (same worker count) on 127.0.0.1 and
replays filter + prioritize for a stream of annotated pods, one pod at a time as
kube-scheduler does, each pod's nodes in a new order as its parallel filters list them
(`--node-order fixed`: one order), alternating pod by pod between the no-op and ours so
both see the same load on a shared machine; prioritize is sent the nodes that server's
filter passed, as kube-scheduler sends them. Prints per-pod milliseconds (mean, p50,
p99), the ratio of the means (the median of `--rounds` replays of the same pods, their
range beside it: the floor moves from one to the next), and where ours spends its time: the same bodies replayed
in-process through the verbs' public pieces (parse: depth check, JSON, decode, as the
verbs do it: node objects seen before are not parsed again; state sync: the snapshot;
estimation: needs per GPU type; decision; write: the filter record; encode: the answer
as bytes), each as a share of their sum, with the whole verb timed through the service
beside it (`service` minus the pieces inside it: its own overhead).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import requests

# Run as `python scripts/bench_extender.py`, Python puts scripts/ first on the path, where
# scripts/chaos.py would shadow the `chaos` package: the checkout goes before it.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from chaos.processes import free_port  # noqa: E402
from extender.model import JobRecord  # noqa: E402
from extender.state.embedded_redis import EmbeddedRedis  # noqa: E402
from extender.state.store import RedisStore  # noqa: E402
from extender.wire.builders import gfd_node, pod_object  # noqa: E402
from extender.wire.kube import encode_extender_args  # noqa: E402
from extender.wire.node_labels import gpus_from_node  # noqa: E402

PRODUCTS = [("NVIDIA-GeForce-RTX-3090", 24576), ("NVIDIA-A100-SXM4-40GB", 40960),
            ("Tesla-T4", 15360), ("NVIDIA-H100-80GB-HBM3", 81559), ("NVIDIA-L4", 23034)]
MODELS = ["resnet50", "vgg16", "densenet121", "bert_base", "vit_b_16", "mobilenet_v2"]
ROOT = Path(__file__).resolve().parent.parent  # gunicorn's working directory


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


def post_pod(session: requests.Session, port: int, body: bytes) -> float:
    """Milliseconds for one pod's filter, then prioritize of the nodes that passed it (as
    kube-scheduler calls them); building the prioritize body is not timed."""
    started = time.perf_counter()
    res = session.post(f"http://127.0.0.1:{port}/filter", data=body,
                       headers={"Content-Type": "application/json"}, timeout=60)
    res.raise_for_status()
    spent = time.perf_counter() - started
    passed = prioritize_body(body, res.content)
    started = time.perf_counter()
    res = session.post(f"http://127.0.0.1:{port}/prioritize", data=passed,
                       headers={"Content-Type": "application/json"}, timeout=60)
    res.raise_for_status()
    return (spent + time.perf_counter() - started) * 1e3


def prioritize_body(filter_body: bytes, filter_answer: bytes) -> bytes:
    """The ExtenderArgs kube-scheduler sends prioritize after this filter answer: the same
    pod, and only the nodes that passed (names, or node objects in full mode)."""
    args, answer = orjson.loads(filter_body), orjson.loads(filter_answer)
    if args.get("NodeNames") is not None:
        args["NodeNames"] = answer["NodeNames"] or []
    else:
        args["Nodes"] = {**args["Nodes"], "items": (answer["Nodes"] or {}).get("items") or []}
    return orjson.dumps(args)


def replay(ports: tuple[int, int], bodies: list[bytes]) -> tuple[list[float], list[float]]:
    """Per-pod milliseconds on each of two servers, pod by pod in turn (which goes first
    alternates), so slow spells of a shared machine hit both alike."""
    sessions = (requests.Session(), requests.Session())
    times: tuple[list[float], list[float]] = ([], [])
    for i, body in enumerate(bodies):
        for side in ((0, 1) if i % 2 == 0 else (1, 0)):
            times[side].append(post_pod(sessions[side], ports[side], body))
    return times


PHASES = ("parse", "state sync", "estimation", "decision", "write", "encode")


def phase_profile(url: str, bodies: list[bytes], now: Callable[[], float]) -> dict[str, Any]:
    """Median milliseconds per pod (filter + prioritize) of each phase, in-process, with
    the settings the served extender reads from the environment."""
    # Imported here: the HTTP comparison alone also runs against older checkouts.
    from estimator.predict import Estimator
    from extender.core import filtering, prioritizing
    from extender.core.annotations import parse_demand
    from extender.core.gpu_table import distinct_layouts
    from extender.core.job import PodJob
    from extender.model import FilterRecord
    from extender.service import Scheduler
    from extender.settings import Settings
    from extender.sizing import Sizer, check_fits_somewhere
    from extender.state.store import WaitersRead
    from extender.web.known_nodes import KnownNodeObjects
    from extender.wire import kube as wire_kube
    from extender.wire.objects import NodeLayouts

    settings = Settings.from_env({**os.environ, "REDIS_URL": url, "EXTENDER_BIND": "record"})
    store = RedisStore.from_url(url)
    estimator = Estimator.load(design=settings.estimator_design)
    estimator.warm()
    sizer = Sizer(estimator, settings.declared_default_s)
    scheduler = Scheduler(settings, RedisStore.from_url(url), estimator)
    layouts, known = NodeLayouts(), KnownNodeObjects()
    samples: dict[str, list[float]] = {name: [] for name in (*PHASES, "service")}
    for filter_body in bodies:
        spent = dict.fromkeys(samples, 0.0)
        body, answer = filter_body, b""
        for verb in ("filter", "prioritize"):
            if verb == "prioritize":
                body = prioritize_body(filter_body, answer)
            clock = _Clock()
            args = wire_kube.decode_args(known.parse(body), layouts)
            spent["parse"] += clock.lap()
            demand = parse_demand(args.pod)
            assert demand is not None, "bench pods are annotated"
            # the cycle; in names mode filter's record goes with its read (`Scheduler.filter`)
            written = FilterRecord(demand) if verb == "filter" and not any(
                args.nodes.values()) else None
            snapshot = store.snapshot(args.nodes, now(), sync=verb == "filter",
                                      waiters=WaitersRead(demand.uid, settings.hold_for + 1,
                                                          settings.prioritize_reuse_s),
                                      record=written, record_ttl_s=settings.demand_ttl_s)
            spent["state sync"] += clock.lap()
            kinds = distinct_layouts(snapshot.nodes)
            needs = sizer.needs(demand, kinds, snapshot.floors)
            check_fits_somewhere(demand, needs, kinds)
            spent["estimation"] += clock.lap()
            job = PodJob(demand, snapshot, needs)
            if verb == "filter":
                decision = filtering.decide_filter(job, args.nodes, settings)
                spent["decision"] += clock.lap()
                if decision.writes_beyond(written):
                    store.record_filter(decision.record, settings.demand_ttl_s, decision.waiter,
                                        snapshot.now, settings.wait_ttl_s, decision.told)
                spent["write"] += clock.lap()
                answer = orjson.dumps(wire_kube.encode_filter(args, decision.verdicts))
            else:
                scores = prioritizing.decide_scores(job, args.nodes, settings)
                spent["decision"] += clock.lap()
                wire_kube.encode_priorities_json(scores)
            spent["encode"] += clock.lap()
            if verb == "filter":
                scheduler.filter(args.pod, args.nodes)
            else:
                scheduler.prioritize(args.pod, args.nodes)
            spent["service"] += clock.lap()
        for name, ms in spent.items():
            samples[name].append(ms)
    medians = {name: statistics.median(values) for name, values in samples.items()}
    pieces = sum(medians[name] for name in PHASES)
    inside = sum(medians[name] for name in ("state sync", "estimation", "decision", "write"))
    return {"ms_per_pod": {name: round(medians[name], 3) for name in PHASES},
            "share": {name: round(medians[name] / pieces, 3) for name in PHASES},
            "pieces_ms": round(pieces, 3), "service_ms": round(medians["service"], 3),
            "service_overhead_ms": round(medians["service"] - inside, 3)}


class _Clock:
    def __init__(self) -> None:
        self._last = time.perf_counter()

    def lap(self) -> float:
        """Milliseconds since the last lap."""
        now = time.perf_counter()
        spent, self._last = (now - self._last) * 1e3, now
        return spent


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run_case(nodes_count: int, args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(42)
    nodes = make_nodes(nodes_count, rng, args.gpus)
    bodies = [orjson.dumps(encode_extender_args(make_pod(rng), listed) if args.mode == "full"
                           else encode_extender_args(make_pod(rng), node_names=[
                               n["metadata"]["name"] for n in listed]))
              for listed in node_orders(nodes, args.pods, args.node_order, rng)]
    with tempfile.TemporaryDirectory() as tmp:
        redis = EmbeddedRedis(Path(tmp) / "redis")
        url = redis.start()
        try:
            store = RedisStore.from_url(url)
            for n in nodes:  # what the node watcher would have recorded
                store.put_node(n["metadata"]["name"],
                               gpus_from_node(n["metadata"]["labels"], n["status"]["allocatable"]))
            busy_gpus = occupy(store, nodes, args.busy, rng)
            env = {**os.environ, "REDIS_URL": url, "EXTENDER_WORKERS": str(args.workers),
                   "EXTENDER_BIND": "record", "EXTENDER_NODE_WATCH": "0",
                   "EXTENDER_LOG_LEVEL": "WARNING", "PROMETHEUS_MULTIPROC_DIR": tmp}
            ports = (free_port(), free_port())
            procs = [serve("scripts.noop_extender:create_app()", ports[0], env),
                     serve("extender.web.app:create_app()", ports[1], env)]
            try:
                replay(ports, bodies[:10])  # warm both
                rounds = [replay(ports, bodies) for _ in range(args.rounds)]
            finally:
                for proc in procs:
                    proc.terminate()
                    proc.wait(timeout=10)
            phases = phase_profile(url, bodies[:args.phase_pods], time.time) \
                if args.phase_pods else None
        finally:
            redis.stop()
    noop = [ms for times, _ in rounds for ms in times]
    ours = [ms for _, times in rounds for ms in times]
    ratios = [sum(ours_ms) / sum(noop_ms) for noop_ms, ours_ms in rounds]
    return {
        "nodes": nodes_count, "mode": args.mode, "node_order": args.node_order,
        "pods": args.pods, "rounds": args.rounds, "busy_gpus": busy_gpus,
        "gpus": sum(int(n["metadata"]["labels"]["nvidia.com/gpu.count"]) for n in nodes),
        "body_kb": round(sum(map(len, bodies)) / len(bodies) / 1024, 1),
        "noop_ms_per_pod": round(statistics.fmean(noop), 2),
        "noop_p50_ms": round(percentile(noop, 0.5), 2),
        "noop_p99_ms": round(percentile(noop, 0.99), 2),
        "extender_ms_per_pod": round(statistics.fmean(ours), 2),
        "p50_ms": round(percentile(ours, 0.5), 2), "p99_ms": round(percentile(ours, 0.99), 2),
        "ratio": round(statistics.median(ratios), 2),  # of the rounds' ratios of means
        "round_ratios": [round(r, 2) for r in ratios],
        "ratio_p50": round(percentile(ours, 0.5) / percentile(noop, 0.5), 2),
        "pods_per_s": round(1000 / statistics.fmean(ours), 1),  # each a filter + prioritize
        "phases": phases,
    }


def table(cases: list[dict[str, Any]]) -> str:
    lines = ["| case | no-op | extender | ratio | p50 | p99 | pods/s | "
             + " | ".join(PHASES) + " | in-process | service overhead |",
             "|---" * (9 + len(PHASES)) + "|"]
    for c in cases:
        profile = c["phases"]
        shares = (" | ".join(f"{100 * profile['share'][p]:.0f} %" for p in PHASES)
                  + f" | {profile['pieces_ms']:.2f} ms | {profile['service_overhead_ms']:.2f} ms"
                  ) if profile else " | ".join("-" for _ in range(len(PHASES) + 2))
        lines.append(f"| {c['nodes']} nodes ({c['gpus']} GPUs), {c['mode']}, "
                     f"{c['node_order']} order | "
                     f"{c['noop_ms_per_pod']} ms | {c['extender_ms_per_pod']} ms | "
                     f"{c['ratio']} ({min(c['round_ratios'])}-{max(c['round_ratios'])}) | "
                     f"{c['p50_ms']} ms | {c['p99_ms']} ms | {c['pods_per_s']} | {shares} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[100],
                        help="node counts, one case each (default 100)")
    parser.add_argument("--mode", choices=("full", "names"), default="full")
    parser.add_argument("--pods", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3,
                        help="replays of the pods through both servers (default 3); the "
                        "ratio is the median of the rounds' ratios, their range beside it")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--gpus", type=int, default=0,
                        help="GPUs per node (default 0: 1, 2, 4 or 8 at random); the "
                        "openb trace's scale: --nodes 1200 --gpus 5")
    parser.add_argument("--busy", type=float, default=0.3,
                        help="fraction of GPUs that already run a job (default 0.3)")
    parser.add_argument("--phase-pods", type=int, default=50,
                        help="pods replayed in-process for the phase profile (0: none)")
    parser.add_argument("--node-order", choices=("shuffled", "fixed"), default="shuffled",
                        help="shuffled (default): each pod's nodes in a new order, as "
                        "kube-scheduler's parallel filters list them; fixed: one order")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if not all(1 <= n <= 20000 for n in args.nodes) or not 1 <= args.pods <= 100000:
        parser.error("--nodes must be 1..20000 and --pods 1..100000")
    if not 1 <= args.rounds <= 100:
        parser.error("--rounds must be 1..100")
    if not 0 <= args.busy <= 1 or not 0 <= args.phase_pods <= args.pods:
        parser.error("--busy must be a fraction in 0..1 and --phase-pods 0..--pods")
    if not 0 <= args.gpus <= 64:
        parser.error("--gpus must be 0..64")
    cases = []
    for count in args.nodes:
        cases.append(run_case(count, args))
        print(f"{count} nodes ({args.mode}): ratio {cases[-1]['ratio']}", file=sys.stderr)
    print(json.dumps({"cases": cases}) if args.json else table(cases))
    return 0


if __name__ == "__main__":
    sys.exit(main())
