"""scripts/queues.py on a real Redis filled by the extender's own verbs."""

from __future__ import annotations

import json

from scripts import queues
from tests.builders import bind_args, filter_args, make_node, make_pod


def _place(client, store, clock, pods, node) -> None:  # noqa: ANN001
    for pod in pods:
        client.post("/filter", json=filter_args(pod, [node]))
        assert client.post("/bind", json=bind_args(pod, node["metadata"]["name"])).get_json() == {"Error": ""}


def test_report_shows_jobs_free_memory_limit_and_queue_delay(client, store, clock, redis_url,
                                                             capsys, monkeypatch) -> None:
    monkeypatch.setenv("EXTENDER_COLLOCATION_LIMIT", "3")
    node = make_node("gpu-node-0", count=1, replicas=4)
    store.put_node("gpu-node-0", None)  # the watcher does not know it: layouts come from bind
    pods = [make_pod("train-a", "ml", model="resnet50", batch=32),
            make_pod("train-b", "ml", model="mobilenet_v2", batch=32)]
    _place(client, store, clock, pods, node)
    from extender.wire.node_labels import gpus_from_node

    store.put_node("gpu-node-0", gpus_from_node(node["metadata"]["labels"], node["status"]["allocatable"]))
    first = store.job(pods[0]["metadata"]["uid"])
    store.mark_running(first.uid, started_at=clock.now)
    monkeypatch.setattr(queues.time, "time", lambda: clock.now + 100)

    assert queues.main(["--redis", redis_url, "--json"]) == 0
    (entry,) = json.loads(capsys.readouterr().out)
    (gpu,) = entry["gpus"]
    jobs = {j["pod"]: j for j in gpu["queue"]}
    assert set(jobs) == {"ml/train-a", "ml/train-b"} and gpu["jobs"] == 2 and gpu["limit"] == 3
    assert gpu["free_mib"] == round(24576 - sum(j["reserved_mib"] for j in jobs.values()), 1)
    assert jobs["ml/train-a"]["state"] == "running"
    assert jobs["ml/train-a"]["remaining_s"] == round(max(0, first.predicted_s - 100), 1)
    assert jobs["ml/train-b"]["remaining_s"] == round(jobs["ml/train-b"]["predicted_s"], 1)
    assert gpu["queue_delay_s"] == round(sum(j["remaining_s"] for j in jobs.values()), 1)

    assert queues.main(["--redis", redis_url, "--node", "gpu-node-0"]) == 0
    table = capsys.readouterr().out
    assert "GPU 0:" in table and "2/3 jobs" in table and "ml/train-a" in table


def test_unknown_node_and_unreachable_redis_are_clear_errors(redis_url, redis_client, capsys) -> None:
    assert queues.main(["--redis", redis_url, "--node", "nope"]) == 1
    assert "nope" in capsys.readouterr().err
    assert queues.main(["--redis", "redis://127.0.0.1:1/0"]) == 1
    assert "unreachable" in capsys.readouterr().err
