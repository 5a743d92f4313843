"""The benchmark runs end to end on a small cluster: both servers under gunicorn, the
same pods through each, and a phase profile of what the service runs."""

from __future__ import annotations

import json
import random
import threading

import orjson
import pytest
import requests
from werkzeug.serving import make_server

from bench import latency, noop_extender
from bench.cluster import make_pod
from bench.phases import PHASES
from extender.wire.kube import encode_extender_args
from scripts import bench_extender


@pytest.mark.parametrize(("mode", "gap"), [("names", "client"), ("full", "client"),
                                         ("names", "none")])
def test_a_small_case_reports_both_servers_and_the_phases(mode, gap, capsys) -> None:
    assert bench_extender.main(["--nodes", "40", "--mode", mode, "--pods", "6", "--rounds", "3",
                                "--phase-pods", "3", "--workers", "1", "--gap", gap,
                                "--json"]) == 0
    [case] = json.loads(capsys.readouterr().out)["cases"]
    assert case["nodes"] == 40 and case["mode"] == mode and case["pods"] == 6
    assert case["gap"] == gap and case["phases"]["after_answer_ms"] > 0
    assert case["noop_ms_per_pod"] > 0 and case["extender_ms_per_pod"] > 0
    assert len(case["round_ratios"]) == 3 and case["ratio"] == sorted(case["round_ratios"])[1]
    phases = case["phases"]
    assert set(phases["share"]) == set(PHASES)
    assert sum(phases["share"].values()) == pytest.approx(1.0, abs=0.01)
    assert phases["pieces_ms"] > 0 and phases["service_ms"] > 0


def test_bad_arguments_are_refused_with_a_reason(capsys) -> None:
    for argv in (["--nodes", "0"], ["--busy", "2"], ["--gpus", "65"],
                 ["--pods", "5", "--phase-pods", "6"], ["--rounds", "0"]):
        with pytest.raises(SystemExit) as exc:
            bench_extender.main(argv)
        assert exc.value.code == 2 and "must be" in capsys.readouterr().err


def test_without_a_gap_prioritize_is_sent_the_body_built_in_an_earlier_pass(monkeypatch) -> None:
    """`--gap none`: the body built for a pod's filter answer is kept and sent at once the
    next time that answer comes back; another answer gets a body of its own."""
    server = make_server("127.0.0.1", 0, noop_extender.create_app())
    threading.Thread(target=server.serve_forever, daemon=True).start()
    builds = []
    real = latency.prioritize_body
    monkeypatch.setattr(latency, "prioritize_body",
                        lambda body, answer: builds.append(body) or real(body, answer))
    pods = [orjson.dumps(encode_extender_args(make_pod(random.Random(i)),
                                              node_names=["a", "b", "c"])) for i in range(2)]
    try:
        session, built = requests.Session(), {}
        for _ in range(3):
            for i, body in enumerate(pods):
                assert latency.post_pod(session, server.server_port, i, body, built) > 0
        assert builds == pods and len(built) == 2  # built once per pod, then sent as kept
        latency.post_pod(session, server.server_port, 0, pods[0])  # the client's gap
        assert builds == [*pods, pods[0]]
    finally:
        server.shutdown()


def test_the_no_op_extender_answers_every_verb_deciding_nothing() -> None:
    client = noop_extender.create_app().test_client()
    args = encode_extender_args(make_pod(random.Random(0)), node_names=["a", "b"])
    assert client.post("/filter", json=args).get_json()["NodeNames"] == ["a", "b"]
    assert client.post("/prioritize", json=args).get_json() == [
        {"Host": "a", "Score": 0}, {"Host": "b", "Score": 0}]
    assert client.post("/bind", json={"PodName": "p", "PodNamespace": "d", "PodUID": "u",
                                      "Node": "a"}).get_json() == {"Error": ""}
