"""Scenario 1, sent: the hostile catalogue to both replicas from 4 threads, every answer
recorded in the ledger (an unauthenticated request not refused counts against the run)."""

from __future__ import annotations

import random
from collections.abc import Callable

from chaos.answers import NO_ANSWER, Answer
from chaos.hostile import hostile_requests
from chaos.world import World


def hostile(world: World, count: int, seed: int) -> set[str]:
    """Send `count` hostile requests from 4 threads, half to each replica; returns the UIDs
    of the pods sent without a valid token (none of them may reach Redis)."""
    items = hostile_requests(random.Random(seed), count, world.token is not None)
    for kind, _ in items:
        world.ledger.add("hostile_asked", kind)

    def sender(part: int) -> Callable[[], None]:
        def run() -> None:
            with world.session() as http:
                for i in range(part, len(items), 4):
                    kind, (verb, body, auth) = items[i]
                    answer = world.call(http, i % 2, verb, body, auth)
                    record_hostile(world, kind, verb, answer, auth)
        return run

    world.ledger.run([world.ledger.thread(f"hostile-{k}", sender(k)) for k in range(4)])
    return {pod_uid(body) for kind, (_, body, auth) in items if auth != "token"}


def pod_uid(body: dict) -> str:
    """The pod UID of a well-formed request body of any verb."""
    if "PodUID" in body:
        return body["PodUID"]
    return (body["task"]["UID"] if "task" in body else body["Pod"]["metadata"]["uid"])


def record_hostile(world: World, kind: str, verb: str, answer: Answer, auth: str = "token") -> None:
    ledger = world.ledger
    ledger.add("hostile", kind)
    ledger.add("hostile_outcomes", f"{kind}:{answer.outcome}")
    ledger.add("hostile_verbs", verb)
    if auth != "token" and answer.outcome not in ("unauthorized", *NO_ANSWER):
        ledger.add("figures", "unauthenticated_not_refused")
        ledger.sample("unauthenticated_not_refused", f"{verb} -> {answer.status} {answer.body}")
    if answer.outcome in ("server_error", "non_contract"):
        ledger.sample(answer.outcome, f"{kind} {verb} -> {answer.status} {answer.body}")
