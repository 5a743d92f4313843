"""One chaos run end to end: Redis, the node layouts and the replicas started in a
temporary directory, every scenario in order (attacks, hostile requests, the race with
its faults), the audit and the report; the processes stopped whatever happens."""

from __future__ import annotations

import argparse
import logging
import random
import secrets
import tempfile
import time
from pathlib import Path
from typing import Any

from chaos.attacks import Attacks
from chaos.audit import audit, names_in_state
from chaos.cluster import node_objects
from chaos.faults import run_faults
from chaos.fuzz import hostile
from chaos.growth import run_growth
from chaos.ledger import Ledger
from chaos.processes import Replicas
from chaos.race import RACERS, Race
from chaos.registry import run_registry
from chaos.report import report
from chaos.world import World
from extender.cluster.node_watch import apply_listing
from extender.state.embedded_redis import EmbeddedRedis
from extender.state.store import RedisStore

log = logging.getLogger("schedtune.chaos")


def race(world: World, args: argparse.Namespace) -> tuple[Race, dict[str, list]]:
    """The racers and the fault thread, run to the end: their shared state and what each
    fault reported ("redis", "replica", "slow_clients")."""
    state = Race(world, args.binds, time.monotonic() + args.race_timeout_s)
    faults: dict[str, list] = {"redis": [], "replica": [], "slow_clients": []}
    state.racers = [world.ledger.thread(f"racer-{k}", lambda k=k: state.racer(args.seed * 100 + k))
                    for k in range(RACERS)]
    faulter = world.ledger.thread("faults", lambda: run_faults(state, args, faults))
    world.ledger.run([*state.racers, faulter])
    return state, faults


def run(world: World, args: argparse.Namespace, started: float) -> dict[str, Any]:
    """Every scenario in order, then the audit and the report."""
    for side in (0, 1):
        if world.first_good_filter(side, started) is None:
            raise RuntimeError(f"replica {side} never answered: {world.replicas.logs[side][-1]}")
    log.info("replicas up after %.1f s; attacks and hostile requests", time.monotonic() - started)
    rounds = max(1, min(10, args.fuzz // 1000)) if args.fuzz else 0
    with world.session() as http:
        attacks = Attacks(world, http, random.Random(args.seed))
        for _ in range(rounds):
            attacks.round()
    sent = sum(world.ledger.counts["hostile"].values())
    unauth = hostile(world, max(0, args.fuzz - sent), args.seed)
    store = world.store
    found = {"names": names_in_state(store),
             "unauth": sum(1 for uid in unauth if store.job(uid) or store.filter_record(uid))}
    for uid in store.job_uids():  # the hostile phase's pods end: what follows starts clean
        store.release(uid)
    log.info("registry scenarios after %.1f s", time.monotonic() - started)
    found["registry"] = run_registry(world)
    log.info("race after %.1f s", time.monotonic() - started)
    state, faults = race(world, args)
    checked = audit(store, state.bound, state.lost_after_kill)
    log.info("growth scenarios and the key audit after %.1f s", time.monotonic() - started)
    found["growth"] = run_growth(world)
    return report(world, args, state, faults, checked, found, rounds)


def run_chaos(args: argparse.Namespace) -> dict[str, Any]:
    """One run with the CLI's options (`args`): the report, `wall_s` included. A run that
    aborts still reports (`ok` false, the reason in `failures`)."""
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="schedtune-chaos-") as tmp_name:
        tmp = Path(tmp_name)
        token = None if args.no_auth else secrets.token_hex(24)
        if token:
            (tmp / "token").write_text(token)
        redis = EmbeddedRedis(tmp / "redis")
        store = RedisStore.from_url(redis.start())
        apply_listing(store, node_objects())  # the layouts the node watcher would write
        replicas = Replicas(tmp, {"REDIS_URL": redis.url}, tmp / "token" if token else None)
        world = World(redis, store, replicas, token, Ledger())
        try:
            result = run(world, args, started)
        except Exception as exc:  # noqa: BLE001  (still one JSON document, and exit 1)
            result = {"ok": False, "failures": [f"aborted: {type(exc).__name__}: {exc}"],
                      "thread_deaths": world.ledger.deaths}
        finally:
            replicas.stop()
            redis.stop()
    result["wall_s"] = round(time.monotonic() - started, 1)
    return result
