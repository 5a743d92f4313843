"""The models users register, in Redis: entries every replica follows (`extender.registry`).

Reached as `RedisStore.models`: the same client and error translation as the rest of the
store. Keys: `st:models` (name -> the entry's JSON, read by `estimator.user_models.entry`),
`st:models:rev` (a counter each change raises) and `st:models:epoch` (a random token the
first change of a registry writes). The revision is epoch and counter together, so a
registry lost with its Redis and written again never repeats a revision a replica holds:
its counter restarts at 1, its epoch does not.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any

import redis

MODELS_KEY = "st:models"
MODELS_REV_KEY = "st:models:rev"
MODELS_EPOCH_KEY = "st:models:epoch"
NONE_REGISTERED = "0"  # the revision of a registry no model was ever registered in


class ModelStore:
    def __init__(self, client: redis.Redis, call: Callable[..., Any]) -> None:
        self._redis = client
        self._call = call

    def publish(self, name: str, entry: bytes) -> None:
        """Register (or replace) a model for every replica: one transaction."""
        self._change(lambda pipe: pipe.hset(MODELS_KEY, name, entry))

    def remove(self, name: str) -> bool:
        """Unregister a model; False when it was not registered."""
        return bool(self._change(lambda pipe: pipe.hdel(MODELS_KEY, name)))

    def entry(self, name: str) -> str | None:
        return self._call(self._redis.hget, MODELS_KEY, name)

    def entries(self) -> tuple[str, dict[str, str]]:
        """(revision, name -> entry) read together."""
        pipe = self._redis.pipeline(transaction=True)
        pipe.mget(MODELS_EPOCH_KEY, MODELS_REV_KEY)
        pipe.hgetall(MODELS_KEY)
        (epoch, counter), entries = self._call(pipe.execute)
        return _revision(epoch, counter), entries

    def revision(self) -> str:
        """`NONE_REGISTERED` until a model is first registered; then changes with every
        registration and removal, and never repeats after the registry is wiped."""
        return _revision(*self._call(self._redis.mget, MODELS_EPOCH_KEY, MODELS_REV_KEY))

    def _change(self, write: Callable[[Any], Any]) -> Any:
        pipe = self._redis.pipeline(transaction=True)
        pipe.set(MODELS_EPOCH_KEY, secrets.token_hex(8), nx=True)
        write(pipe)
        pipe.incr(MODELS_REV_KEY)
        return self._call(pipe.execute)[1]


def _revision(epoch: str | None, counter: str | None) -> str:
    if counter is None:
        return NONE_REGISTERED
    return f"{epoch or 'unknown'}:{counter}"
