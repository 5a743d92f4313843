"""Values in Redis that no extender wrote (by hand, by another program): a request never
fails on them. A broken value reads as unreadable (that node has no layout, that model is
not registered); a key of the wrong type is a retriable error, as an outage is; the
operator's report lists what it cannot place instead of running out of memory."""

from __future__ import annotations

import time

import pytest
import redis

from extender.core.queue_report import queue_report
from extender.model import GPU_MEMORY, JobRecord, Limits, NodeGpus
from tests.builders import filter_args, make_node, make_pod

THREE_090 = '{"product": "NVIDIA-GeForce-RTX-3090", "gpu_type": "RTX-3090", "count": 1, ' \
            '"memory_mib": 24576, "share_slots": 4, "problem": ""}'


@pytest.fixture
def raw_redis(redis_url, redis_client) -> redis.Redis:  # noqa: ARG001 (flushed by redis_client)
    """A client that writes bytes as they are, as `redis-cli` can."""
    return redis.Redis.from_url(redis_url)


def _filter_names(client, names: list[str], pod: dict | None = None) -> dict:  # noqa: ANN001
    body = filter_args(pod or make_pod(model="resnet50"), [make_node(n) for n in names],
                       names_only=True)
    started = time.monotonic()
    response = client.post("/filter", json=body)
    assert time.monotonic() - started < 10
    assert response.status_code == 200, response.data[:300]
    return response.get_json()


def test_a_registered_model_that_is_not_utf8_breaks_no_request(client, raw_redis) -> None:
    raw_redis.hset("st:models", "bin", b"\xff\xfe")
    raw_redis.incr("st:models:rev")
    raw_redis.hset("st:nodes", "ok", THREE_090)
    raw_redis.incr("st:nodes:rev")
    out = _filter_names(client, ["ok"])
    assert out["Error"] == "" and out["NodeNames"] == ["ok"]  # built-in models still work


@pytest.mark.parametrize("layout", [
    b"\xff\xfe not utf-8",
    b'{"product": "x", "gpu_type": null, "count": "abc", "memory_mib": 1, "share_slots": 1}',
    b'{"product": "x", "gpu_type": ["a"], "count": 1, "memory_mib": 1, "share_slots": 1}',
    b'{"product": "x", "gpu_type": null, "count": 1, "memory_mib": "x", "share_slots": 1}',
    b'{"product": "x", "gpu_type": null, "count": 1, "memory_mib": 1, "share_slots": "z"}',
    b'{"product": "x", "gpu_type": null, "count": 100000000, "memory_mib": 1, '
    b'"share_slots": 1}',
    b'{"product": "x", "gpu_type": null, "count": true, "memory_mib": 1, "share_slots": 1}',
    b'[1, 2]',
])
def test_a_node_layout_no_watcher_wrote_is_no_layout(client, raw_redis, layout) -> None:
    raw_redis.hset("st:nodes", mapping={"bad": layout, "ok": THREE_090})
    raw_redis.incr("st:nodes:rev")
    out = _filter_names(client, ["bad", "ok"])
    assert out["Error"] == "" and out["NodeNames"] == ["ok"]
    assert "bad" in out["FailedAndUnresolvableNodes"]


def test_a_key_of_the_wrong_type_is_a_retriable_error_and_others_pass(client,
                                                                       raw_redis) -> None:
    raw_redis.set("st:waiting", "not a hash")
    raw_redis.hset("st:nodes", "ok", THREE_090)
    out = client.post("/filter", json=filter_args(make_pod(model="resnet50"), [make_node("ok")],
                                                  names_only=True))
    assert out.status_code == 200  # the contract's answer, its Error retried by the scheduler
    assert "refused the operation" in out.get_json()["Error"]
    assert "WRONGTYPE" in out.get_json()["Error"]
    unannotated = _filter_names(client, ["ok"], make_pod(model=None))
    assert unannotated["NodeNames"] == ["ok"]


def _owned_declared_pod() -> dict:
    """A declared-memory pod of a Job, with no time: its owner's runs time it."""
    pod = make_pod(model=None, **{GPU_MEMORY: "4096"})
    pod["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job",
                                           "name": "train", "uid": "j-1", "controller": True}]
    return pod


@pytest.mark.parametrize(("key", "pod"), [
    ("st:waiting", make_pod(model="resnet50")),  # read by the changes script, after the
    # record's write
    ("st:owner-runs:default/Job/train", _owned_declared_pod()),  # read after the snapshot
])
def test_a_names_mode_filter_that_errs_leaves_redis_as_it_was(client, raw_redis, key,
                                                             pod) -> None:
    # Names mode writes the pod's record in the read's pipeline: an error after it must
    # take the record back, as an answer with its Error set changes nothing.
    raw_redis.hset("st:nodes", "ok", THREE_090)
    _filter_names(client, ["ok"])  # the script's own keys exist
    raw_redis.set(key, "wrong type")
    before = {k: raw_redis.dump(k) for k in raw_redis.keys("*")}
    out = client.post("/filter", json=filter_args(pod, [make_node("ok")],
                                                  names_only=True)).get_json()
    assert "WRONGTYPE" in out["Error"]
    assert {k: raw_redis.dump(k) for k in raw_redis.keys("*")} == before


def test_the_queue_report_lists_jobs_on_gpus_no_layout_has_and_stays_small() -> None:
    def job(uid: str, node: str, index: int) -> JobRecord:
        return JobRecord(uid=uid, pod=uid, namespace="ml", model="m", task="train", node=node,
                         gpu_index=index, reserved_mib=100.0, predicted_s=10.0,
                         state="running", reserved_at=1.0)

    layouts = {"known": NodeGpus("NVIDIA-GeForce-RTX-3090", "RTX-3090", 2, 24576)}
    report = queue_report(layouts, [job("a", "ghost", 99_999_999), job("b", "known", 5),
                                    job("c", "known", 1), job("d", "known", -1)],
                          Limits(4, {}), now=2.0)
    ghost, known = report
    assert [g["index"] for g in ghost["gpus"]] == [99_999_999]
    assert ghost["layout"] is None and ghost["gpus"][0]["queue"][0]["uid"] == "a"
    assert [g["index"] for g in known["gpus"]] == [-1, 0, 1, 5]  # -1: an unreadable index
    assert [g["capacity_mib"] for g in known["gpus"]] == [None, 24576, 24576, None]
    assert known["gpus"][3]["free_mib"] is None and known["gpus"][3]["jobs"] == 1


def test_the_queues_cli_prints_valid_json_and_a_line_for_a_wrong_key(raw_redis, redis_url,
                                                                     capsys) -> None:
    import json

    from scripts import queues

    raw_redis.hset("st:nodes", "ok", THREE_090)
    raw_redis.zadd("st:jobs", {"u1": 1})
    raw_redis.hset("st:job:u1", mapping={"uid": "u1", "node": "ok", "gpu_index": "0",
                                         "reserved_mib": "nan", "predicted_s": "inf",
                                         "state": "running", "started_at": "1"})
    raw_redis.hset("st:waiting", "w1", '{"uid": "w1", "since": "-inf", "expires_at": "inf", '
                   '"needs": {"T4": ["nan", 1]}}')

    def no_constants(name: str) -> None:
        raise AssertionError(f"{name} is not JSON")

    assert queues.main(["--redis", redis_url, "--json"]) == 0
    [node] = json.loads(capsys.readouterr().out, parse_constant=no_constants)
    assert node["node"] == "ok" and node["gpus"][0]["queue"][0]["uid"] == "u1"
    raw_redis.hset("st:waiting", "w2", '{"uid": "w2", "since": 5, "expires_at": "inf", '
                   '"needs": {"T4": [1000, 60]}}')
    assert queues.main(["--redis", redis_url, "--waiting", "--json"]) == 0
    [waiter] = json.loads(capsys.readouterr().out, parse_constant=no_constants)
    assert waiter["uid"] == "w2"  # w1's since and needs are no figures: unreadable, not listed
    raw_redis.set("st:jobs", "not a sorted set")
    assert queues.main(["--redis", redis_url]) == 1
    err = capsys.readouterr().err
    assert "refused the operation" in err and "Traceback" not in err
