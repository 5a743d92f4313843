"""Separate many-orders runs read together: a variant of ours against the baselines of an
earlier run, matched order by order; reports that cannot be matched are clear errors."""

from __future__ import annotations

import collections
import copy
import json
import random

import pytest

from replay.combine import combine
from replay.report import as_text
from replay.workloads import ReplayError
from scripts import replay

HEADER = {"jobs": 3, "cluster": {"nodes": 1, "gpus": 1, "types": ["T4"],
                                 "collocation_limits": {"T4": 4}}, "oracles": [],
          "world": "perturbed (2): noise", "interference": "uniform", "startup_s": 10.0,
          "assumptions": [], "ours_configured_by": {}}


def _figures(makespan: float, jct: float) -> dict:
    return {"makespan_s": makespan, "avg_jct_s": jct, "p95_jct_s": jct, "mem_util": 0.5,
            "oom_count": 0, "retries": 0, "failed": 0, "placed_on_arrival": None}


def _report(orders: int, policies: dict[str, list[tuple[float, float]]], **header) -> dict:
    per_order = [{"order": n + 1, "policies": {name: _figures(*runs[n])
                                               for name, runs in policies.items()}}
                 for n in range(orders)]
    return {**HEADER, "workload": f"paper, {orders} orders", "orders": orders,
            "per_order": per_order, "summary": {}, "versus": {}, **header}


BASE = _report(3, {"schedtune-paper": [(100, 10), (100, 10), (100, 10)],
                   "ours": [(110, 9), (95, 12), (100, 10)]})
VARIANT = _report(2, {"ours": [(90, 11), (104, 10)]},
                  ours_configured_by={"EXTENDER_HOLD_FOR": "0"})


def test_a_variant_is_compared_with_the_baselines_and_ours_of_another_run() -> None:
    report = combine([("base", BASE), ("variant", VARIANT)], "ours@variant")
    assert [o["order"] for o in report["per_order"]] == [1, 2]  # the orders both replayed
    assert report["workload"] == "paper, 2 orders replayed by all of base, variant (of 3, 2)"
    assert list(report["per_order"][0]["policies"]) == ["schedtune-paper", "ours@base",
                                                        "ours@variant"]
    versus = report["versus"]
    # Makespan gaps against the paper's policy -10 and +4 %; against ours@base -18.2, +9.5 %.
    assert versus["schedtune-paper"]["makespan_s"] == {
        "wins": 1, "losses": 1, "ties": 0, "median_gap_pct": -3.0, "medians_gap_pct": -3.0,
        "medians_gap_90pct": [-10.0, 4.0], "worst_gap_pct": 4.0, "behind_5pct": 0}
    assert versus["ours@base"]["makespan_s"]["behind_5pct"] == 1
    assert versus["ours@base"]["avg_jct_s"]["wins"] == 1
    assert report["combined"] == {
        "base": {"policies": ["ours", "schedtune-paper"], "differs": {}},
        "variant": {"policies": ["ours"],
                    "differs": {"ours_configured_by": {"EXTENDER_HOLD_FOR": "0"}}}}
    assert report["summary"]["ours@variant"]["makespan_s"]["median"] == 97.0


def test_the_reference_is_ours_only_where_one_report_ran_it() -> None:
    paper_only = _report(3, {"schedtune-paper": [(100, 10)] * 3}, startup_s=10.1)
    report = combine([("base", BASE), ("paper", paper_only)])
    assert report["reference"] == "ours"
    assert set(report["versus"]) == {"schedtune-paper@base", "schedtune-paper@paper"}
    assert report["combined"]["paper"]["differs"] == {"startup_s": 10.1}
    with pytest.raises(ReplayError, match="--reference one of schedtune-paper, ours@base"):
        combine([("base", BASE), ("variant", VARIANT)])
    with pytest.raises(ReplayError, match="--reference ours: not among"):
        combine([("base", BASE), ("variant", VARIANT)], "ours")


def test_pooled_runs_are_one_policy_whose_figures_per_order_are_their_mean() -> None:
    """Runs of the same orders under a negligible change (start-up 10 s and 10.1 s) read as
    one run each policy averaged, so a per-order comparison sits above one run's spread."""
    jitter = _report(3, {"schedtune-paper": [(90, 10), (110, 10), (100, 14)],
                         "ours": [(100, 11), (95, 8), (120, 10)]}, startup_s=10.1)
    jitter["per_order"][0]["policies"]["ours"].update(oom_count=2, oom_max_per_type=2)
    base = copy.deepcopy(BASE)
    base["per_order"][0]["policies"]["ours"].update(oom_count=1, oom_max_per_type=1)
    oracle = _report(3, {"oracle": [(80, 8)] * 3}, oracles=["oracle"])
    report = combine([("base", base), ("jitter", jitter), ("oracle", oracle)], pool=True)
    assert report["reference"] == "ours"
    assert report["workload"].endswith("(of 3, 3, 3), each policy's figures the mean over the "
                                       "reports that ran it (oom_max_per_type: the largest)")
    first = report["per_order"][0]["policies"]
    assert list(first) == ["schedtune-paper", "ours", "oracle"]
    assert first["ours"] | {"oracle": None} == {
        **_figures(105.0, 10.0), "oom_count": 1.5, "oom_max_per_type": 2,
        "placed_on_arrival": None, "oracle": None, "runs": 2}
    assert first["oracle"]["oracle"] is False and first["oracle"]["runs"] == 1
    assert report["oracles"] == ["oracle"]
    # Per order, ours / paper's: makespan 105/95, 95/105, 110/100; JCT 10/10, 10/10, 10/12.
    versus = report["versus"]["schedtune-paper"]
    assert (versus["makespan_s"]["wins"], versus["makespan_s"]["behind_5pct"]) == (1, 2)
    assert versus["avg_jct_s"] | {"medians_gap_90pct": None} == {
        "wins": 1, "losses": 0, "ties": 2, "median_gap_pct": 0.0, "medians_gap_pct": 0.0,
        "medians_gap_90pct": None, "worst_gap_pct": 0.0, "behind_5pct": 0}
    assert report["combined"]["jitter"]["differs"] == {"startup_s": 10.1}
    as_text(report)
    # Two configurations of ours are two policies: never averaged into one.
    with pytest.raises(ReplayError, match="--pool reads runs of one policy configuration"):
        combine([("base", BASE), ("variant", VARIANT)], pool=True)


@pytest.mark.parametrize(("change", "message"), [
    (lambda r: r.update(world="lofo"), "variant replayed other world than base"),
    (lambda r: r.update(jobs=4), "variant replayed other jobs than base"),
    (lambda r: r.update(workload="generated, 2 orders"), "replayed workload 'generated'"),
    (lambda r: r.pop("per_order"), "variant: not the JSON of a replay with --orders"),
    (lambda r: r.pop("cluster"), "its header .* is not a replay's"),
    (lambda r: r.update(interference=None), "its header .* is not a replay's"),
    (lambda r: r.update(oracles="oracle"), "its header .* is not a replay's"),
    (lambda r: r["per_order"][1]["policies"].update(extra=r["per_order"][1]["policies"]["ours"]),
     "the same policies"),
    (lambda r: r["per_order"][0]["policies"]["ours"].pop("avg_jct_s"), "not a number"),
    (lambda r: r["per_order"][1].update(order="2"), "an order that is not a number"),
    (lambda r: r["per_order"][0]["policies"]["ours"].update(makespan_s="long"),
     "an order that is not a number"),
    (lambda r: r["per_order"][0]["policies"]["ours"].update(avg_jct_s=float("nan")),
     "an order that is not a number"),
    (lambda r: [o.update(order=o["order"] + 10) for o in r["per_order"]], "share no order"),
    (lambda r: r["per_order"][0]["policies"]["ours"].update(makespan_s=-57902.0),
     "numbers >= 0"),
    (lambda r: [o["policies"].update({"declared@base": o["policies"]["ours"]})
                for o in r["per_order"]], "names without '@'"),
])
def test_reports_that_cannot_be_matched_are_clear_errors(change, message) -> None:
    variant = copy.deepcopy(VARIANT)
    change(variant)
    with pytest.raises(ReplayError, match=message):
        combine([("base", BASE), ("variant", variant)], "ours@base")
    with pytest.raises(ReplayError, match="two reports or more"):
        combine([("base", BASE)])


def test_the_cli_reads_json_reports_and_says_what_is_wrong_with_a_file(tmp_path,
                                                                      capsys) -> None:
    base, variant = tmp_path / "base.json", tmp_path / "variant.json"
    base.write_text(json.dumps(BASE))
    variant.write_text(json.dumps(VARIANT))
    assert replay.main(["--combine", str(base), str(variant), "--reference", "ours@variant"]) == 0
    text = capsys.readouterr().out
    assert "  variant: ours; run with ours_configured_by {'EXTENDER_HOLD_FOR': '0'}" in text
    assert ("ours@variant vs schedtune-paper: wins-losses makespan 1-1 (median -3.0 %, "
            "medians -3.0 % [-10.0, +4.0], worst +4.0 %, > 5 % behind in 0)") in text
    # The same file twice: its policies are told apart by position.
    assert replay.main(["--combine", str(base), str(base), "--json"]) == 2
    assert "ours@base#1, schedtune-paper@base#2" in capsys.readouterr().err
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    assert replay.main(["--combine", str(base), str(broken)]) == 2
    assert "broken.json: not a JSON report" in capsys.readouterr().err
    assert replay.main(["--combine", str(base), str(tmp_path / "missing.json")]) == 2
    assert "missing.json" in capsys.readouterr().err
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    assert replay.main(["--combine", str(base), str(deep)]) == 2
    assert "deep.json: not a replay's JSON report (nests too deep)" in capsys.readouterr().err
    jitter = tmp_path / "jitter.json"
    jitter.write_text(json.dumps({**BASE, "startup_s": 10.1}))
    assert replay.main(["--combine", str(base), str(jitter), "--pool"]) == 0
    text = capsys.readouterr().out
    assert "the mean over the reports that ran it" in text
    assert "ours vs schedtune-paper: wins-losses makespan" in text


def _paths(value, prefix=()):
    """Every key path into a JSON value (lists: their first three items)."""
    items = value.items() if isinstance(value, dict) else \
        enumerate(value[:3]) if isinstance(value, list) else ()
    for key, item in items:
        yield (*prefix, key)
        yield from _paths(item, (*prefix, key))


@pytest.mark.parametrize("pool", [False, True])
def test_a_report_broken_anywhere_is_summarised_or_refused_never_a_crash(pool) -> None:
    """Hundreds of reports with one to three values replaced or removed: each is either
    combined and printed, or refused with a `ReplayError`."""
    rng = random.Random(17)
    junk = [None, "x", 0, -1, 1.5, float("nan"), True, [], {}, [1], {"a": 1}]
    source = {**VARIANT, "ours_configured_by": {}} if pool else VARIANT  # pool: one config
    paths = list(_paths(source))
    outcomes = collections.Counter()
    for _ in range(400):
        variant = copy.deepcopy(source)
        for path in rng.sample(paths, rng.randint(1, 3)):
            parent = variant
            try:
                for key in path[:-1]:
                    parent = parent[key]
                if isinstance(parent, dict) and rng.random() < 0.3:
                    parent.pop(path[-1], None)
                else:
                    parent[path[-1]] = rng.choice(junk)
            except (KeyError, IndexError, TypeError):
                continue  # an earlier change removed the way there
        try:
            as_text(combine([("base", BASE), ("variant", variant)],
                            "ours" if pool else "ours@base", pool))
            outcomes["combined"] += 1
        except ReplayError:
            outcomes["refused"] += 1
    assert outcomes["combined"] > 30 and outcomes["refused"] > 50  # -1: refused since figures >= 0


@pytest.mark.parametrize("argv", [
    ["--combine", "a.json", "b.json", "--orders", "4"],
    ["--combine", "a.json", "b.json", "--world", "lofo"],
    ["--reference", "ours"],
    ["--pool"],
])
def test_combining_and_replaying_are_not_mixed(argv, capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        replay.main(argv)
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and ("replays nothing: leave out --" in err
                                      or "--reference and --pool are for --combine" in err)
