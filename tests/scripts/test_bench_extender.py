"""The benchmark runs end to end on a small cluster: both servers under gunicorn, the
same pods through each, and a phase profile of what the service runs."""

from __future__ import annotations

import json

import pytest

from bench.phases import PHASES
from scripts import bench_extender


@pytest.mark.parametrize("mode", ["names", "full"])
def test_a_small_case_reports_both_servers_and_the_phases(mode, capsys) -> None:
    assert bench_extender.main(["--nodes", "40", "--mode", mode, "--pods", "6", "--rounds", "3",
                                "--phase-pods", "3", "--workers", "1", "--json"]) == 0
    [case] = json.loads(capsys.readouterr().out)["cases"]
    assert case["nodes"] == 40 and case["mode"] == mode and case["pods"] == 6
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
