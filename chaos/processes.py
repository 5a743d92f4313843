"""The extender replicas as real processes: two gunicorn replicas on one Redis (or Sentinel), each in its
own process group, started, SIGKILLed (master and workers, as when the container dies),
restarted and stopped; each life logs to its own file. Also a free port on 127.0.0.1."""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from chaos.cluster import LIMIT

ROOT = Path(__file__).resolve().parent.parent  # gunicorn's working directory
WORKERS = 2


EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LOWEST_PORT = 10000
_handed_out: set[int] = set()


def free_port() -> int:
    """A port nobody listens on, for a server started later. Drawn at random below the
    kernel's ephemeral range: a port the kernel hands out (bind to 0) can be taken again by
    any outgoing connection before the server binds it (a monitor once failed so, with
    EADDRINUSE, while the sentinels were connecting)."""
    ephemeral_low = int(EPHEMERAL_RANGE.read_text().split()[0]) if EPHEMERAL_RANGE.exists() \
        else 32768
    for _ in range(1000):
        port = random.randrange(LOWEST_PORT, ephemeral_low)
        if port in _handed_out:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    raise RuntimeError(f"no free port in [{LOWEST_PORT}, {ephemeral_low})")


class Replicas:
    """Two gunicorn extender replicas on one Redis, each in its own process group, each life
    logging to its own file (gunicorn's log says which workers booted and why they left)."""

    def __init__(self, tmp: Path, redis_env: Mapping[str, str], token_file: Path | None
                 ) -> None:
        """`redis_env`: how the replicas reach Redis (REDIS_URL, or the sentinels)."""
        self.tmp = tmp
        self.env = {**os.environ, **redis_env, "EXTENDER_WORKERS": str(WORKERS),
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
