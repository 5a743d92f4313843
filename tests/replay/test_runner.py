"""The replay's Redis comes from Settings: REDIS_URL's when set, else an embedded server
that lives only as long as the replay."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from extender.settings import SettingsError
from replay.runner import POLICIES, make_policy, replay_redis
from replay.policies import WholeGpuPolicy


def test_redis_url_from_the_environment_is_used_as_is(redis_url) -> None:
    with replay_redis({"REDIS_URL": redis_url}) as url:
        assert url == redis_url


def test_without_redis_url_an_embedded_server_lives_for_the_block() -> None:
    with replay_redis({}) as url:
        assert url.startswith("unix://") and redis.Redis.from_url(url).ping()
        socket = Path(url.removeprefix("unix://").split("?")[0])
    assert not socket.exists()


def test_unusable_extender_settings_are_refused() -> None:
    with pytest.raises(SettingsError), replay_redis({"EXTENDER_SCORING": "nope"}):
        pass


def test_baselines_need_no_extender() -> None:
    assert POLICIES == ("default", "schedtune-paper", "gavel-like", "ours")
    for name in ("default", "gavel-like"):
        policy = make_policy(name, [], "redis://unused")
        assert isinstance(policy, WholeGpuPolicy) and policy.name == name
