"""Scenario 1b, the attack rounds: stateful hostile sequences (a fake 1 TiB layout then
binds, a second bind elsewhere, Volcano's deallocate of a kube-scheduler bind, made-up
allocates, verbs without a valid token), each checked against Redis right after."""

from __future__ import annotations

import random
from typing import Any

import requests

from chaos.answers import Answer, passing
from chaos.audit import audit
from chaos.cluster import GPUS_PER_NODE, LIMIT, NODE_NAMES, node_objects, pod
from chaos.fuzz import record_hostile
from chaos.world import World
from extender.wire.kube import encode_binding_args, encode_extender_args
from extender.wire.volcano import encode_event_request, encode_predicate_request


class Attacks:
    """One round of each attack on a clean state; what an attack must not achieve is counted
    in the ledger's `figures` scope, the rounds run in `attacks`. The pods end after each
    round (their reservations released, as the monitor does)."""

    def __init__(self, world: World, http: requests.Session, rng: random.Random) -> None:
        self.world, self.http, self.rng = world, http, rng
        self.store, self.ledger = world.store, world.ledger
        self.made: list[str] = []

    def round(self) -> None:
        self.fake_layout()
        self.against_a_bound_pod()
        self.made_up_allocate()
        if self.world.token:
            self.unauthenticated()
        for uid in self.made:
            self.store.release(uid)
        self.made.clear()

    def pod(self, **kwargs: Any) -> dict:
        p = pod(True, self.rng, **{"batch": 8, **kwargs})
        self.made.append(p["metadata"]["uid"])
        return p

    def hostile(self, kind: str, side: int, verb: str, body: Any, auth: str = "token") -> Answer:
        answer = self.world.call(self.http, side, verb, body, auth)
        record_hostile(self.world, kind, verb, answer, auth)
        return answer

    def setup(self, verb: str, body: Any) -> Answer:
        answer = self.world.call(self.http, self.rng.randrange(2), verb, body)
        self.ledger.add("attack_setup", f"{verb}:{answer.outcome}")
        return answer

    def bound_pod(self) -> tuple[dict, str] | None:
        """A pod filtered and bound as kube-scheduler does (None: no room, setup failed)."""
        p = self.pod()
        nodes = passing(self.setup("filter", encode_extender_args(p, node_objects())))
        if nodes and self.setup("bind", encode_binding_args(p, nodes[0])).outcome == "ok":
            return p, nodes[0]
        self.ledger.add("attacks", "setup_failed")
        return None

    def fake_layout(self) -> None:
        """A full-nodes filter claiming 16 GPUs of 1 TiB for the real gpu-0, then binds of
        pods that do not fit a real GPU, or not more than one to a GPU."""
        fake = node_objects(memory_mib=1 << 20, count=16)[0]
        for model, batch in [("bert_base", 256), ("vgg16", 128)] * (GPUS_PER_NODE * LIMIT):
            p = self.pod(model=model, batch=batch)
            answer = self.hostile("fake_layout", 0, "filter", encode_extender_args(p, [fake]))
            if "gpu-0" in passing(answer):
                self.hostile("fake_layout", 1, "bind", encode_binding_args(p, "gpu-0"))
        checked = audit(self.store, {}, set())
        self.ledger.add("figures", "fake_layout_overcommits",
                        checked["overcommits"] + checked["reservations_on_missing_gpus"])
        self.ledger.add("attacks", "fake_layout_rounds")

    def against_a_bound_pod(self) -> None:
        """A second bind of a bound pod to another node (refused) and Volcano's deallocate
        of it (ignored: kube-scheduler bound it): either way its reservation stays put."""
        for kind in ("second_bind", "deallocate_kube_bind"):
            placed = self.bound_pod()
            if placed is None:
                continue
            (p, node), side = placed, self.rng.randrange(2)
            if kind == "second_bind":
                other = next(n for n in NODE_NAMES if n != node)
                answer = self.hostile(kind, side, "bind", encode_binding_args(p, other))
                self.ledger.add("figures", "second_binds_accepted", answer.outcome == "ok")
                moved = "double_reservations"
            else:
                self.hostile(kind, side, "volcano/deallocate", encode_event_request(p, node))
                moved = "kube_binds_released_by_deallocate"
            job = self.store.job(p["metadata"]["uid"])
            self.ledger.add("figures", moved, job is None or job.node != node)
            self.ledger.add("attacks", f"{kind}_rounds")

    def made_up_allocate(self) -> None:
        """Allocate for a UID nobody filtered (no reservation); predicate + allocate for a
        made-up pod (a reservation only until the monitor would confirm it)."""
        ghost = self.pod()
        self.hostile("made_up_allocate", 0, "volcano/allocate",
                     encode_event_request(ghost, "gpu-1"))
        if self.store.job(ghost["metadata"]["uid"]) is not None:
            self.ledger.add("figures", "made_up_allocations_held")
        ghost = self.pod()
        self.setup("volcano/predicate", encode_predicate_request(ghost, node_objects()[1]))
        self.hostile("made_up_allocate", 1, "volcano/allocate",
                     encode_event_request(ghost, "gpu-1"))
        job = self.store.job(ghost["metadata"]["uid"])
        self.ledger.add("figures", "never_expiring_allocations",
                        job is not None and job.expires_at <= 0)
        self.ledger.add("attacks", "made_up_allocate_rounds")

    def unauthenticated(self) -> None:
        """Filter, bind, allocate and deallocate without a token or with a wrong one: each
        refused, Redis left as it was."""
        p = self.pod()
        nodes = passing(self.setup("filter", encode_extender_args(p, node_objects())))
        fresh = []
        for auth in ("none", "wrong"):
            self.hostile("unauthenticated_bind", 1, "bind",
                         encode_binding_args(p, nodes[0] if nodes else "gpu-2"), auth)
            self.hostile("unauthenticated_allocate", 0, "volcano/allocate",
                         encode_event_request(p, "gpu-3"), auth)
            fresh.append(self.pod())
            self.hostile("unauthenticated_filter", 0, "filter",
                         encode_extender_args(fresh[-1], node_objects()), auth)
        changed = (self.store.job(p["metadata"]["uid"]) is not None) + sum(
            self.store.filter_record(q["metadata"]["uid"]) is not None for q in fresh)
        r = self.pod()
        self.setup("volcano/predicate", encode_predicate_request(r, node_objects()[2]))
        self.setup("volcano/allocate", encode_event_request(r, "gpu-2"))
        held = self.store.job(r["metadata"]["uid"]) is not None
        self.hostile("unauthenticated_deallocate", 1, "volcano/deallocate",
                     encode_event_request(r, "gpu-2"), "none")
        changed += held and self.store.job(r["metadata"]["uid"]) is None
        self.ledger.add("figures", "unauthenticated_state_changes", changed)
        self.ledger.add("attacks", "unauthenticated_rounds")
