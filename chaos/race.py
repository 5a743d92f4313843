"""Scenario 2, the race: threads that filter on one replica and bind (twice) on the
other for pods competing for few GPUs, then end some, each answer recorded under the
fault window open when it was sent. The faults themselves are `chaos.faults`."""

from __future__ import annotations

import random
import threading
import time
from typing import Any

import requests

from chaos.answers import NO_ANSWER, Answer, contract_error, passing
from chaos.cluster import NODE_NAMES, node_objects, pod
from chaos.world import World
from extender.errors import StoreUnavailable
from extender.wire.kube import encode_binding_args, encode_extender_args

RACERS = 8
RETRY_S = 0.2  # a racer's pause after no answer (kube-scheduler backs a pod off for 1 s)


def refusal(answer: Answer) -> str:
    """What refused a bind: the state store (down, or the write not replicated: the
    durability rule) or the placement itself (no room left, bound already)."""
    text = contract_error("bind", answer.body) or ""
    return "state_store" if text.startswith("state store") else "placement"


class Race:
    """What the racing threads and the fault thread share: the binds answered success, the
    releases, the fault windows open now. A window is "replica_down:<i>", "redis_down"
    (Redis killed, or its master until Sentinel names a new one) or "slow_clients"."""

    def __init__(self, world: World, binds: int, deadline: float) -> None:
        self.world, self.asked, self.deadline = world, binds, deadline
        self.lock = threading.Lock()
        self.release_gate = threading.Lock()  # a release never spans a Redis kill
        self.bound: dict[str, str] = {}
        self.released: set[str] = set()
        self.release_unanswered: set[str] = set()  # its release may have run: gone is right
        self.windows: set[str] = set()
        self.binds_answered = 0
        self.faults_done = threading.Event()
        self.racers: list[threading.Thread] = []
        self.lost_after_kill: set[str] = set()  # the Redis kill measurement reports them
        self.acknowledged_at: dict[str, float] = {}  # wall clock, to read beside Redis's logs

    def finished(self) -> bool:
        done = self.faults_done.is_set() and self.binds_answered >= self.asked
        return done or time.monotonic() > self.deadline

    def racing(self) -> bool:
        return any(thread.is_alive() for thread in self.racers)

    def window(self, side: int) -> str:
        with self.lock:
            if f"replica_down:{side}" in self.windows:
                return "replica_down"
            return next((w for w in ("redis_down", "slow_clients") if w in self.windows), "none")

    def open(self, window: str, is_open: bool) -> None:
        with self.lock:
            (self.windows.add if is_open else self.windows.discard)(window)

    def call(self, http: requests.Session, side: int, verb: str, body: Any) -> Answer:
        before = self.window(side)
        answer = self.world.call(http, side, verb, body)
        window = before if before != "none" else self.window(side)
        ledger = self.world.ledger
        ledger.add("race", f"{verb}:{answer.outcome}")
        ledger.add(f"race_during_{window}", f"{verb}:{answer.outcome}")
        if answer.outcome in ("server_error", "non_contract"):
            ledger.sample(answer.outcome, f"race {verb} -> {answer.status} {answer.body}")
        if answer.outcome not in NO_ANSWER:
            ledger.peak(f"latency_s:{window}", answer.latency_s)
        if verb == "bind":
            ledger.add("race", f"bind_requests_to_replica_{side}")
            if answer.outcome in ("error", "retriable"):
                ledger.add(f"race_bind_refusals_during_{window}", refusal(answer))
            if answer.outcome not in NO_ANSWER:
                with self.lock:
                    self.binds_answered += 1
        return answer

    def call_either(self, http: requests.Session, side: int, verb: str, body: Any
                    ) -> tuple[Answer, int]:
        """`side` first; refused a connection, the other replica (as a Service sends the
        retry to a live endpoint). Returns the answer and the replica that gave it."""
        answer = self.call(http, side, verb, body)
        if answer.outcome == "connection_error":
            side = 1 - side
            answer = self.call(http, side, verb, body)
        if answer.outcome in NO_ANSWER:
            time.sleep(RETRY_S)
        return answer, side

    def racer(self, seed: int) -> None:
        """Filter on one replica, bind twice on the other (a stale filter binds anyway: it
        must be refused, never over-commit), then maybe end a bound pod."""
        rng, nodes = random.Random(seed), node_objects()
        with self.world.session() as http:
            while not self.finished():
                p = pod(True, rng)
                body = encode_extender_args(p, nodes)
                filtered, side = self.call_either(http, rng.randrange(2), "filter", body)
                if filtered.outcome != "ok":
                    continue
                bind = encode_binding_args(p, rng.choice(passing(filtered) or list(NODE_NAMES)))
                answers = [self.call_either(http, 1 - side, "bind", bind)[0] for _ in range(2)]
                if any(a.outcome == "ok" for a in answers):
                    with self.lock:
                        self.bound[bind["PodUID"]] = bind["Node"]
                        self.acknowledged_at[bind["PodUID"]] = time.time()
                if rng.random() < 0.5:
                    self.release_one(rng)

    def release_one(self, rng: random.Random) -> None:
        """A running pod ends (the monitor releases it): GPUs stay contested."""
        with self.release_gate:
            with self.lock:
                if "redis_down" in self.windows or not self.bound:
                    return
                uid = rng.choice(list(self.bound))
                node = self.bound.pop(uid)
            try:
                self.world.store.release(uid)
            except StoreUnavailable:  # still held, or released with the answer lost
                with self.lock:
                    self.bound[uid] = node
                    self.release_unanswered.add(uid)
                return
            with self.lock:
                self.released.add(uid)
            self.world.ledger.add("race", "releases")
