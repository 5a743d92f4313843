"""A replay's report for people: the text table with comparisons to the default policy,
and PNG figures (memory utilisation over time, JCT CDF, makespan). matplotlib is
imported only when figures are asked for."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from replay.runner import Run


def render(report: dict) -> str:
    """The report as the CLI prints it without --json."""
    lines = [f"workload {report['workload']}: {report['jobs']} jobs on {report['cluster']['gpus']} "
             f"GPUs ({', '.join(report['cluster']['types'])})",
             f"world: {report['world']}; start-up {report['startup_s']:g} s; "
             f"collocation slowdown alpha {report['alpha']}", ""]
    head = f"{'policy':>16} {'makespan':>10} {'avg JCT':>9} {'p95 JCT':>9} {'queue':>8} " \
           f"{'mem util':>8} {'OOM':>4} {'unsched':>7} {'dec/s':>7}"
    lines.append(head)
    base = report["policies"].get("default")
    for name, r in report["policies"].items():
        lines.append(f"{name:>16} {r['makespan_s']:>10.0f} {r['avg_jct_s'] or 0:>9.1f} "
                     f"{r['p95_jct_s'] or 0:>9.1f} {r['avg_queue_s'] or 0:>8.1f} "
                     f"{r['mem_util']:>8.3f} {r['oom_count']:>4} {r['unscheduled']:>7} "
                     f"{r['decisions_per_s'] or 0:>7.0f}")
    if base:
        lines.append("")
        for name, r in report["policies"].items():
            if name != "default" and base["makespan_s"] and base["mem_util"]:
                change = 100 * (r["makespan_s"] / base["makespan_s"] - 1)
                lines.append(f"{name} vs default: makespan {change:+.1f} %, "
                             f"avg JCT {base['avg_jct_s'] / r['avg_jct_s']:.2f}x lower, "
                             f"memory utilisation {r['mem_util'] / base['mem_util']:.2f}x")
    return "\n".join(lines)


def plot(directory: Path, runs: Mapping[str, Run]) -> list[Path]:
    """Write the figures of `runs` (by policy name) under `directory`; their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    fig, ax = plt.subplots(figsize=(9, 4))
    for name, (_, sim, _) in runs.items():
        ts = [t - sim.start_s for t, _ in sim.timeline]
        ax.step(ts, [100 * used / sim.capacity_mib for _, used in sim.timeline], where="post",
                label=name)
    ax.set(xlabel="time (s)", ylabel="GPU memory in use (%)", title="Memory utilisation")
    ax.legend()
    paths.append(directory / "memory_utilisation.png")
    fig.savefig(paths[-1], dpi=120, bbox_inches="tight")
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, (_, _, outcomes) in runs.items():
        jcts = sorted(o.ended_s - o.job.arrival_s for o in outcomes if o.ended_s and not o.oom)
        ax.plot(jcts, [(i + 1) / len(jcts) for i in range(len(jcts))], label=name)
    ax.set(xscale="log", xlabel="job completion time (s)", ylabel="fraction of jobs",
           title="JCT CDF")
    ax.legend()
    paths.append(directory / "jct_cdf.png")
    fig.savefig(paths[-1], dpi=120, bbox_inches="tight")
    fig, ax = plt.subplots(figsize=(6, 4))
    names = list(runs)
    ax.bar(names, [runs[n][0]["makespan_s"] for n in names])
    ax.set(ylabel="makespan (s)", title="Makespan")
    paths.append(directory / "makespan.png")
    fig.savefig(paths[-1], dpi=120, bbox_inches="tight")
    plt.close("all")
    return paths
