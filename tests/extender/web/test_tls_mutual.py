"""Mutual TLS for real: the extender under gunicorn on 127.0.0.1, with the certificates that
k8s/make-secrets.sh writes (the documented set-up), against clients with our client
certificate, with none, with one from another CA, and in plain HTTP.

One server for the module (start-up is a few seconds); every test uses pods of its own.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from extender.state.keys import demand_key, gpu_key, job_key
from extender.state.store import RedisStore
from tests.builders import bind_args, filter_args, make_node, make_pod

ROOT = Path(__file__).resolve().parents[3]
MAKE_SECRETS = ROOT / "k8s" / "make-secrets.sh"
LISTENING = re.compile(r"Listening at: https://127\.0\.0\.1:(\d+)")
START_TIMEOUT_S = 60.0

pytestmark = pytest.mark.skipif(not (shutil.which("openssl") and shutil.which("bash")),
                                reason="k8s/make-secrets.sh needs bash and the openssl CLI")


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two independent sets of what make-secrets.sh writes: ours, and another CA's."""
    sets = {}
    for name in ("ours", "theirs"):
        sets[name] = tmp_path_factory.mktemp(name)
        subprocess.run(["bash", str(MAKE_SECRETS), str(sets[name])], check=True,
                       capture_output=True, timeout=60)
    return sets


@pytest.fixture(scope="module")
def server(pki: dict[str, Path], redis_url: str,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """gunicorn serving HTTPS with client-certificate verification; yields its environment
    (EXTENDER_BIND_ADDRESS set to the port it took)."""
    ours = pki["ours"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EXTENDER_", "PROMETHEUS_"))}
    env.update(REDIS_URL=redis_url, EXTENDER_BIND="record", EXTENDER_NODE_WATCH="0",
               EXTENDER_WORKERS="1", EXTENDER_LOG_LEVEL="WARNING",
               EXTENDER_STATE_DIR=str(tmp_path_factory.mktemp("state")),
               EXTENDER_BIND_ADDRESS="127.0.0.1:0",
               EXTENDER_TLS_CERT_FILE=str(ours / "extender.crt"),
               EXTENDER_TLS_KEY_FILE=str(ours / "extender.key"),
               EXTENDER_TLS_CLIENT_CA_FILE=str(ours / "ca.crt"))
    process = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-c", "extender/web/gunicorn.conf.py",
         "extender.web.app:create_app()"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    ports: list[int] = []
    listening = threading.Event()

    def drain() -> None:  # reads gunicorn's log to its end, so the pipe never fills
        for line in process.stderr:  # type: ignore[union-attr]
            lines.append(line)
            if not ports and (found := LISTENING.search(line)):
                ports.append(int(found.group(1)))
                listening.set()
        listening.set()  # it exited

    threading.Thread(target=drain, daemon=True).start()
    try:
        if not listening.wait(START_TIMEOUT_S) or not ports:
            pytest.fail("gunicorn did not listen on HTTPS:\n" + "".join(lines[-40:]))
        yield {**env, "EXTENDER_BIND_ADDRESS": f"127.0.0.1:{ports[0]}"}
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _port(server: dict[str, str]) -> int:
    return int(server["EXTENDER_BIND_ADDRESS"].rsplit(":", 1)[1])


def _tls(ca: Path, client: Path | None = None) -> ssl.SSLContext:
    """A client that verifies the server against `ca` (host name included) and presents
    `client`.crt/.key when given."""
    context = ssl.create_default_context(cafile=str(ca))
    if client is not None:
        context.load_cert_chain(client.with_suffix(".crt"), client.with_suffix(".key"))
    return context


def _post(server: dict[str, str], path: str, body: Any,
          context: ssl.SSLContext | None) -> tuple[int, Any]:
    """POST over HTTPS with `context` (None: plain HTTP). The first request waits for the
    worker (the socket queues it), hence the long timeout."""
    conn = (http.client.HTTPSConnection("127.0.0.1", _port(server), timeout=60, context=context)
            if context is not None else http.client.HTTPConnection("127.0.0.1", _port(server),
                                                                   timeout=60))
    try:
        conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


def _filtered_pod(server: dict[str, str], scheduler: ssl.SSLContext) -> tuple[dict[str, Any], str]:
    """A pod filtered by an authenticated client onto a node of its own (one job per GPU):
    a bind of it there would reserve."""
    pod = make_pod()
    node = f"gpu-{pod['metadata']['uid'][:8]}"
    status, out = _post(server, "/filter", filter_args(pod, [make_node(node)]), scheduler)
    assert status == 200 and out["Error"] == ""
    assert [n["metadata"]["name"] for n in out["Nodes"]["items"]] == [node]
    return pod, node


@pytest.fixture
def scheduler_tls(pki: dict[str, Path]) -> ssl.SSLContext:
    """What kube-scheduler's tlsConfig does: caFile, certFile, keyFile."""
    return _tls(pki["ours"] / "ca.crt", pki["ours"] / "scheduler")


def test_client_certificate_gets_answers(server, scheduler_tls, redis_url, redis_client) -> None:
    store = RedisStore.from_url(redis_url)
    pod, node = _filtered_pod(server, scheduler_tls)
    uid = pod["metadata"]["uid"]
    status, out = _post(server, "/bind", bind_args(pod, node), scheduler_tls)
    assert (status, out) == (200, {"Error": ""})
    job = store.job(uid)
    assert job is not None and job.node == node
    # What volatile-ttl (k8s/redis.yaml, the embedded server) relies on: the reservation
    # and its queue carry no TTL, so they are never evicted; only the filter record does.
    assert redis_client.ttl(job_key(uid)) == -1
    assert redis_client.ttl(gpu_key(node, job.gpu_index)) == -1
    assert redis_client.ttl(demand_key(uid)) > 0


@pytest.mark.parametrize("client", ["no certificate", "another CA's certificate"])
def test_without_our_client_certificate_no_handshake_and_no_change(
        server, pki, scheduler_tls, redis_url, client) -> None:
    store = RedisStore.from_url(redis_url)
    pod, node = _filtered_pod(server, scheduler_tls)
    uid = pod["metadata"]["uid"]
    certificate = None if client == "no certificate" else pki["theirs"] / "scheduler"
    intruder = _tls(pki["ours"] / "ca.crt", certificate)  # it trusts our server, even so
    for path, body in (("/bind", bind_args(pod, node)), ("/filter", filter_args(pod, []))):
        with pytest.raises((ssl.SSLError, ConnectionError)) as refused:
            _post(server, path, body, intruder)
        if isinstance(refused.value, ssl.SSLError):  # the server's alert, or its hang-up
            assert re.search(r"CERTIFICATE_REQUIRED|UNKNOWN_CA|BAD_CERTIFICATE|EOF",
                             str(refused.value)), refused.value
    assert store.job(uid) is None
    # The same bind with the scheduler's certificate goes through: the refusal was the TLS.
    assert _post(server, "/bind", bind_args(pod, node), scheduler_tls) == (200, {"Error": ""})
    assert store.job(uid) is not None


def test_plain_http_gets_no_answer(server, scheduler_tls, redis_url) -> None:
    store = RedisStore.from_url(redis_url)
    pod, node = _filtered_pod(server, scheduler_tls)
    with pytest.raises((ConnectionError, http.client.HTTPException)):
        _post(server, "/bind", bind_args(pod, node), None)
    assert store.job(pod["metadata"]["uid"]) is None


def test_scheduler_refuses_a_server_its_ca_did_not_sign(server, pki) -> None:
    """kube-scheduler's caFile check: our client certificate, but another CA trusted."""
    mistrusting = _tls(pki["theirs"] / "ca.crt", pki["ours"] / "scheduler")
    with pytest.raises(ssl.SSLCertVerificationError):
        _post(server, "/filter", filter_args(make_pod(), []), mistrusting)


def _probe_commands() -> dict[str, list[str]]:
    docs = yaml.safe_load_all((ROOT / "k8s" / "extender.yaml").read_text())
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    (container,) = [c for c in deployment["spec"]["template"]["spec"]["containers"]
                    if c["name"] == "extender"]
    return {kind: container[kind]["exec"]["command"] for kind in ("readinessProbe", "livenessProbe")}


def test_the_manifest_probes_pass_with_the_extender_certificate(server, pki) -> None:
    """The exec probes of k8s/extender.yaml, run as they are with the container's settings
    (kubelet's own HTTPS probes present no client certificate, so they could not pass)."""
    for kind, command in _probe_commands().items():
        answered = subprocess.run([sys.executable, *command[1:]], env=server, timeout=30,
                                  capture_output=True, text=True)
        assert answered.returncode == 0, (kind, answered.stderr[-2000:])
        foreign = {**server, "EXTENDER_TLS_CERT_FILE": str(pki["theirs"] / "extender.crt"),
                   "EXTENDER_TLS_KEY_FILE": str(pki["theirs"] / "extender.key")}
        refused = subprocess.run([sys.executable, *command[1:]], env=foreign, timeout=30,
                                 capture_output=True, text=True)
        assert refused.returncode != 0, kind
