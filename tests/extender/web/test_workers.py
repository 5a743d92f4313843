"""The real server (`python -m extender`: gunicorn with extender/web/gunicorn.conf.py) on
127.0.0.1: a starting replica refuses connections until it answers them at once, slow
clients do not stop it answering, and a hostile body gets its 400 from a live worker.

No timing asserts: each request may take kube-scheduler's `httpTimeout` (5 s); the
server gets `START_LIMIT_S` to come up.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from chaos.processes import free_port
from tests.builders import filter_args, make_node, make_pod

REPO = Path(__file__).resolve().parents[3]
HTTP_TIMEOUT_S = 5.0  # kube-scheduler's httpTimeout: a request never waits longer
START_LIMIT_S = 60.0  # generous for a loaded CI machine; a start takes seconds
POLL_S = 0.05
SLOW_CLIENTS = 8  # well past the one worker started here: each one would hold a sync worker


@dataclass(frozen=True)
class Served:
    port: int
    refused: int  # connection attempts refused while it started
    first_status: int  # the answer to the first connection it accepted
    first_body: bytes


def _request(port: int, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=HTTP_TIMEOUT_S)
    try:
        conn.request(method, path, body=body, headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def _good_filter() -> bytes:
    return json.dumps(filter_args(make_pod(), [make_node("gpu-node-0")])).encode()


def _first_answer(proc: subprocess.Popen[bytes], port: int) -> Served:
    """Poll until a connection is accepted; that first request must be answered in time."""
    refused, deadline = 0, time.monotonic() + START_LIMIT_S
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            status, body = _request(port, "POST", "/filter", _good_filter())
        except ConnectionRefusedError:
            refused += 1
            time.sleep(POLL_S)
            continue
        return Served(port, refused, status, body)
    raise AssertionError(f"server did not start within {START_LIMIT_S} s (exit {proc.poll()})")


@contextmanager
def _serving(redis_url: str, tmp: Path, **env: str | None) -> Iterator[Served]:
    """`python -m extender` with one worker, logging to `tmp`, on `env` over ours (None:
    unset); stopped with SIGTERM (as kubelet stops a container) when the block ends."""
    port = free_port()
    env = {**os.environ, "REDIS_URL": redis_url, "EXTENDER_BIND": "record",
           "EXTENDER_NODE_WATCH": "0", "EXTENDER_BIND_ADDRESS": f"127.0.0.1:{port}",
           "EXTENDER_WORKERS": "1", "EXTENDER_LOG_LEVEL": "WARNING", **env}
    with open(tmp / "server.log", "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "extender"], cwd=REPO,
                                env={k: v for k, v in env.items() if v is not None},
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield _first_answer(proc, port)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.fixture(scope="module")
def server(redis_url, tmp_path_factory) -> Iterator[Served]:  # noqa: ANN001
    tmp = tmp_path_factory.mktemp("served")
    with _serving(redis_url, tmp, PROMETHEUS_MULTIPROC_DIR=str(tmp)) as served:
        yield served


def test_a_starting_server_answers_the_first_connection_it_accepts(server) -> None:
    # A connection accepted before the estimator was loaded would have hung past
    # HTTP_TIMEOUT_S (socket.timeout in the fixture); this one was answered, and well.
    assert server.first_status == 200, server.first_body[:300]
    assert json.loads(server.first_body)["Error"] == ""


def test_slow_clients_do_not_stop_answers(server) -> None:
    slow = []
    try:
        for i in range(SLOW_CLIENTS):  # a request line, one header, then silence
            sock = socket.create_connection(("127.0.0.1", server.port), timeout=HTTP_TIMEOUT_S)
            sock.sendall(f"POST /filter HTTP/1.1\r\nHost: x\r\nX-Slow: {i}\r\n".encode())
            slow.append(sock)
        assert _request(server.port, "GET", "/healthz") == (200, b'{"status":"ok"}')
        status, body = _request(server.port, "POST", "/filter", _good_filter())
        assert status == 200 and json.loads(body)["Error"] == ""
    finally:
        for sock in slow:
            sock.close()


def test_a_hostile_body_gets_its_400_from_a_live_worker(server) -> None:
    deep = ('{"a":' * 60000 + "1" + "}" * 60000).encode()  # a SIGSEGV in orjson 3.8.3
    for _ in range(3):
        status, body = _request(server.port, "POST", "/filter", deep)
        assert status == 400 and "nests 60000 levels deep" in json.loads(body)["Error"]
    assert _request(server.port, "GET", "/healthz")[0] == 200


def test_the_metrics_directory_it_made_is_removed_when_it_stops(redis_url, tmp_path) -> None:
    made = tmp_path / "tmp"
    made.mkdir()
    with _serving(redis_url, tmp_path, TMPDIR=str(made), PROMETHEUS_MULTIPROC_DIR=None) as up:
        assert up.first_status == 200
        assert [p.name for p in made.glob("schedtune-metrics-*")]  # made where TMPDIR says
    assert list(made.glob("schedtune-metrics-*")) == []


def test_a_configured_metrics_directory_stays(redis_url, tmp_path) -> None:
    configured, made = tmp_path / "metrics", tmp_path / "tmp"
    configured.mkdir()
    made.mkdir()
    with _serving(redis_url, tmp_path, TMPDIR=str(made),
                  PROMETHEUS_MULTIPROC_DIR=str(configured)) as up:
        assert up.first_status == 200
    assert list(configured.glob("*.db"))  # the worker's values, kept for whoever set it
    assert list(made.glob("schedtune-metrics-*")) == []  # and no other directory made
