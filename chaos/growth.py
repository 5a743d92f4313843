"""State that must not grow without bound (issue #50), checked on the run's own Redis:

1. flood: one namespace tells `FLOOD` waiting decisions (more than the decision log
   keeps) right after another namespace's reservation decision, through the store every
   replica writes with; an Event poster reading the log afterwards must still find the
   other namespace's decision, and the flood must stay within its namespace's share.
2. learned state: owner runs and OOM kills recorded as the monitor records them.
3. audit, after every scenario: each st:* key is one of the layout's (README, "State in
   Redis"), and each of those that must expire carries a TTL; capped streams are within
   their cap.

Figures (enforced at 0): decisions_trimmed_before_posted, flood_over_namespace_share,
keys_without_bound.
"""

from __future__ import annotations

import fnmatch
import time

import redis

from chaos.world import World
from extender.model import Decision
from extender.state.keys import DECISIONS_KEY, DECISIONS_MAXLEN, OBSERVATIONS_MAXLEN, TOLD_QUOTA

FLOOD = int(DECISIONS_MAXLEN * 1.5)
POSTER = "chaos-poster"
# Keys that expire by themselves (a TTL on every one), and keys bounded by what they hold.
EXPIRING = ("st:demand:*", "st:told:*", "st:told-quota:*", "st:oom:*", "st:owner-runs:*",
            "st:floor-kills:*", "st:gang:*")
BOUNDED = ("st:nodes", "st:nodes:rev", "st:gpu:*", "st:rev", "st:changed", "st:epoch",
           "st:job:*", "st:jobs", "st:observations", "st:waiting", "st:waiting:*",
           "st:decisions", "st:floor:*", "st:floor-jobs", "st:interference", "st:models",
           "st:models:*", "st:handovers", "st:ooms", "st:owner-runs")
CAPS = {DECISIONS_KEY: DECISIONS_MAXLEN, "st:observations": OBSERVATIONS_MAXLEN}
SCENARIOS = 3  # flood, learned state, audit
CAP_SLACK = 1.1  # XADD MAXLEN ~ trims whole macro nodes: a little over the cap is normal


def flood(world: World, figures: dict[str, int]) -> None:
    store, now = world.store, time.time()
    store.claim_decisions(POSTER, 1)  # the posters' group exists, as in a cluster
    while batch := store.claim_decisions(POSTER, 500):  # what the run told so far: posted
        store.ack_decisions(entry_id for entry_id, _ in batch)
    other = Decision("reserved", "chaos-other-0", "chaos-other/pod", "reserved 100 MiB",
                     "gpu-0")
    store.tell(other, now)
    store.log_decisions([Decision("waiting", f"flood-{i}", f"chaos-flood/pod-{i}",
                                  "waiting for GPU memory", once_key=f"waiting:flood-{i}")
                         for i in range(FLOOD)], now)
    posted = []
    while batch := store.claim_decisions(POSTER, 500):
        posted += [fields for _, fields in batch]
        store.ack_decisions(entry_id for entry_id, _ in batch)
    figures["decisions_trimmed_before_posted"] += not any(
        d.get("uid") == other.uid for d in posted)
    flooded = sum(1 for d in posted if d.get("pod", "").startswith("chaos-flood/"))
    figures["flood_over_namespace_share"] += max(0, flooded - TOLD_QUOTA)
    world.ledger.add("growth", "flood_posted", flooded)


def learned_state(world: World, figures: dict[str, int]) -> None:  # noqa: ARG001
    store = world.store
    for i in range(50):
        store.record_owner_run(f"chaos/Job/train-{i % 5}", 60.0 + i)
        store.record_oom(f"chaos-pod-{i}/main/0")
    world.ledger.add("growth", "learned_writes", 100)


def audit_keys(world: World, figures: dict[str, int]) -> None:
    client = redis.Redis.from_url(world.redis.url, decode_responses=True)
    try:
        for key in client.scan_iter("st:*", count=1000):
            expiring = any(fnmatch.fnmatchcase(key, p) for p in EXPIRING)
            bounded = any(fnmatch.fnmatchcase(key, p) for p in BOUNDED)
            if expiring and client.ttl(key) == -1 or not (expiring or bounded):
                figures["keys_without_bound"] += 1
                world.ledger.sample("keys_without_bound", key)
            world.ledger.add("growth", "keys_audited")
        for key, cap in CAPS.items():
            if client.exists(key) and client.xlen(key) > cap * CAP_SLACK:
                figures["keys_without_bound"] += 1
                world.ledger.sample("keys_without_bound", f"{key}: {client.xlen(key)} entries")
    finally:
        client.close()


def run_growth(world: World) -> dict[str, int]:
    figures = dict.fromkeys(("decisions_trimmed_before_posted", "flood_over_namespace_share",
                             "keys_without_bound"), 0)
    for scenario in (flood, learned_state, audit_keys):
        scenario(world, figures)
        world.ledger.add("executed", "growth_scenarios")
    return figures
