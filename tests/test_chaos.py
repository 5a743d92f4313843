"""A short chaos run on real processes: two extender replicas on one Redis, fuzz, racing
binds, a SIGKILLed replica, a Redis restart and outage (the long run is scripts/chaos.py)."""

from __future__ import annotations

import json

from scripts import chaos


def test_short_chaos_run_holds_every_invariant(capsys) -> None:
    code = chaos.main(["--fuzz", "300", "--binds", "400", "--json"])
    result = json.loads(capsys.readouterr().out)
    assert code == 0, result
    assert result["fuzz_cases"] == 300 and result["bind_attempts"] >= 400
    assert result["server_errors"] == result["overcommits"] == 0
    assert result["double_reservations"] == result["lost_reservations"] == 0
    assert result["passthrough_during_outage"] and result["retriable_error_during_outage"]
    assert 0 <= result["recovery_s"] < 30
