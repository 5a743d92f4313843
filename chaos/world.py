"""What every chaos scenario drives: Redis, its store, the replicas, the token and the
ledger, with a call to one replica and the wait for its first good answer."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import requests

from chaos.answers import Answer, post
from chaos.cluster import node_objects, pod
from chaos.ledger import Ledger
from chaos.processes import Replicas
from chaos.sentinel import SentinelTopology
from extender.state.embedded_redis import EmbeddedRedis
from extender.state.store import RedisStore
from extender.wire.kube import encode_extender_args

READY_TIMEOUT_S = 60.0


@dataclass
class World:
    """What every scenario drives: Redis, its store, the replicas, the token, the ledger."""

    redis: EmbeddedRedis | SentinelTopology  # the race with failovers: the topology
    store: RedisStore
    replicas: Replicas
    token: str | None
    ledger: Ledger

    def session(self) -> requests.Session:
        http = requests.Session()
        if self.token:
            http.headers["Authorization"] = f"Bearer {self.token}"
        return http

    def call(self, http: requests.Session, side: int, verb: str, body: Any,
             auth: str = "token") -> Answer:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        return post(http, self.replicas.url(side, verb), verb, data, auth)

    def metric(self, http: requests.Session, side: int, sample: str) -> float:
        """The sum of the samples a replica's /metrics lists under `sample` (a name, with
        its labels if any: ``name{outcome="bound"}``), over its workers."""
        text = http.get(self.replicas.url(side, "metrics"), timeout=5).text
        return sum(float(line.split()[-1]) for line in text.splitlines()
                   if line.startswith(sample) and line[len(sample):len(sample) + 1] in " {")

    def first_good_filter(self, side: int, started: float) -> float | None:
        """Seconds from `started` to the first well-formed 200 on `side`'s /filter (None:
        none within READY_TIMEOUT_S)."""
        body = encode_extender_args(pod(True), node_objects())
        with self.session() as http:
            while time.monotonic() - started < READY_TIMEOUT_S:
                if self.call(http, side, "filter", body).outcome == "ok":
                    return time.monotonic() - started
                time.sleep(0.01)
        return None
