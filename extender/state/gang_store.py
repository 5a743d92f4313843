"""Gang plans in Redis: reserve every member's GPUs in one call, hand slots to members.

The layout and the scripts are in `gang_lua`. Reached as `RedisStore.gangs`: the same
client and the same error translation as the rest of the store.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import orjson
import redis

from extender.core.gang_plan import GangPlan, MemberSlot
from extender.errors import Conflict, NotReplicated
from extender.model import JobRecord, PodDemand, Reservation
from extender.state import gang_lua
from extender.state.records import gpu_list

PLAN_PREFIX = "st:gang:"
GANG_PLACEHOLDER = "gang:"  # the UIDs of plans' placeholders (and gangs' waiters) start so


def plan_key(gang: str) -> str:
    """`gang`: namespace/name."""
    return PLAN_PREFIX + gang


def placeholder_prefix(gang: str) -> str:
    """The UIDs of a plan's placeholders, before the slot number."""
    return f"{GANG_PLACEHOLDER}{gang}/"


def waiter_uid(gang: str) -> str:
    """The one waiter a gang that fits nowhere waits as."""
    return f"{GANG_PLACEHOLDER}{gang}"


def job_of(member: PodDemand) -> str:
    """What a member asks for, as the plan keeps it: every field of its demand but the
    pod's identity (members of one gang run the same job)."""
    job = {k: v for k, v in asdict(member).items() if k not in ("uid", "name", "owner")}
    return orjson.dumps(job, option=orjson.OPT_SORT_KEYS).decode()


@dataclass(frozen=True)
class GangView:
    """What filter learns of a gang in one call. `status`: "slot" (the member's slot of a
    live plan, `slot` and `plan` set; `claimed`: just now), "full" (every slot claimed by
    other members), "none" (no live plan); `revision`: the state's revision then ("none"
    and "full"), for answering a gang's repeated filters from its last refusal."""

    status: str  # or "other": the pod asks for another job than the plan was made for
    slot: int = -1
    plan: dict[str, Any] | None = None
    claimed: bool = False
    revision: tuple[str, str] = ("", "")

    def member_slot(self) -> MemberSlot | None:
        if self.plan is None:
            return None
        raw = self.plan["slots"][self.slot]
        return MemberSlot(raw["node"], tuple(raw["gpus"]), raw["type"], raw["mib"], 0.0)


class GangStore:
    def __init__(self, client: redis.Redis, call: Callable[..., Any],
                 replicated: Callable[..., tuple[Any, bool]]) -> None:
        self._call = call
        self._replicated = replicated  # `RedisStore._replicated`: a bind's durable writes
        self._claim = client.register_script(gang_lua.CLAIM)
        self._reserve = client.register_script(gang_lua.RESERVE_PLAN)
        self._take = client.register_script(gang_lua.TAKE)
        self._release = client.register_script(gang_lua.RELEASE_PLAN)
        self._client = client

    def claim(self, gang: str, member: PodDemand, now: float) -> GangView:
        """The member's slot in the gang's live plan (claiming a free one), or why none."""
        status, first, *rest = self._call(self._claim, keys=[plan_key(gang)], args=[
            member.uid, now, placeholder_prefix(gang), job_of(member)])
        if status == "slot":
            return GangView("slot", int(first), orjson.loads(rest[0]), rest[1] == "1")
        if status == "other":
            return GangView("other", plan={"job": first})
        return GangView(str(status), revision=(str(first), str(rest[0])))

    def reserve(self, gang: str, plan: GangPlan, member: PodDemand, now: float,
                ttl_s: float) -> GangView | None:
        """Reserve every slot of `plan` for the gang at once (each slot's GPUs held by a
        placeholder until a member takes it, all expiring after `ttl_s`), slot 0 claimed by
        `member`. Returns the member's view of it (slot 0, just claimed), or None when
        another worker's plan came first. Raises `Conflict` when a GPU of the plan has no
        room any more."""
        slots = []
        for index, slot in enumerate(plan.slots):
            fields = {"pod": f"{gang.partition('/')[2]}#{index}", "namespace": member.namespace,
                      "model": member.model, "task": member.task, "batch": member.batch,
                      "units": member.units, "gpu_type": slot.gpu_type,
                      "predicted_s": round(plan.duration_s, 3)}
            slots.append({"node": slot.node, "mib": round(slot.mib, 1), "fields": fields,
                          "gpus": [[i, capacity, slot.limit] for i, capacity
                                   in zip(slot.gpus, slot.capacities, strict=True)]})
        stored = {"slots": [{"node": s.node, "gpus": list(s.gpus), "type": s.gpu_type,
                             "mib": round(s.mib, 1)} for s in plan.slots],
                  "type": plan.gpu_type, "completion_s": round(plan.completion_s, 3),
                  "duration_s": round(plan.duration_s, 3)}
        args = {"now": now, "ttl": ttl_s, "uid": member.uid, "job": job_of(member),
                "prefix": placeholder_prefix(gang),
                "waiter": waiter_uid(gang), "plan": orjson.dumps(stored).decode(),
                "slots": slots}
        status, *detail = self._call(self._reserve, keys=[plan_key(gang)],
                                     args=[orjson.dumps(args)])
        if status == "full":
            raise Conflict(f"gang {gang}: GPU {detail[0].split(':')[0]}:{detail[0].split(':')[1]} "
                           f"has no room for its plan any more (node:gpu:used MiB:jobs "
                           f"{detail[0]}); it is planned again")
        return GangView("slot", 0, stored, claimed=True) if status == "reserved" else None

    def take(self, gang: str, record: JobRecord, now: float, ttl_s: float,
             source: str) -> Reservation | None:
        """The member takes over its slot on `record.node` (its placeholder's GPUs, MiB and
        predicted seconds), expiring after `ttl_s` unless confirmed (0: never). None when
        it holds no live slot (never filtered into the plan, or the plan expired). Raises
        `Conflict` when its slot is on another node."""
        fields = {k: v for k, v in asdict(record).items()
                  if k in ("pod", "namespace", "model", "task", "batch", "units", "cpu_milli")}
        fields["source"] = source
        (status, *detail), durable = self._replicated(self._take, [plan_key(gang)], [
            record.uid, record.node, now, ttl_s, orjson.dumps(fields), placeholder_prefix(gang),
            source])
        if not durable:  # the slot stays the member's: its retry takes it again
            raise NotReplicated(f"state store: gang {gang}'s slot for {record.namespace}/"
                                f"{record.pod} did not reach the replicas a failover needs "
                                "in time; retry")
        if status == "none":
            return None
        if status == "elsewhere":
            raise Conflict(f"pod {record.namespace}/{record.pod} is planned on node {detail[0]} "
                           f"with its gang {gang}, not on {record.node}")
        queue, gpus = str(detail[0]), gpu_list(detail[1]) if len(detail) > 1 else ()
        node, _, index = queue.removeprefix("st:gpu:").rpartition(":")
        return Reservation(record.uid, node, int(index), new=status == "reserved",
                           gpu_indices=gpus if len(gpus) > 1 else ())

    def release(self, gang: str, only_partial: bool = False) -> int:
        """Drop the gang's plan whole: every slot no member took (members that did keep
        their reservations: they are pods on those GPUs). With `only_partial`, a plan every
        member took stays. Returns the placeholders dropped (-1: left whole)."""
        return int(self._call(self._release, keys=[plan_key(gang)],
                              args=[placeholder_prefix(gang), "1" if only_partial else "0"]))

    def complete(self, gang: str) -> bool:
        """Whether every slot of the gang's live plan has been taken by a member."""
        fields = self._call(self._client.hgetall, plan_key(gang))
        size = int(fields.get("size") or 0)
        return size > 0 and all(f"bound:{i}" in fields for i in range(size))

    def planned(self, gang: str) -> bool:
        return bool(self._call(self._client.exists, plan_key(gang)))

