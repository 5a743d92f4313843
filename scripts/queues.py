"""Inspect the shared queues: per node and GPU, the jobs, free memory, job count against
the collocation limit, and the queue delay (Eq. 1) a new job would see.

    schedtune queues                    # every node, as a table
    schedtune queues --node gpu-node-0 --json
    schedtune queues --waiting          # pods that fit nowhere, oldest first
    schedtune queues --floors           # what GPU OOMs taught: the least a job type reserves
    schedtune queues --interference     # what finished runs taught: alpha per GPU type

Reads REDIS_URL (or --redis), else the embedded server of `schedtune serve` in
EXTENDER_STATE_DIR (./var). Collocation limits come from the same EXTENDER_* variables
as the extender.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import orjson

from extender.core.interference import MEASURED_ALPHA
from extender.state.embedded_redis import open_store, unreachable_hint
from extender.errors import StoreUnavailable
from extender.settings import Settings, SettingsError
from extender.status import cluster_status


def render(report: list[dict]) -> str:
    lines = []
    for node in report:
        layout = node["layout"]
        head = (f"{node['node']}: {layout['count']} x {layout['gpu_type'] or layout['product']}"
                f" ({layout['memory_mib']} MiB)" if layout else f"{node['node']}: layout unknown (written by the node watcher: "
                                 "`schedtune node-watch` with cluster access)")
        if layout and layout["problem"]:
            head += f"  [{layout['problem']}]"
        lines.append(head)
        for gpu in node["gpus"]:
            free = "?" if gpu["free_mib"] is None else f"{gpu['free_mib']:.0f}"
            limit = "?" if gpu["limit"] is None else gpu["limit"]
            lines.append(f"  GPU {gpu['index']}: {free} MiB free, {gpu['jobs']}/{limit} jobs, "
                         f"new job waits {gpu['queue_delay_s']:.0f} s")
            for job in gpu["queue"]:
                lines.append(f"    {job['pod']:<32} {job['model']:<14} {job['state']:<8} "
                             f"{job['reserved_mib']:>8.0f} MiB  predicted {job['predicted_s']:>8.0f} s"
                             f"  remaining {job['remaining_s']:>8.0f} s"
                             + (f"  (+{job['grown_mib']:.0f} MiB beside an OOM kill)"
                                if job["grown_mib"] else "")
                             + (f"  (time x{job['time_factor']:.2f} learned: "
                                f"{job['time_correction']})" if job.get("time_correction")
                                else ""))
    return "\n".join(lines) if lines else "no nodes and no reservations in the store"


def render_waiting(waiting: list[dict]) -> str:
    lines = []
    for pod in waiting:
        needs = ", ".join(f"{t} {n['padded_mib']:.0f} MiB" for t, n in pod["needs"].items())
        lines.append(f"{pod['pod'] or pod['uid']:<32} waiting {pod['waiting_s']:>8.0f} s  "
                     f"needs {needs}")
    return "\n".join(lines) if lines else "no pod is waiting"


def render_floors(floors: list[dict]) -> str:
    lines = [f"{f['model']:<20} {f['task']:<9} batch {f['batch']:>5} on {f['gpu_type']:<12} "
             f"reserves at least {f['floor_mib']:>8.0f} MiB in "
             f"{'every namespace' if f['namespace'] == '*' else 'namespace ' + f['namespace']}"
             " (after a GPU OOM)" for f in floors]
    return "\n".join(lines) if lines else "no OOM corrections: no job type ran out of GPU memory"


def render_interference(learned: list[dict], configured: float, priors: bool = False) -> str:
    lines = [f"{row['gpu_type']:<14} alpha {row['alpha']:.2f} (learned from observed runs)"
             for row in learned]
    rest = "every other GPU type" if lines else "every GPU type"
    if priors:
        said = ", ".join(f"{arch} {alpha:g}" for arch, alpha in MEASURED_ALPHA.items())
        return "\n".join([*lines, f"{rest}: its architecture's measured alpha ({said}; "
                                  "after Volta, Hopper's) (EXTENDER_INTERFERENCE_PRIORS)"])
    return "\n".join([*lines, f"{rest}: alpha {configured:g} (EXTENDER_INTERFERENCE_ALPHA)"])


def _json(value: object) -> str:
    """Valid JSON whatever a broken record holds: orjson writes NaN and infinities as null."""
    return orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--node", help="only this node")
    parser.add_argument("--waiting", action="store_true",
                        help="the pods waiting for room (the oldest may hold a GPU)")
    parser.add_argument("--floors", action="store_true",
                        help="the OOM corrections in force: per job type, the least it reserves")
    parser.add_argument("--interference", action="store_true",
                        help="the collocation slowdown per GPU type decisions play forward at")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--redis", help="Redis URL (default: REDIS_URL, else the embedded one)")
    args = parser.parse_args(argv)
    try:
        settings = Settings.from_env({**os.environ, **({"REDIS_URL": args.redis} if args.redis else {})})
    except SettingsError as exc:
        parser.error(str(exc))
    store = open_store(settings)
    try:
        status = cluster_status(store, settings.collocation, time.time())
    except StoreUnavailable as exc:
        print(f"error: {exc}\n{unreachable_hint(settings)}", file=sys.stderr)
        return 1
    if args.floors:
        floors = status["floors"]
        print(_json(floors) if args.json else render_floors(floors))
        return 0
    if args.interference:
        learned = status["interference"]
        print(_json(learned) if args.json
              else render_interference(learned, settings.interference_alpha,
                                       settings.interference_priors))
        return 0
    if args.waiting:
        waiting = status["waiting"]
        print(_json(waiting) if args.json else render_waiting(waiting))
        return 0
    report = status["nodes"]
    if args.node:
        report = [n for n in report if n["node"] == args.node]
        if not report:
            print(f"error: node {args.node!r} has no layout and no reservations in the store",
                  file=sys.stderr)
            return 1
    print(_json(report) if args.json else render(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
