"""`schedtune chaos --sentinel`: the race of `chaos.race` on a Redis Sentinel topology
(`chaos.sentinel`: 3 redis-servers, 3 sentinels, 2 extender replicas reaching the master
through the sentinels), the master SIGKILLed again and again while binds race.

Per kill: seconds without a master (SIGKILL until the sentinels name a promoted replica
that takes writes), the binds answered meanwhile by outcome, the acknowledged
reservations the new master lacks or holds unconfirmed (confirmed then, as the monitor does
for a pod it sees bound), releases it has back (a release is not waited for: the monitor's
reconcile repairs it), and a write tried on the old master once restarted,
before the sentinels make it a replica (min-replicas-to-write must refuse it: a
split-brain write otherwise). Before the race: what the durability step (WAIT for a
replica) costs one reservation and its confirmation, measured on the same topology.
"""

from __future__ import annotations

import argparse
import logging
import secrets
import shutil
import statistics
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import redis

from chaos.audit import audit
from chaos.cluster import GPUS_PER_NODE, LIMIT, MEMORY, node_objects
from chaos.ledger import Ledger
from chaos.processes import Replicas
from chaos.race import RACERS, Race
from chaos.sentinel import SentinelTopology, Server
from chaos.world import World
from extender.cluster.node_watch import apply_listing
from extender.errors import StoreUnavailable
from extender.model import JobRecord
from extender.state.store import RedisStore

log = logging.getLogger("schedtune.chaos")
COST_SAMPLES = 300
PROBE_NODE = "probe-node"  # not a node of the race: its reservations never contend
EXPECTED = {"acknowledged_lost_after_failover": 0, "binds_passed_through_unreserved": 0,
            "overcommits": 0, "split_brain_writes": 0,
            "double_reservations": 0, "server_errors": 0, "non_contract_answers": 0}


def run_failover_chaos(args: argparse.Namespace) -> dict[str, Any]:
    """One run (`args`: the CLI's); the report, `ok` false with the reasons in `failures`."""
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="schedtune-chaos-sentinel-") as tmp_name:
        tmp = Path(tmp_name)
        token = None if args.no_auth else secrets.token_hex(24)
        if token:
            (tmp / "token").write_text(token)
        topology = SentinelTopology(tmp / "redis").start()
        replicas = None
        try:
            store = RedisStore.from_url(topology.url, 0.5, replicas=1)
            cost = durability_cost(topology)
            apply_listing(store, node_objects())
            replicas = Replicas(tmp, {**topology.env, "EXTENDER_REDIS_TIMEOUT_S": "0.5"},
                                tmp / "token" if token else None)
            world = World(topology, store, replicas, token, Ledger())
            result = race_through_failovers(world, args, started)
            result["durability_cost_ms"] = cost
        except Exception as exc:  # noqa: BLE001  (still one JSON document, and exit 1)
            result = {"ok": False, "failures": [f"aborted: {type(exc).__name__}: {exc}"]}
        finally:
            if replicas is not None:
                replicas.stop()
            topology.stop()
        if not result.get("ok") and args.keep_failed:
            kept = Path(args.keep_failed) / tmp.name
            shutil.copytree(tmp, kept, symlinks=True, ignore_dangling_symlinks=True,
                            ignore=shutil.ignore_patterns("*.sock"))
            result["kept"] = str(kept)
    result["wall_s"] = round(time.monotonic() - started, 1)
    return result


def race_through_failovers(world: World, args: argparse.Namespace,
                           started: float) -> dict[str, Any]:
    for side in (0, 1):
        if world.first_good_filter(side, started) is None:
            raise RuntimeError(f"replica {side} never answered: {world.replicas.logs[side][-1]}")
    log.info("replicas up after %.1f s; race with %d master kills", time.monotonic() - started,
             args.master_kills)
    state = Race(world, args.binds, time.monotonic() + args.race_timeout_s)
    kills: list[dict[str, Any]] = []
    state.racers = [world.ledger.thread(f"racer-{k}", lambda k=k: state.racer(args.seed * 100 + k))
                    for k in range(RACERS)]
    faulter = world.ledger.thread("failovers", lambda: kill_masters(state, args, kills))
    world.ledger.run([*state.racers, faulter])
    checked = audit(newest_master_store(world), state.bound, state.release_unanswered)
    with world.session() as http:  # every racing pod is annotated: none may pass unreserved
        checked["passed_through"] = int(sum(
            world.metric(http, side, 'schedtune_binds_total{outcome="passed_through"}')
            for side in (0, 1)))
    return report(world, state, kills, checked, args)


def kill_masters(race: Race, args: argparse.Namespace, kills: list[dict[str, Any]]) -> None:
    """`args.master_kills` times: let binds race for `args.kill_every_s`, then kill the
    master and measure the failover (`kill_master`)."""
    try:
        for _ in range(args.master_kills):
            time.sleep(args.kill_every_s)
            kills.append(kill_master(race))
    finally:
        race.faults_done.set()


def kill_master(race: Race) -> dict[str, Any]:
    world, topology = race.world, race.world.redis
    assert isinstance(topology, SentinelTopology)
    with race.release_gate:  # no release spans the kill: what was acknowledged is known
        with race.lock:
            acknowledged = dict(race.bound)
        race.open("redis_down", True)
        old = topology.kill_master()
    world.ledger.add("executed", "master_kills")
    failover_s = topology.wait_for_new_master(old)
    try:
        store = newest_master_store(world)
        held = {j.uid: j for j in store.jobs()}
        unconfirmed = confirm_as_the_monitor_does(store, acknowledged, held)
    finally:
        race.open("redis_down", False)
    with race.lock:  # a release that went unanswered may have run: gone is right
        excused = set(race.release_unanswered)
    lost = [uid for uid, node in acknowledged.items()
            if uid not in excused and (uid not in held or held[uid].node != node)]
    topology.restart(old)
    split = split_brain_write(old)
    topology.wait_until_rejoined(old)
    return {"failover_s": round(failover_s, 3), "acknowledged_before": len(acknowledged),
            "held_after": len(held), "acknowledged_lost": len(lost),
            "lost_sample": sorted(lost)[:5],
            "lost_acknowledged_at": acknowledged_times(race, lost),
            "acknowledged_unconfirmed": unconfirmed, "split_brain_write_accepted": split}


def newest_master_store(world: World) -> RedisStore:
    """A store on a connection made now, to the master the sentinels of the newest
    configuration name: a pooled connection is checked only when it is made, so one kept
    to a master the sentinels have replaced (still a master, on its own) reads its
    stale state, and what the new master holds would be misread as lost."""
    assert isinstance(world.redis, SentinelTopology)
    return RedisStore.from_url(world.redis.url, 0.5, replicas=1)


def acknowledged_times(race: Race, uids: list[str]) -> list[str]:
    """When each of `uids` was answered bound (UTC, ms), earliest first: to read beside
    the sentinels' and servers' logs of a kept run."""
    stamps = sorted(race.acknowledged_at[uid] for uid in uids if uid in race.acknowledged_at)
    return [time.strftime("%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1000):03d}"
            for t in stamps]


def confirm_as_the_monitor_does(store: RedisStore, acknowledged: dict[str, str],
                                held: dict[str, JobRecord]) -> int:
    """Acknowledged reservations the new master holds still expiring (bind answers once the
    reservation is durable; its confirmation, after the Binding, may not be), confirmed as
    the monitor confirms a pod it sees bound; how many there were."""
    unconfirmed = [uid for uid, node in acknowledged.items()
                   if uid in held and held[uid].node == node and held[uid].expires_at > 0]
    for uid in unconfirmed:
        store.confirm_placement(uid, acknowledged[uid], time.time())
    return len(unconfirmed)


def split_brain_write(old: Server) -> bool:
    """A reservation written straight to the old master, restarted with its data and not
    yet a replica: True when it took it (a client that still had its address)."""
    stale = RedisStore(old.client(), replicas=0)
    record = JobRecord(uid=f"split-{uuid.uuid4().hex[:8]}", pod="split", namespace="chaos",
                       model="resnet50", task="train", node=PROBE_NODE, gpu_index=0,
                       reserved_mib=1.0, predicted_s=1.0, state="reserved", reserved_at=0.0)
    try:
        info = old.client().info("replication")
        if info.get("role") != "master":
            return False  # already reconfigured: the write would be refused as READONLY
        stale.reserve(record, [(0, MEMORY, LIMIT)], time.time(), 1)
    except (StoreUnavailable, redis.RedisError):
        return False
    return True


def durability_cost(topology: SentinelTopology) -> dict[str, float]:
    """Median ms of one reservation and its confirmation without the durability step and
    with it (WAIT for one replica), alternating on the same master, and the difference."""
    timings: dict[int, list[float]] = {0: [], 1: []}
    stores = {n: RedisStore.from_url(topology.url, 1.0, replicas=n) for n in timings}
    for k in range(COST_SAMPLES):
        for replicas, store in stores.items():
            record = JobRecord(uid=f"cost-{replicas}-{k}", pod="cost", namespace="chaos",
                               model="resnet50", task="train", node=PROBE_NODE,
                               gpu_index=0, reserved_mib=1.0, predicted_s=1.0,
                               state="reserved", reserved_at=0.0)
            began = time.perf_counter()
            reservation = store.reserve(record, [(i, 10**9, 10**6)
                                                 for i in range(GPUS_PER_NODE)], time.time(), 60)
            store.confirm_bind(reservation, time.time())
            timings[replicas].append((time.perf_counter() - began) * 1000)
            store.release(record.uid)
    without, with_wait = (statistics.median(timings[n]) for n in (0, 1))
    return {"samples": COST_SAMPLES, "reserve_confirm_p50_without": round(without, 3),
            "reserve_confirm_p50_with_wait": round(with_wait, 3),
            "wait_p50": round(with_wait - without, 3)}


def report(world: World, race: Race, kills: list[dict[str, Any]], checked: dict[str, int],
           args: argparse.Namespace) -> dict[str, Any]:
    ledger = world.ledger
    during = Counter({k: v for k, v in ledger.counts["race_during_redis_down"].items()
                      if k.startswith("bind:")})
    outcomes: Counter = Counter()
    for key, n in ledger.counts["race"].items():  # "<verb>:<outcome>" and plain counts
        outcomes[key.partition(":")[2]] += n
    failover = [k["failover_s"] for k in kills]
    figures = {
        "master_kills": ledger.counts["executed"]["master_kills"],
        "failover_s": {"min": min(failover), "median": statistics.median(failover),
                       "max": max(failover)} if failover else None,
        "binds_answered_during_failover": dict(during),
        "binds_refused_during_failover": sum(n for k, n in during.items()
                                             if k in ("bind:error", "bind:retriable")),
        "acknowledged_lost_after_failover": sum(k["acknowledged_lost"] for k in kills)
        + checked["lost_reservations"],
        "acknowledged_unconfirmed_after_failover": sum(k["acknowledged_unconfirmed"]
                                                       for k in kills),
        "binds_refused_by_the_store_outside_failover":  # the durability rule's refusals
            ledger.counts["race_bind_refusals_during_none"]["state_store"],
        "releases_unanswered": len(race.release_unanswered),
        "binds_passed_through_unreserved": checked["passed_through"],
        "split_brain_writes": sum(k["split_brain_write_accepted"] for k in kills),
        "overcommits": checked["overcommits"],
        "double_reservations": checked["double_reservations"],
        "server_errors": outcomes["server_error"],
        "non_contract_answers": outcomes["non_contract"],
    }
    failures = [f"thread died: {d}" for d in ledger.deaths]
    failures += [f"{key} = {figures[key]}, expected {want}" for key, want in EXPECTED.items()
                 if figures[key] != want]
    if figures["master_kills"] < args.master_kills:
        failures.append(f"master_kills = {figures['master_kills']}, asked {args.master_kills}")
    return {"ok": not failures, "failures": failures, "figures": figures, "kills": kills,
            "race": {k: dict(v) for k, v in ledger.counts.items() if k.startswith("race")},
            "audit": checked, "samples": ledger.samples}
