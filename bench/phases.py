"""Where ours spends a pod's time, in-process: the verbs' public pieces timed one by one
(parse, state sync, estimation, decision, write, encode) beside the whole verb through the
service."""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import orjson

from bench.cluster import prioritize_body
from estimator.predict import Estimator
from extender.core import filtering
from extender.core.annotations import parse_demand
from extender.core.gpu_table import distinct_layouts
from extender.core.job import PodJob
from extender.model import FilterRecord
from extender.service import Scheduler
from extender.settings import Settings
from extender.sizing import Sizer, check_fits_somewhere
from extender.state.store import RedisStore, WaitersRead
from extender.web.ahead import PricedAhead, after_filter
from extender.web.known_nodes import KnownNodeObjects
from extender.wire import kube as wire_kube
from extender.wire.objects import NodeLayouts

PHASES = ("parse", "state sync", "estimation", "decision", "write", "encode")


def phase_profile(url: str, bodies: list[bytes], now: Callable[[], float]) -> dict[str, Any]:
    """Median milliseconds per pod (filter + prioritize) of each phase, in-process, with
    the settings the served extender reads from the environment."""
    settings = Settings.from_env({**os.environ, "REDIS_URL": url, "EXTENDER_BIND": "record"})
    store = RedisStore.from_url(url)
    estimator = Estimator.load(design=settings.estimator_design)
    estimator.warm()
    sizer = Sizer(estimator, settings.declared_default_s)
    scheduler = Scheduler(settings, RedisStore.from_url(url), estimator)
    layouts, known = NodeLayouts(), KnownNodeObjects()
    ahead = PricedAhead()
    samples: dict[str, list[float]] = {name: [] for name in (*PHASES, "service",
                                                             "after answer")}
    for body in bodies:
        spent = dict.fromkeys(samples, 0.0)
        clock = _Clock()
        args = wire_kube.decode_args(known.parse(body), layouts)
        spent["parse"] += clock.lap()
        demand = parse_demand(args.pod)
        assert demand is not None, "bench pods are annotated"
        # in names mode filter's record goes with its read (`Scheduler.filter`)
        written = FilterRecord(demand) if not any(args.nodes.values()) else None
        snapshot = store.snapshot(args.nodes, now(),
                                  waiters=WaitersRead(demand.uid, settings.hold_for + 1,
                                                      settings.prioritize_reuse_s),
                                  record=written, record_ttl_s=settings.demand_ttl_s)
        spent["state sync"] += clock.lap()
        kinds = distinct_layouts(snapshot.nodes)
        needs = sizer.needs(demand, kinds, snapshot.floors)
        check_fits_somewhere(demand, needs, kinds)
        spent["estimation"] += clock.lap()
        job = PodJob(demand, snapshot, needs)
        decision = filtering.decide_filter(job, args.nodes, settings)
        spent["decision"] += clock.lap()
        if decision.writes_beyond(written):
            store.record_filter(decision.record, settings.demand_ttl_s, decision.waiter,
                                snapshot.now, settings.wait_ttl_s, decision.told)
        spent["write"] += clock.lap()
        encoded = wire_kube.encode_filter(args, decision.verdicts)
        answer = orjson.dumps(encoded)
        spent["encode"] += clock.lap()
        scheduler.filter(args.pod, args.nodes)
        spent["service"] += clock.lap()
        after_filter(scheduler, layouts, ahead, args, decision, encoded)  # as the route does
        spent["after answer"] += clock.lap()

        passed = prioritize_body(body, answer)
        clock = _Clock()
        args = wire_kube.decode_args(known.parse(passed), layouts)
        spent["parse"] += clock.lap()
        scores = scheduler.prioritize(args.pod, args.nodes)  # the cycle's: priced ahead
        spent["service"] += (priced := clock.lap())
        spent["decision"] += priced
        ahead.body_for(scores) or wire_kube.encode_priorities_json(scores)
        spent["encode"] += clock.lap()
        for name, ms in spent.items():
            samples[name].append(ms)
    medians = {name: statistics.median(values) for name, values in samples.items()}
    pieces = sum(medians[name] for name in PHASES)
    inside = sum(medians[name] for name in ("state sync", "estimation", "decision", "write"))
    return {"ms_per_pod": {name: round(medians[name], 3) for name in PHASES},
            "share": {name: round(medians[name] / pieces, 3) for name in PHASES},
            "pieces_ms": round(pieces, 3), "service_ms": round(medians["service"], 3),
            "service_overhead_ms": round(medians["service"] - inside, 3),
            "after_answer_ms": round(medians["after answer"], 3)}


class _Clock:
    def __init__(self) -> None:
        self._last = time.perf_counter()

    def lap(self) -> float:
        """Milliseconds since the last lap."""
        now = time.perf_counter()
        spent, self._last = (now - self._last) * 1e3, now
        return spent
