"""Extender fixtures: a fresh Redis database per test, an injected clock, a recording binder."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import pytest

from estimator.predict import Estimator
from extender.web.app import create_app
from extender.settings import Settings


class FakeClock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@dataclass
class RecordingBinder:
    calls: list[tuple[str, str, str, str, dict[str, str]]] = field(default_factory=list)
    fail: bool = False

    def bind(self, namespace, name, uid, node, annotations) -> None:  # noqa: ANN001
        from extender.errors import BindFailed

        if self.fail:
            raise BindFailed("API server said no")
        self.calls.append((namespace, name, uid, node, dict(annotations)))


@pytest.fixture(scope="session")
def estimator() -> Estimator:
    return Estimator.load()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def binder() -> RecordingBinder:
    return RecordingBinder()


@pytest.fixture
def settings(redis_url) -> Settings:
    return Settings(redis_url=redis_url, bind_mode="record", node_watch=False, log_level="WARNING")


@pytest.fixture
def app(settings, binder, clock, estimator, redis_client):
    return create_app(settings, binder=binder, clock=clock, estimator=estimator)


@pytest.fixture
def client(app):
    return app.test_client()


@pytest.fixture
def client_with(settings, binder, clock, estimator, redis_client) -> Callable[..., object]:
    """A client of an app whose settings differ from `settings` in the fields given."""
    def make(**changes):  # noqa: ANN003, ANN202
        return create_app(replace(settings, **changes), binder=binder, clock=clock,
                          estimator=estimator).test_client()

    return make
