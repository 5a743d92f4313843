"""One benchmark case: both servers under gunicorn on a simulated cluster, the same pods
through each in turn, and the phase profile beside (see `scripts/bench_extender.py`)."""

from __future__ import annotations

import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import requests

from bench.cluster import make_nodes, make_pod, node_orders, occupy, prioritize_body
from bench.phases import PHASES, phase_profile
from chaos.processes import free_port
from extender.state.embedded_redis import EmbeddedRedis
from extender.state.store import RedisStore
from extender.wire.kube import encode_extender_args
from extender.wire.node_labels import gpus_from_node

ROOT = Path(__file__).resolve().parent.parent  # gunicorn's working directory


@dataclass(frozen=True)
class Options:
    """A run's choices (the CLI's arguments): see `scripts/bench_extender.py`."""

    mode: str = "full"
    pods: int = 200
    rounds: int = 3
    workers: int = 2
    gpus: int = 0
    busy: float = 0.3
    phase_pods: int = 50
    node_order: str = "shuffled"
    gap: str = "client"


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


Built = dict[tuple[int, bytes], bytes]  # (pod, filter's answer) -> prioritize's body


def post_pod(session: requests.Session, port: int, pod: int, body: bytes,
             built: Built | None = None) -> float:
    """Milliseconds for one pod's filter, then prioritize of the nodes that passed it (as
    kube-scheduler calls them); building the prioritize body is not timed. With `built`,
    a body built for the same answer in an earlier pass is sent at once (no gap between
    the calls); a new one is built and kept."""
    started = time.perf_counter()
    res = session.post(f"http://127.0.0.1:{port}/filter", data=body,
                       headers={"Content-Type": "application/json"}, timeout=60)
    res.raise_for_status()
    spent = time.perf_counter() - started
    passed = None if built is None else built.get((pod, res.content))
    if passed is None:
        passed = prioritize_body(body, res.content)
        if built is not None:
            built[pod, res.content] = passed
    started = time.perf_counter()
    res = session.post(f"http://127.0.0.1:{port}/prioritize", data=passed,
                       headers={"Content-Type": "application/json"}, timeout=60)
    res.raise_for_status()
    return (spent + time.perf_counter() - started) * 1e3


def replay(ports: tuple[int, int], bodies: list[bytes],
           built: tuple[Built, Built] | None = None) -> tuple[list[float], list[float]]:
    """Per-pod milliseconds on each of two servers, pod by pod in turn (which goes first
    alternates), so slow spells of a shared machine hit both alike; `built`: each
    server's prioritize bodies built ahead (`post_pod`)."""
    sessions = (requests.Session(), requests.Session())
    times: tuple[list[float], list[float]] = ([], [])
    for i, body in enumerate(bodies):
        for side in ((0, 1) if i % 2 == 0 else (1, 0)):
            times[side].append(post_pod(sessions[side], ports[side], i, body,
                                        None if built is None else built[side]))
    return times


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run_case(nodes_count: int, args: Options) -> dict[str, Any]:
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
            procs = [serve("bench.noop_extender:create_app()", ports[0], env),
                     serve("extender.web.app:create_app()", ports[1], env)]
            try:
                replay(ports, bodies[:10])  # warm both
                built: tuple[Built, Built] | None = None
                if args.gap == "none":  # every prioritize body built in an untimed pass
                    built = ({}, {})
                    replay(ports, bodies, built)
                rounds = [replay(ports, bodies, built) for _ in range(args.rounds)]
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
        "gap": args.gap,
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


def render_table(cases: list[dict[str, Any]]) -> str:
    """The cases as a Markdown table (the README quotes it)."""
    lines = ["| case | no-op | extender | ratio | p50 | p99 | pods/s | "
             + " | ".join(PHASES) + " | in-process | service overhead | after answer |",
             "|---" * (10 + len(PHASES)) + "|"]
    for c in cases:
        profile = c["phases"]
        shares = (" | ".join(f"{100 * profile['share'][p]:.0f} %" for p in PHASES)
                  + f" | {profile['pieces_ms']:.2f} ms | {profile['service_overhead_ms']:.2f} ms"
                  + f" | {profile['after_answer_ms']:.2f} ms"
                  ) if profile else " | ".join("-" for _ in range(len(PHASES) + 3))
        lines.append(f"| {c['nodes']} nodes ({c['gpus']} GPUs), {c['mode']}, "
                     f"{c['node_order']} order"
                     + (", no gap" if c["gap"] == "none" else "") + " | "
                     f"{c['noop_ms_per_pod']} ms | {c['extender_ms_per_pod']} ms | "
                     f"{c['ratio']} ({min(c['round_ratios'])}-{max(c['round_ratios'])}) | "
                     f"{c['p50_ms']} ms | {c['p99_ms']} ms | {c['pods_per_s']} | {shares} |")
    return "\n".join(lines)
