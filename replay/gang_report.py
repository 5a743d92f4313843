"""The gang replay's figures over orders: medians, ours' gain over the gang-blind
baseline, and the table the CLI prints."""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from typing import Any

#: Figures of the gang table, medians over the orders; lower is better for each.
GANG_FIGURES = ("deadlocks", "partial_gang_gpu_s", "makespan_s", "avg_jct_s", "gang_avg_jct_s",
                "oom_count", "unscheduled")


def medians(per_order: list[dict[str, Any]]) -> dict[str, dict[str, float | None]]:
    """Per policy, each of `GANG_FIGURES`: its median over the orders."""
    out: dict[str, dict[str, float | None]] = {}
    for policy in (per_order[0]["policies"] if per_order else {}):
        out[policy] = {}
        for figure in GANG_FIGURES:
            values = [o["policies"][policy][figure] for o in per_order
                      if o["policies"][policy].get(figure) is not None]
            out[policy][figure] = round(statistics.median(values), 1) if values else None
    return out


def gains(policies: Mapping[str, Mapping[str, Any]], reference: str = "ours",
          against: str = "gang-blind") -> dict[str, float | None]:
    """How much lower `reference`'s median is than `against`'s, in % of `against`'s."""
    out: dict[str, float | None] = {}
    if reference not in policies or against not in policies:
        return out
    for figure in ("makespan_s", "avg_jct_s", "gang_avg_jct_s"):
        mine, theirs = policies[reference].get(figure), policies[against].get(figure)
        out[figure] = round(100 * (1 - mine / theirs), 1) if mine is not None and theirs \
            else None
    return out


def render(report: Mapping[str, Any]) -> str:
    """The gang table as the CLI prints it without --json."""
    lines = [(f"workload {report['workload']}: {report['jobs']} jobs ({report['gangs']} gangs) "
              f"on {report['cluster']['gpus']} GPUs ({', '.join(report['cluster']['types'])}); "
              f"network {report['network_gbps']:g} Gb/s"),
             f"world: {report['world']}", f"collocation law: {report['interference']}",
             f"medians over {report['orders']} order(s)", "",
             (f"{'policy':>14} {'deadlocks':>9} {'partial GPU-s':>13} {'makespan':>9} "
              f"{'avg JCT':>8} {'gang JCT':>9} {'OOM':>4} {'unsched':>7}")]
    for name, r in report["policies"].items():
        lines.append(f"{name:>14} {r['deadlocks'] or 0:>9.0f} {r['partial_gang_gpu_s'] or 0:>13.0f} "
                     f"{r['makespan_s'] or 0:>9.0f} {r['avg_jct_s'] or 0:>8.0f} "
                     f"{r['gang_avg_jct_s'] or 0:>9.0f} {r['oom_count'] or 0:>4.0f} "
                     f"{r['unscheduled'] or 0:>7.0f}")
    gain = report.get("ours_vs_gang_blind_pct") or {}
    if gain:
        lines.append("")
        lines.append("ours vs gang-blind (lower by): " + ", ".join(
            f"{k.removesuffix('_s')} {v:+.1f} %" for k, v in gain.items() if v is not None))
    return "\n".join(lines)
