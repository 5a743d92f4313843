"""What `schedtune replay --workload openb --protocol fgd` prints and draws: each policy's
unallocated GPU % at 100 % of capacity arrived (FGD's figure, `fgd_protocol.figure_at`),
median over the orders, beside the published one, and the curve against arrived load."""

from __future__ import annotations

from pathlib import Path
from typing import Any

COLUMNS = "{:>12} {:>13} {:>13} {:>10} {:>12} {:>7} {:>9}"


def as_text(report: dict[str, Any]) -> str:
    lines = [f"workload openb, FGD's protocol: {report['orders']} orders (seeds "
             f"{report['seeds'][0]}..{report['seeds'][-1]}), arrivals until 1.3x the "
             f"cluster's {report['gpus']:,} GPUs, none leaving",
             "unallocated GPU % once 100 % of the GPU capacity has arrived (FGD's figure; "
             "median over the orders):", "",
             COLUMNS.format("policy", "unallocated %", "min..max", "published", "failed pods",
                            "wall s", "dec/s")]
    for name, figures in report["policies"].items():
        values = list(figures["per_order"].values())
        failed = sorted(figures["failed_pods"].values())
        published = figures.get("published")
        lines.append(COLUMNS.format(
            name, f"{figures['unallocated_gpu_pct_at_100']:.2f}",
            f"{min(values):.2f}..{max(values):.2f}",
            "" if published is None else f"{published:.2f}",
            f"{failed[len(failed) // 2]:,}", f"{figures['seconds_total']:.0f}",
            f"{figures['decisions_per_s']:,.0f}"))
    lines += ["", "published: the FGD simulator's expected results (default trace, median of "
              "10 seeds); failed pods: the median order's pods that fit nowhere; dec/s: "
              "pods decided per second of wall time, ours: every pod through the "
              "extender over HTTP (filter, prioritize, bind) per second spent in them; "
              "the baselines decide in-process."]
    if report.get("plots"):
        lines.append(f"plot: {report['plots'][0]}")
    return "\n".join(lines)


def plot(report: dict[str, Any], directory: Path) -> Path:
    """The median unallocated GPU % of each policy against arrived load, one PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    directory.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, figures in report["policies"].items():
        curve = figures["curve"]
        ax.plot(curve["arrived_pct"], curve["unallocated_pct_median"], label=name)
    ax.axvline(100, color="grey", linewidth=0.8, linestyle=":")
    ax.set_xlabel("GPU requests arrived (% of the cluster's GPUs)")
    ax.set_ylabel("GPUs unallocated (%)")
    ax.set_title(f"openb under FGD's protocol, median of {report['orders']} orders")
    ax.legend()
    path = directory / "fgd_unallocated.png"
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path
