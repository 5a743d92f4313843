"""`schedtune replay --workload gangs`: gangs (distributed training) beside single pods
(`replay.gangs`), ours against one-at-a-time and gang-blind placement."""

from __future__ import annotations

import argparse
import json
import os
import sys

from extender.settings import Settings, SettingsError
from replay import gang_report, gang_workload, gangs
from replay.orders import summarise
from replay.runner import describe_cluster
from replay.scenario import Scenario, extender_env
from replay.workloads import ReplayError, cluster_from_file, parse_cluster, parse_collocation


def run(parser: argparse.ArgumentParser, args: argparse.Namespace, default_policies: list[str],
        ) -> int:
    """Gangs beside single pods (`replay.gangs`): ours, one-at-a-time and gang-blind over
    `--orders` shuffled orders; the report's `policies`: each figure's median."""
    if args.policies != default_policies:
        parser.error(f"--workload gangs replays {', '.join(gangs.GANG_POLICIES)}: leave out "
                     "--policies")
    if args.world not in ("auto", "predicted", "perturbed") or args.jobs_file \
            or args.plots or args.jobs_out or args.sensitivity:
        parser.error("--workload gangs: --world predicted or perturbed only; no --jobs-file, "
                     "--plots, --jobs-out or --sensitivity")
    if not 0 <= args.gang_fraction <= 1 or not 0.1 <= args.network_gbps <= 10_000 \
            or not 2 <= args.max_gang_gpus <= 1024:
        parser.error("--gang-fraction 0..1, --network-gbps 0.1..10000, --max-gang-gpus 2..1024")
    try:
        nodes = cluster_from_file(args.cluster_file, parse_collocation(args.collocation)) \
            if args.cluster_file else parse_cluster(args.cluster or gang_workload.GANG_CLUSTER,
                                                     parse_collocation(args.collocation))
        settings = Settings.from_env(dict(extender_env(os.environ)))
    except (ReplayError, SettingsError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    # The predictors' world (no reference data needed: it holds none of these GPU types).
    world_name = "perturbed" if args.world == "auto" else args.world
    scenario = Scenario(world=world_name, data_dir=None, world_seed=args.world_seed,
                        startup_s=args.startup, startup_shares=not args.startup_alone,
                        interference=args.interference)
    world = scenario.build_world({n.gpu_type for n in nodes})
    jobs = gang_workload.gang_workload(args.jobs, args.rate, args.seed, args.gang_fraction,
                                       nodes, args.train_fraction, args.max_gang_gpus,
                                       world.estimator)

    def progress(done: dict) -> None:
        figures = ", ".join(f"{p} {r['deadlocks']}/{r['makespan_s']:.0f}/{r['avg_jct_s'] or 0:.0f}"
                            for p, r in done["policies"].items())
        print(f"order {done['order']}: deadlocks/makespan/avg JCT {figures}", file=sys.stderr,
              flush=True)

    per_order = gangs.run_gang_orders(jobs, nodes, world, settings, args.orders,
                                      args.network_gbps, progress=progress)
    policies = gang_report.medians(per_order)
    sized = [j for j in jobs if j.size > 1]
    report = {"workload": f"gangs, {args.orders or 1} order(s)", "jobs": len(jobs),
              "gangs": len(sized), "orders": args.orders or 1,
              "gang_workers": [min(j.size for j in sized), max(j.size for j in sized)]
              if sized else [], "gang_gpus_max": max((j.size * j.gpus for j in sized),
                                                     default=0),
              "network_gbps": args.network_gbps, "cluster": describe_cluster(nodes),
              **world.describe(), **scenario.describe(), "seed": args.seed,
              "gang_fraction": args.gang_fraction, "rate_per_min": args.rate,
              "rendezvous_timeout_s": gangs.RENDEZVOUS_TIMEOUT_S,
              "policies": policies, "ours_vs_gang_blind_pct": gang_report.gains(policies),
              "versus": summarise(per_order)["versus"], "per_order": per_order}
    print(json.dumps(report, indent=2) if args.json else gang_report.render(report))
    return 0
