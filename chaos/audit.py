"""Scenario 3, the audit: Redis against the answers (limits, GPUs that exist, one queue
place per pod, every answered bind still held, no hostile name in a key), and gunicorn's
logs (workers replaced and why, secrets written)."""

from __future__ import annotations

import re
import time
from collections import Counter, defaultdict
from typing import Any

from chaos.cluster import GPUS_PER_NODE, LIMIT, MEMORY, NODE_NAMES
from chaos.hostile import BAD_NODE_NAMES, BAD_UIDS
from chaos.processes import WORKERS, Replicas
from extender.state.store import RedisStore


def audit(store: RedisStore, bound: dict[str, str], excused: set[str]) -> dict[str, int]:
    """Redis against the answers: GPUs within memory and collocation limits, reservations
    only on GPUs the nodes have, each pod queued once and where its bind said, every
    answered bind still held (`excused`: losses a Redis kill measurement reported)."""
    now = time.time()
    jobs = [j for j in store.jobs() if not 0 < j.expires_at <= now]
    per_gpu: dict[tuple[str, int], list] = defaultdict(list)
    for job in jobs:
        per_gpu[job.node, job.gpu_index].append(job)
    queues = Counter(uid for members in store.queues().values() for uid in members)
    held = {j.uid for j in jobs}
    return {
        "reservations": len(jobs),
        "overcommits": sum(1 for js in per_gpu.values()
                           if sum(j.reserved_mib for j in js) > MEMORY or len(js) > LIMIT),
        "reservations_on_missing_gpus": sum(
            1 for j in jobs if j.node not in NODE_NAMES or not 0 <= j.gpu_index < GPUS_PER_NODE),
        "double_reservations": sum(1 for n in queues.values() if n > 1) + sum(
            1 for j in jobs if bound.get(j.uid, j.node) != j.node),
        "lost_reservations": sum(1 for uid in bound if uid not in held and uid not in excused),
    }


def names_in_state(store: RedisStore) -> int:
    """Places where a hostile name reached Redis: a job, filter record or queue under it."""
    jobs = store.jobs()
    found = sum(1 for uid in BAD_UIDS if store.job(uid) or store.filter_record(uid))
    found += sum(1 for node, _ in store.queues() if node in BAD_NODE_NAMES)
    bad = set(BAD_NODE_NAMES)
    return found + sum(1 for j in jobs if {j.pod, j.namespace, j.node} & bad)


def worker_deaths(log_text: str, workers: int) -> tuple[int, Counter]:
    """Workers one gunicorn life replaced (booted beyond `workers`, recycling aside) and the
    reasons its log gives (a signal, an exit code, a worker timeout)."""
    boots = log_text.count("Booting worker with pid")
    recycled = log_text.count("Autorestarting worker")
    reasons = Counter(re.sub(r"\(pid:\d+\) ", "", m) for m in re.findall(
        r"Worker \(pid:\d+\) was sent SIG\w+|Worker \(pid:\d+\) exited with code \d+|"
        r"WORKER TIMEOUT", log_text))
    return max(0, boots - workers - recycled), reasons


def workers_report(replicas: Replicas, token: str | None) -> dict[str, Any]:
    """From every gunicorn life's log: workers replaced (crashed, killed for a timeout) and
    their reasons; pod secrets or the token written to a log. `crashed` is None (not
    measured) when a life's log shows no worker booting: the log is not what we read."""
    crashed: int | None = 0
    reasons, leaked, lives = Counter(), 0, [len(lives) for lives in replicas.logs]
    for life in (path for lives in replicas.logs for path in lives):
        text = life.read_text(errors="replace")
        replaced, why = worker_deaths(text, WORKERS)
        seen = "Booting worker with pid" in text
        crashed = crashed + replaced if crashed is not None and seen else None
        reasons += why
        leaked += text.count("chaos-secret") + (text.count(token) if token else 0)
    return {"crashed": crashed, "reasons": dict(reasons), "secrets_in_logs": leaked,
            "lives": lives}
