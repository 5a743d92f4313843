"""RedisStore on a real Redis: atomic reservations, idempotence, expiry, release."""

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import orjson
import pytest
import redis

from extender.errors import Conflict
from extender.model import Decision, FilterRecord, JobRecord, NodeGpus, PodDemand, Reservation, Waiter
from extender.state.embedded_redis import EmbeddedRedis
from extender.state.store import KUBE_BIND, VOLCANO_ALLOCATE, RedisStore

LAYOUT = NodeGpus("NVIDIA-GeForce-RTX-3090", "RTX-3090", 2, 24576)


def _job(uid: str, mib: float = 10_000, node: str = "n1") -> JobRecord:
    return JobRecord(uid=uid, pod=f"pod-{uid}", namespace="ml", model="resnet50", task="train",
                     node=node, gpu_index=-1, reserved_mib=mib, predicted_s=600, state="reserved",
                     reserved_at=0)


def test_reserve_is_best_effort_in_order_and_never_overcommits(store: RedisStore) -> None:
    cands = [(0, 24576.0, 4), (1, 24576.0, 4)]
    assert store.reserve(_job("a"), cands, now=100, ttl_s=60) == Reservation("a", "n1", 0, True)
    assert store.reserve(_job("b"), cands, now=100, ttl_s=60) == Reservation("b", "n1", 0, True)
    assert store.reserve(_job("c"), cands, now=100, ttl_s=60) == Reservation("c", "n1", 1, True)
    with pytest.raises(Conflict, match=r"room for 15000 MiB .*0:20000"):
        store.reserve(_job("d", 15_000), cands, now=100, ttl_s=60)
    snap = store.snapshot({"n1": LAYOUT}, now=100)
    assert [g.reserved_mib for g in snap.nodes["n1"].gpu_states] == [20000, 10000]


def test_concurrent_reservations_respect_capacity_and_limit(store: RedisStore) -> None:
    cands = [(0, 24576.0, 3)]
    def reserved(i: int) -> bool:
        try:
            return store.reserve(_job(f"j{i}", 5000), cands, 100, 60).new
        except Conflict:
            return False

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(reserved, range(40)))
    assert results.count(True) == 3  # the collocation limit, not the 4 that would fit
    gpu = store.snapshot({"n1": LAYOUT}, now=100).nodes["n1"].gpu_states[0]
    assert len(gpu.jobs) == 3 and gpu.reserved_mib == 15000


def test_same_pod_is_never_reserved_twice(store: RedisStore) -> None:
    cands = [(0, 24576.0, 4), (1, 24576.0, 4)]
    first = store.reserve(_job("a"), cands, 100, 60)
    again = store.reserve(_job("a"), list(reversed(cands)), 100, 60)
    assert first == Reservation("a", "n1", 0, True) and again == Reservation("a", "n1", 0, False)
    assert store.job_uids() == ["a"]


def test_a_pod_holds_one_placement_idempotent_per_node(store: RedisStore) -> None:
    cands = [(0, 24576.0, 4)]
    store.reserve(_job("a", node="n1"), cands, now=100, ttl_s=60)
    assert store.reserve(_job("a", node="n1"), cands, 101, 60) == Reservation("a", "n1", 0, False)
    with pytest.raises(Conflict, match="already holds a reservation on node n1 .GPU 0.; "
                                       "refusing to place it on n10 too"):
        store.reserve(_job("a", node="n10"), cands, now=101, ttl_s=60)  # n1 is a prefix of n10
    assert store.job("a").node == "n1" and store.job_uids() == ["a"]
    # Expired, never confirmed: the pod may be placed anew elsewhere.
    assert store.reserve(_job("a", node="n2"), cands, 161, 60) == Reservation("a", "n2", 0, True)
    assert store.queues() == {("n2", 0): ["a"]}  # the empty n1 queue is gone


def test_confirm_placement_confirms_only_a_live_reservation_on_that_node(store, redis_client
                                                                        ) -> None:
    store.reserve(_job("a"), [(1, 24576.0, 4)], now=100, ttl_s=60, source=VOLCANO_ALLOCATE)
    assert redis_client.hget("st:job:a", "source") == "volcano"
    assert not store.confirm_placement("a", "n2", now=110)
    assert not store.confirm_placement("a", "n", now=110)  # a prefix of n1 is not n1
    assert not store.confirm_placement("nobody", "n1", now=110)
    assert not store.confirm_placement("a", "n1", now=160)  # expired
    assert store.confirm_placement("a", "n1", now=159)
    job = store.job("a")
    assert job.state == "bound" and job.expires_at == 0 and job.gpu_index == 1
    assert store.confirm_placement("a", "n1", now=10_000)  # already confirmed: still True


def test_release_placement_takes_back_only_its_own_unconfirmed_allocation(store) -> None:
    cands = [(0, 24576.0, 4)]
    store.reserve(_job("kube"), cands, now=100, ttl_s=60)  # a kube-scheduler bind
    store.reserve(_job("vc"), cands, now=100, ttl_s=60, source=VOLCANO_ALLOCATE)
    assert store.release_placement("kube", "n1", VOLCANO_ALLOCATE) is None
    assert store.release_placement("vc", "n2", VOLCANO_ALLOCATE) is None
    assert store.release_placement("vc", "n1", KUBE_BIND) is None
    assert store.release_placement("nobody", "n1", VOLCANO_ALLOCATE) is None
    assert store.release_placement("vc", "n1", VOLCANO_ALLOCATE).uid == "vc"
    store.reserve(_job("seen"), cands, now=100, ttl_s=60, source=VOLCANO_ALLOCATE)
    assert store.confirm_placement("seen", "n1", now=101)
    assert store.release_placement("seen", "n1", VOLCANO_ALLOCATE) is None  # bound: stays
    assert sorted(store.job_uids()) == ["kube", "seen"]


def test_snapshot_vets_layouts_against_the_node_watchers(store: RedisStore) -> None:
    store.put_node("n1", LAYOUT)
    claimed = NodeGpus("NVIDIA-GeForce-RTX-3090", "RTX-3090", 8, 1 << 20)
    def smaller(c: NodeGpus | None, w: NodeGpus | None) -> NodeGpus | None:
        return min(c, w, key=lambda g: g.memory_mib) if c and w else c or w

    snap = store.snapshot({"n1": claimed, "n2": claimed, "n3": None}, now=1, vet=smaller)
    assert snap.nodes["n1"].gpus == LAYOUT and snap.nodes["n2"].gpus == claimed
    assert snap.nodes["n3"].gpus is None


def test_unconfirmed_reservation_expires_and_confirmed_one_stays(store: RedisStore) -> None:
    cands = [(0, 24576.0, 4)]
    left = store.reserve(_job("left"), cands, now=100, ttl_s=60)
    kept = store.reserve(_job("kept"), cands, now=100, ttl_s=60)
    assert store.confirm_bind(kept, now=110)
    gpu = store.snapshot({"n1": LAYOUT}, now=161).nodes["n1"].gpu_states[0]
    assert [j.uid for j in gpu.jobs] == ["kept"]
    assert not store.confirm_bind(left, now=161)
    # The next reservation prunes the expired one for good.
    store.reserve(_job("new", 1000), cands, now=162, ttl_s=60)
    assert sorted(store.job_uids()) == ["kept", "new"] and store.job("left") is None


def test_running_and_release(store: RedisStore) -> None:
    store.confirm_bind(store.reserve(_job("a"), [(0, 24576.0, 4)], 100, 60), 101)
    assert store.mark_running("a", started_at=200)
    job = store.job("a")
    assert job.state == "running" and job.started_at == 200 and job.expires_at == 0
    released = store.release("a")
    assert released.uid == "a" and released.reserved_mib == 10000
    assert store.release("a") is None and store.job_uids() == []


def test_snapshot_is_a_read_and_the_filter_record_one_write(store, redis_client) -> None:
    store.snapshot({"n1": LAYOUT}, now=1)
    assert redis_client.keys("st:demand:*") == [] and redis_client.keys("st:waiting") == []
    demand = PodDemand("p", "train", "ml", "resnet50", "train", 32, 1)
    record = FilterRecord(demand, {"n1": LAYOUT}, {"n1": (0,)})
    waiter = Waiter("p", 5.0, {"RTX-3090": (9000.0, 60.0)}, "ml/train")
    store.record_filter(record, ttl_s=30, waiter=waiter, now=10.0, wait_ttl_s=100)
    assert store.filter_record("p") == record and 0 < redis_client.ttl("st:demand:p") <= 30
    assert store.waiters(now=109.0) == (waiter,) and store.waiters(now=111.0) == ()
    store.record_filter(FilterRecord(demand), ttl_s=30)  # refreshed: no waiter, no holds
    assert store.filter_record("p") == FilterRecord(demand)
    assert store.filter_record("never-filtered") is None
    redis_client.set("st:demand:bad", b"{not json")
    assert store.filter_record("bad") is None


def test_a_waiter_on_several_gpus_keeps_its_count(store, redis_client) -> None:
    demand = PodDemand("q", "ddp", "ml", "resnet50", "train", 64, 1, gpus=4)
    waiter = Waiter("q", 5.0, {"RTX-3090": (9000.0, 60.0)}, "ml/ddp", gpus=4)
    store.record_filter(FilterRecord(demand), ttl_s=30, waiter=waiter, now=10.0, wait_ttl_s=100)
    assert store.waiters(now=20.0) == (waiter,)
    for bad in (0, 65, "four"):  # a count no pod can have: that entry is skipped
        redis_client.hset("st:waiting", "x", orjson.dumps(
            {"uid": "x", "since": 1.0, "expires_at": 999.0, "needs": {}, "gpus": bad}))
        assert store.waiters(now=20.0) == (waiter,)


def test_the_filter_record_stores_each_layout_once(store, redis_client) -> None:
    demand = PodDemand("p", "train", "ml", "resnet50", "train", 32, 1)
    other = NodeGpus("Tesla-T4", "T4", 1, 15360, share_slots=4)
    layouts = {f"node-{i:03d}": LAYOUT if i % 3 else other for i in range(300)}
    store.record_filter(FilterRecord(demand, layouts), ttl_s=30)
    assert store.filter_record("p") == FilterRecord(demand, layouts)
    assert redis_client.get("st:demand:p").count("RTX-3090") == 2  # product and type, once


def test_snapshot_reads_node_watcher_layouts(store: RedisStore) -> None:
    store.put_node("n2", NodeGpus("Tesla-T4", "T4", 1, 15360, share_slots=4))
    snap = store.snapshot({"n2": None, "ghost": None}, now=1)
    assert snap.nodes["n2"].gpus.share_slots == 4 and len(snap.nodes["n2"].gpu_states) == 1
    assert snap.nodes["ghost"].gpus is None


def test_node_watch_events_and_listings_update_layouts(store: RedisStore) -> None:
    from extender.cluster.node_watch import apply_event, apply_listing
    from tests.builders import make_node

    node = make_node("w1", product="NVIDIA-L40S", count=2)
    apply_event(store, "ADDED", node)
    assert store.snapshot({"w1": None}, 0).nodes["w1"].gpus.gpu_type == "L40S"
    apply_event(store, "DELETED", node)
    assert store.snapshot({"w1": None}, 0).nodes["w1"].gpus is None
    apply_event(store, "ADDED", node)
    apply_listing(store, [make_node("w2", product="Tesla-T4")])  # w1 went while unwatched
    assert store.node_names() == ["w2"]


def test_workers_see_each_others_changes_through_the_change_log(store, redis_url, redis_client) -> None:
    other = RedisStore.from_url(redis_url)  # a second worker with its own mirror
    assert other.snapshot({"n1": LAYOUT}, now=100).nodes["n1"].idle
    store.reserve(_job("a"), [(1, 24576.0, 4)], now=100, ttl_s=60)
    gpu = other.snapshot({"n1": LAYOUT}, now=100).nodes["n1"].gpu_states[1]
    assert [(j.uid, j.expires_at) for j in gpu.jobs] == [("a", 160)]
    assert other.snapshot({"n1": LAYOUT}, now=100).nodes["n1"].gpu_states[1].free_mib == 14576
    # Unconfirmed: gone from the other worker's view once expired, without any write.
    assert other.snapshot({"n1": LAYOUT}, now=161).nodes["n1"].idle
    store.confirm_bind(store.reserve(_job("b"), [(0, 24576.0, 4)], now=200, ttl_s=60), now=201)
    store.mark_running("b", started_at=210)
    (job,) = other.snapshot({"n1": LAYOUT}, now=300).nodes["n1"].gpu_states[0].jobs
    assert job.started_at == 210 and job.expires_at == 0
    store.release("b")
    assert other.snapshot({"n1": LAYOUT}, now=300).nodes["n1"].gpu_states[0].jobs == ()
    # Redis wiped and refilled: the epoch changes and the mirror starts over.
    store.reserve(_job("c"), [(0, 24576.0, 4)], now=300, ttl_s=0)
    other.snapshot({"n1": LAYOUT}, now=300)
    redis_client.flushdb()
    store.reserve(_job("d", 1000), [(1, 24576.0, 4)], now=400, ttl_s=0)
    gpus = other.snapshot({"n1": LAYOUT}, now=400).nodes["n1"].gpu_states
    assert [[j.uid for j in g.jobs] for g in gpus] == [[], ["d"]]


def test_embedded_redis_starts_from_a_relative_state_dir(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)  # `python -m extender` uses EXTENDER_STATE_DIR=var by default
    server = EmbeddedRedis(Path("var") / "redis")
    try:
        client = redis.Redis.from_url(server.start())
        assert client.set("k", "v") and client.get("k") == b"v"
    finally:
        server.stop()
    assert (tmp_path / "var" / "redis" / "redis.log").exists()


def test_every_process_finds_the_embedded_redis_where_settings_say(tmp_path) -> None:
    from extender.settings import Settings
    from extender.state.embedded_redis import open_store

    settings = Settings(state_dir=tmp_path / "state")
    assert settings.embedded_redis_dir == (tmp_path / "state" / "redis").resolve()
    server = EmbeddedRedis(settings.embedded_redis_dir)  # what gunicorn's master starts
    try:
        assert server.start() == settings.store_url
        service = open_store(settings, start_embedded=True)  # a worker shares it
        other = EmbeddedRedis(settings.embedded_redis_dir)
        assert other.start() == settings.store_url and not other.running  # no second server
        service.put_node("n1", LAYOUT)
        assert open_store(settings).node_layouts() == {"n1": LAYOUT}  # a CLI beside it
    finally:
        server.stop()
    assert not server.running
    explicit = Settings(redis_url="redis://db:6379/0", state_dir=tmp_path)
    assert explicit.store_url == "redis://db:6379/0" and explicit.embedded_redis_dir is None


def test_node_watcher_runs_as_its_own_process_and_says_when_there_is_no_cluster(
        tmp_path, monkeypatch, redis_url) -> None:
    from extender.cluster.node_watch import start_in_background
    from extender.settings import Settings

    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("REDIS_URL", redis_url)
    assert start_in_background(Settings(node_watch=False)) is None
    watcher = start_in_background(Settings())
    assert watcher is not None and watcher.wait(timeout=60) == 0


def test_unreadable_values_in_a_job_never_break_a_reservation_nor_make_room(
        store, redis_client) -> None:
    cands = [(0, 24576.0, 4)]
    store.confirm_bind(store.reserve(_job("bad"), cands, now=100, ttl_s=60), now=101)
    redis_client.hset("st:job:bad", mapping={"expires_at": "nan", "reserved_mib": "garbage"})
    # The unreadable reservation fills the GPU (never makes room) and never expires.
    with pytest.raises(Conflict, match="no GPU on n1 has room"):
        store.reserve(_job("next", 100), cands, now=10_000, ttl_s=60)
    redis_client.hset("st:job:bad", "reserved_mib", "1e400")  # inf: fills it too
    with pytest.raises(Conflict):
        store.reserve(_job("next", 100), cands, now=10_000, ttl_s=60)
    assert store.reserve(_job("bad"), cands, now=10_000, ttl_s=60).new is False  # no error
    redis_client.hset("st:job:bad", "reserved_mib", "1000")  # readable again: counted as such
    assert store.reserve(_job("next", 100), cands, now=10_000, ttl_s=60).new
    assert store.release("bad") is not None


def test_a_decision_told_is_logged_and_a_store_gone_never_fails_the_teller(store, caplog) -> None:
    told = Decision("released", "u1", "ml/p1", "released from n1")
    store.tell(told, now=100.0)
    [logged] = store.decisions(5)
    assert logged["uid"] == "u1" and logged["message"] == "released from n1"
    gone = RedisStore.from_url("redis://127.0.0.1:1/0", timeout_s=0.2)  # nothing listens
    gone.tell(told, now=100.0)
    assert "could not log a decision" in caplog.text


def test_growing_beside_a_kill_covers_every_gpu_of_the_killed_pod_and_only_live_suspects(
        store: RedisStore) -> None:
    both = [(0, 24576.0, 4), (1, 24576.0, 4)]
    killed = store.reserve(_job("killed", 8000), both, now=100, ttl_s=0, gpus=2)
    store.reserve(_job("wide", 4000), both, now=100, ttl_s=0, gpus=2)  # on both GPUs
    store.reserve(_job("one", 2000), [(1, 24576.0, 4)], now=100, ttl_s=0)
    store.reserve(_job("lapsed", 2000), [(0, 24576.0, 4)], now=100, ttl_s=10)
    for uid in ("wide", "one"):
        store.mark_running(uid, 100)
    record = store.job("killed")
    assert record.gpus == (killed.gpu_index, *killed.gpu_indices[1:]) == (0, 1)

    grown = store.grow_beside(record, 24576.0, now=200)  # "lapsed" expired at 110
    # GPU 0: "wide" alone grows to 24576 - 8000; GPU 1 then holds "wide" at that already.
    assert grown == pytest.approx({"wide": 12576.0})
    assert store.job("wide").reserved_mib == pytest.approx(16576.0)
    assert store.job("one").reserved_mib == 2000
    assert store.grow_beside(record, 24576.0, now=200) == {}  # nothing short any more
    store.release("killed")
    assert store.grow_beside(record, 24576.0, now=200) == {}  # gone: nothing to go by


def test_replies_are_read_by_hiredis(store: RedisStore) -> None:
    """The C reply parser is a dependency (the monitor's refit reads thousands of stream
    fields per success); a client falling back to the pure-Python parser is a packaging
    regression, seen here rather than as a slower monitor."""
    from redis._parsers import _HiredisParser

    connection = store._redis.connection_pool.get_connection()
    try:
        assert isinstance(connection._parser, _HiredisParser)
    finally:
        store._redis.connection_pool.release(connection)


def test_a_snapshot_whose_connection_died_while_idle_reads_on_a_new_one(store, redis_client
                                                                        ) -> None:
    """Redis restarted, or a proxy's idle timeout: the snapshot's own connection is dead
    and fails its next command; the snapshot is read on a new one, not refused."""
    store.put_node("n0", NodeGpus("Tesla-T4", "T4", 2, 15360))
    record = FilterRecord(PodDemand("u1", "p", "ml", "resnet50", "train", 32, 1))
    store.snapshot({"n0": None}, 1.0)
    redis_client.execute_command("CLIENT", "KILL", "TYPE", "normal")
    snapshot = store.snapshot({"n0": None}, 2.0, record=record, record_ttl_s=60)
    assert snapshot.now == 2.0 and len(snapshot.nodes["n0"].gpu_states) == 2
    assert store.filter_record("u1") == record


def test_a_reservations_cpu_reaches_every_workers_table(store, redis_url) -> None:
    """The CPU a pod asked is in its job hash and every worker's queue rows; with the node
    watcher's layout (allocatable CPU) the table gives the node's CPU left."""
    from dataclasses import replace

    from extender.core.fragmentation import cpu_left
    from extender.core.gpu_table import GpuTable

    store.put_node("n1", replace(LAYOUT, cpu_milli=32000))
    store.reserve(replace(_job("a"), cpu_milli=6000), [(0, 24576.0, 4)], now=100, ttl_s=60)
    assert store.job("a").cpu_milli == 6000
    other = RedisStore.from_url(redis_url)
    nodes = other.snapshot({"n1": None}, now=100).nodes
    assert [j.cpu_milli for j in nodes["n1"].gpu_states[0].jobs] == [6000]
    table = GpuTable.from_states(nodes)
    assert cpu_left(table).tolist() == [26000]


def test_a_filter_record_written_before_layouts_had_cpu_still_reads(store, redis_client) -> None:
    demand = PodDemand("old", "p", "ml", "resnet50", "train", 32, 1)
    row = list(LAYOUT.as_row()[:-1])  # the eight fields an older replica wrote
    redis_client.set("st:demand:old", orjson.dumps({"demand": demand,
                                                    "groups": [[row, ["n1"]]]}))
    assert store.filter_record("old") == FilterRecord(demand, {"n1": LAYOUT})
