"""A replay's report for people: the header of what was assumed, the table of one
replay with comparisons to the default policy, the summary of many orders, PNG
figures, and every job's placement as CSV. matplotlib is imported only when figures
are asked for."""

from __future__ import annotations

import csv
import textwrap
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from replay.runner import Run

SUMMARY_FIGURES = (("makespan_s", "makespan", "{:.0f}"), ("avg_jct_s", "avg JCT", "{:.0f}"),
                   ("p95_jct_s", "p95 JCT", "{:.0f}"), ("mem_util", "mem util", "{:.3f}"),
                   ("oom_count", "OOM", "{:.0f}"))


OOM_SHOWN = 5  # OOM kills listed per policy in the text report
COLUMNS = (  # the text table's legend
    "Seconds of simulated time. makespan: until the last job ends; avg / p95 JCT: job "
    "completion time, arrival to end; queue: average wait before placement; mem util: GPU "
    "memory reserved over memory present, averaged over time; OOM: GPU out-of-memory kills "
    "(retry: created again; failed: given up); unsched: never placed; arrival: share placed "
    "the moment they arrived; dec/s: decisions per second; *: reads the world's truth.")


def header(report: dict) -> list[str]:
    """What the numbers assume: workload, cluster, world, law, limits, retries, oracles."""
    cluster = report["cluster"]
    limits = ", ".join(f"{t} {n}" for t, n in cluster.get("collocation_limits", {}).items())
    lines = [f"workload {report['workload']}: {report['jobs']} jobs on {cluster['gpus']} GPUs "
             f"({', '.join(cluster['types'])}); pods per GPU at most: {limits}",
             f"world: {report['world']}"]
    if report.get("perturbation"):
        lines.append(f"perturbation: {report['perturbation']}")
    lines.append(f"collocation law: {report['interference']}")
    lines.append(f"start-up {report['startup_s']:g} s; " + "; ".join(report.get("assumptions", [])))
    if report.get("oracles"):
        lines.append(f"oracles (read the world's truth): {', '.join(report['oracles'])}")
    return lines


def render(report: dict) -> str:
    """One replay as the CLI prints it without --json ("arrival": share of jobs placed the
    instant they arrived; "*": an oracle)."""
    lines = [*header(report), ""]
    lines.append(f"{'policy':>17} {'makespan':>9} {'avg JCT':>8} {'p95 JCT':>8} {'queue':>7} "
                 f"{'mem util':>8} {'OOM':>4} {'retry':>5} {'failed':>6} {'unsched':>7} "
                 f"{'arrival':>7} {'dec/s':>6}")
    base = report["policies"].get("default")
    for name, r in report["policies"].items():
        label = f"{name}{'*' if r.get('oracle') else ''}"
        lines.append(f"{label:>17} {r['makespan_s']:>9.0f} {r['avg_jct_s'] or 0:>8.1f} "
                     f"{r['p95_jct_s'] or 0:>8.1f} {r['avg_queue_s'] or 0:>7.1f} "
                     f"{r['mem_util']:>8.3f} {r['oom_count']:>4} {r.get('retries', 0):>5} "
                     f"{r.get('failed', 0):>6} {r['unscheduled']:>7} "
                     f"{r.get('placed_on_arrival') or 0:>7.3f} {r['decisions_per_s'] or 0:>6.0f}")
    if base and base["makespan_s"] and base["mem_util"] and base["avg_jct_s"]:
        lines.append("")
        for name, r in report["policies"].items():
            if name != "default" and r["avg_jct_s"]:
                change = 100 * (r["makespan_s"] / base["makespan_s"] - 1)
                jct = 100 * (r["avg_jct_s"] / base["avg_jct_s"] - 1)
                lines.append(f"{name} vs default: makespan {change:+.1f} %, avg JCT {jct:+.1f} %, "
                             f"memory utilisation {r['mem_util'] / base['mem_util']:.2f}x")
    lines += ["", *textwrap.wrap(COLUMNS, 96)]
    reserves = [(n, e) for n, r in report["policies"].items() for e in r.get("oom_reserves", [])]
    if reserves:
        lines.append("")
        lines.append("OOM kills of the extender policies: reserved -> floor after (true peak)")
        shown = Counter[str]()
        for name, e in reserves:
            shown[name] += 1
            if shown[name] <= OOM_SHOWN:
                lines.append(f"  {name}: {e['job_type']} attempt {e['attempt']}: "
                             f"{e['reserved_mib']} -> {e['floor_after_mib']} MiB ({e['true_mib']})")
        lines += [f"  {name}: {count - OOM_SHOWN} more (--json lists every one)"
                  for name, count in shown.items() if count > OOM_SHOWN]
    return "\n".join(lines)


def render_summary(report: dict) -> str:
    """Many orders: per policy the median [p10, p90] and worst of each figure, then the
    reference policy's wins and losses against each other."""
    lines = [*header(report), f"orders: {report['orders']}"]
    for label, run in report.get("combined", {}).items():
        differs = "; ".join(f"{key} {value}" for key, value in run["differs"].items())
        lines.append(f"  {label}: {', '.join(run['policies'])}"
                     + (f"; run with {differs}" if differs else ""))
    lines.append("")
    head = f"{'policy':>17}" + "".join(f" {title:>26}" for _, title, _ in SUMMARY_FIGURES)
    lines.append(head)
    lines.append(f"{'':>17}" + "".join(f" {'median [p10, p90] worst':>26}"
                                       for _ in SUMMARY_FIGURES))
    for name, figures in report["summary"].items():
        label = f"{name}{'*' if name in report.get('oracles', []) else ''}"
        cells = []
        for key, _, fmt in SUMMARY_FIGURES:
            s = figures.get(key)
            cells.append(f"{fmt.format(s['median'])} [{fmt.format(s['p10'])}, "
                         f"{fmt.format(s['p90'])}] {fmt.format(s['worst'])}" if s else "-")
        lines.append(f"{label:>17}" + "".join(f" {c:>26}" for c in cells))
    if report.get("versus"):
        lines.append("")
        ref = report["reference"]
        for other, figures in report["versus"].items():
            parts = [f"{key.removesuffix('_s')} {v['wins']}-{v['losses']} (median "
                     f"{v['median_gap_pct']:+.1f} %, medians {v['medians_gap_pct']:+.1f} % "
                     f"[{v['medians_gap_90pct'][0]:+.1f}, {v['medians_gap_90pct'][1]:+.1f}], "
                     f"worst {v['worst_gap_pct']:+.1f} %, > 5 % behind in {v['behind_5pct']})"
                     for key, v in figures.items()]
            lines.append(f"{ref} vs {other}: wins-losses " + ", ".join(parts))
    return "\n".join(lines)


def _pyplot():  # type: ignore[no-untyped-def]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_orders(directory: Path, per_order: list[dict]) -> list[Path]:
    """One figure per summarised figure: its distribution over the orders, per policy."""
    plt = _pyplot()
    directory.mkdir(parents=True, exist_ok=True)
    policies = list(per_order[0]["policies"]) if per_order else []
    paths = []
    for key, title, _ in SUMMARY_FIGURES:
        data = [[o["policies"][p][key] for o in per_order if o["policies"][p][key] is not None]
                for p in policies]
        fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(policies)), 4))
        ax.boxplot(data, whis=(10, 90))
        ax.set_xticks(range(1, len(policies) + 1), policies, rotation=20)
        for i, values in enumerate(data, start=1):
            ax.scatter([i] * len(values), values, s=8, alpha=0.5)
        ax.set(ylabel=key, title=f"{title} over {len(per_order)} orders (whiskers p10-p90)")
        paths.append(directory / f"orders_{key}.png")
        fig.savefig(paths[-1], dpi=120, bbox_inches="tight")
        plt.close(fig)
    return paths


def plot(directory: Path, runs: Mapping[str, Run]) -> list[Path]:
    """Write the figures of one replay's `runs` (by policy name) under `directory`."""
    plt = _pyplot()
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
        jcts = sorted(o.ended_s - o.job.arrival_s for o in outcomes if o.completed)
        if jcts:
            ax.plot(jcts, [(i + 1) / len(jcts) for i in range(len(jcts))], label=name)
    ax.set(xscale="log", xlabel="job completion time (s)", ylabel="fraction of jobs",
           title="JCT CDF")
    ax.legend()
    paths.append(directory / "jct_cdf.png")
    fig.savefig(paths[-1], dpi=120, bbox_inches="tight")
    fig, ax = plt.subplots(figsize=(6, 4))
    names = list(runs)
    ax.bar(names, [runs[n][0]["makespan_s"] for n in names])
    ax.tick_params(axis="x", rotation=20)
    ax.set(ylabel="makespan (s)", title="Makespan")
    paths.append(directory / "makespan.png")
    fig.savefig(paths[-1], dpi=120, bbox_inches="tight")
    plt.close("all")
    return paths


JOB_COLUMNS = ("policy", "job", "model", "task", "batch", "units", "gpus", "arrival_s",
               "placed_s", "last_placed_s", "ended_s", "jct_s", "node", "gpu_type",
               "gpu_indices", "oom_kills", "failed", "placed_on_arrival", "alone_s")


def job_rows(runs: Mapping[str, Run]) -> tuple[list[str], list[dict[str, Any]]]:
    """Every job of every policy's run, in the order they ended (never-ended last): when
    it arrived, was first and last placed and ended (seconds from the replay's start),
    where its last attempt ran, and the world's truth (not any policy's estimate) of its
    seconds alone there (`alone_s`) and on each GPU type of the cluster (`alone_s:TYPE`,
    empty where it may not run). The columns, then the rows."""
    types = sorted({node.gpu_type for _, sim, _ in runs.values() for node in sim.nodes})
    columns = [*JOB_COLUMNS, *(f"alone_s:{t}" for t in types)]
    rows = []
    for policy, (_, sim, outcomes) in runs.items():
        def at(t: float | None) -> float | str:
            return "" if t is None else round(t - sim.start_s, 1)

        for o in sorted(outcomes, key=lambda o: (o.ended_s is None, o.ended_s or 0, o.job.id)):
            job, node = o.job, sim.by_name.get(o.node)
            truth = {t: round(sim.world.run_s(job, t), 1) if job.may_run_on(t) else ""
                     for t in types}
            rows.append({
                "policy": policy, "job": job.id, "model": job.model, "task": job.task,
                "batch": job.batch, "units": job.units, "gpus": job.gpus,
                "arrival_s": at(job.arrival_s),
                "placed_s": at(o.placed_s), "last_placed_s": at(o.last_placed_s),
                "ended_s": at(o.ended_s),
                "jct_s": "" if o.ended_s is None else round(o.ended_s - job.arrival_s, 1),
                "node": o.node, "gpu_type": node.gpu_type if node else "",
                "gpu_indices": " ".join(map(str, o.gpus)), "oom_kills": o.ooms,
                "failed": int(o.failed), "placed_on_arrival": int(o.on_arrival),
                "alone_s": truth.get(node.gpu_type, "") if node else "",
                **{f"alone_s:{t}": v for t, v in truth.items()},
            })  # fmt: skip
    return columns, rows


def write_jobs(path: Path, runs: Mapping[str, Run]) -> Path:
    """`job_rows` as CSV at `path` (its directory made if missing)."""
    columns, rows = job_rows(runs)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, columns)
        writer.writeheader()
        writer.writerows(rows)
    return path


def as_text(report: dict[str, Any]) -> str:
    return render_summary(report) if "summary" in report else render(report)
