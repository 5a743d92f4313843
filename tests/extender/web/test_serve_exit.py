"""`schedtune serve` for real (gunicorn with extender/web/gunicorn.conf.py) on 127.0.0.1: a
start that cannot listen (its port held by another socket) exits non-zero, leaves no
metrics directory behind and never says it is ready; a start that listens says so once
gunicorn listens (its `when_ready` hook).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.extender.web.test_workers import REPO, _serving

START_LIMIT_S = 120.0  # the app is built (estimator loaded) before the bind is tried
READY = "extender ready"


@dataclass(frozen=True)
class FailedStart:
    returncode: int
    output: str
    tmpdir: Path


def _json_lines(text: str) -> list[dict[str, Any]]:
    """Our log lines (one JSON object each); gunicorn's own lines are left out."""
    lines = []
    for line in text.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and "msg" in entry:
            lines.append(entry)
    return lines


@pytest.fixture(scope="module")
def port_in_use(redis_url, tmp_path_factory) -> FailedStart:
    """`schedtune serve` on a port a listening socket of ours holds, with its own TMPDIR."""
    tmpdir = tmp_path_factory.mktemp("serve-tmp")
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        env = {**os.environ, "REDIS_URL": redis_url, "EXTENDER_BIND": "record",
               "EXTENDER_NODE_WATCH": "0", "EXTENDER_BIND_ADDRESS": f"127.0.0.1:{port}",
               "EXTENDER_WORKERS": "1", "EXTENDER_LOG_LEVEL": "INFO", "TMPDIR": str(tmpdir)}
        env.pop("PROMETHEUS_MULTIPROC_DIR", None)  # so the master makes its own directory
        done = subprocess.run([sys.executable, "-m", "scripts.cli", "serve"], cwd=REPO, check=False,
                              env=env, capture_output=True, text=True, timeout=START_LIMIT_S)
    return FailedStart(done.returncode, done.stdout + done.stderr, tmpdir)


def test_a_start_on_a_port_in_use_exits_nonzero_and_leaves_no_metrics_dir(port_in_use) -> None:
    assert port_in_use.returncode != 0, port_in_use.output[-3000:]
    assert "Connection in use" in port_in_use.output  # it failed where this test means
    assert list(port_in_use.tmpdir.glob("schedtune-metrics-*")) == []


def test_a_start_on_a_port_in_use_never_says_ready(port_in_use) -> None:
    assert [e for e in _json_lines(port_in_use.output) if "ready" in e["msg"]] == []


def test_a_start_that_listens_says_ready_once_it_listens(redis_url, tmp_path) -> None:
    with _serving(redis_url, tmp_path, EXTENDER_LOG_LEVEL="INFO") as served:
        assert served.first_status == 200
    text = (tmp_path / "server.log").read_text()
    listening = text.index("Listening at:")  # gunicorn's own line, once it is bound
    ready = [e for e in _json_lines(text[listening:]) if e["msg"] == READY]
    assert [e.get("listening") for e in ready] == [f"http://127.0.0.1:{served.port}"]
