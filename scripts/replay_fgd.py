"""`schedtune replay --workload openb --protocol fgd`: Alibaba's openb trace under FGD's own
evaluation protocol (`replay.fgd_protocol`), each order a seed: FGD's six baselines
in-process, FGD deciding only the pods that ask a GPU (behind an extender registered for
``nvidia.com/gpu`` only, as shipped), and ours with every pod decided by the extender over
HTTP (`replay.fgd_extender`; the extender's settings from the environment, ``EXTENDER_*``).
``--policies ours`` replays ours and the best-fit baseline only."""

from __future__ import annotations

import argparse
import json
import os
import sys

from extender.env_values import SettingsError
from extender.settings import Settings
from replay import fgd_protocol, fgd_report
from replay.fgd_extender import ExtenderOnFgd
from replay.fgd_policies import POLICIES, make_policy
from replay.fgd_workload import MILLI
from replay.runner import replay_redis
from replay.workloads import ReplayError

DEFAULT_ORDERS = 10  # FGD's seeds


def run(parser: argparse.ArgumentParser, args: argparse.Namespace, default_policies: list[str],
        ) -> int:
    if args.workload != "openb" or not args.trace_dir:
        parser.error("--protocol fgd replays the openb trace: --workload openb --trace-dir DIR")
    if args.policies not in (default_policies, ["ours"]):
        parser.error(f"--protocol fgd replays FGD's baselines ({', '.join(POLICIES)}) and "
                     "ours: leave out --policies, or --policies ours (ours and best-fit)")
    if args.world != "auto" or args.jobs_file or args.jobs_out or args.sensitivity \
            or args.shuffle is not None or args.parallel is not None:
        parser.error("--protocol fgd: no --world, --jobs-file, --jobs-out, --sensitivity, "
                     "--shuffle or --parallel")
    if not 0 <= args.orders <= 1000:
        parser.error("--orders 0..1000")
    orders = args.orders or DEFAULT_ORDERS
    seeds = list(range(1, orders + 1))
    names = ["best-fit", "ours"] if args.policies == ["ours"] else [*POLICIES, "ours"]
    try:
        with replay_redis(os.environ) as url:
            settings = Settings.from_env(os.environ)

            def make(name, pods):  # type: ignore[no-untyped-def]
                return ExtenderOnFgd(url, settings) if name == "ours" else make_policy(name, pods)

            result = fgd_protocol.run_protocol(args.trace_dir, names, seeds,
                                               pod_file=args.pod_file, make=make)
        nodes, _ = fgd_protocol.load_trace(args.trace_dir, args.pod_file)
    except (ReplayError, OSError, ValueError, SettingsError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    report = {"workload": "openb", "protocol": "fgd", "orders": orders, "seeds": seeds,
              "gpus": nodes.capacity_milli // MILLI,
              "policies": {name: {"unallocated_gpu_pct_at_100": r["unallocated_gpu_pct_at_100"],
                                  "published": r["published"], "per_order": r["per_seed"],
                                  "failed_pods": r["failed_pods"],
                                  "seconds_total": r["seconds_total"],
                                  "decisions_per_s": r.get("http_decisions_per_s",
                                                           r["decisions_per_s"]),
                                  "curve": r["curve"]}
                           for name, r in result.items()}}
    if args.plots:
        report["plots"] = [str(fgd_report.plot(report, args.plots))]
    print(json.dumps(report, indent=2) if args.json else fgd_report.as_text(report))
    return 0
