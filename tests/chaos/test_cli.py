"""scripts/chaos.py end to end: short runs on real processes (two replicas on one Redis,
and on a Sentinel topology; the long runs are `schedtune chaos --json` and `schedtune
chaos --sentinel --json`) execute what they were asked and hold every invariant."""

from __future__ import annotations

import json

from scripts import chaos


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
    assert executed["registry_scenarios"] == executed["growth_scenarios"] == 3
    assert result["growth"]["keys_audited"] > 100 and result["growth"]["flood_posted"] > 0
    for name in ("registry_poison_bad_answers", "registry_poison_not_reported",
                 "registry_reloads_without_change", "churn_non_contract_answers",
                 "replicas_disagreeing_after_wipe", "decisions_trimmed_before_posted",
                 "flood_over_namespace_share", "keys_without_bound"):
        assert figures[name] == 0, name
    assert sum(n for k, n in result["registry"].items() if k.startswith("churn:")) == 16


def test_short_sentinel_run_kills_the_master_twice_and_loses_no_acknowledged_bind(
        capsys, tmp_path) -> None:
    """`--sentinel` with 2 master kills (the long run is `schedtune chaos --sentinel`)."""
    code = chaos.main(["--sentinel", "--master-kills", "2", "--binds", "200",
                       "--kill-every-s", "2", "--json", "--keep-failed", str(tmp_path)])
    result = json.loads(capsys.readouterr().out)
    assert result["failures"] == [] and result["ok"] and code == 0, (
        result["failures"], result.get("kept"), [k.get("lost_sample") for k in result["kills"]])
    figures = result["figures"]
    assert figures["master_kills"] == len(result["kills"]) == 2
    assert 0 < figures["failover_s"]["min"] <= figures["failover_s"]["max"] < 30
    for name in ("acknowledged_lost_after_failover", "binds_passed_through_unreserved",
                 "overcommits", "split_brain_writes", "double_reservations", "server_errors",
                 "non_contract_answers"):
        assert figures[name] == 0, name
    assert all(k["acknowledged_before"] > 0 for k in result["kills"])  # kills under load
    cost = result["durability_cost_ms"]
    assert cost["samples"] > 0 and cost["reserve_confirm_p50_with_wait"] > 0
