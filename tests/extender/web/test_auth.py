"""The bearer token (EXTENDER_AUTH_TOKEN_FILE): every verb of both contracts needs it; a
refusal is a 401 in the verb's error shape, counted, logged once, and costs Redis nothing."""

from __future__ import annotations

import base64
from dataclasses import replace
from typing import Any

import pytest
from prometheus_client import REGISTRY

from extender.settings import Settings
from extender.web.app import create_app
from extender.web.auth import CHALLENGE, basic_password, bearer_token
from extender.wire import kube as wire_kube
from extender.wire import volcano as wire_volcano
from extender.wire.objects import decode_node
from extender.wire.volcano import (
    encode_event_request, encode_predicate_request, encode_prioritize_request,
)  # fmt: skip
from tests.builders import bind_args, filter_args, make_node, make_pod

TOKEN = "test-token-0123456789abcdef"
NODE = "gpu-node-0"


def _basic(credentials: str) -> str:
    return "Basic " + base64.b64encode(credentials.encode("latin-1")).decode()


# Each verb's error shape (what its contract handler answers), by path.
ERROR_SHAPES = {
    "/filter": wire_kube.encode_filter_error,
    "/prioritize": lambda message: {"Error": message},
    "/bind": wire_kube.encode_bind,
    "/volcano/predicate": wire_volcano.encode_predicate_error,
    "/volcano/prioritize": lambda message: wire_volcano.encode_prioritize({}, message),
    "/volcano/allocate": lambda message: {"error": message},
    "/volcano/deallocate": lambda message: {"error": message},
}


def _bodies(pod: dict[str, Any], name: str = NODE) -> dict[str, Any]:
    node = make_node(name)
    return {
        "/filter": filter_args(pod, [node]),
        "/prioritize": filter_args(pod, [node]),
        "/bind": bind_args(pod, name),
        "/volcano/predicate": encode_predicate_request(pod, node),
        "/volcano/prioritize": encode_prioritize_request(pod, [node]),
        "/volcano/allocate": encode_event_request(pod, name),
        "/volcano/deallocate": encode_event_request(pod, name),
    }


@pytest.fixture
def guarded(settings: Settings, binder, clock, estimator, redis_client):  # noqa: ANN001, ANN201
    app = create_app(replace(settings, auth_token=TOKEN), binder=binder, clock=clock,
                     estimator=estimator)
    return app.test_client()


def _commands(redis_client) -> int:  # noqa: ANN001
    """Commands the server has run so far (this INFO included)."""
    return int(redis_client.info("stats")["total_commands_processed"])


def _refusals(path: str) -> float:
    verb = "filter_nodes" if path == "/filter" else path.strip("/").replace("/", "_")
    labels = {"verb": verb, "kind": "Unauthorized"}  # the contract handlers' error counter
    return REGISTRY.get_sample_value("schedtune_extender_errors_total", labels) or 0.0


@pytest.mark.parametrize("header", [None, "Bearer wrong-token-0123456789abcdef", "Bearer",
                                    f"Basic {TOKEN}", f"Token {TOKEN}", f"Bearer {TOKEN}x",
                                    "Bearer \u00e9\u00e8-not-ascii",
                                    _basic(f"user:{TOKEN}")])  # Basic: the status page only
def test_every_verb_refuses_without_the_token(guarded, redis_client, caplog, header) -> None:
    pod = make_pod()
    headers = {"Authorization": header} if header is not None else {}
    before = {path: _refusals(path) for path in ERROR_SHAPES}
    idle = _commands(redis_client) - _commands(redis_client)  # what one INFO costs: -1
    start = _commands(redis_client)
    with caplog.at_level("WARNING"):
        for path, body in _bodies(pod).items():
            res = guarded.post(path, json=body, headers=headers)
            assert res.status_code == 401, path
            message = next(v for v in res.get_json().values() if isinstance(v, str) and v)
            assert res.get_json() == ERROR_SHAPES[path](message), path
            assert "bearer token" in message.lower() and TOKEN not in message
            assert res.headers["WWW-Authenticate"] == CHALLENGE
    assert start - _commands(redis_client) == idle  # not one Redis command
    assert redis_client.dbsize() == 0
    for path in ERROR_SHAPES:
        assert _refusals(path) == before[path] + 1, path
    refused = [r for r in caplog.records if getattr(r, "error", None) == "Unauthorized"]
    assert len(refused) == len(ERROR_SHAPES)  # logged once each
    assert all(TOKEN not in r.getMessage() + str(vars(r)) for r in caplog.records)


def test_the_token_opens_every_verb(guarded, store) -> None:
    # The scheme is case-insensitive (RFC 7235).
    for name, header in (("gpu-node-a", f"Bearer {TOKEN}"), ("gpu-node-b", f"bearer {TOKEN}")):
        store.put_node(*decode_node(make_node(name), "node"))  # allocate trusts the watcher
        pod = make_pod()
        bodies = _bodies(pod, name)
        for path in ERROR_SHAPES:  # Volcano's verbs (allocate, then deallocate), kube's
            if path.startswith("/volcano/"):
                res = guarded.post(path, json=bodies[path], headers={"Authorization": header})
                assert res.status_code == 200, (path, res.get_json())
        for path in ("/filter", "/prioritize", "/bind"):
            res = guarded.post(path, json=bodies[path], headers={"Authorization": header})
            assert res.status_code == 200, (path, res.get_json())
        assert store.job(pod["metadata"]["uid"]).node == name


def test_probes_and_metrics_stay_open(guarded) -> None:
    for path in ("/healthz", "/readyz", "/metrics"):
        assert guarded.get(path).status_code == 200, path
    assert guarded.get("/nowhere").status_code == 404  # no route: not a verb, no challenge


def test_refused_bind_of_a_filtered_pod_reserves_nothing(guarded, store) -> None:
    pod = make_pod()
    headers = {"Authorization": f"Bearer {TOKEN}"}
    assert guarded.post("/filter", json=filter_args(pod, [make_node(NODE)]),
                        headers=headers).status_code == 200
    for forged in ({}, {"Authorization": "Bearer forged-token-0123456789"}):
        assert guarded.post("/bind", json=bind_args(pod, NODE), headers=forged).status_code == 401
        assert guarded.post("/volcano/allocate", json=encode_event_request(pod, NODE),
                            headers=forged).status_code == 401
    assert store.job_uids() == []


def test_without_a_token_setting_verbs_need_no_header(client) -> None:
    pod = make_pod()
    assert client.post("/filter", json=filter_args(pod, [make_node(NODE)])).status_code == 200


@pytest.mark.parametrize(("header", "token"), [
    (f"Bearer {TOKEN}", TOKEN.encode()), (f"  bEaReR   {TOKEN}  ", TOKEN.encode()),
    ("Bearer", None), ("Bearer   ", None), ("", None), (f"Basic {TOKEN}", None),
    (TOKEN, None), ("Bearer \u00ff", b"\xff"),
])
def test_bearer_token_parsing(header: str, token: bytes | None) -> None:
    assert bearer_token(header) == token


@pytest.mark.parametrize(("header", "password"), [
    (_basic(f"operator:{TOKEN}"), TOKEN.encode()), (_basic(f":{TOKEN}"), TOKEN.encode()),
    (f"  bAsIc   {_basic('u:a:b')[6:]}  ", b"a:b"), (_basic("u:\u00ff"), b"\xff"),
    (_basic("operator:"), None), (_basic(TOKEN), None), ("Basic", None), ("Basic !!!!", None),
    (f"Basic {TOKEN}", None), (f"Bearer {TOKEN}", None), ("", None),
])  # fmt: skip
def test_basic_password_parsing(header: str, password: bytes | None) -> None:
    # RFC 7617: the user name ends at the first colon; the password may hold more.
    assert basic_password(header) == password
