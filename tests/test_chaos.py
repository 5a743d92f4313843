"""scripts/chaos.py tells the truth: its bookkeeping without processes (a dead thread, a
scenario that ran less than asked, a figure not measured each fail the run; a read timeout
is an outcome, not a silent death), then a short run on real processes (two replicas on
one Redis; the long run is `schedtune chaos --json`)."""

from __future__ import annotations

import json
import random
import socket
import time
from collections import Counter

import pytest
import requests

from scripts import chaos


def clean_report(**changes: object) -> dict:
    """The smallest report `judge` accepts: one scenario done as asked, every figure right."""
    report = {"thread_deaths": [], "asked": {"racing_bind_answers": 10},
              "executed": {"racing_bind_answers": 10},
              "figures": {name: wanted for name, (wanted, _) in chaos.EXPECTED.items()}}
    return {**report, **changes}


def test_a_clean_report_passes() -> None:
    assert chaos.judge(clean_report()) == []


def test_a_thread_that_dies_is_reported_with_its_exception_and_fails_the_run() -> None:
    ledger = chaos.Ledger()

    def racer() -> None:
        raise requests.ReadTimeout("read timed out")

    ledger.run([ledger.thread("racer-0", racer), ledger.thread("racer-1", lambda: None)])
    assert ledger.deaths == ["racer-0: ReadTimeout: read timed out"]
    assert chaos.judge(clean_report(thread_deaths=ledger.deaths)) == [
        "thread died: racer-0: ReadTimeout: read timed out"]


def test_a_racer_hit_by_an_unexpected_exception_dies_loudly() -> None:
    class Broken(chaos.World):
        def call(self, *args: object, **kwargs: object) -> chaos.Answer:
            raise KeyError("Nodes")

    # No processes: nothing but `call` is reached before it raises.
    world = Broken(None, None, None, None, chaos.Ledger())  # type: ignore[arg-type]
    race = chaos.Race(world, binds=10, deadline=time.monotonic() + 10)
    race.faults_done.set()
    world.ledger.run([world.ledger.thread("racer-0", lambda: race.racer(1))])
    assert world.ledger.deaths == ["racer-0: KeyError: 'Nodes'"]
    assert race.binds_answered == 0


def test_a_scenario_that_ran_less_than_asked_fails_the_run() -> None:
    assert chaos.judge(clean_report(executed={"racing_bind_answers": 9})) == [
        "racing_bind_answers: executed 9 of 10 asked"]
    assert chaos.judge(clean_report(executed={})) == ["racing_bind_answers: executed 0 of 10 asked"]


def test_a_figure_off_or_not_measured_fails_the_run_naming_its_area() -> None:
    figures = clean_report()["figures"]
    off = chaos.judge(clean_report(figures={**figures, "second_binds_accepted": 3}))
    assert off == ["second_binds_accepted = 3, expected 0 "
                   "(bind rules (idempotent per UID and node))"]
    missing = {k: v for k, v in figures.items() if k != "crashed_workers"}
    assert chaos.judge(clean_report(figures=missing))[0].startswith("crashed_workers = None")


def test_no_answer_is_an_outcome_not_an_exception(monkeypatch) -> None:
    monkeypatch.setattr(chaos, "HTTP_TIMEOUT_S", 0.2)
    with socket.socket() as server, requests.Session() as http:
        server.bind(("127.0.0.1", 0))
        server.listen()  # the kernel accepts; nobody ever answers
        url = f"http://127.0.0.1:{server.getsockname()[1]}/filter"
        assert chaos.post(http, url, "filter", b"{}").outcome == "timeout"
        server.close()
        assert chaos.post(http, url, "filter", b"{}").outcome == "connection_error"


@pytest.mark.parametrize(("verb", "status", "content", "expected"), [
    ("filter", 200, b'{"Nodes": null, "NodeNames": [], "FailedNodes": {}, "Error": ""}', "ok"),
    ("filter", 200, b'{"Error": "store unreachable; retry"}', "error"),
    ("filter", 400, b'{"Error": "body is not valid JSON"}', "refused"),
    ("prioritize", 503, b'{"Error": "retry"}', "retriable"),
    ("prioritize", 503, b"<html>busy</html>", "server_error"),
    ("filter", 500, b"<html>Internal Server Error</html>", "server_error"),
    ("bind", 502, b'{"Error": "x"}', "server_error"),
    ("filter", 400, b"<html>Bad Request</html>", "non_contract"),
    ("bind", 401, b"", "unauthorized"),
    ("prioritize", 200, b'[{"Host": "gpu-0", "Score": 3}]', "ok"),
    ("volcano/predicate", 200, b'{"status": "no room", "code": 2}', "ok"),
    ("volcano/predicate", 200, b'{"status": "bad", "code": 1}', "error"),
    ("volcano/allocate", 200, b"{}", "ok"),
    ("volcano/allocate", 503, b'{"error": "retry"}', "retriable"),
])
def test_outcomes_follow_each_contract(verb: str, status: int, content: bytes,
                                       expected: str) -> None:
    assert chaos.outcome(verb, status, content)[0] == expected


def test_replaced_workers_are_counted_from_gunicorns_log() -> None:
    log = "\n".join([
        "[1] [INFO] Booting worker with pid: 11", "[1] [INFO] Booting worker with pid: 12",
        "[1] [WARNING] Worker (pid:11) was sent SIGSEGV!", "[1] [INFO] Booting worker with pid: 13",
        "[1] [CRITICAL] WORKER TIMEOUT (pid:12)",
        "[1] [ERROR] Worker (pid:12) was sent SIGKILL! Perhaps out of memory?",
        "[1] [INFO] Booting worker with pid: 14"])
    replaced, reasons = chaos.worker_deaths(log, workers=2)
    assert replaced == 2
    assert reasons == Counter({"Worker was sent SIGSEGV": 1, "WORKER TIMEOUT": 1,
                               "Worker was sent SIGKILL": 1})
    assert chaos.worker_deaths(log.split("\n[1] [WARNING]")[0], workers=2)[0] == 0


def test_hostile_requests_carry_what_issue_14_lists() -> None:
    items = chaos.hostile_requests(random.Random(1), 400, auth=True)
    assert len(items) == 400
    assert set(kind for kind, _ in items) == set(chaos.GENERATORS)
    raw = [body for _, (_, body, _) in items if isinstance(body, bytes)]
    assert chaos.NESTED_JSON in raw and len(chaos.NESTED_JSON) >= 360_000
    text = json.dumps([body for _, (_, body, _) in items if not isinstance(body, bytes)])
    assert "0" * 5000 + "32" in text and "x" * 300 in text and "9" * 300 in text
    assert {auth for _, (_, _, auth) in items} == {"token", "none", "wrong"}
    no_auth = chaos.hostile_requests(random.Random(1), 400, auth=False)
    assert {auth for _, (_, _, auth) in no_auth} == {"token"}


def test_every_fault_falls_inside_the_stream_interleaved() -> None:
    plan = chaos.fault_plan(redis_kills=5, replica_kills=3, slow_clients=4)
    assert Counter(kind for _, kind, _ in plan) == {"redis": 5, "replica": 3, "slow_clients": 1}
    shares = [share for share, _, _ in plan]
    assert shares == sorted(shares) and 0 < shares[0] and shares[-1] < 1
    assert [arg for _, kind, arg in plan if kind == "replica"] == [0, 1, 0]
    assert [kind for _, kind, _ in plan][:2] == ["replica", "redis"]


def test_short_chaos_run_executes_what_it_was_asked_and_holds_every_invariant(capsys) -> None:
    # The restart budget is loose here (a test machine under load); the full run enforces 2 s.
    code = chaos.main(["--fuzz", "300", "--binds", "400", "--redis-kills", "2",
                       "--replica-kills", "1", "--slow-hold-s", "3", "--restart-budget-s", "30",
                       "--json"])
    result = json.loads(capsys.readouterr().out)
    assert result["failures"] == [] and result["ok"] and code == 0, result["failures"]
    asked, executed = result["asked"], result["executed"]
    assert asked["hostile_requests"] == 300 and executed["hostile_requests"] == 300
    assert asked["racing_bind_answers"] == 400 and executed["racing_bind_answers"] >= 400
    assert executed["redis_kills"] == 2 and executed["replica_kills"] == 1
    assert executed["slow_clients"] == 4 and executed["replicas_receiving_binds"] == 2
    assert all(executed[key] >= n for key, n in asked.items())
    kinds = result["hostile"]["by_kind"]
    for kind in ("deep_json", "huge_number", "bad_names", "unauthenticated", "mutated",
                 "fake_layout", "second_bind", "deallocate_kube_bind", "made_up_allocate",
                 "unauthenticated_bind", "unauthenticated_filter"):
        assert kinds.get(kind, 0) > 0, kind
    figures = result["figures"]
    assert figures["server_errors"] == figures["crashed_workers"] == figures["overcommits"] == 0
    assert figures["double_reservations"] == figures["lost_reservations"] == 0
    assert figures["lost_reservations_after_redis_kill"] == 0
    assert len(result["redis_kills"]["kills"]) == 2 and len(result["replica_kills"]["kills"]) == 1
    assert 0 < figures["restart_to_first_good_answer_s"]["max"] < 30
    assert result["slow_clients"]["well_formed_sent_while_held"] > 0
    assert result["thread_deaths"] == []
