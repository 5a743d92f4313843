"""Gangs through the HTTP verbs with a real Redis: planned whole on one GPU type, every
member's GPUs reserved at once, released whole; Volcano's verbs; bad gang annotations."""

from __future__ import annotations

from dataclasses import replace

import pytest

from extender.cluster.monitor import Monitor
from extender.model import GANG, GANG_SIZE, Limits, NodeGpus
from extender.settings import Settings
from extender.state.gang_store import plan_key, waiter_uid
from extender.wire.volcano import encode_job_info
from tests.builders import (
    bind_args, filter_args, make_node, make_pod, passed_nodes, volcano_node, volcano_task,
)  # fmt: skip

FAST = make_node("fast", "NVIDIA-A100-SXM4-80GB", count=4, memory_mib=81920)
SLOW = make_node("slow", "Tesla-T4", count=8, memory_mib=15360)


def _member(gang: str, size: int, index: int, **extra: str) -> dict:
    return make_pod(f"{gang}-{index}", model="resnet50", batch=32,
                    **{GANG: gang, GANG_SIZE: str(size), **extra})


def _filter(client, pod: dict, nodes: list[dict]) -> dict:
    res = client.post("/filter", json=filter_args(pod, nodes))
    assert res.status_code == 200
    return res.get_json()


def _bind(client, pod: dict, node: str) -> dict:
    return client.post("/bind", json=bind_args(pod, node)).get_json()


def _placeholders(store, gang: str) -> list[str]:
    return [uid for uid in store.job_uids() if uid.startswith(f"gang:default/{gang}/")]


def test_a_gang_is_planned_whole_on_the_fastest_type_that_fits_it(client, store) -> None:
    members = [_member("ddp", 4, i) for i in range(4)]
    assert passed_nodes(_filter(client, members[0], [SLOW, FAST])) == ["fast"]
    assert len(_placeholders(store, "ddp")) == 4  # every member's GPU held at the first filter
    for pod in members[1:]:
        out = _filter(client, pod, [SLOW, FAST])
        assert passed_nodes(out) == ["fast"]
        assert "planned on fast" in out["FailedNodes"]["slow"]
    for pod in members:
        assert _bind(client, pod, "fast") == {"Error": ""}
    jobs = [store.job(p["metadata"]["uid"]) for p in members]
    assert sorted(j.gpu_index for j in jobs) == [0, 1, 2, 3] and {j.node for j in jobs} == {"fast"}
    assert _placeholders(store, "ddp") == [] and store.gangs.complete("default/ddp")


def test_a_gang_too_big_for_one_type_is_placed_mixed(client, store) -> None:
    members = [_member("wide", 10, i) for i in range(10)]
    _filter(client, members[0], [SLOW, FAST])
    nodes = {store.job(uid).node for uid in _placeholders(store, "wide")}
    assert nodes == {"slow", "fast"}


def test_two_gangs_that_fit_alone_not_together_one_runs_the_other_waits_whole(
        client_with, store, redis_client, clock) -> None:
    client = client_with(collocation=Limits(1, {}))
    first = [_member("a", 3, i) for i in range(3)]
    second = [_member("b", 3, i) for i in range(3)]
    assert passed_nodes(_filter(client, first[0], [FAST])) == ["fast"]
    refused = _filter(client, second[0], [FAST])
    assert passed_nodes(refused) == [] and "waits whole" in refused["FailedNodes"]["fast"]
    assert _placeholders(store, "b") == []  # nothing reserved for a gang that does not fit
    (waiter,) = [w for w in store.waiters(clock.now) if w.uid == waiter_uid("default/b")]
    assert waiter.members == 3
    # Its retries cost one Redis call each while nothing changed (the in-tree retry loop):
    # the plan lookup (4 commands, counted with those its script runs), no snapshot.
    before = redis_client.info("stats")["total_commands_processed"]
    for _ in range(20):
        assert passed_nodes(_filter(client, second[1], [FAST])) == []
    assert redis_client.info("stats")["total_commands_processed"] - before <= 20 * 4 + 1
    for pod in first:
        assert passed_nodes(_filter(client, pod, [FAST])) == ["fast"]
        assert _bind(client, pod, "fast") == {"Error": ""}
    for pod in first:
        store.release(pod["metadata"]["uid"])  # the first gang ended
    assert passed_nodes(_filter(client, second[1], [FAST])) == ["fast"]
    assert len(_placeholders(store, "b")) == 3


def test_a_member_deleted_mid_plan_releases_the_plan_whole(client, store, clock,
                                                           estimator) -> None:
    members = [_member("lost", 3, i) for i in range(3)]
    for pod in members:
        _filter(client, pod, [FAST])
    assert _bind(client, members[0], "fast") == {"Error": ""}
    monitor = Monitor(store, estimator, clock=clock, settings=Settings())
    monitor.on_event("DELETED", members[2])
    assert _placeholders(store, "lost") == [] and not store.gangs.planned("default/lost")
    assert store.job(members[0]["metadata"]["uid"]) is not None  # a bound member keeps its GPU
    assert "filter it again" in _bind(client, members[1], "fast")["Error"]


def test_a_plan_not_bound_in_time_frees_its_gpus(client, store, clock) -> None:
    members = [_member("slowpoke", 4, i) for i in range(4)]
    _filter(client, members[0], [FAST])
    other = make_pod("other", model="resnet50", batch=32)
    with pytest.raises(AssertionError):
        assert passed_nodes(_filter(client, other, [FAST])) == ["fast"]  # FAST is collocation 4..
    clock.now += Settings().gang_plan_ttl_s + 1
    assert passed_nodes(_filter(client, other, [FAST])) == ["fast"]
    assert "filter it again" in _bind(client, members[0], "fast")["Error"]


def test_more_members_than_its_size_are_refused(client) -> None:
    members = [_member("pair", 2, i) for i in range(3)]
    for pod in members[:2]:
        assert passed_nodes(_filter(client, pod, [FAST])) == ["fast"]
    out = _filter(client, members[2], [FAST])
    assert "not one of its members" in out["FailedNodes"]["fast"]


@pytest.mark.parametrize(("annotations", "said"), [
    ({GANG_SIZE: "4"}, "needs schedtune.io/gang"),
    ({GANG: "g", GANG_SIZE: "many"}, "whole number"),
    ({GANG: "g", GANG_SIZE: "0"}, "1..256"),
    ({GANG: "Not_A_Name", GANG_SIZE: "2"}, "object name"),
])
def test_bad_gang_annotations_get_a_clear_error(client, annotations, said) -> None:
    res = client.post("/filter", json=filter_args(make_pod(**annotations), [FAST]))
    assert res.status_code == 400 and said in res.get_json()["Error"]


def test_a_podgroup_gang_without_cluster_access_is_refused_saying_why(client) -> None:
    pod = make_pod(**{"scheduling.k8s.io/group-name": "pg"})
    out = _filter(client, pod, [FAST])
    assert "no cluster access" in out["FailedNodes"]["fast"]


def test_volcano_gang_predicate_allocate_job_ready_and_deallocate(client, store) -> None:
    store.put_node("fast", NodeGpus("NVIDIA-A100-SXM4-80GB", "A100-80GB", 4, 81920))
    store.put_node("slow", NodeGpus("Tesla-T4", "T4", 8, 15360))
    members = [_member("vc", 2, i) for i in range(2)]
    verdicts = {}
    for pod in members:
        for node in (SLOW, FAST):
            out = client.post("/volcano/predicate", json={"task": volcano_task(pod),
                                                           "node": volcano_node(node)}).get_json()
            verdicts[pod["metadata"]["name"], node["metadata"]["name"]] = out["code"]
    assert verdicts == {("vc-0", "slow"): 2, ("vc-0", "fast"): 0,
                        ("vc-1", "slow"): 2, ("vc-1", "fast"): 0}

    def ready() -> bool:
        return client.post("/volcano/jobReady",
                           json={"job": encode_job_info("default", "vc", 2)}).get_json()["status"]

    assert client.post("/volcano/allocate", json={"task": volcano_task(members[0], "fast")}
                       ).status_code == 200
    assert not ready()
    assert client.post("/volcano/allocate", json={"task": volcano_task(members[1], "fast")}
                       ).status_code == 200
    assert ready()
    client.post("/volcano/deallocate", json={"task": volcano_task(members[1], "fast")})
    assert not store.gangs.planned("default/vc")
    assert store.job(members[1]["metadata"]["uid"]) is None


def test_a_job_we_did_not_plan_is_not_held_back(client) -> None:
    assert client.post("/volcano/jobReady", json={"job": encode_job_info("default", "x", 3)}
                       ).get_json() == {"status": True}


def test_plan_key_is_readable_by_operators(client, redis_client) -> None:
    _filter(client, _member("ops", 2, 0), [FAST])
    fields = redis_client.hgetall(plan_key("default/ops"))
    assert fields["size"] == "2" and '"type":"A100-80GB"' in fields["plan"].replace(" ", "")


def test_settings_read_the_gang_variables() -> None:
    settings = Settings.from_env({"EXTENDER_GANG_PLAN_TTL_S": "60",
                                  "EXTENDER_GANG_NETWORK_GBPS": "100"})
    assert (settings.gang_plan_ttl_s, settings.gang_network_gbps) == (60.0, 100.0)
    assert replace(settings, gang_plan_ttl_s=1).gang_plan_ttl_s == 1


def test_a_member_asking_for_another_job_than_its_gang_is_refused(client, store) -> None:
    _filter(client, _member("same", 2, 0), [FAST])
    other = make_pod("same-1", model="vgg16", batch=64, **{GANG: "same", GANG_SIZE: "2"})
    out = _filter(client, other, [FAST])
    assert "must run the same job" in out["FailedAndUnresolvableNodes"]["fast"]


def test_a_request_without_the_planned_node_keeps_the_plan_unless_the_node_is_gone(
        client, store) -> None:
    store.put_node("fast", NodeGpus("NVIDIA-A100-SXM4-80GB", "A100-80GB", 4, 81920))
    members = [_member("kept", 2, i) for i in range(2)]
    assert passed_nodes(_filter(client, members[0], [SLOW, FAST])) == ["fast"]
    out = _filter(client, members[1], [SLOW])  # a sample of kube-scheduler's without it
    assert "does not offer" in out["FailedNodes"]["slow"] and store.gangs.planned("default/kept")
    gone = [_member("gone", 2, i) for i in range(2)]
    assert passed_nodes(_filter(client, gone[0], [SLOW])) == ["slow"]  # planned on slow
    assert "is gone" in _filter(client, gone[1], [FAST])["FailedNodes"]["fast"]
    assert not store.gangs.planned("default/gone")
