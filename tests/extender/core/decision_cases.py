"""Seeded, varied scheduling situations and what filter and prioritize decide in them.

`tests/data/decisions/recorded.json` holds the decisions the per-node code made on
these cases before filter and prioritize were vectorised
(`test_recorded_decisions.py` replays them against today's code and compares
exactly, reasons and float scores included). The cases are regenerated from their
seed, so this module must not change in a way that changes what it generates:
record again (with code whose decisions you trust) if it ever must.

    python -m tests.extender.core.decision_cases --write   # records, from this checkout
    python -m tests.extender.core.decision_cases --add-policy drain   # one new policy's
        # scores added to every case of the recording, nothing else in it changed

Two kinds of case:
* pure: a `ClusterSnapshot` built here (idle and busy nodes sharing a few
  templates, so idle layouts and tied scores repeat; several GPU types, an
  unknown product, nodes with no layout, with problems, with no GPUs; collocation
  limits per type and time-slicing slots; running, reserved, overrunning and
  expiring jobs; waiters old enough to hold a GPU or not, the pod itself among
  them) and needs per type, decided under every scoring policy;
* store: the same kind of cluster written into Redis (layouts as the node watcher
  records them, reservations made, confirmed, started or left to expire, waiters
  recorded by filter) and read back by `RedisStore.snapshot` at a later instant, in
  names mode (layouts from the watcher) and full mode (layouts in the request).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from extender.core.filtering import decide_filter
from extender.core.job import PodJob
from extender.core.prioritizing import decide_scores
from extender.core.interference import Alphas
from extender.core.filtering.holds import held_gpus
from extender.model import (
    ClusterSnapshot, FilterRecord, GpuState, JobRecord, Limits, Need, NodeGpus, NodeState,
    PodDemand, QueuedJob, Waiter, type_of,
)  # fmt: skip
from extender.settings import Settings

RECORDED = Path(__file__).resolve().parents[2] / "data" / "decisions" / "recorded.json"
SEED = 20260118
PURE_CASES = 260
STORE_CASES = 40
POLICIES = ("marginal", "shared", "paper", "drain", "keeping-up")  # drain, then keeping-up, added later
# (gpu_type, product, MiB per GPU); None: a product the catalogue does not know.
TYPES = [("RTX-3090", "NVIDIA-GeForce-RTX-3090", 24576), ("A100", "NVIDIA-A100-SXM4-40GB", 40960),
         ("T4", "Tesla-T4", 15360), ("V100", "Tesla-V100-SXM2-16GB", 16160),
         (None, "Mystery-GPU-9000", 20000)]


def _layout(rng: random.Random) -> NodeGpus | None:
    kind = rng.random()
    if kind < 0.05:
        return None  # the node watcher never saw it
    gpu_type, product, memory = rng.choice(TYPES)
    if kind < 0.09:
        return NodeGpus(product, gpu_type, 0, 0, 1, "nvidia.com/gpu.count label is missing")
    if kind < 0.11:
        return NodeGpus(product, gpu_type, 0, memory, 1)
    return NodeGpus(product, gpu_type, rng.choice([1, 1, 2, 4, 8]), memory,
                    rng.choice([0, 0, 1, 2, 4]))


def _job(rng: random.Random, uid: str, memory: int, now: float) -> QueuedJob:
    mib = rng.choice([rng.uniform(300, memory * 0.8), float(rng.randrange(500, memory, 250)),
                      float(memory)])
    predicted = rng.choice([rng.uniform(5, 4000), float(rng.randrange(60, 3600, 60))])
    state = rng.random()
    if state < 0.35:
        return QueuedJob(uid, mib, predicted)  # reserved, not started
    if state < 0.45:
        return QueuedJob(uid, mib, predicted, 0.0, now + rng.uniform(1, 120))  # expiring
    started = now - rng.choice([rng.uniform(0, predicted), predicted * rng.uniform(1, 3)])
    return QueuedJob(uid, mib, predicted, started)


def _queues(rng: random.Random, layout: NodeGpus | None, prefix: str,
            now: float) -> list[list[QueuedJob]]:
    if layout is None or layout.count == 0:
        return []
    busy = rng.choice([0.0, 0.3, 0.6, 0.9])
    return [[_job(rng, f"{prefix}-{i}-{j}", layout.memory_mib, now)
             for j in range(rng.choice([1, 1, 1, 2, 2, 3, 5]))] if rng.random() < busy else []
            for i in range(layout.count)]


def _limits(rng: random.Random) -> Limits:
    per_type = {t: rng.choice([1, 2, 3, 4]) for t, _, _ in TYPES if t and rng.random() < 0.4}
    if rng.random() < 0.2:
        per_type["unknown"] = rng.choice([1, 2])
    return Limits(rng.choice([1, 2, 4, 4]), per_type)


def _needs(rng: random.Random) -> dict[str, Need]:
    scale = rng.choice([0.05, 0.2, 0.5, 0.9, 1.3])
    needs = {}
    for gpu_type, _, memory in TYPES:
        padded = rng.choice([memory * scale * rng.uniform(0.7, 1.1),
                             float(rng.randrange(256, int(memory * 1.2), 128))])
        needs[gpu_type or "unknown"] = Need(padded, rng.uniform(5, 3000))
    return needs


def _waiting(rng: random.Random, now: float, uid: str) -> tuple[Waiter, ...]:
    waiters = []
    for i in range(rng.choice([0, 0, 1, 1, 2, 3])):
        needs = {t: (m, s) for t, (m, s) in
                 ((t, (n.padded_mib, n.predicted_s)) for t, n in _needs(rng).items())
                 if rng.random() < 0.8}
        waiters.append(Waiter(f"waiter-{i}", now - rng.choice([10.0, 200.0, 400.0, 900.0]),
                              needs, f"ml/waiter-{i}"))
    if rng.random() < 0.2:
        needs = {t: (n.padded_mib, n.predicted_s) for t, n in _needs(rng).items()}
        waiters.append(Waiter(uid, now - rng.choice([5.0, 500.0]), needs, "ml/pod"))
    return tuple(sorted(waiters, key=lambda w: (w.since, w.uid)))


def _settings(rng: random.Random, limits: Limits, scoring: str = "marginal") -> Settings:
    """As recorded: before shortest-job-first holds, waiting for a faster GPU and the
    fragmentation tie-break existed (`short_first` and `wait_for_faster` 0, best fit)."""
    return Settings(collocation=limits, hold_for=rng.choice([0, 1, 1, 2]),
                    hold_after_s=rng.choice([0.0, 300.0]),
                    interference_alpha=rng.choice([0.47, 0.47, 0.0, 1.0]), scoring=scoring,
                    short_first=0.0, wait_for_faster=0.0, tie_break="best-fit")


def _cluster(rng: random.Random, now: float) -> list[tuple[str, NodeGpus | None,
                                                            list[list[QueuedJob]]]]:
    """Nodes as (name, layout, jobs per GPU), drawn from a few templates."""
    templates = []
    for t in range(rng.randint(2, 7)):
        layout = _layout(rng)
        templates.append((layout, _queues(rng, layout, f"t{t}", now)))
    nodes = []
    for i in range(rng.choice([1, 3, 8, 20, 40, 60])):
        layout, queues = rng.choice(templates)
        if rng.random() < 0.3:  # a fresh queue on a shared layout
            queues = _queues(rng, layout, f"n{i}", now)
        nodes.append((f"node-{i}", layout, queues))
    return nodes


def pure_cases(count: int = PURE_CASES, seed: int = SEED) -> Iterator[tuple[PodJob, Settings]]:
    rng = random.Random(seed)
    for c in range(count):
        now = 10_000.0 + rng.uniform(0, 1000)
        uid = f"pod-{c}"
        nodes = {name: NodeState(name, layout, tuple(GpuState(name, i, layout.memory_mib,
                                                              tuple(jobs))
                                                     for i, jobs in enumerate(queues)))
                 for name, layout, queues in _cluster(rng, now)}  # fmt: skip
        snapshot = ClusterSnapshot(now, nodes, _waiting(rng, now, uid))
        demand = PodDemand(uid, f"pod-{c}", "ml", "resnet50", "train", 32, 1)
        yield PodJob(demand, snapshot, _needs(rng)), _settings(rng, _limits(rng))


def decisions(job: PodJob, settings: Settings, layouts: dict[str, NodeGpus | None],
              reasons: dict[str, int]) -> dict[str, Any]:
    """What filter and prioritize decide for `job`, compactly (reasons by index)."""
    snap = job.snapshot
    decision = decide_filter(job, layouts, settings)
    record = decision.record or FilterRecord(job.demand)
    holds = held_gpus(snap, settings.collocation, Alphas(settings.interference_alpha),
                      job.demand.uid, settings.hold_for, settings.hold_after_s)
    out: dict[str, Any] = {
        "verdicts": [[v.fits, reasons.setdefault(v.reason, len(reasons)), v.gpu_index,
                      v.unresolvable] for v in (decision.verdicts[n] for n in layouts)],
        "layouts": sorted(record.layouts), "held": {n: list(i) for n, i in record.held.items()},
        # As recorded: (uid, since, needs, pod); `gpus` came later and is 1 in every case.
        "waiter": _recorded_waiter(decision.waiter) if decision.waiter else None,
        "told": [[d.kind, d.uid, d.pod, d.message, d.node, d.once_key] for d in decision.told],
        "holds": [[n, i, h.uid, h.padded_mib, h.fits_in_s, h.limit]
                  for (n, i), h in holds.items()],
        "scores": {},
    }
    for name in POLICIES:
        scores = decide_scores(job, list(layouts), replace(settings, scoring=name))
        out["scores"][name] = [scores[n] for n in layouts]
    return json.loads(json.dumps(out))  # as read back from the recording (tuples as lists)


def store_case(rng: random.Random, c: int) -> dict[str, Any]:
    """A cluster to write into Redis: layouts, reservations (made at `made_at`, some confirmed,
    some started, some left to expire before `now`), waiters, and the pod's needs."""
    made_at = 50_000.0 + rng.uniform(0, 100)
    now = made_at + rng.choice([5.0, 60.0, 200.0])
    nodes, jobs = [], []
    for name, layout, queues in _cluster(rng, now):
        nodes.append((name, layout))
        for index, queue in enumerate(queues):
            for job in queue:
                ttl = rng.choice([0.0, 0.0, 0.0, 30.0, 600.0])
                oversize = rng.random() < 0.03  # more than the GPU: counts as the whole GPU
                mib = job.reserved_mib * 3 if oversize else job.reserved_mib
                jobs.append((f"{name}-{index}-{job.uid}", name, index, round(mib, 1),
                             round(job.predicted_s, 3), ttl,
                             job.started_at if job.started_at > 0 else 0.0))
    uid = f"spod-{c}"
    return {"now": now, "made_at": made_at, "nodes": nodes, "jobs": jobs,
            "waiting": _waiting(rng, now, uid), "needs": _needs(rng), "uid": uid,
            "limits": _limits(rng), "settings_rng": rng.random(),
            "full_mode": rng.random() < 0.4}


def store_cases(count: int = STORE_CASES, seed: int = SEED + 1) -> Iterator[dict[str, Any]]:
    rng = random.Random(seed)
    for c in range(count):
        yield store_case(rng, c)


def load_store_case(store: Any, case: dict[str, Any]) -> tuple[PodJob, Settings,
                                                               dict[str, NodeGpus | None]]:
    """Write `case` into `store` (a fresh database) and read it back as the verbs do."""
    for name, layout in case["nodes"]:
        if layout is not None:
            store.put_node(name, layout)
    for uid, node, index, mib, predicted, ttl, started in case["jobs"]:
        record = JobRecord(uid=uid, pod=uid, namespace="ml", model="resnet50", task="train",
                           node=node, gpu_index=index, reserved_mib=mib, predicted_s=predicted,
                           state="reserved", reserved_at=case["made_at"])
        store.reserve(record, [(index, 1e9, 100)], case["made_at"], ttl)
        if started:
            store.mark_running(uid, started)
    for waiter in case["waiting"]:
        demand = PodDemand(waiter.uid, waiter.uid, "ml", "resnet50", "train", 32, 1)
        store.record_filter(FilterRecord(demand), 900, waiter, waiter.since, 10**6)
    rng = random.Random(case["settings_rng"])
    settings = _settings(rng, case["limits"])
    layouts = {name: (layout if case["full_mode"] else None) for name, layout in case["nodes"]}
    snapshot = store.snapshot(layouts, case["now"])
    needs = {t: n for t, n in case["needs"].items()}
    types = {type_of(n.gpus) for n in snapshot.nodes.values() if n.gpus is not None}
    assert types <= set(needs)
    demand = PodDemand(case["uid"], case["uid"], "ml", "resnet50", "train", 32, 1)
    return PodJob(demand, snapshot, needs), settings, layouts


def record_all(store_factory: Any = None) -> dict[str, Any]:
    reasons: dict[str, int] = {}
    pure = [decisions(job, settings, {n: None for n in job.snapshot.nodes}, reasons)
            for job, settings in pure_cases()]
    stored = []
    if store_factory is not None:
        for case in store_cases():
            store = store_factory()
            job, settings, layouts = load_store_case(store, case)
            stored.append(decisions(job, settings, layouts, reasons))
    return {"seed": SEED, "reasons": list(reasons), "pure": pure, "store": stored}


def add_policy(recorded: dict[str, Any], name: str, store_factory: Any) -> dict[str, Any]:
    """`recorded` with the scores of policy `name` (newly registered) added to every case;
    what was recorded before is kept as it was (the new policy's scores only are today's)."""
    def scores(job: PodJob, settings: Settings, layouts: dict[str, Any]) -> list[float]:
        got = decide_scores(job, list(layouts), replace(settings, scoring=name))
        return json.loads(json.dumps([got[n] for n in layouts]))

    for case, (job, settings) in zip(recorded["pure"], pure_cases(), strict=True):
        case["scores"][name] = scores(job, settings, {n: None for n in job.snapshot.nodes})
    for case, spec in zip(recorded["store"], store_cases(), strict=True):
        job, settings, layouts = load_store_case(store_factory(), spec)
        case["scores"][name] = scores(job, settings, layouts)
    return recorded


def _embedded_store_factory(directory: Path) -> Any:
    import redis

    from extender.state.embedded_redis import EmbeddedRedis
    from extender.state.store import RedisStore

    server = EmbeddedRedis(directory)
    url = server.start()

    def fresh() -> RedisStore:
        redis.Redis.from_url(url).flushdb()
        return RedisStore.from_url(url)

    return server, fresh


def main(argv: list[str] | None = None) -> int:
    import tempfile

    parser = argparse.ArgumentParser(description="record filter/prioritize decisions")
    parser.add_argument("--write", action="store_true", help=f"write {RECORDED}")
    parser.add_argument("--add-policy", metavar="NAME",
                        help="add one newly registered policy's scores to the recording")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        server, fresh = _embedded_store_factory(Path(tmp))
        try:
            if args.add_policy:
                recorded = add_policy(json.loads(RECORDED.read_text()), args.add_policy, fresh)
            else:
                recorded = record_all(fresh)
        finally:
            server.stop()
    text = json.dumps(recorded, separators=(",", ":"))
    if args.write:
        RECORDED.parent.mkdir(parents=True, exist_ok=True)
        RECORDED.write_text(text + "\n")
    print(f"{len(recorded['pure'])} pure + {len(recorded['store'])} store cases, "
          f"{len(recorded['reasons'])} distinct reasons, {len(text) // 1024} KiB", file=sys.stderr)
    return 0



def _recorded_waiter(waiter: Waiter) -> list:
    assert waiter.gpus == 1, "the recorded cases are single-GPU pods"
    return list(waiter)[:4]


if __name__ == "__main__":
    sys.exit(main())
