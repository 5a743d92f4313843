"""Decisions per second through HTTP on openb, ours as shipped against the floor of the
machine (docs/2026-12-07-openb-no-gpu-pods.md, "Decisions per second"):

    EXTENDER_INTERFERENCE_ALPHA=0 PYTHONPATH=. python docs/2026-12-07-openb-http-floor.py N

The first N arrivals of seed 1 under FGD's protocol, every pod decided by ours served by
gunicorn as shipped (2 gevent workers, a process of its own, names mode, bind recording
the reservation) through the protocol's harness (`replay.fgd_extender`); every request
ours was sent (filter, prioritize, bind) is kept, then sent again, in order, over the same
kind of client, to the no-op extender (`bench.noop_extender`) under the same gunicorn: the
same bytes, nothing decided. Prints both in decisions per second and per call."""

import os
import sys
import tempfile
import time

import orjson
import requests

from bench.latency import serve
from chaos.processes import free_port
from extender.settings import Settings
from replay import fgd_protocol
from replay.fgd_extender import SLOTS_PER_GPU, ExtenderOnFgd
from replay.fgd_workload import load_trace, sample_workload
from replay.runner import replay_redis

ARRIVALS = int(sys.argv[1])
nodes, pods = load_trace("../shared/data/alibaba-openb")
arrivals = pods.take(sample_workload(pods, nodes.capacity_milli, 1, 1.3, "simulator")[:ARRIVALS])
sent: list[tuple[str, bytes]] = []
spent: dict[str, float] = {}


def timed_post(session: requests.Session, port: int, verb: str, body: bytes) -> bytes:
    started = time.perf_counter()
    res = session.post(f"http://127.0.0.1:{port}/{verb}", data=body, timeout=30,
                       headers={"Content-Type": "application/json"})
    res.raise_for_status()
    spent[verb] = spent.get(verb, 0.0) + time.perf_counter() - started
    return res.content


with replay_redis(os.environ) as url, tempfile.TemporaryDirectory() as tmp:
    env = {**os.environ, "REDIS_URL": url, "EXTENDER_WORKERS": "2", "EXTENDER_BIND": "record",
           "EXTENDER_NODE_WATCH": "0", "EXTENDER_LOG_LEVEL": "ERROR",
           "EXTENDER_COLLOCATION_LIMIT": str(SLOTS_PER_GPU), "PROMETHEUS_MULTIPROC_DIR": tmp}
    ports = {"ours": free_port(), "no-op": free_port()}
    procs = [serve("extender.web.app:create_app()", ports["ours"], env),
             serve("bench.noop_extender:create_app()", ports["no-op"], env)]
    try:
        policy = ExtenderOnFgd(url, Settings.from_env(os.environ))
        session = requests.Session()

        def post(_url: str, verb: str, body: dict) -> object:  # ours, as shipped
            data = orjson.dumps(body)
            sent.append((verb, data))
            return orjson.loads(timed_post(session, ports["ours"], verb, data))

        reset = policy.reset

        def reset_served(state):
            reset(state)
            policy.extender._post = post

        policy.reset = reset_served
        fgd_protocol.run(policy, nodes, arrivals, 1)
        policy.close()
        ours = dict(spent)
        spent.clear()
        floor_session = requests.Session()
        for verb, data in sent:
            timed_post(floor_session, ports["no-op"], verb, data)
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=10)
calls = {verb: sum(1 for v, _ in sent if v == verb) for verb in ours}
for name, times in (("ours", ours), ("no-op", spent)):
    per_call = ", ".join(f"{v} {1000 * times[v] / calls[v]:.2f} ms" for v in times)
    print(f"{name}: {policy.decisions / sum(times.values()):.1f} decisions/s ({per_call})")
