"""`schedtune replay --workload openb --protocol fgd`: Alibaba's openb trace under FGD's own
evaluation protocol (`replay.fgd_protocol`), each order a seed, every policy in-process."""

from __future__ import annotations

import argparse
import json
import sys

from replay import fgd_protocol, fgd_report
from replay.fgd_policies import POLICIES
from replay.workloads import ReplayError

DEFAULT_ORDERS = 10  # FGD's seeds


def run(parser: argparse.ArgumentParser, args: argparse.Namespace, default_policies: list[str],
        ) -> int:
    if args.workload != "openb" or not args.trace_dir:
        parser.error("--protocol fgd replays the openb trace: --workload openb --trace-dir DIR")
    if args.policies != default_policies:
        parser.error(f"--protocol fgd replays FGD's baselines ({', '.join(POLICIES)}); "
                     "the extender's policy is not on this protocol yet: leave out --policies")
    if args.world != "auto" or args.jobs_file or args.jobs_out or args.sensitivity \
            or args.shuffle is not None or args.parallel != 1:
        parser.error("--protocol fgd: no --world, --jobs-file, --jobs-out, --sensitivity, "
                     "--shuffle or --parallel")
    if not 0 <= args.orders <= 1000:
        parser.error("--orders 0..1000")
    orders = args.orders or DEFAULT_ORDERS
    seeds = list(range(1, orders + 1))
    try:
        result = fgd_protocol.run_protocol(args.trace_dir, None, seeds, pod_file=args.pod_file)
        nodes, _ = fgd_protocol.load_trace(args.trace_dir, args.pod_file)
    except (ReplayError, OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    report = {"workload": "openb", "protocol": "fgd", "orders": orders, "seeds": seeds,
              "gpus": nodes.capacity_milli // fgd_protocol.MILLI,
              "policies": {name: {"unallocated_gpu_pct_at_100": r["unallocated_gpu_pct_at_100"],
                                  "published": r["published"], "per_order": r["per_seed"],
                                  "failed_pods": r["failed_pods"],
                                  "seconds_total": r["seconds_total"], "curve": r["curve"]}
                           for name, r in result.items()}}
    if args.plots:
        report["plots"] = [str(fgd_report.plot(report, args.plots))]
    print(json.dumps(report, indent=2) if args.json else fgd_report.as_text(report))
    return 0
