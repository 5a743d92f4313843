"""The status page's routes (test_ui_browser.py draws the page in Chromium): what
/ui/state.json holds for a state made through the verbs, the token on the page (Bearer or
Basic), that reading it writes nothing, Redis down, and user text never taken for HTML."""

from __future__ import annotations

import base64
import json
import socket
from dataclasses import dataclass, replace
from typing import Any

import pytest

from extender.web.app import create_app
from extender.web.auth import PAGE_CHALLENGE
from extender.wire.objects import decode_node
from scripts import queues
from tests.builders import bind_args, filter_args, make_node, make_pod

TOKEN = "ui-token-0123456789abcdef"
RTX_3090, RTX_3070 = "NVIDIA-GeForce-RTX-3090", "NVIDIA-GeForce-RTX-3070"
NODES = (
    make_node("gpu-node-0", RTX_3090, count=2, memory_mib=24576, replicas=4),
    make_node("gpu-node-1", RTX_3090, count=1, memory_mib=24576, replicas=4),
    make_node("gpu-node-2", RTX_3070, count=2, memory_mib=8192, replicas=4),
    make_node("gpu-node-3", RTX_3070, count=1, memory_mib=8192, replicas=4),
)
# (node, pod): enough on every RTX 3090 that vgg16 at batch 64 fits on none of them.
PLACEMENTS = (
    ("gpu-node-0", dict(name="resnet50-b64", model="resnet50", task="train", batch=64, epochs=3)),
    ("gpu-node-0", dict(name="vgg16-a", model="vgg16", task="train", batch=32, epochs=1)),
    ("gpu-node-0", dict(name="densenet121", model="densenet121", task="train", batch=32,
                        epochs=2)),
    ("gpu-node-0", dict(name="vgg16-b", model="vgg16", task="train", batch=32, epochs=1)),
    ("gpu-node-1", dict(name="vgg16-c", model="vgg16", task="train", batch=32, epochs=1)),
    ("gpu-node-1", dict(name="mobilenet-a", model="mobilenet_v2", task="train", batch=32,
                        epochs=5)),
    ("gpu-node-1", dict(name="resnet18-batch", model="resnet18", task="inference", batch=8,
                        requests=2000)),
    ("gpu-node-2", dict(name="resnet18-serve", model="resnet18", task="inference",
                        requests=1000)),
    ("gpu-node-2", dict(name="mobilenet-b", model="mobilenet_v2", task="train", batch=32,
                        epochs=5)),
    ("gpu-node-3", dict(name="resnet50-b32", model="resnet50", task="train", batch=32, epochs=5)),
)  # fmt: skip
RUNNING_FOR_S = 120.0  # the first job started this long before the data's time
WAITING_FOR_S = 42.0


@dataclass
class Cluster:
    """What `fill_cluster` made: the placed pods by name, and the pod left waiting."""

    placed: dict[str, dict[str, Any]]
    waiting: dict[str, Any]


def place(client, pod: dict[str, Any], node: str, nodes=NODES) -> None:  # noqa: ANN001
    """Filter over `nodes`, then bind to `node` (which must have passed): as kube-scheduler."""
    out = client.post("/filter", json=filter_args(pod, list(nodes))).get_json()
    assert node in {n["metadata"]["name"] for n in out["Nodes"]["items"]}, out
    assert client.post("/bind", json=bind_args(pod, node)).get_json() == {"Error": ""}


def fill_cluster(client, store, clock) -> Cluster:  # noqa: ANN001
    """Four nodes of two GPU types as the node watcher records them, the jobs of PLACEMENTS
    reserved through /filter and /bind, the first one running, and a vgg16 at batch 64 that
    fits nowhere: refused by /filter, it waits. The clock ends WAITING_FOR_S later."""
    for node in NODES:
        store.put_node(*decode_node(node, "node"))
    placed = {}
    for node, spec in PLACEMENTS:
        name = spec["name"]
        placed[name] = make_pod(**spec)
        place(client, placed[name], node)
        clock.now += 1
    store.mark_running(placed["resnet50-b64"]["metadata"]["uid"], clock.now)  # the monitor's
    clock.now += RUNNING_FOR_S - WAITING_FOR_S
    giant = make_pod("vgg16-b64", model="vgg16", task="train", batch=64, epochs=1)
    out = client.post("/filter", json=filter_args(giant, list(NODES))).get_json()
    assert out["Nodes"]["items"] == [] and set(out["FailedNodes"]) == {"gpu-node-0", "gpu-node-1"}
    clock.now += WAITING_FOR_S
    return Cluster(placed, giant)


def test_state_json_holds_queues_waiting_pods_and_decisions(client, store, clock, redis_url,
                                                            monkeypatch, capsys) -> None:
    cluster = fill_cluster(client, store, clock)
    res = client.get("/ui/state.json")
    assert res.status_code == 200 and res.mimetype == "application/json"
    state = res.get_json()
    assert set(state) == {"now", "nodes", "waiting", "floors", "interference", "decisions"}
    assert state["now"] == clock() and state["interference"] == []  # no run has ended

    nodes = {node["node"]: node for node in state["nodes"]}
    assert list(nodes) == [n["metadata"]["name"] for n in NODES]
    assert nodes["gpu-node-0"]["layout"]["gpu_type"] == "RTX-3090"
    assert [len(n["gpus"]) for n in nodes.values()] == [2, 1, 2, 1]
    for name, pod in cluster.placed.items():
        job = store.job(pod["metadata"]["uid"])
        gpu = nodes[job.node]["gpus"][job.gpu_index]
        [entry] = [e for e in gpu["queue"] if e["uid"] == job.uid]
        running = name == "resnet50-b64"
        assert entry == {
            "pod": f"default/{name}", "uid": job.uid, "model": pod["metadata"]["annotations"][
                "schedtune.io/model"], "task": job.task, "state": "running" if running else "bound",
            "reserved_mib": job.reserved_mib, "grown_mib": 0.0, "predicted_s": job.predicted_s,
            "time_factor": 1.0, "time_correction": "",
            "remaining_s": round(job.predicted_s - (RUNNING_FOR_S if running else 0), 1)}
    for node in nodes.values():
        for gpu in node["gpus"]:
            capacity = node["layout"]["memory_mib"]
            reserved = round(sum(e["reserved_mib"] for e in gpu["queue"]), 1)
            assert (gpu["capacity_mib"], gpu["reserved_mib"], gpu["jobs"], gpu["limit"]) == (
                capacity, reserved, len(gpu["queue"]), 4)
            if node["layout"]["gpu_type"] == "RTX-3090":
                assert 0 < gpu["free_mib"] < state["waiting"][0]["needs"]["RTX-3090"]["padded_mib"]
    assert sum(g["jobs"] for n in nodes.values() for g in n["gpus"]) == len(PLACEMENTS)

    [waiting] = state["waiting"]
    assert (waiting["pod"], waiting["uid"], waiting["waiting_s"]) == (
        "default/vgg16-b64", cluster.waiting["metadata"]["uid"], WAITING_FOR_S)
    assert set(waiting["needs"]) == {"RTX-3090", "RTX-3070"}
    assert waiting["needs"]["RTX-3070"]["padded_mib"] > 8192  # never fits there

    decisions = state["decisions"]
    assert decisions[0]["kind"] == "waiting" and decisions[0]["pod"] == "default/vgg16-b64"
    reserved = [d for d in decisions if d["kind"] == "reserved"]
    assert [d["pod"] for d in reserved] == [f"default/{p['name']}" for _, p in PLACEMENTS[::-1]]
    assert [d["node"] for d in reserved] == [node for node, _ in PLACEMENTS[::-1]]
    assert all(d["message"] for d in decisions)

    # The same report as `schedtune queues --json`: one assembly behind both.
    monkeypatch.setattr(queues.time, "time", clock)
    assert queues.main(["--redis", redis_url, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == state["nodes"]
    assert queues.main(["--redis", redis_url, "--waiting", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == state["waiting"]


def test_an_empty_store_is_an_empty_state(client) -> None:
    state = client.get("/ui/state.json").get_json()
    assert (state["nodes"], state["waiting"], state["decisions"]) == ([], [], [])


def test_the_page_and_its_files_are_served(client) -> None:
    page = client.get("/ui")
    assert page.status_code == 200 and page.mimetype == "text/html"
    html = page.get_data(as_text=True)
    for asset in ("/ui/static/ui.js", "/ui/static/ui.css"):
        assert f'"{asset}"' in html and client.get(asset).status_code == 200
    for anchor in ('id="nodes"', 'id="waiting"', 'id="decisions"', 'id="error"'):
        assert anchor in html
    assert "http" not in html.replace("http-equiv", "")  # nothing from another origin


# --- authentication -------------------------------------------------------------------

PAGE_PATHS = ("/ui", "/ui/state.json", "/ui/static/ui.js")


def _basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


@pytest.fixture
def guarded(settings, binder, clock, estimator, redis_client):  # noqa: ANN001, ANN201
    app = create_app(replace(settings, auth_token=TOKEN), binder=binder, clock=clock,
                     estimator=estimator)
    return app.test_client()


def _commands(redis_client) -> int:  # noqa: ANN001
    """Commands the server has run so far (this INFO included)."""
    return int(redis_client.info("stats")["total_commands_processed"])


@pytest.mark.parametrize("headers", [
    {}, _basic("operator", "wrong-token-0123456789abcdef"), _basic("operator", ""),
    _basic(TOKEN, "x"), _basic("operator", TOKEN + "x"), {"Authorization": f"Basic {TOKEN}"},
    {"Authorization": "Basic !!!"}, {"Authorization": "Bearer wrong-token-0123456789abcdef"},
    {"Authorization": f"Token {TOKEN}"},
])  # fmt: skip
def test_the_page_refuses_without_the_token(guarded, redis_client, headers) -> None:
    idle = _commands(redis_client) - _commands(redis_client)  # what one INFO costs: -1
    start = _commands(redis_client)
    for path in PAGE_PATHS:
        res = guarded.get(path, headers=headers)
        assert res.status_code == 401, path
        # A Basic challenge: a browser asks for a user and password, then re-sends them.
        assert res.headers["WWW-Authenticate"] == PAGE_CHALLENGE == 'Basic realm="schedtune"'
        error = res.get_json()["error"]
        assert "credentials" in error and TOKEN not in error
    assert start - _commands(redis_client) == idle  # a refusal costs Redis nothing


@pytest.mark.parametrize("headers", [
    _basic("operator", TOKEN), _basic("", TOKEN),
    {"Authorization": f"Bearer {TOKEN}"},
    {"Authorization": "bAsIc " + _basic("operator", TOKEN)["Authorization"].split()[1]},
])  # fmt: skip
def test_the_token_opens_the_page_as_bearer_or_basic_password(guarded, headers) -> None:
    for path in PAGE_PATHS:
        assert guarded.get(path, headers=headers).status_code == 200, path


def test_verbs_still_take_only_a_bearer_token(guarded) -> None:
    pod = make_pod()
    res = guarded.post("/filter", json=filter_args(pod, [NODES[0]]), headers=_basic("u", TOKEN))
    assert res.status_code == 401 and res.headers["WWW-Authenticate"] == 'Bearer realm="schedtune"'
    assert "bearer token" in res.get_json()["Error"]


def test_without_a_token_setting_the_page_is_open(client) -> None:
    for path in PAGE_PATHS:
        assert client.get(path).status_code == 200, path


# --- read-only, Redis down, text not markup ---------------------------------------------


def _contents(redis_client) -> dict[str, Any]:  # noqa: ANN001
    return {key: (redis_client.dump(key), redis_client.ttl(key) > 0)
            for key in sorted(redis_client.keys("*"))}


def _writes(redis_client) -> int:  # noqa: ANN001
    """Writes since the last save (the embedded server never saves: every write counts)."""
    return int(redis_client.info("persistence")["rdb_changes_since_last_save"])


def test_reading_the_page_writes_nothing(client, store, clock, redis_client) -> None:
    fill_cluster(client, store, clock)
    before, writes = _contents(redis_client), _writes(redis_client)
    assert before and writes
    for _ in range(2):
        for path in PAGE_PATHS:
            assert client.get(path).status_code == 200
        clock.now += 1
    assert _writes(redis_client) == writes
    assert _contents(redis_client) == before


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_redis_down_is_a_503_saying_so(settings, binder, clock, estimator) -> None:
    down = replace(settings, redis_url=f"redis://127.0.0.1:{_closed_port()}/0",
                   redis_timeout_s=0.2)
    client = create_app(down, binder=binder, clock=clock, estimator=estimator).test_client()
    res = client.get("/ui/state.json")
    assert res.status_code == 503 and res.mimetype == "application/json"
    assert "state store unreachable" in res.get_json()["error"]
    assert client.get("/ui").status_code == 200  # the page itself needs no Redis: it shows why


HOSTILE = '<img src=x id="injected"><script>window.injected = 1</script>'


def hostile_node(store) -> dict[str, Any]:  # noqa: ANN001
    """A node whose GPU product label is markup: labels are free text to whoever may label
    nodes, and the product reaches the layout and the decision messages verbatim."""
    node = make_node("gpu-node-x", HOSTILE, count=1, memory_mib=24576, replicas=4)
    store.put_node(*decode_node(node, "node"))
    return node


def test_user_text_reaches_the_page_only_as_json_data(client, store) -> None:
    node = hostile_node(store)
    place(client, make_pod("victim", model="resnet50", batch=32), "gpu-node-x", [node])
    res = client.get("/ui/state.json")
    state = res.get_json()
    assert state["nodes"][0]["layout"]["product"] == HOSTILE
    assert HOSTILE in state["decisions"][0]["message"]
    assert res.headers["X-Content-Type-Options"] == "nosniff"  # never sniffed as HTML
    page = client.get("/ui")
    assert HOSTILE not in page.get_data(as_text=True)  # data never enters the HTML
    policy = page.headers["Content-Security-Policy"]
    assert "default-src 'self'" in policy and "unsafe" not in policy  # no inline script runs
    script = client.get("/ui/static/ui.js").get_data(as_text=True)
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
        assert sink not in script, sink
