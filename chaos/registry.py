"""The model registry under attack and churn, on the running replicas (issue #50):

1. poison: entries no reader should trust written straight into Redis (a batch key that
   is a Unicode digit, a name that is not its key, a built-in model's name, bytes that are
   not JSON or not UTF-8, an entry over the size limit, fields of the wrong type), beside
   one good entry; replica 1 restarted on it. Every filter of a built-in or the good
   model must still be answered, each poisoned name refused in the verb's shape,
   `/readyz` must name every poisoned entry, and filters naming them must not reload the
   registry (`schedtune_registry_reloads_total` unchanged).
2. churn: a pod of the good model filtered on one replica, the model removed or replaced
   by a transformer, then the pod bound (kube-scheduler's bind, or Volcano's allocate)
   on the other: every answer in the verb's shape.
3. wipe: the registry's keys lost (as with its Redis) and written again with another
   model under the same name: both replicas must reserve alike for the same job.

Figures (all enforced at 0): registry_poison_bad_answers, registry_poison_not_reported,
registry_reloads_without_change, replica_start_failures_with_poisoned_registry,
churn_non_contract_answers, replicas_disagreeing_after_wipe.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import orjson
import redis

from chaos.answers import passing
from chaos.cluster import NODE_NAMES, node_objects, pod
from chaos.world import World
from estimator.feature_table import FeatureTable
from estimator.user_models.entry import MAX_ENTRY_BYTES, RegisteredModel
from extender.state.model_store import MODELS_EPOCH_KEY, MODELS_KEY, MODELS_REV_KEY
from extender.wire.kube import encode_binding_args, encode_extender_args
from extender.wire.volcano import encode_event_request, encode_predicate_request

log = logging.getLogger("schedtune.chaos")
GOOD = "chaos-net"
CHECK_S = 1.1  # past a replica's registry check interval (1 s)
CHURN_PODS = 8
SCENARIOS = 3  # poison, churn, wipe


def entry_like(builtin: str, name: str) -> RegisteredModel:
    """A CNN entry holding `builtin`'s features under `name` (no torch)."""
    summary, sims = FeatureTable.load().rows_of(builtin)
    return RegisteredModel(name, f"{name}-family", "torchvision", "chaos",
                           {k: float(v) for k, v in summary.items()
                            if k not in ("model", "family")},
                           {task: {b: row for b, row in rows.items() if min(row.values()) >= 0}
                            for task, rows in sims.items()})


def poisoned_entries() -> dict[str, bytes]:
    good = orjson.loads(entry_like("resnet50", "x").to_json())
    row = next(iter(good["sims"]["train"].values()))

    def variant(name: str, **changes: Any) -> bytes:
        return orjson.dumps({**good, "name": name, **changes})

    return {
        "unicode-batch": variant("unicode-batch", sims={"train": {"²": row}}),
        "circled-batch": variant("circled-batch", sims={"train": {"①": row}}),
        "moved": variant("elsewhere"),
        "resnet50": variant("resnet50"),
        "not-json": b"{not json",
        "not-utf8": b"\xff\xfe\x00",
        "huge": variant("huge", source="x" * (MAX_ENTRY_BYTES + 1)),
        "wrong-types": variant("wrong-types", summary=[1, 2], sims="none"),
    }


def _filter(world: World, http: Any, side: int, model: str) -> Any:
    return world.call(http, side, "filter", encode_extender_args(
        pod(True, model=model, batch=32), node_objects()))


def _reloads(world: World, http: Any, side: int) -> float:
    return world.metric(http, side, "schedtune_registry_reloads_total")


def poison(world: World, figures: dict[str, int]) -> None:
    store = world.store
    entries = poisoned_entries()
    for key, raw in entries.items():
        store.models.publish(key, raw)
    store.models.publish(GOOD, entry_like("resnet50", GOOD).to_json())
    world.replicas.kill(1)
    world.replicas.start(1)
    if world.first_good_filter(1, time.monotonic()) is None:
        figures["replica_start_failures_with_poisoned_registry"] += 1
    time.sleep(CHECK_S)
    with world.session() as http:
        for side in (0, 1):
            for model in ("resnet50", GOOD):
                answer = _filter(world, http, side, model)
                world.ledger.add("registry", f"poison:{model}:{answer.outcome}")
                figures["registry_poison_bad_answers"] += answer.outcome != "ok"
            for key in entries:
                answer = _filter(world, http, side, key)
                world.ledger.add("registry", f"poisoned:{answer.outcome}")
                figures["registry_poison_bad_answers"] += answer.outcome not in ("ok", "refused")
            ready = http.get(world.replicas.url(side, "readyz"), timeout=5).json()
            skipped = ready.get("registry", {}).get("skipped", {})
            figures["registry_poison_not_reported"] += sum(1 for k in entries if k not in skipped)
            before = _reloads(world, http, side)
            for _ in range(20):
                _filter(world, http, side, "moved")
            figures["registry_reloads_without_change"] += int(_reloads(world, http, side) - before)


def churn(world: World, figures: dict[str, int]) -> None:
    store = world.store
    transformer = orjson.dumps({"name": GOOD, "family": "llm", "kind": "transformer",
                                "source": "chaos", "config": {
                                    "hidden_size": 2048, "num_hidden_layers": 16,
                                    "num_attention_heads": 16, "vocab_size": 32000,
                                    "intermediate_size": 5504}})
    with world.session() as http:
        for i in range(CHURN_PODS):
            store.models.publish(GOOD, entry_like("resnet50", GOOD).to_json())
            time.sleep(CHECK_S)
            job = pod(True, model=GOOD, batch=32)
            volcano = i % 2 == 1
            node = NODE_NAMES[i % len(NODE_NAMES)]
            if volcano:
                first = world.call(http, 0, "volcano/predicate", encode_predicate_request(
                    job, node_objects()[i % len(NODE_NAMES)]))
            else:
                first = world.call(http, 0, "filter", encode_extender_args(job, node_objects()))
            if i % 4 < 2:
                store.models.remove(GOOD)
            else:
                store.models.publish(GOOD, transformer)
            if i % 3 == 0:
                time.sleep(CHECK_S)  # the other replica has seen the change, or not yet
            if volcano:
                second = world.call(http, 1, "volcano/allocate",
                                    encode_event_request(job, node))
            else:
                second = world.call(http, 1, "bind", encode_binding_args(job, node))
            for answer in (first, second):
                world.ledger.add("registry", f"churn:{answer.outcome}")
                figures["churn_non_contract_answers"] += answer.outcome in (
                    "server_error", "non_contract")
            store.release(job["metadata"]["uid"])


def _lose_registry(world: World) -> None:
    """What losing Redis does to the registry: its entries, counter and epoch gone."""
    client = redis.Redis.from_url(world.redis.url)
    try:
        client.delete(MODELS_KEY, MODELS_REV_KEY, MODELS_EPOCH_KEY)
    finally:
        client.close()


def wipe(world: World, figures: dict[str, int]) -> None:
    """Replica 0 loads the registry's first revision; the registry is lost and written
    again with another model under the same name, which is again its first revision;
    replica 1 reads it fresh. Both must reserve alike."""
    store = world.store
    _lose_registry(world)
    store.models.publish(GOOD, entry_like("resnet50", GOOD).to_json())
    time.sleep(CHECK_S)
    with world.session() as http:
        _filter(world, http, 0, GOOD)
        _lose_registry(world)
        store.models.publish(GOOD, entry_like("vgg16", GOOD).to_json())
        time.sleep(CHECK_S)
        reserved = []
        for side in (0, 1):
            job = pod(True, model=GOOD, batch=32)
            kept = passing(world.call(http, side, "filter",
                                      encode_extender_args(job, node_objects())))
            answer = world.call(http, side, "bind",
                                encode_binding_args(job, (kept or NODE_NAMES)[0]))
            held = store.job(job["metadata"]["uid"])
            world.ledger.add("registry", f"wipe:{answer.outcome}")
            reserved.append(round(held.reserved_mib) if held else None)
            store.release(job["metadata"]["uid"])
    figures["replicas_disagreeing_after_wipe"] += reserved[0] != reserved[1] or None in reserved
    world.ledger.add("registry", f"wipe_reserved_mib:{reserved[0]}/{reserved[1]}")


def run_registry(world: World) -> dict[str, int]:
    """Every registry scenario in turn; the figures (see the module docstring)."""
    figures = dict.fromkeys(("registry_poison_bad_answers", "registry_poison_not_reported",
                             "registry_reloads_without_change",
                             "replica_start_failures_with_poisoned_registry",
                             "churn_non_contract_answers", "replicas_disagreeing_after_wipe"), 0)
    for scenario in (poison, churn, wipe):
        log.info("registry: %s", scenario.__name__)
        scenario(world, figures)
        world.ledger.add("executed", "registry_scenarios")
    for key in [*poisoned_entries(), GOOD]:
        world.store.models.remove(key)
    return figures
