"""Work done once filter's answer is sent, before the worker reads its next request.

Its refused nodes are counted for the metrics, and:

kube-scheduler runs its own score plugins over the nodes that passed before it calls
prioritize with that very list (in the order filter answered it), so prioritize's
answer is priced and encoded then (`Scheduler.price_ahead`), off kube-scheduler's
path; prioritize answers with those bytes when the service hands back those very
scores. The CPU spent is the same; where it falls is not.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from extender.core.filtering import FilterDecision
from extender.metrics import AFTER_ANSWER_SECONDS, count_filter
from extender.service import Scheduler
from extender.wire import kube as wire_kube
from extender.wire.objects import NodeLayouts

log = logging.getLogger(__name__)


class PricedAhead:
    """The last scores priced ahead and their encoded answer (one per app)."""

    def __init__(self) -> None:
        self._kept: tuple[Mapping[str, float] | None, bytes] = (None, b"")

    def keep(self, scores: Mapping[str, float], body: bytes) -> None:
        self._kept = (scores, body)

    def body_for(self, scores: Mapping[str, float]) -> bytes | None:
        kept, body = self._kept
        return body if kept is scores else None


def after_filter(service: Scheduler, layouts: NodeLayouts, ahead: PricedAhead,
                 args: wire_kube.ExtenderArgs, decision: FilterDecision,
                 answer: Mapping[str, Any]) -> None:
    """The refused nodes counted (metrics), the passing list of filter's `answer` (in its
    order) remembered as checked (names mode), and prioritize's answer for it priced and
    encoded. A failure here loses nothing: prioritize prices the pod itself."""
    started = time.perf_counter()
    try:
        count_filter("filter", decision)
        if args.node_items is None:  # names: no layouts
            passed = layouts.passed(answer["NodeNames"])
        else:
            passed = {item["metadata"]["name"]: args.nodes[item["metadata"]["name"]]
                      for item in answer["Nodes"]["items"]}
        scores = service.price_ahead(args.pod, passed)
        if scores is not None:
            ahead.keep(scores, wire_kube.encode_priorities_json(scores))
    except Exception:  # noqa: BLE001 (the answer is sent; nothing may escape into the server)
        log.exception("pricing ahead failed; prioritize prices the pod itself")
    finally:
        AFTER_ANSWER_SECONDS.labels("filter").observe(time.perf_counter() - started)
