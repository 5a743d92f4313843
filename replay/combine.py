"""Separate `--orders` runs of one workload read side by side, as if replayed together.

A setting of ours (`EXTENDER_*`) is evaluated in a run of ours alone, against the
baselines of an earlier run; how far a negligible change of the world moves each
policy is one run against another. Reports are matched order by order (the orders
they share); a policy that more than one report replayed is named after its file
(``ours@variant``). The workload, its jobs, the cluster and the world must be the
same; what else the runs were run with (start-up, ours' settings) may differ and is
listed.

Pooled (`pool`), the reports are runs of the same orders under changes too small to
matter (start-up 10 s and 10.1 s): a policy several of them replayed is one policy,
each order's figures the mean over its runs, so a per-order comparison reads above
the spread of a single run.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Sequence
from typing import Any

from replay.orders import FIGURES, VERSUS, summarise
from replay.workloads import ReplayError

#: What a report says about its own run, never compared between reports.
POLICY_NAME = re.compile(r"[A-Za-z0-9_.-]+")  # '@' is how a combined report names its runs
_OWN = frozenset({"per_order", "summary", "versus", "reference", "orders", "plots", "oracles",
                  "workload", "jobs", "cluster", "world"})


def combine(reports: Sequence[tuple[str, dict[str, Any]]],
            reference: str | None = None, pool: bool = False) -> dict[str, Any]:
    """One many-orders report from (label, report) pairs: the orders all of them replayed,
    every policy of each (renamed `policy@label` where reports share a name; pooled: one
    policy, its figures per order averaged over the reports, `_pooled`), summarised
    against `reference` (default: `ours` where only one report, or `pool`, has it)."""
    if len(reports) < 2:
        raise ReplayError("combine needs two reports or more")
    labels = [label for label, _ in reports]
    if len(set(labels)) != len(labels):
        raise ReplayError(f"reports need distinct names, got {labels}")
    for label, report in reports:
        _check(label, report)
    first_label, first = reports[0]
    for label, report in reports[1:]:
        for key in ("jobs", "cluster", "world"):
            if report.get(key) != first.get(key):
                raise ReplayError(f"{label} replayed other {key} than {first_label}: "
                                  f"{report.get(key)!r} vs {first.get(key)!r}")
        if _workload(report) != _workload(first):
            raise ReplayError(f"{label} replayed workload {_workload(report)!r}, "
                              f"{first_label} {_workload(first)!r}")
        if pool and report.get("ours_configured_by") != first.get("ours_configured_by"):
            raise ReplayError(f"--pool reads runs of one policy configuration: {label} ran "
                              f"ours with {report.get('ours_configured_by')!r}, {first_label} "
                              f"with {first.get('ours_configured_by')!r}")
    per_order, names = (_pooled if pool else _merged)(reports)
    reference = _reference(reference, names)
    counts = [len(r["per_order"]) for _, r in reports]
    combined = {key: value for key, value in first.items() if key not in _OWN}
    pooled = (", each policy's figures the mean over the reports that ran it "
              "(oom_max_per_type: the largest)") if pool else ""
    combined.update(
        workload=f"{_workload(first)}, {len(per_order)} orders replayed by all of "
                 f"{', '.join(labels)} (of {', '.join(map(str, counts))}){pooled}",
        jobs=first["jobs"], cluster=first["cluster"], world=first["world"],
        oracles=list(dict.fromkeys(f"{n}@{label}" if f"{n}@{label}" in names else n
                                   for label, r in reports for n in r.get("oracles", []))),
        combined={label: {"policies": sorted(_names_of(r)), "differs": _differs(r, first)}
                  for label, r in reports},
        **summarise(per_order, reference), per_order=per_order)
    return combined


def _check(label: str, report: Any) -> None:
    """`ReplayError` unless `report` reads as a many-orders report: the header the summary
    prints, and per order a number and the same policies, each with its figures (numbers
    or null; makespan and average JCT always there)."""
    if not isinstance(report, dict) or not isinstance(report.get("per_order"), list):
        raise ReplayError(f"{label}: not the JSON of a replay with --orders")
    cluster = report.get("cluster")
    texts = ("workload", "world", "interference")
    if not (all(isinstance(report.get(key), str) for key in texts)
            and type(report.get("jobs")) is int and report.get("startup_s") is not None
            and _number_or_null(report.get("startup_s"))
            and isinstance(cluster, dict) and type(cluster.get("gpus")) is int
            and _strings(cluster.get("types"))
            and isinstance(cluster.get("collocation_limits", {}), dict)
            and _strings(report.get("oracles", [])) and _strings(report.get("assumptions", []))):
        raise ReplayError(f"{label}: its header (workload, jobs, cluster, world, collocation "
                          f"law, start-up, oracles) is not a replay's")
    policies = None
    for order in report["per_order"]:
        figures = order.get("policies") if isinstance(order, dict) else None
        if not (isinstance(figures, dict) and type(order.get("order")) is int
                and (policies is None or set(figures) == policies)
                and all(isinstance(name, str) and POLICY_NAME.fullmatch(name) for name in figures)
                and all(isinstance(f, dict) and all(_number_or_null(f.get(k)) for k in FIGURES)
                        and all(k in f for k in VERSUS) for f in figures.values())):  # fmt: skip
            raise ReplayError(f"{label}: an order that is not a number with the same "
                              f"policies' figures (numbers >= 0) as the others, under policy "
                              f"names without '@': {str(order)[:200]}")
        policies = set(figures)


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _number_or_null(value: Any) -> bool:
    """A figure as a replay writes it: null, or a finite number >= 0 (times, shares, counts)."""
    return value is None or (type(value) in (int, float) and math.isfinite(value) and value >= 0)


def _names_of(report: dict[str, Any]) -> set[str]:
    return {name for order in report["per_order"] for name in order.get("policies", {})}


def _workload(report: dict[str, Any]) -> str:
    """The workload's name without the number of orders the run replayed."""
    return re.sub(r", \d+ orders$", "", str(report.get("workload", "")))


def _merged(reports: Sequence[tuple[str, dict[str, Any]]]
            ) -> tuple[list[dict[str, Any]], list[str]]:
    """Per shared order, every report's policies under their combined names."""
    seen: dict[str, int] = {}
    for _, report in reports:
        for name in _names_of(report):
            seen[name] = seen.get(name, 0) + 1
    by_order, shared = _shared_orders(reports)
    per_order, names = [], []
    for order in shared:
        policies = {}
        for (label, _), orders in zip(reports, by_order, strict=True):
            for name, figures in orders[order].items():
                policies[name if seen[name] == 1 else f"{name}@{label}"] = figures
        per_order.append({"order": order, "policies": policies})
        names = names or list(policies)
    return per_order, names


def _pooled(reports: Sequence[tuple[str, dict[str, Any]]]
            ) -> tuple[list[dict[str, Any]], list[str]]:
    """Per shared order, each policy once: every number among its figures the mean over the
    reports that replayed it (null where a run has none), the largest kills of one job
    type the largest of any run, and `runs`, how many runs it pools."""
    by_order, shared = _shared_orders(reports)
    per_order = []
    for order in shared:
        runs: dict[str, list[dict[str, Any]]] = {}
        for orders in by_order:
            for name, figures in orders[order].items():
                runs.setdefault(name, []).append(figures)
        per_order.append({"order": order,
                          "policies": {name: _mean_figures(of) for name, of in runs.items()}})
    return per_order, list(per_order[0]["policies"])


def _mean_figures(runs: list[dict[str, Any]]) -> dict[str, Any]:
    keys = [key for key, value in runs[0].items() if type(value) in (int, float)]
    figures: dict[str, Any] = {}
    for key in dict.fromkeys([*FIGURES, *keys]):
        values = [run.get(key) for run in runs]
        if not all(type(v) in (int, float) and math.isfinite(v) for v in values):
            figures[key] = None
        elif key == "oom_max_per_type":
            figures[key] = max(values)
        else:
            figures[key] = statistics.fmean(values)
    return {**figures, "oracle": any(run.get("oracle") is True for run in runs),
            "runs": len(runs)}


def _shared_orders(reports: Sequence[tuple[str, dict[str, Any]]]
                   ) -> tuple[list[dict[int, dict[str, Any]]], list[int]]:
    """Each report's policies' figures by order, and the orders all of them replayed."""
    by_order = [{o["order"]: o["policies"] for o in r["per_order"]} for _, r in reports]
    shared = sorted(set.intersection(*(set(orders) for orders in by_order)))
    if not shared:
        raise ReplayError("the reports share no order")
    return by_order, shared


def _reference(asked: str | None, names: list[str]) -> str:
    if asked is not None:
        if asked not in names:
            raise ReplayError(f"--reference {asked}: not among {', '.join(names)}")
        return asked
    if "ours" in names:
        return "ours"
    raise ReplayError(f"name the policy to compare the others with: --reference one of "
                      f"{', '.join(names)}")


def _differs(report: dict[str, Any], first: dict[str, Any]) -> dict[str, Any]:
    """What `report` was run with that `first` was not (its values)."""
    keys = (set(report) | set(first)) - _OWN
    return {key: report.get(key) for key in sorted(keys) if report.get(key) != first.get(key)}
