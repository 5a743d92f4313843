"""The faults spread over the race, one at a time: Redis SIGKILLed and restarted from its
AOF (what it held and binds answered before, compared after; the replicas probed while it
is down), replicas SIGKILLed and restarted (seconds to the first good answer), and slow
clients that never finish a request."""

from __future__ import annotations

import argparse
import socket
import time
from collections import Counter
from typing import Any

from chaos.answers import passing
from chaos.cluster import NODES, node_objects, pod
from chaos.race import Race
from chaos.world import World
from extender.wire.kube import encode_extender_args


def fault_plan(redis_kills: int, replica_kills: int,
               slow_clients: int) -> list[tuple[float, str, int]]:
    """(share of the asked binds answered before it starts, fault, argument), in order:
    every fault strictly inside the stream, kinds interleaved."""
    plan = [((j + 0.5) / (redis_kills + 0.5), "redis", j) for j in range(redis_kills)]
    plan += [((j + 0.3) / (replica_kills + 0.5), "replica", j % 2) for j in range(replica_kills)]
    plan += [(0.45, "slow_clients", slow_clients)] if slow_clients else []
    return sorted((share * 0.9, kind, arg) for share, kind, arg in plan)


def run_faults(race: Race, args: argparse.Namespace, results: dict[str, list]) -> None:
    try:
        for share, kind, arg in fault_plan(args.redis_kills, args.replica_kills, args.slow_clients):
            while race.binds_answered < share * race.asked and race.racing() \
                    and not race.finished():
                time.sleep(0.02)
            if kind == "redis":
                results["redis"].append(kill_redis(race, args.redis_down_s))
            elif kind == "replica":
                results["replica"].append(kill_replica(race, arg))
            else:
                results["slow_clients"].append(hold_slow_clients(race, arg, args.slow_hold_s))
    finally:
        race.faults_done.set()


def kill_replica(race: Race, side: int) -> dict[str, Any]:
    world = race.world
    race.open(f"replica_down:{side}", True)
    world.replicas.kill(side)
    world.ledger.add("executed", "replica_kills")
    started = time.monotonic()
    world.replicas.start(side)
    ready_s = world.first_good_filter(side, started)
    race.open(f"replica_down:{side}", False)
    return {"replica": side,
            "restart_to_first_good_answer_s": None if ready_s is None else round(ready_s, 3)}


def kill_redis(race: Race, down_s: float) -> dict[str, Any]:
    """SIGKILL Redis, probe both replicas while it is down, restart it from its AOF, and
    compare what it holds with what it held (and what binds answered) before the kill."""
    world = race.world
    with race.release_gate:
        with race.lock:
            acknowledged, released = dict(race.bound), set(race.released)
        held = {j.uid: j.node for j in world.store.jobs()}
        race.open("redis_down", True)
        world.redis.stop(kill=True)
    killed = time.monotonic()
    world.ledger.add("executed", "redis_kills")
    probes = probe_outage(world)
    time.sleep(max(0.0, down_s - (time.monotonic() - killed)))
    world.redis.start()
    outage_s = time.monotonic() - killed
    after = {j.uid: j.node for j in world.store.jobs()}
    with race.release_gate:
        race.open("redis_down", False)
    lost = [uid for uid, node in {**held, **acknowledged}.items()
            if after.get(uid) != node and uid not in race.lost_after_kill]
    back = [uid for uid in released if uid in after and uid not in held]
    race.lost_after_kill.update(lost)
    recovered = world.first_good_filter(0, time.monotonic())
    return {"outage_s": round(outage_s, 3), "held_before": len(held),
            "acknowledged_before": len(acknowledged), "held_after": len(after),
            "lost": len(lost), "released_but_back": len(back), "probes": probes,
            "recovery_s": None if recovered is None else round(recovered, 3)}


def probe_outage(world: World) -> dict[str, int]:
    """While Redis is down: an unannotated pod must pass every node, an annotated one must
    get the contract's retriable error (kube-scheduler retries it)."""
    probes: Counter = Counter()
    with world.session() as http:
        for side in (0, 1):
            plain, annotated = (world.call(http, side, "filter",
                                           encode_extender_args(pod(annotated), node_objects()))
                                for annotated in (False, True))
            probes["sent"] += 2
            probes["passthrough_failed"] += len(passing(plain)) != NODES
            probes["retriable_error_missing"] += annotated.outcome != "error"
            world.ledger.add("redis_outage_probes", f"plain:{plain.outcome}")
            world.ledger.add("redis_outage_probes", f"annotated:{annotated.outcome}")
    return dict(probes)


def hold_slow_clients(race: Race, count: int, hold_s: float) -> dict[str, Any]:
    """`count` sockets, alternating replicas, that send a request line and then one header
    a second for `hold_s`, never finishing the request."""
    socks: list[socket.socket] = []
    closed_after: list[float | None] = []
    for k in range(count):
        sock = socket.create_connection(("127.0.0.1", race.world.replicas.ports[k % 2]), timeout=2)
        sock.sendall(b"POST /filter HTTP/1.1\r\nHost: x\r\n")
        socks.append(sock)
        closed_after.append(None)
    race.world.ledger.add("executed", "slow_clients", count)
    race.open("slow_clients", True)
    started = time.monotonic()
    try:
        for second in range(int(hold_s)):
            time.sleep(1.0)
            for k, sock in enumerate(socks):
                if closed_after[k] is None:
                    try:
                        sock.sendall(b"X-Slow-%d: 1\r\n" % second)
                    except OSError:
                        closed_after[k] = round(time.monotonic() - started, 1)
    finally:
        race.open("slow_clients", False)
        for sock in socks:
            sock.close()
    return {"sockets": count, "held_s": round(time.monotonic() - started, 1),
            "closed_by_server_after_s": [c for c in closed_after if c is not None]}
