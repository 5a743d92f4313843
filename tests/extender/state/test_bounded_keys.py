"""Keys that used to grow without bound (issue #50, item 5): each now has a TTL or a
share, and what earlier versions wrote is still read, never lost. Real Redis."""

from __future__ import annotations

from extender.model import Decision
from extender.state.keys import (
    DECISIONS_MAXLEN, OOM_SEEN_TTL_S, OWNER_RUNS_KEY, OWNER_RUNS_TTL_S, TOLD_QUOTA,
)  # fmt: skip

NOW = 1_000_000.0


def test_an_owners_runs_expire_after_its_last_run(store, redis_client) -> None:
    store.record_owner_run("ml/Job/train", 100.0)
    store.record_owner_run("ml/Job/train", 300.0)
    assert store.owner_seconds("ml/Job/train") == 200.0
    key = "st:owner-runs:ml/Job/train"
    assert 0 < redis_client.ttl(key) <= OWNER_RUNS_TTL_S
    assert not redis_client.exists(OWNER_RUNS_KEY)  # nothing in the one hash that grew


def test_an_owners_runs_kept_by_an_earlier_version_are_read_and_folded_in(store,
                                                                        redis_client) -> None:
    redis_client.hset(OWNER_RUNS_KEY, mapping={"ml/Job/old|runs": "3",
                                               "ml/Job/old|seconds": "300",
                                               "ml/Job/other|runs": "1",
                                               "ml/Job/other|seconds": "50"})
    assert store.owner_seconds("ml/Job/old") == 100.0
    store.record_owner_run("ml/Job/old", 500.0)
    assert store.owner_seconds("ml/Job/old") == 200.0  # (300 + 500) / 4: nothing lost
    assert redis_client.hgetall(OWNER_RUNS_KEY) == {"ml/Job/other|runs": "1",
                                                    "ml/Job/other|seconds": "50"}


def test_an_oom_kill_is_counted_once_and_its_mark_expires(store, redis_client) -> None:
    assert store.record_oom("uid-1/main/0")
    assert not store.record_oom("uid-1/main/0")
    assert 0 < redis_client.ttl("st:oom:uid-1/main/0") <= OOM_SEEN_TTL_S
    redis_client.sadd("st:ooms", "uid-0/main/0")  # an earlier version's set
    assert not store.record_oom("uid-0/main/0")
    assert store.oom_count() == 2


def _waiting(namespace: str, i: int) -> Decision:
    return Decision("waiting", f"{namespace}-{i}", f"{namespace}/pod-{i}",
                    "waiting for GPU memory", once_key=f"waiting:{namespace}-{i}")


def test_one_namespaces_waiting_pods_do_not_trim_anothers_decisions(store) -> None:
    store.claim_decisions("poster", 1)  # the posters' group exists, as in a cluster
    store.tell(Decision("reserved", "b-1", "team-b/pod", "reserved 100 MiB", "n1"), NOW)
    store.log_decisions([_waiting("team-a", i) for i in range(int(DECISIONS_MAXLEN * 1.25))],
                        NOW)
    posted = []
    while batch := store.claim_decisions("poster", 500):
        posted += [fields for _, fields in batch]
        store.ack_decisions(entry_id for entry_id, _ in batch)
    assert posted[0]["uid"] == "b-1"  # still there when the poster came
    assert sum(1 for d in posted if d["pod"].startswith("team-a/")) == TOLD_QUOTA
    store.tell(_waiting("team-c", 0), NOW)  # another namespace has its own share
    assert [f["uid"] for _, f in store.claim_decisions("poster", 10)] == ["team-c-0"]


def test_a_decision_over_its_namespaces_share_is_told_on_a_later_request(store,
                                                                         redis_client) -> None:
    store.log_decisions([_waiting("team-a", i) for i in range(TOLD_QUOTA + 1)], NOW)
    late = _waiting("team-a", TOLD_QUOTA)
    assert not redis_client.exists(f"st:told:{late.once_key}")  # not marked as told
    redis_client.delete("st:told-quota:team-a")  # the window passed
    store.log_decisions([late], NOW)
    assert store.decisions(1)[0]["uid"] == late.uid
