"""chaos/report.py: `judge` fails the run for a dead thread, a scenario that ran less than
asked, and a figure off or not measured (naming its area)."""

from __future__ import annotations

from chaos.report import EXPECTED, judge


def clean_report(**changes: object) -> dict:
    """The smallest report `judge` accepts: one scenario done as asked, every figure right."""
    report = {"thread_deaths": [], "asked": {"racing_bind_answers": 10},
              "executed": {"racing_bind_answers": 10},
              "figures": {name: wanted for name, (wanted, _) in EXPECTED.items()}}
    return {**report, **changes}


def test_a_clean_report_passes() -> None:
    assert judge(clean_report()) == []


def test_a_scenario_that_ran_less_than_asked_fails_the_run() -> None:
    assert judge(clean_report(executed={"racing_bind_answers": 9})) == [
        "racing_bind_answers: executed 9 of 10 asked"]
    assert judge(clean_report(executed={})) == ["racing_bind_answers: executed 0 of 10 asked"]


def test_a_figure_off_or_not_measured_fails_the_run_naming_its_area() -> None:
    figures = clean_report()["figures"]
    off = judge(clean_report(figures={**figures, "second_binds_accepted": 3}))
    assert off == ["second_binds_accepted = 3, expected 0 "
                   "(bind rules (idempotent per UID and node))"]
    missing = {k: v for k, v in figures.items() if k != "crashed_workers"}
    assert judge(clean_report(figures=missing))[0].startswith("crashed_workers = None")
