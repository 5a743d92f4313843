"""What the monitor learns, kept in the store (a `RedisStore` mixin): GPU OOM floors and
the growth beside a kill, OOM kills counted, finished runs (observations, owners' mean
seconds), the collocation slowdowns and time biases the last refit published."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import redis

from extender.core.interference import AlphaFit
from extender.core.time_bias import BIAS_PREFIX
from extender.model import JobRecord
from extender.state.keys import (
    FLOOR_JOBS_KEY, INTERFERENCE_KEY, OBSERVATIONS_KEY, OBSERVATIONS_MAXLEN, OOM_SEEN_PREFIX,
    OOM_SEEN_TTL_S, OOMS_KEY, OWNER_RUNS_KEY, OWNER_RUNS_PREFIX, OWNER_RUNS_TTL_S,
    floor_kills_key, floors_key, gpu_key, job_key,
)  # fmt: skip
from extender.state.records import alphas_from_pairs, as_mapping, floors_from_pairs, reading


def flat_floors(key: str, pairs: list[str] | dict[str, str]) -> dict[str, float]:
    """A job's floors hash as `job_type` keys (namespace floors prefixed with it)."""
    job = key.removeprefix("st:floor:")
    flat = {}
    for field, mib in as_mapping(pairs).items():
        namespace, _, gpu = field.rpartition("|")
        flat[f"{namespace}|{job}|{gpu}" if namespace else f"{job}|{gpu}"] = mib
    return floors_from_pairs(flat)


@dataclass(frozen=True)
class FloorRaise:
    """A GPU OOM kill's effect: the floors now in force for the killed pod's namespace and
    for everyone, and whether the kill was within its namespace's budget of raises."""

    namespace_mib: float
    everyone_mib: float
    counted: bool



class LearningRecords:
    """The learning half of `RedisStore` (its client, error translation and scripts)."""

    _redis: redis.Redis
    _call: Callable[..., Any]
    _raise_floor: Any
    _raises_reset: Any
    _grow_beside: Any
    _owner_run: Any

    def raise_floor(self, job_type: str, namespace: str, mib: float, cap_mib: float, now: float,
                    window_s: float, max_raises: int) -> FloorRaise:
        """After a GPU OOM kill of `job_type` in `namespace`: that namespace's pods of the
        type reserve at least `mib` (capped at `cap_mib`) from now on, at most `max_raises`
        times per `window_s`; everyone's floor rises only on kills from two namespaces
        (learning_lua.RAISE_FLOOR). A floor only rises."""
        model, task, batch, gpu = job_type.split("|")
        own, everyone, counted = self._call(
            self._raise_floor, keys=[floors_key(model, task, int(batch)),
                                     floor_kills_key(job_type), FLOOR_JOBS_KEY],
            args=[gpu, namespace, mib, cap_mib, now, window_s, max_raises])
        return FloorRaise(float(own), float(everyone), bool(int(counted)))

    def floor_held(self, job_type: str, namespace: str, now: float) -> bool:
        """A run of `job_type` succeeded in `namespace`: its budget of floor raises for the
        type starts again (`raise_floor`). True when it had spent some."""
        return bool(self._call(self._raises_reset, keys=[floor_kills_key(job_type)],
                               args=[namespace, now]))

    def grow_beside(self, killed: JobRecord, capacity_mib: float | Sequence[float],
                    now: float) -> dict[str, float]:
        """After an OOM kill of `killed` (still reserved): on each of its GPUs, grow the bound
        and running jobs beside it so that they hold the GPU's capacity (`capacity_mib`: one
        for all, or one per GPU of `killed.gpus`) less its reservation (learning_lua.GROW_BESIDE).
        Returns MiB added per grown job's UID."""
        queues = [gpu_key(killed.node, index) for index in killed.gpus]
        capacities = ([capacity_mib] * len(queues) if isinstance(capacity_mib, int | float)
                      else list(capacity_mib))
        pairs = self._call(self._grow_beside, keys=[job_key(killed.uid), *queues],
                           args=[now, *capacities])
        return {str(uid): float(mib) for uid, mib in zip(pairs[::2], pairs[1::2], strict=True)}

    def record_owner_run(self, owner: str, seconds: float) -> None:
        """Count a finished run of `owner`'s pods (namespace/kind/name) and its seconds; an
        owner with no run for `OWNER_RUNS_TTL_S` is forgotten."""
        self._call(self._owner_run, keys=[OWNER_RUNS_PREFIX + owner, OWNER_RUNS_KEY],
                   args=[owner, repr(float(seconds)), OWNER_RUNS_TTL_S])

    def owner_seconds(self, owner: str) -> float | None:
        """The mean seconds of `owner`'s finished runs (None: none yet, or unreadable)."""
        pipe = self._redis.pipeline(transaction=False)
        pipe.hmget(OWNER_RUNS_PREFIX + owner, ["runs", "seconds"])
        pipe.hmget(OWNER_RUNS_KEY, [f"{owner}|runs", f"{owner}|seconds"])  # earlier versions'
        own, old = self._call(pipe.execute)
        runs, seconds = own if own[0] is not None else old
        count, total = reading(runs, 0.0), reading(seconds, 0.0)
        return total / count if count >= 1 and total > 0 else None

    def floors(self) -> dict[str, float]:
        """Every GPU OOM floor, as `job_type` keys (namespace floors prefixed with it): for
        the status page and `schedtune queues`, never on a request's path."""
        keys = sorted(self._call(self._redis.smembers, FLOOR_JOBS_KEY))
        pipe = self._redis.pipeline(transaction=False)
        for key in keys:
            pipe.hgetall(key)
        flat: dict[str, float] = {}
        for key, pairs in zip(keys, self._call(pipe.execute) if keys else (), strict=True):
            flat.update(flat_floors(key, pairs))
        return flat

    def record_oom(self, event: str) -> bool:
        """Count one OOM kill (`event` names pod, container and restart); False if counted
        (in the last `OOM_SEEN_TTL_S`, or in the set earlier versions kept)."""
        if self._call(self._redis.sismember, OOMS_KEY, event):
            return False
        return bool(self._call(self._redis.set, OOM_SEEN_PREFIX + event, "1", nx=True,
                               ex=OOM_SEEN_TTL_S))

    def oom_count(self) -> int:
        """OOM kills counted in the last `OOM_SEEN_TTL_S` (a key scan: for operators and
        tests, never on a request's path), and those earlier versions kept."""
        seen = self._call(lambda: sum(1 for _ in self._redis.scan_iter(OOM_SEEN_PREFIX + "*",
                                                                         count=1000)))
        return seen + int(self._call(self._redis.scard, OOMS_KEY))

    def record_observation(self, observation: Mapping[str, Any]) -> None:
        fields = {k: str(v) for k, v in observation.items()}
        self._call(self._redis.xadd, OBSERVATIONS_KEY, fields, maxlen=OBSERVATIONS_MAXLEN)

    def observations(self) -> list[dict[str, str]]:
        return [fields for _, fields in self._call(self._redis.xrange, OBSERVATIONS_KEY)]

    def recent_observations(self, count: int) -> list[dict[str, str]]:
        """The last `count` observations, newest first."""
        return [fields for _, fields in self._call(self._redis.xrevrange, OBSERVATIONS_KEY,
                                                   count=count)]

    def set_alphas(self, fits: Iterable[AlphaFit],
                   biases: Mapping[str, tuple[float, int]] | None = None) -> None:
        """Publish the monitor's collocation slowdowns per GPU type and the time estimate's
        biases (`extender.core.time_bias`), replacing the last fit: every worker's next
        snapshot reads them."""
        mapping = {}
        for fit in fits:
            mapping[fit.gpu_type] = repr(fit.alpha)
            mapping[f"{fit.gpu_type}|runs"] = f"{fit.runs} ({fit.shared_runs} shared)"
        for key, (bias, runs) in (biases or {}).items():
            mapping[f"{BIAS_PREFIX}{key}"] = repr(round(bias, 4))
            mapping[f"{BIAS_PREFIX}{key}|runs"] = str(runs)
        pipe = self._redis.pipeline(transaction=True)
        pipe.delete(INTERFERENCE_KEY)
        if mapping:
            pipe.hset(INTERFERENCE_KEY, mapping=mapping)
        self._call(pipe.execute)

    def learned_alphas(self) -> dict[str, float]:
        """The published collocation slowdowns, GPU type -> alpha (for operators)."""
        return alphas_from_pairs(self._call(self._redis.hgetall, INTERFERENCE_KEY))
