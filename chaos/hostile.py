"""The hostile request catalogue (scenario 1): mutated bodies of all seven verbs, deeply
nested JSON, 5,000-digit and non-finite numbers, names outside Kubernetes rules, requests
without a valid token; `hostile_requests` draws them on a fixed schedule. Pure: it builds
requests, sends none."""

from __future__ import annotations

import copy
import random
from collections.abc import Callable
from typing import Any

from chaos.cluster import node_objects, pod
from extender.model import (
    BATCH, EPOCHS, LABEL_COUNT, LABEL_MEMORY, LABEL_REPLICAS, MODEL, REQUESTS, TASK,
)  # fmt: skip
from extender.wire.kube import encode_binding_args, encode_extender_args
from extender.wire.volcano import (
    encode_event_request, encode_predicate_request, encode_prioritize_request,
)  # fmt: skip

VERBS = ("filter", "prioritize", "bind", "volcano/predicate", "volcano/prioritize",
         "volcano/allocate", "volcano/deallocate")
NESTED_JSON = b'{"a":' * 60000 + b"1" + b"}" * 60000  # 360 KB
NESTED_LISTS = b"[" * 200000 + b"]" * 200000
BIG_NUMBERS = ["0" * 5000 + "32", "9" * 5000, "1" + "0" * 400, "1e300", "-1e300", "nan", "inf",
               "-inf", "1e-300", "\u0663\u0662", " 32 ", "0x20", "32.0", "1_000", "-0"]
# Outside Kubernetes naming rules whatever the exact rule: '/', ':', '*', NUL, CR LF, space,
# non-ASCII, upper case or '_' (node names), 300 characters.
BAD_NODE_NAMES = ["gpu-0/../../etc", "GPU_0", "gpu-0:1", "st:job:x", "*", "gpu\x00zero",
                  "n\u00f6de", " gpu-0", "gpu-0\r\nX-Injected: 1", "-gpu-", "a..b", "x" * 300]
BAD_UIDS = ["../../st:jobs", "uid/with/slashes", "st:gpu:gpu-0:0", "*", "u\x00id", "\u00fc-id",
            "uid with spaces", "uid\r\nX-Injected: 1", "9" * 300]
HOSTILE_SCHEDULE = (["deep_json", "huge_number", "huge_number", "bad_names", "bad_names",
                     "bad_names", "unauthenticated", "unauthenticated"] + ["mutated"] * 32)

Request = tuple[str, Any, str]  # verb, body (JSON value or raw bytes), auth


def mutated(rng: random.Random, nodes: list[dict]) -> list[Request]:
    """A valid body with random damage: dropped or retyped keys, absurd values, nesting."""
    p = pod(rng.random() < 0.8, rng)
    junk = [None, True, -1, 0, 10**12, 1e308, "", "\u202e\u0000\ud7ff", [], {}, [[[[]]]],
            {"a": {"b": {"c": [1, {"d": None}]}}}, "x" * 5000]
    if rng.random() < 0.5:
        p["metadata"]["annotations"][rng.choice([BATCH, MODEL, TASK, EPOCHS])] = \
            rng.choice(junk + ["0", "-5", "1000000000000", "nope", "inference"])
    node = copy.deepcopy(rng.choice(nodes))
    if rng.random() < 0.4:
        node["metadata"]["labels"][rng.choice(list(node["metadata"]["labels"]))] = rng.choice(junk)
    verb = rng.choice(VERBS)
    body = request_body(verb, p, node)
    for key in list(body):
        roll = rng.random()
        if roll < 0.1:
            del body[key]
        elif roll < 0.2:
            body[key] = rng.choice(junk)
    return [(verb, rng.choice(junk) if rng.random() < 0.05 else body, "token")]


def request_body(verb: str, p: dict, node: dict) -> dict:
    """`verb`'s request for pod `p` and `node` (a full node; events and bind name it)."""
    name = node["metadata"]["name"]
    return {
        "filter": lambda: encode_extender_args(p, [node]),
        "prioritize": lambda: encode_extender_args(p, node_names=[name, "ghost"]),
        "bind": lambda: encode_binding_args(p, name),
        "volcano/predicate": lambda: encode_predicate_request(p, node),
        "volcano/prioritize": lambda: encode_prioritize_request(p, [node]),
        "volcano/allocate": lambda: encode_event_request(p, name),
        "volcano/deallocate": lambda: encode_event_request(p, name),
    }[verb]()


def deep_json(rng: random.Random, nodes: list[dict]) -> list[Request]:
    return [(rng.choice(VERBS), rng.choice([NESTED_JSON, NESTED_JSON, NESTED_LISTS]), "token")]


def huge_number(rng: random.Random, nodes: list[dict]) -> list[Request]:
    """A 5,000-digit, non-finite or oddly written number in an annotation or a GPU label,
    then (half the time) a bind, in case filter let it through."""
    p, node = pod(True, rng), copy.deepcopy(rng.choice(nodes))
    if rng.random() < 0.6:
        where, keys = p["metadata"]["annotations"], [BATCH, EPOCHS, REQUESTS]
    else:
        where, keys = node["metadata"]["labels"], [LABEL_COUNT, LABEL_MEMORY, LABEL_REPLICAS]
    where[rng.choice(keys)] = rng.choice(BIG_NUMBERS)
    verb = rng.choice(["filter", "prioritize", "volcano/predicate", "volcano/prioritize"])
    follow = [("bind", encode_binding_args(p, node["metadata"]["name"]), "token")]
    return [(verb, request_body(verb, p, node), "token")] + (follow if rng.random() < 0.5 else [])


def bad_names(rng: random.Random, nodes: list[dict]) -> list[Request]:
    """A name outside Kubernetes rules where a pod UID, pod name, namespace or node name
    goes, followed by the bind or allocate that would turn it into Redis keys."""
    p, node, where = pod(True, rng), copy.deepcopy(rng.choice(nodes)), rng.randrange(6)
    bad_node, bad_uid = rng.choice(BAD_NODE_NAMES), rng.choice(BAD_UIDS)
    meta = p["metadata"]
    if where == 0:
        meta["uid"] = bad_uid
    elif where == 1:
        meta[rng.choice(["name", "namespace"])] = bad_node
    elif where == 2:
        node["metadata"]["name"] = bad_node
    if where <= 2:
        verb = rng.choice(["filter", "volcano/predicate"])
        then = ("bind", encode_binding_args(p, node["metadata"]["name"])) if verb == "filter" \
            else ("volcano/allocate", encode_event_request(p, node["metadata"]["name"]))
        return [(verb, request_body(verb, p, node), "token"), (*then, "token")]
    if where == 3:
        return [(rng.choice(["filter", "prioritize"]),
                 encode_extender_args(p, node_names=["gpu-0", bad_node]), "token")]
    if where == 4:
        body = encode_binding_args(p, "gpu-0")
        field = rng.choice(["PodUID", "PodName", "PodNamespace", "Node"])
        body[field] = bad_uid if field == "PodUID" else bad_node
        return [("bind", body, "token")]
    event = encode_event_request(p, bad_node)
    return [(rng.choice(["volcano/allocate", "volcano/deallocate"]), event, "token")]


def unauthenticated(rng: random.Random, nodes: list[dict]) -> list[Request]:
    """A valid request of a random verb without a token or with a wrong one."""
    p, verb = pod(True, rng), rng.choice(VERBS)
    return [(verb, request_body(verb, p, rng.choice(nodes)), rng.choice(["none", "wrong"]))]


GENERATORS: dict[str, Callable[[random.Random, list[dict]], list[Request]]] = {
    "mutated": mutated, "deep_json": deep_json, "huge_number": huge_number,
    "bad_names": bad_names, "unauthenticated": unauthenticated}


def hostile_requests(rng: random.Random, count: int, auth: bool) -> list[tuple[str, Request]]:
    """`count` (kind, request) pairs following HOSTILE_SCHEDULE (unauthenticated ones only
    with `auth`; mutated ones instead)."""
    nodes, out = node_objects(), []
    slot = 0
    while len(out) < count:
        kind = HOSTILE_SCHEDULE[slot % len(HOSTILE_SCHEDULE)]
        kind = "mutated" if kind == "unauthenticated" and not auth else kind
        out += [(kind, request) for request in GENERATORS[kind](rng, nodes)]
        slot += 1
    return out[:count]
