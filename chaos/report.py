"""The chaos run's report: asked against executed per scenario, the enforced figures
(`EXPECTED`) and the reported ones, the JSON document, and `judge`: why the run fails."""

from __future__ import annotations

import argparse
import statistics
from collections import Counter
from typing import Any

from chaos.answers import NO_ANSWER
from chaos.audit import workers_report
from chaos.race import Race
from chaos.growth import SCENARIOS as GROWTH_SCENARIOS
from chaos.registry import SCENARIOS as REGISTRY_SCENARIOS
from chaos.world import World

# What each enforced figure must be, and the part of #14 a failure points to.
EXPECTED: dict[str, tuple[Any, str]] = {
    "server_errors": (0, "hostile input"),
    "non_contract_answers": (0, "hostile input"),
    "hostile_unanswered": (0, "hostile input / worker model"),
    "hostile_names_in_state": (0, "hostile input (name validation)"),
    "crashed_workers": (0, "hostile input / worker model"),
    "replicas_exited_unasked": (0, "hostile input / worker model"),
    "unanswered_outside_faults": (0, "worker model"),
    "unanswered_while_slow_clients_held": (0, "worker model"),
    "overcommits": (0, "bind rules"),
    "reservations_on_missing_gpus": (0, "bind rules"),
    "double_reservations": (0, "bind rules"),
    "lost_reservations": (0, "bind rules / store"),
    "fake_layout_overcommits": (0, "bind rules (layouts capped at the watcher's)"),
    "second_binds_accepted": (0, "bind rules (idempotent per UID and node)"),
    "kube_binds_released_by_deallocate": (0, "bind rules (deallocate)"),
    "made_up_allocations_held": (0, "bind rules (allocate)"),
    "never_expiring_allocations": (0, "bind rules (allocate)"),
    "unauthenticated_not_refused": (0, "authentication"),
    "unauthenticated_state_changes": (0, "authentication"),
    "passthrough_failed_during_redis_outage": (0, "store outage handling"),
    "retriable_error_missing_during_redis_outage": (0, "store outage handling"),
    "replica_restarts_without_good_answer": (0, "restarts (item 5)"),
    "restarts_over_budget": (0, "restarts (item 5)"),
    "secrets_in_logs": (0, "logging"),
    "registry_poison_bad_answers": (0, "registry (one reader, #50)"),
    "registry_poison_not_reported": (0, "registry (/readyz, #50)"),
    "registry_reloads_without_change": (0, "registry (reload cost, #50)"),
    "replica_start_failures_with_poisoned_registry": (0, "registry (#50)"),
    "churn_non_contract_answers": (0, "verbs' error shapes (#50)"),
    "replicas_disagreeing_after_wipe": (0, "registry identity (#50)"),
    "decisions_trimmed_before_posted": (0, "decision log fairness (#50)"),
    "flood_over_namespace_share": (0, "decision log fairness (#50)"),
    "keys_without_bound": (0, "growing state (#50)"),
}


def judge(report: dict[str, Any]) -> list[str]:
    """Why the run fails: dead threads, scenarios that executed less than asked, figures
    other than `EXPECTED` (a figure not measured fails too)."""
    failures = [f"thread died: {death}" for death in report["thread_deaths"]]
    for key, asked in report["asked"].items():
        done = report["executed"].get(key, 0)
        if done < asked:
            failures.append(f"{key}: executed {done} of {asked} asked")
    for name, (wanted, area) in EXPECTED.items():
        value = report["figures"].get(name)
        if value != wanted:
            failures.append(f"{name} = {value}, expected {wanted} ({area})")
    return failures


def summary(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {"min": round(min(values), 3), "median": round(statistics.median(values), 3),
            "max": round(max(values), 3)}


def ending(counter: Counter, suffixes: tuple[str, ...]) -> int:
    """How many "verb:outcome" counts end in one of `suffixes`."""
    return sum(n for key, n in counter.items() if key.endswith(suffixes))


def figures(world: World, args: argparse.Namespace, faults: dict[str, list],
            checked: dict[str, int], found: dict[str, int], workers: dict[str, Any]) -> dict:
    """The enforced figures (`EXPECTED`), then the reported ones."""
    counts = world.ledger.counts
    fig, kills = counts["figures"], faults["redis"]
    answered = [*counts["hostile_outcomes"].items(), *counts["race"].items(),
                *counts["attack_setup"].items(), *counts["redis_outage_probes"].items()]
    restarts = [r["restart_to_first_good_answer_s"] for r in faults["replica"]]
    good = [r for r in restarts if r is not None]
    return {
        "server_errors": sum(n for k, n in answered if k.endswith(":server_error")),
        "non_contract_answers": sum(n for k, n in answered if k.endswith(":non_contract")),
        "hostile_unanswered": ending(counts["hostile_outcomes"], NO_ANSWER),
        "hostile_names_in_state": found["names"],
        "crashed_workers": workers["crashed"],
        "replicas_exited_unasked": world.replicas.exited_unasked(),
        "unanswered_outside_faults": ending(counts["race_during_none"], NO_ANSWER),
        "unanswered_while_slow_clients_held": ending(counts["race_during_slow_clients"], NO_ANSWER),
        **{k: checked[k] for k in ("overcommits", "reservations_on_missing_gpus",
                                   "lost_reservations")},
        "double_reservations": checked["double_reservations"] + fig["double_reservations"],
        **{k: fig[k] for k in ("fake_layout_overcommits", "second_binds_accepted",
                               "kube_binds_released_by_deallocate", "made_up_allocations_held",
                               "never_expiring_allocations", "unauthenticated_not_refused")},
        "unauthenticated_state_changes": fig["unauthenticated_state_changes"] + found["unauth"],
        "passthrough_failed_during_redis_outage": sum(
            k["probes"]["passthrough_failed"] for k in kills),
        "retriable_error_missing_during_redis_outage": sum(
            k["probes"]["retriable_error_missing"] for k in kills),
        "replica_restarts_without_good_answer": len(restarts) - len(good),
        "restarts_over_budget": sum(1 for r in good if r > args.restart_budget_s),
        "secrets_in_logs": workers["secrets_in_logs"],
        **found["registry"], **found["growth"],
        "restart_to_first_good_answer_s": summary(good),
        "lost_reservations_after_redis_kill": sum(k["lost"] for k in kills),
        "released_reservations_back_after_redis_kill": sum(k["released_but_back"] for k in kills),
    }


def asked_and_executed(world: World, args: argparse.Namespace, state: Race,
                       rounds: int) -> tuple[dict[str, int], dict[str, int]]:
    counts = world.ledger.counts
    kinds = counts["hostile_asked"]
    attacks = ["fake_layout", "second_bind", "deallocate_kube_bind", "made_up_allocate"]
    attacks += ["unauthenticated"] if world.token else []
    asked = {"hostile_requests": args.fuzz, "attack_rounds": rounds,
             "racing_bind_answers": args.binds, "replicas_receiving_binds": 2,
             "redis_kills": args.redis_kills, "replica_kills": args.replica_kills,
             "slow_clients": args.slow_clients, "registry_scenarios": REGISTRY_SCENARIOS,
             "growth_scenarios": GROWTH_SCENARIOS,
             **{f"hostile:{k}": n for k, n in kinds.items()}}
    executed = {
        "hostile_requests": sum(counts["hostile"].values()),
        "attack_rounds": min(counts["attacks"][f"{a}_rounds"] for a in attacks),
        "racing_bind_answers": state.binds_answered,
        "replicas_receiving_binds": sum(1 for i in (0, 1)
                                        if counts["race"][f"bind_requests_to_replica_{i}"]),
        **{k: counts["executed"][k] for k in ("redis_kills", "replica_kills", "slow_clients",
                                              "registry_scenarios", "growth_scenarios")},
        **{f"hostile:{k}": counts["hostile"][k] for k in kinds}}
    return asked, executed


def report(world: World, args: argparse.Namespace, state: Race, faults: dict[str, list],
           checked: dict[str, int], found: dict[str, int], rounds: int) -> dict[str, Any]:
    ledger, counts = world.ledger, world.ledger.counts
    workers = workers_report(world.replicas, world.token)
    asked, executed = asked_and_executed(world, args, state, rounds)
    fig = figures(world, args, faults, checked, found, workers)
    by_verb = Counter()
    for key, n in counts["race"].items():
        if ":" in key:
            by_verb[key.split(":")[0]] += n
    slow = counts["race_during_slow_clients"]
    result = {
        "ok": False, "failures": [], "asked": asked, "executed": executed,
        "thread_deaths": list(ledger.deaths), "figures": fig,
        "requests": sum(sum(counts[s].values()) for s in (
            "hostile", "attack_setup", "redis_outage_probes")) + sum(by_verb.values()),
        "hostile": {"by_kind": dict(counts["hostile"]), "by_verb": dict(counts["hostile_verbs"]),
                    "outcomes": dict(counts["hostile_outcomes"]),
                    "auth": "bearer token" if world.token else "none (--no-auth)"},
        "attacks": {"rounds": dict(counts["attacks"]), "setup": dict(counts["attack_setup"])},
        "race": {"requests_by_verb": dict(by_verb),
                 "bind_requests_by_replica": [counts["race"][f"bind_requests_to_replica_{i}"]
                                              for i in (0, 1)],
                 "binds_answered": state.binds_answered, "binds_held_at_end": len(state.bound),
                 "releases": counts["race"]["releases"],
                 "outcomes_by_window": {s.removeprefix("race_during_"): dict(c)
                                        for s, c in counts.items() if s.startswith("race_during_")},
                 "max_latency_s_by_window": {k.split(":")[1]: round(v, 3)
                                             for k, v in ledger.peaks.items()}},
        "replica_kills": {"kills": faults["replica"], "budget_s": args.restart_budget_s,
                          "restart_to_first_good_answer_s": fig["restart_to_first_good_answer_s"],
                          "how": "SIGKILL to the gunicorn master and its workers (process group)"},
        "redis_kills": {"kills": faults["redis"],
                        "outage_s": summary([k["outage_s"] for k in faults["redis"]]),
                        "probe_outcomes": dict(counts["redis_outage_probes"]),
                        "note": "lost: reservations held, or binds answered, before a SIGKILL "
                                "and missing after the restart from the AOF (appendfsync "
                                "everysec); reported, not enforced"},
        "slow_clients": {"windows": faults["slow_clients"],
                         "well_formed_sent_while_held": sum(slow.values()),
                         "answered_while_held": sum(slow.values()) - ending(slow, NO_ANSWER),
                         "max_latency_while_held_s": round(
                             ledger.peaks.get("latency_s:slow_clients", 0.0), 3)},
        "registry": dict(counts["registry"]), "growth": dict(counts["growth"]),
        "audit": checked, "workers": workers, "samples": dict(ledger.samples),
    }
    result["failures"] = judge(result)
    result["ok"] = not result["failures"]
    return result
