"""Hostile, racing and fault scenarios against real processes on 127.0.0.1; the JSON says
what each scenario executed, and the run fails when one ran less than asked.

    schedtune chaos --json                 # 10,000 hostile requests, 10,000 racing binds,
                                           # 5 Redis SIGKILLs, 3 replica SIGKILLs
    schedtune chaos --fuzz 300 --binds 400 --redis-kills 2 --replica-kills 1 --json

Starts one redis-server (AOF, `EmbeddedRedis`) and two extender replicas (gunicorn, two
workers each, record-only binds, a bearer token unless --no-auth) on it, and writes the
nodes' GPU layouts as the node watcher does. Then:

1. hostile: `--fuzz` requests to both replicas. Attack rounds first (a full-nodes filter
   claiming 16 GPUs of 1 TiB for a real node, then binds; a second bind of a bound pod to
   another node; Volcano deallocate of a kube-scheduler bind; allocate for made-up UIDs;
   filter, bind and deallocate without or with a wrong token), then single requests:
   mutated bodies of all seven verbs, JSON nested 60,000 deep, 5,000-digit and
   non-finite annotations and GPU labels, names outside Kubernetes rules (300
   characters, '/', ':', NUL, CR LF), requests without a token.
2. race: 8 threads filter on one replica and bind (twice, as kube-scheduler retries) on
   the other for pods competing for 8 GPUs; half the bound pods are then released (as
   the monitor does), until `--binds` bind requests were answered. Spread over that
   stream, one at a time: `--replica-kills` replicas SIGKILLed (master and workers, as
   when the container dies) and restarted; `--redis-kills` SIGKILLs of Redis, restarted
   from its AOF after `--redis-down-s`; `--slow-clients` sockets that send a request
   line and then one header a second for `--slow-hold-s`.
3. audit: Redis against the answers; gunicorn's logs for replaced workers.

JSON, one document on stdout:
  ok, failures      exit 0 only without failures; each names the #14 area it depends on
  asked, executed   per scenario, the same keys; executed < asked fails the run
  thread_deaths     "<thread>: <exception>: <text>" for every thread that died
  figures           the enforced counts (`EXPECTED`), then what is reported:
                    restart_to_first_good_answer_s {min, median, max} (each restart also
                    held to --restart-budget-s), lost_reservations_after_redis_kill and
                    released_reservations_back_after_redis_kill (see redis_kills)
  requests          every request sent
  hostile           requests by kind and by verb, outcomes by kind
  attacks           rounds per attack; outcomes of their well-formed set-up requests
  race              requests by verb, bind requests per replica, binds answered, held at
                    the end, releases; outcomes and max latency per fault window (none,
                    replica_down, redis_down, slow_clients)
  replica_kills     per kill: the replica, seconds from the restart command to the first
                    200 on /filter with a well-formed body
  redis_kills       per kill: outage_s (SIGKILL to PING after the AOF restart), what Redis
                    held and binds had answered before, held after, lost, released but
                    back, the outage probes, recovery_s (to the first good filter)
  slow_clients      sockets, seconds held, when the server closed them; well-formed
                    requests sent and answered while held, their max latency
  audit, workers    the final audit; replaced workers and why, secrets found in the logs
  samples           up to 5 answers per kind of failure

Outcomes: ok; error (the contract's error field set, 200: kube-scheduler retries);
refused (4xx in the contract's shape); unauthorized (401/403); retriable (503 with the
error field); server_error (any other 5xx); non_contract (not the verb's JSON shape);
timeout (no answer in 5 s, kube-scheduler's httpTimeout); connection_error.
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import os
import random
import re
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests

from extender.cluster.node_watch import apply_listing
from extender.errors import StoreUnavailable
from extender.model import (
    BATCH, EPOCHS, LABEL_COUNT, LABEL_MEMORY, LABEL_REPLICAS, MODEL, REQUESTS, TASK,
)  # fmt: skip
from extender.state.embedded_redis import EmbeddedRedis
from extender.state.store import RedisStore
from extender.wire.builders import gfd_node, pod_object
from extender.wire.kube import encode_binding_args, encode_extender_args
from extender.wire.volcano import (
    encode_event_request, encode_predicate_request, encode_prioritize_request,
)  # fmt: skip
from scripts.bench_extender import ROOT, free_port

log = logging.getLogger("schedtune.chaos")
GPUS_PER_NODE, NODES, LIMIT, MEMORY, SLOTS = 2, 4, 3, 24576, 4
PRODUCT = "NVIDIA-GeForce-RTX-3090"
NODE_NAMES = tuple(f"gpu-{i}" for i in range(NODES))
MODELS = ["resnet50", "vgg16", "densenet121", "mobilenet_v2", "bert_base", "resnet18"]
WORKERS = 2
HTTP_TIMEOUT_S = 5.0  # kube-scheduler's httpTimeout (k8s/scheduler-config.yaml)
READY_TIMEOUT_S = 60.0
RACERS = 8
RETRY_S = 0.2  # a racer's pause after no answer (kube-scheduler backs a pod off for 1 s)
VERBS = ("filter", "prioritize", "bind", "volcano/predicate", "volcano/prioritize",
         "volcano/allocate", "volcano/deallocate")
NO_ANSWER = ("timeout", "connection_error")
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

# What each enforced figure must be, and the part of #14 a failure points to.
EXPECTED: dict[str, tuple[Any, str]] = {
    "server_errors": (0, "hostile input"),
    "non_contract_answers": (0, "hostile input"),
    "hostile_unanswered": (0, "hostile input / worker model"),
    "hostile_names_in_state": (0, "hostile input (name validation)"),
    "crashed_workers": (0, "hostile input / worker model"),
    "replicas_exited_unasked": (0, "hostile input / worker model"),
    "unanswered_outside_faults": (0, "worker model"),
    "unanswered_while_slow_clients_held": (0, "worker model"),
    "overcommits": (0, "bind rules"),
    "reservations_on_missing_gpus": (0, "bind rules"),
    "double_reservations": (0, "bind rules"),
    "lost_reservations": (0, "bind rules / store"),
    "fake_layout_overcommits": (0, "bind rules (layouts capped at the watcher's)"),
    "second_binds_accepted": (0, "bind rules (idempotent per UID and node)"),
    "kube_binds_released_by_deallocate": (0, "bind rules (deallocate)"),
    "made_up_allocations_held": (0, "bind rules (allocate)"),
    "never_expiring_allocations": (0, "bind rules (allocate)"),
    "unauthenticated_not_refused": (0, "authentication"),
    "unauthenticated_state_changes": (0, "authentication"),
    "passthrough_failed_during_redis_outage": (0, "store outage handling"),
    "retriable_error_missing_during_redis_outage": (0, "store outage handling"),
    "replica_restarts_without_good_answer": (0, "restarts (item 5)"),
    "restarts_over_budget": (0, "restarts (item 5)"),
    "secrets_in_logs": (0, "logging"),
}


# --- bookkeeping: what ran, what died, what failed --------------------------------------------


class Ledger:
    """Counters by scope, latency peaks, samples and dead threads; shared by every thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counts: dict[str, Counter] = defaultdict(Counter)
        self.peaks: dict[str, float] = {}
        self.samples: dict[str, list[str]] = defaultdict(list)
        self.deaths: list[str] = []

    def add(self, scope: str, key: str, n: int = 1) -> None:
        with self._lock:
            self.counts[scope][key] += n

    def peak(self, key: str, value: float) -> None:
        with self._lock:
            self.peaks[key] = max(self.peaks.get(key, 0.0), value)

    def sample(self, scope: str, text: str) -> None:
        with self._lock:
            if len(self.samples[scope]) < 5:
                self.samples[scope].append(text[:300])

    def thread(self, name: str, target: Callable[[], None]) -> threading.Thread:
        """A thread whose unexpected exception is recorded (and fails the run), not lost."""

        def guarded() -> None:
            try:
                target()
            except BaseException as exc:  # noqa: BLE001  (every death must fail the run)
                with self._lock:
                    self.deaths.append(f"{name}: {type(exc).__name__}: {exc}"[:500])

        return threading.Thread(target=guarded, name=name, daemon=True)

    def run(self, threads: list[threading.Thread]) -> None:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()


def judge(report: dict[str, Any]) -> list[str]:
    """Why the run fails: dead threads, scenarios that executed less than asked, figures
    other than `EXPECTED` (a figure not measured fails too)."""
    failures = [f"thread died: {death}" for death in report["thread_deaths"]]
    for key, asked in report["asked"].items():
        done = report["executed"].get(key, 0)
        if done < asked:
            failures.append(f"{key}: executed {done} of {asked} asked")
    for name, (wanted, area) in EXPECTED.items():
        value = report["figures"].get(name)
        if value != wanted:
            failures.append(f"{name} = {value}, expected {wanted} ({area})")
    return failures


# --- requests and their outcomes --------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    outcome: str
    status: int
    body: Any
    latency_s: float


def contract_error(verb: str, body: Any) -> str | None:
    """The error text of a `verb` answer ("" for none); None when `body` is not the verb's shape."""
    if verb == "prioritize" and isinstance(body, list):
        shaped = all(isinstance(h, dict) and {"Host", "Score"} <= h.keys() for h in body)
        return "" if shaped else None
    if not isinstance(body, dict):
        return None
    if verb == "volcano/predicate":
        if not isinstance(body.get("code"), int) or not isinstance(body.get("status"), str):
            return None
        return (body["status"] or "error") if body["code"] == 1 else ""  # 0, 2, 3: verdicts
    if verb == "volcano/prioritize" and not isinstance(body.get("nodeScore"), dict):
        return None
    key = {"volcano/prioritize": "errorMessage", "volcano/allocate": "error",
           "volcano/deallocate": "error"}.get(verb, "Error")
    error = body.get(key, "" if verb.startswith("volcano/") else None)
    return error if isinstance(error, str) else None


def outcome(verb: str, status: int, content: bytes) -> tuple[str, Any]:
    """(outcome, decoded body) of one answer; the outcomes are listed in the module doc."""
    try:
        body = json.loads(content)
    except ValueError:
        body = None
    if status in (401, 403):
        return "unauthorized", body
    error = contract_error(verb, body)
    if status >= 500:
        return ("retriable" if status == 503 and error else "server_error"), body
    if error is None:
        return "non_contract", body
    if status >= 400:
        return "refused", body
    return ("error" if error else "ok"), body


def post(http: requests.Session, url: str, verb: str, data: bytes, auth: str = "token") -> Answer:
    """POST `data` to `url`; `auth`: token (the session's), none, or wrong."""
    headers: dict[str, str | None] = {"Content-Type": "application/json"}
    if auth == "none":
        headers["Authorization"] = None  # drops the session's header
    elif auth == "wrong":
        headers["Authorization"] = f"Bearer {secrets.token_hex(16)}"
    started = time.monotonic()
    try:
        res = http.post(url, data=data, headers=headers, timeout=HTTP_TIMEOUT_S)
    except requests.Timeout:
        return Answer("timeout", 0, None, time.monotonic() - started)
    except requests.RequestException:
        return Answer("connection_error", 0, None, time.monotonic() - started)
    kind, body = outcome(verb, res.status_code, res.content)
    return Answer(kind, res.status_code, body, time.monotonic() - started)


def passing(answer: Answer) -> list[str]:
    """The node names a successful full-nodes filter answer kept."""
    if answer.outcome != "ok":
        return []
    return [n["metadata"]["name"] for n in (answer.body.get("Nodes") or {}).get("items") or []]


# --- the processes -----------------------------------------------------------------------------


class Replicas:
    """Two gunicorn extender replicas on one Redis, each in its own process group, each life
    logging to its own file (gunicorn's log says which workers booted and why they left)."""

    def __init__(self, tmp: Path, redis_url: str, token_file: Path | None) -> None:
        self.tmp = tmp
        self.env = {**os.environ, "REDIS_URL": redis_url, "EXTENDER_WORKERS": str(WORKERS),
                    "EXTENDER_BIND": "record", "EXTENDER_NODE_WATCH": "0",
                    "EXTENDER_LOG_LEVEL": "ERROR", "EXTENDER_COLLOCATION_LIMIT": str(LIMIT),
                    "EXTENDER_REDIS_TIMEOUT_S": "0.5"}
        if token_file is not None:
            self.env["EXTENDER_AUTH_TOKEN_FILE"] = str(token_file)
        self.ports = [free_port(), free_port()]
        self.logs: list[list[Path]] = [[], []]
        self.procs: list[subprocess.Popen] = []
        for i in (0, 1):
            self.procs.append(self.start(i))

    def start(self, i: int) -> subprocess.Popen:
        life = self.tmp / f"replica-{i}-{len(self.logs[i])}.log"
        self.logs[i].append(life)
        metrics = self.tmp / f"metrics-{i}-{len(self.logs[i])}"
        metrics.mkdir()
        command = [sys.executable, "-m", "gunicorn", "-c",
                   str(ROOT / "extender" / "web" / "gunicorn.conf.py"),
                   "--bind", f"127.0.0.1:{self.ports[i]}", "--log-level", "info",
                   "--no-control-socket", "extender.web.app:create_app()"]
        with life.open("wb") as out:
            proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=out,
                                    env={**self.env, "PROMETHEUS_MULTIPROC_DIR": str(metrics)},
                                    start_new_session=True)
        if i < len(self.procs):
            self.procs[i] = proc
        return proc

    def url(self, i: int, verb: str) -> str:
        return f"http://127.0.0.1:{self.ports[i]}/{verb}"

    def kill(self, i: int) -> None:
        """SIGKILL the master and its workers at once, as when the container dies."""
        try:
            os.killpg(self.procs[i].pid, signal.SIGKILL)
        except ProcessLookupError:  # gone already: `exited_unasked` said so before
            pass
        self.procs[i].wait()

    def exited_unasked(self) -> int:
        return sum(1 for proc in self.procs if proc.poll() is not None)

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def worker_deaths(log_text: str, workers: int) -> tuple[int, Counter]:
    """Workers one gunicorn life replaced (booted beyond `workers`, recycling aside) and the
    reasons its log gives (a signal, an exit code, a worker timeout)."""
    boots = log_text.count("Booting worker with pid")
    recycled = log_text.count("Autorestarting worker")
    reasons = Counter(re.sub(r"\(pid:\d+\) ", "", m) for m in re.findall(
        r"Worker \(pid:\d+\) was sent SIG\w+|Worker \(pid:\d+\) exited with code \d+|"
        r"WORKER TIMEOUT", log_text))
    return max(0, boots - workers - recycled), reasons


@dataclass
class World:
    """What every scenario drives: Redis, its store, the replicas, the token, the ledger."""

    redis: EmbeddedRedis
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


def node_objects(memory_mib: int = MEMORY, count: int = GPUS_PER_NODE) -> list[dict]:
    return [gfd_node(name, PRODUCT, count, memory_mib, SLOTS) for name in NODE_NAMES]


def pod(annotated: bool = True, rng: random.Random | None = None, model: str | None = None,
        batch: int | None = None) -> dict:
    """A pod whose spec carries a secret (env) that must never reach a log line."""
    rng = rng or random.Random()
    if annotated:
        model, batch = model or rng.choice(MODELS), batch or rng.choice([8, 16, 32, 64])
    return pod_object(f"p-{uuid.uuid4().hex[:10]}", "chaos", str(uuid.uuid4()), model=model,
                      batch=batch, image="x", gpus=None, env={"TOKEN": "chaos-secret"})


# --- scenario 1: hostile requests --------------------------------------------------------------

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


def names_in_state(store: RedisStore) -> int:
    """Places where a hostile name reached Redis: a job, filter record or queue under it."""
    jobs = store.jobs()
    found = sum(1 for uid in BAD_UIDS if store.job(uid) or store.filter_record(uid))
    found += sum(1 for node, _ in store.queues() if node in BAD_NODE_NAMES)
    bad = set(BAD_NODE_NAMES)
    return found + sum(1 for j in jobs if {j.pod, j.namespace, j.node} & bad)


# --- scenario 1b: attack rounds (stateful hostile sequences) -----------------------------------


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


# --- scenario 2: the race, and the faults spread over it ---------------------------------------


class Race:
    """What the racing threads and the fault thread share: the binds answered success, the
    releases, the fault windows open now. A window is "replica_down:<i>", "redis_down"
    or "slow_clients"."""

    def __init__(self, world: World, binds: int, deadline: float) -> None:
        self.world, self.asked, self.deadline = world, binds, deadline
        self.lock = threading.Lock()
        self.release_gate = threading.Lock()  # a release never spans a Redis kill
        self.bound: dict[str, str] = {}
        self.released: set[str] = set()
        self.windows: set[str] = set()
        self.binds_answered = 0
        self.faults_done = threading.Event()
        self.racers: list[threading.Thread] = []
        self.lost_after_kill: set[str] = set()  # the Redis kill measurement reports them

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
            except StoreUnavailable:  # still held; the audit expects it
                with self.lock:
                    self.bound[uid] = node
                return
            with self.lock:
                self.released.add(uid)
            self.world.ledger.add("race", "releases")


def fault_plan(redis_kills: int, replica_kills: int,
               slow_clients: int) -> list[tuple[float, str, int]]:
    """(share of the asked binds answered before it starts, fault, argument), in order:
    every fault strictly inside the stream, kinds interleaved."""
    plan = [((j + 0.5) / (redis_kills + 0.5), "redis", j) for j in range(redis_kills)]
    plan += [((j + 0.3) / (replica_kills + 0.5), "replica", j % 2) for j in range(replica_kills)]
    plan += [(0.45, "slow_clients", slow_clients)] if slow_clients else []
    return sorted((share * 0.9, kind, arg) for share, kind, arg in plan)


def run_faults(race: Race, args: argparse.Namespace, results: dict[str, list]) -> None:
    try:
        for share, kind, arg in fault_plan(args.redis_kills, args.replica_kills, args.slow_clients):
            while race.binds_answered < share * race.asked and race.racing() \
                    and not race.finished():
                time.sleep(0.02)
            if kind == "redis":
                results["redis"].append(kill_redis(race, args.redis_down_s))
            elif kind == "replica":
                results["replica"].append(kill_replica(race, arg))
            else:
                results["slow_clients"].append(hold_slow_clients(race, arg, args.slow_hold_s))
    finally:
        race.faults_done.set()


def kill_replica(race: Race, side: int) -> dict[str, Any]:
    world = race.world
    race.open(f"replica_down:{side}", True)
    world.replicas.kill(side)
    world.ledger.add("executed", "replica_kills")
    started = time.monotonic()
    world.replicas.start(side)
    ready_s = world.first_good_filter(side, started)
    race.open(f"replica_down:{side}", False)
    return {"replica": side,
            "restart_to_first_good_answer_s": None if ready_s is None else round(ready_s, 3)}


def kill_redis(race: Race, down_s: float) -> dict[str, Any]:
    """SIGKILL Redis, probe both replicas while it is down, restart it from its AOF, and
    compare what it holds with what it held (and what binds answered) before the kill."""
    world = race.world
    with race.release_gate:
        with race.lock:
            acknowledged, released = dict(race.bound), set(race.released)
        held = {j.uid: j.node for j in world.store.jobs()}
        race.open("redis_down", True)
        world.redis.stop(kill=True)
    killed = time.monotonic()
    world.ledger.add("executed", "redis_kills")
    probes = probe_outage(world)
    time.sleep(max(0.0, down_s - (time.monotonic() - killed)))
    world.redis.start()
    outage_s = time.monotonic() - killed
    after = {j.uid: j.node for j in world.store.jobs()}
    with race.release_gate:
        race.open("redis_down", False)
    lost = [uid for uid, node in {**held, **acknowledged}.items()
            if after.get(uid) != node and uid not in race.lost_after_kill]
    back = [uid for uid in released if uid in after and uid not in held]
    race.lost_after_kill.update(lost)
    recovered = world.first_good_filter(0, time.monotonic())
    return {"outage_s": round(outage_s, 3), "held_before": len(held),
            "acknowledged_before": len(acknowledged), "held_after": len(after),
            "lost": len(lost), "released_but_back": len(back), "probes": probes,
            "recovery_s": None if recovered is None else round(recovered, 3)}


def probe_outage(world: World) -> dict[str, int]:
    """While Redis is down: an unannotated pod must pass every node, an annotated one must
    get the contract's retriable error (kube-scheduler retries it)."""
    probes: Counter = Counter()
    with world.session() as http:
        for side in (0, 1):
            plain, annotated = (world.call(http, side, "filter",
                                           encode_extender_args(pod(annotated), node_objects()))
                                for annotated in (False, True))
            probes["sent"] += 2
            probes["passthrough_failed"] += len(passing(plain)) != NODES
            probes["retriable_error_missing"] += annotated.outcome != "error"
            world.ledger.add("redis_outage_probes", f"plain:{plain.outcome}")
            world.ledger.add("redis_outage_probes", f"annotated:{annotated.outcome}")
    return dict(probes)


def hold_slow_clients(race: Race, count: int, hold_s: float) -> dict[str, Any]:
    """`count` sockets, alternating replicas, that send a request line and then one header
    a second for `hold_s`, never finishing the request."""
    socks: list[socket.socket] = []
    closed_after: list[float | None] = []
    for k in range(count):
        sock = socket.create_connection(("127.0.0.1", race.world.replicas.ports[k % 2]), timeout=2)
        sock.sendall(b"POST /filter HTTP/1.1\r\nHost: x\r\n")
        socks.append(sock)
        closed_after.append(None)
    race.world.ledger.add("executed", "slow_clients", count)
    race.open("slow_clients", True)
    started = time.monotonic()
    try:
        for second in range(int(hold_s)):
            time.sleep(1.0)
            for k, sock in enumerate(socks):
                if closed_after[k] is None:
                    try:
                        sock.sendall(b"X-Slow-%d: 1\r\n" % second)
                    except OSError:
                        closed_after[k] = round(time.monotonic() - started, 1)
    finally:
        race.open("slow_clients", False)
        for sock in socks:
            sock.close()
    return {"sockets": count, "held_s": round(time.monotonic() - started, 1),
            "closed_by_server_after_s": [c for c in closed_after if c is not None]}


def race(world: World, args: argparse.Namespace) -> tuple[Race, dict[str, list]]:
    state = Race(world, args.binds, time.monotonic() + args.race_timeout_s)
    faults: dict[str, list] = {"redis": [], "replica": [], "slow_clients": []}
    state.racers = [world.ledger.thread(f"racer-{k}", lambda k=k: state.racer(args.seed * 100 + k))
                    for k in range(RACERS)]
    faulter = world.ledger.thread("faults", lambda: run_faults(state, args, faults))
    world.ledger.run([*state.racers, faulter])
    return state, faults


# --- scenario 3: the audit ---------------------------------------------------------------------


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


# --- the report --------------------------------------------------------------------------------


def summary(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {"min": round(min(values), 3), "median": round(statistics.median(values), 3),
            "max": round(max(values), 3)}


def ending(counter: Counter, suffixes: tuple[str, ...]) -> int:
    """How many "verb:outcome" counts end in one of `suffixes`."""
    return sum(n for key, n in counter.items() if key.endswith(suffixes))


def figures(world: World, args: argparse.Namespace, faults: dict[str, list],
            checked: dict[str, int], found: dict[str, int], workers: dict[str, Any]) -> dict:
    """The enforced figures (`EXPECTED`), then the reported ones."""
    counts = world.ledger.counts
    fig, kills = counts["figures"], faults["redis"]
    answered = [*counts["hostile_outcomes"].items(), *counts["race"].items(),
                *counts["attack_setup"].items(), *counts["redis_outage_probes"].items()]
    restarts = [r["restart_to_first_good_answer_s"] for r in faults["replica"]]
    good = [r for r in restarts if r is not None]
    return {
        "server_errors": sum(n for k, n in answered if k.endswith(":server_error")),
        "non_contract_answers": sum(n for k, n in answered if k.endswith(":non_contract")),
        "hostile_unanswered": ending(counts["hostile_outcomes"], NO_ANSWER),
        "hostile_names_in_state": found["names"],
        "crashed_workers": workers["crashed"],
        "replicas_exited_unasked": world.replicas.exited_unasked(),
        "unanswered_outside_faults": ending(counts["race_during_none"], NO_ANSWER),
        "unanswered_while_slow_clients_held": ending(counts["race_during_slow_clients"], NO_ANSWER),
        **{k: checked[k] for k in ("overcommits", "reservations_on_missing_gpus",
                                   "lost_reservations")},
        "double_reservations": checked["double_reservations"] + fig["double_reservations"],
        **{k: fig[k] for k in ("fake_layout_overcommits", "second_binds_accepted",
                               "kube_binds_released_by_deallocate", "made_up_allocations_held",
                               "never_expiring_allocations", "unauthenticated_not_refused")},
        "unauthenticated_state_changes": fig["unauthenticated_state_changes"] + found["unauth"],
        "passthrough_failed_during_redis_outage": sum(
            k["probes"]["passthrough_failed"] for k in kills),
        "retriable_error_missing_during_redis_outage": sum(
            k["probes"]["retriable_error_missing"] for k in kills),
        "replica_restarts_without_good_answer": len(restarts) - len(good),
        "restarts_over_budget": sum(1 for r in good if r > args.restart_budget_s),
        "secrets_in_logs": workers["secrets_in_logs"],
        "restart_to_first_good_answer_s": summary(good),
        "lost_reservations_after_redis_kill": sum(k["lost"] for k in kills),
        "released_reservations_back_after_redis_kill": sum(k["released_but_back"] for k in kills),
    }


def asked_and_executed(world: World, args: argparse.Namespace, state: Race,
                       rounds: int) -> tuple[dict[str, int], dict[str, int]]:
    counts = world.ledger.counts
    kinds = counts["hostile_asked"]
    attacks = ["fake_layout", "second_bind", "deallocate_kube_bind", "made_up_allocate"]
    attacks += ["unauthenticated"] if world.token else []
    asked = {"hostile_requests": args.fuzz, "attack_rounds": rounds,
             "racing_bind_answers": args.binds, "replicas_receiving_binds": 2,
             "redis_kills": args.redis_kills, "replica_kills": args.replica_kills,
             "slow_clients": args.slow_clients, **{f"hostile:{k}": n for k, n in kinds.items()}}
    executed = {
        "hostile_requests": sum(counts["hostile"].values()),
        "attack_rounds": min(counts["attacks"][f"{a}_rounds"] for a in attacks),
        "racing_bind_answers": state.binds_answered,
        "replicas_receiving_binds": sum(1 for i in (0, 1)
                                        if counts["race"][f"bind_requests_to_replica_{i}"]),
        **{k: counts["executed"][k] for k in ("redis_kills", "replica_kills", "slow_clients")},
        **{f"hostile:{k}": counts["hostile"][k] for k in kinds}}
    return asked, executed


def report(world: World, args: argparse.Namespace, state: Race, faults: dict[str, list],
           checked: dict[str, int], found: dict[str, int], rounds: int) -> dict[str, Any]:
    ledger, counts = world.ledger, world.ledger.counts
    workers = workers_report(world.replicas, world.token)
    asked, executed = asked_and_executed(world, args, state, rounds)
    fig = figures(world, args, faults, checked, found, workers)
    by_verb = Counter()
    for key, n in counts["race"].items():
        if ":" in key:
            by_verb[key.split(":")[0]] += n
    slow = counts["race_during_slow_clients"]
    result = {
        "ok": False, "failures": [], "asked": asked, "executed": executed,
        "thread_deaths": list(ledger.deaths), "figures": fig,
        "requests": sum(sum(counts[s].values()) for s in (
            "hostile", "attack_setup", "redis_outage_probes")) + sum(by_verb.values()),
        "hostile": {"by_kind": dict(counts["hostile"]), "by_verb": dict(counts["hostile_verbs"]),
                    "outcomes": dict(counts["hostile_outcomes"]),
                    "auth": "bearer token" if world.token else "none (--no-auth)"},
        "attacks": {"rounds": dict(counts["attacks"]), "setup": dict(counts["attack_setup"])},
        "race": {"requests_by_verb": dict(by_verb),
                 "bind_requests_by_replica": [counts["race"][f"bind_requests_to_replica_{i}"]
                                              for i in (0, 1)],
                 "binds_answered": state.binds_answered, "binds_held_at_end": len(state.bound),
                 "releases": counts["race"]["releases"],
                 "outcomes_by_window": {s.removeprefix("race_during_"): dict(c)
                                        for s, c in counts.items() if s.startswith("race_during_")},
                 "max_latency_s_by_window": {k.split(":")[1]: round(v, 3)
                                             for k, v in ledger.peaks.items()}},
        "replica_kills": {"kills": faults["replica"], "budget_s": args.restart_budget_s,
                          "restart_to_first_good_answer_s": fig["restart_to_first_good_answer_s"],
                          "how": "SIGKILL to the gunicorn master and its workers (process group)"},
        "redis_kills": {"kills": faults["redis"],
                        "outage_s": summary([k["outage_s"] for k in faults["redis"]]),
                        "probe_outcomes": dict(counts["redis_outage_probes"]),
                        "note": "lost: reservations held, or binds answered, before a SIGKILL "
                                "and missing after the restart from the AOF (appendfsync "
                                "everysec); reported, not enforced"},
        "slow_clients": {"windows": faults["slow_clients"],
                         "well_formed_sent_while_held": sum(slow.values()),
                         "answered_while_held": sum(slow.values()) - ending(slow, NO_ANSWER),
                         "max_latency_while_held_s": round(
                             ledger.peaks.get("latency_s:slow_clients", 0.0), 3)},
        "audit": checked, "workers": workers, "samples": dict(ledger.samples),
    }
    result["failures"] = judge(result)
    result["ok"] = not result["failures"]
    return result


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fuzz", type=int, default=10_000, help="hostile requests")
    parser.add_argument("--binds", type=int, default=10_000, help="racing bind requests answered")
    parser.add_argument("--redis-kills", type=int, default=5)
    parser.add_argument("--redis-down-s", type=float, default=1.0)
    parser.add_argument("--replica-kills", type=int, default=3)
    parser.add_argument("--restart-budget-s", type=float, default=2.0,
                        help="kill -9 to first good answer (issue #14: 2 s)")
    parser.add_argument("--slow-clients", type=int, default=4)
    parser.add_argument("--slow-hold-s", type=float, default=8.0)
    parser.add_argument("--race-timeout-s", type=float, default=1800.0)
    parser.add_argument("--no-auth", action="store_true", help="run the replicas without a token")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if not 0 <= args.fuzz <= 1_000_000 or not 10 <= args.binds <= 1_000_000:
        parser.error("--fuzz 0..1000000, --binds 10..1000000")
    if min(args.redis_kills, args.replica_kills, args.slow_clients) < 0 or args.slow_hold_s > 60:
        parser.error("kill and client counts >= 0, --slow-hold-s <= 60")
    return args


def run(world: World, args: argparse.Namespace, started: float) -> dict[str, Any]:
    """Every scenario in order, then the audit and the report."""
    for side in (0, 1):
        if world.first_good_filter(side, started) is None:
            raise RuntimeError(f"replica {side} never answered: {world.replicas.logs[side][-1]}")
    log.info("replicas up after %.1f s; attacks and hostile requests", time.monotonic() - started)
    rounds = max(1, min(10, args.fuzz // 1000)) if args.fuzz else 0
    with world.session() as http:
        attacks = Attacks(world, http, random.Random(args.seed))
        for _ in range(rounds):
            attacks.round()
    sent = sum(world.ledger.counts["hostile"].values())
    unauth = hostile(world, max(0, args.fuzz - sent), args.seed)
    store = world.store
    found = {"names": names_in_state(store),
             "unauth": sum(1 for uid in unauth if store.job(uid) or store.filter_record(uid))}
    for uid in store.job_uids():  # the hostile phase's pods end: the race starts clean
        store.release(uid)
    log.info("race after %.1f s", time.monotonic() - started)
    state, faults = race(world, args)
    checked = audit(store, state.bound, state.lost_after_kill)
    return report(world, args, state, faults, checked, found, rounds)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="chaos %(message)s")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="schedtune-chaos-") as tmp_name:
        tmp = Path(tmp_name)
        token = None if args.no_auth else secrets.token_hex(24)
        if token:
            (tmp / "token").write_text(token)
        redis = EmbeddedRedis(tmp / "redis")
        store = RedisStore.from_url(redis.start())
        apply_listing(store, node_objects())  # the layouts the node watcher would write
        replicas = Replicas(tmp, redis.url, tmp / "token" if token else None)
        world = World(redis, store, replicas, token, Ledger())
        try:
            result = run(world, args, started)
        except Exception as exc:  # noqa: BLE001  (still one JSON document, and exit 1)
            result = {"ok": False, "failures": [f"aborted: {type(exc).__name__}: {exc}"],
                      "thread_deaths": world.ledger.deaths}
        finally:
            replicas.stop()
            redis.stop()
    result["wall_s"] = round(time.monotonic() - started, 1)
    print(json.dumps(result, indent=None if args.json else 2))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
