"""Replay a workload on a simulated GPU cluster, every decision of our policy made by the
extender over HTTP, with baselines in the same run, world and arrivals.

    schedtune replay                               # paper workload (or generated)
    schedtune replay --workload paper --json
    schedtune replay --workload generated --jobs 2000 --rate 20 --seed 7 \\
        --cluster "T4:8x4,A10:4x4,L4:4x4,A100-80GB:2x8" --plots out/
    schedtune replay --cluster-file my-cluster.yaml --jobs-file my-jobs.csv
    schedtune replay --workload paper --shuffle 5    # same arrival times, jobs reordered

Starts an embedded Redis (or uses REDIS_URL) and the extender app on 127.0.0.1 with its
clock on simulated time. Policies: default, schedtune-paper, gavel-like, ours. The
simulator, workloads, policies and report live in the `replay` package; this is its CLI.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

# Run as `python scripts/replay.py`, Python puts scripts/ first on the path, where this
# file would shadow the `replay` package: the checkout goes before it.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from estimator.data import DEFAULT_DATA_DIR  # noqa: E402
from extender.settings import SettingsError  # noqa: E402
from replay.report import plot, render  # noqa: E402
from replay.runner import POLICIES, run_replay  # noqa: E402
from replay.workloads import (  # noqa: E402
    GENERATED_CLUSTER, PAPER_CLUSTER, ReplayError, cluster_from_file, generated_workload,
    has_paper_data, jobs_from_file, paper_workload, parse_cluster, shuffle_order,
)  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", choices=("paper", "generated", "auto"), default="auto",
                        help="auto: paper when the reference data is present")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA_DIR)
    parser.add_argument("--policies", nargs="+", choices=POLICIES, default=list(POLICIES))
    parser.add_argument("--cluster", help=f"TYPE:NODESxGPUS,... (generated default "
                        f"{GENERATED_CLUSTER}; paper: {PAPER_CLUSTER})")
    parser.add_argument("--cluster-file", type=Path)
    parser.add_argument("--jobs-file", type=Path)
    parser.add_argument("--jobs", type=int, default=1000, help="generated workload size")
    parser.add_argument("--rate", type=float, default=10.0, help="generated: jobs per minute")
    parser.add_argument("--train-fraction", type=float, default=0.3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--shuffle", type=int, metavar="SEED",
                        help="keep the arrival times, permute which job arrives at each")
    parser.add_argument("--startup", type=float, default=10.0, help="per-job start-up seconds")
    parser.add_argument("--sensitivity", action="store_true",
                        help="also report makespan and JCT at 2 s and 30 s start-up")
    parser.add_argument("--plots", type=Path, help="write PNG figures here")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if not 1 <= args.jobs <= 200_000 or args.rate <= 0 or not 0 <= args.train_fraction <= 1:
        parser.error("--jobs 1..200000, --rate > 0, --train-fraction 0..1")
    if not 0 <= args.startup <= 3600:
        parser.error("--startup must be 0..3600 seconds")

    has_data = has_paper_data(args.data)
    workload = args.workload if args.workload != "auto" else ("paper" if has_data else "generated")
    try:
        if args.jobs_file:
            jobs, workload = jobs_from_file(args.jobs_file), f"file:{args.jobs_file.name}"
        elif workload == "paper":
            if not has_data:
                parser.error(f"--workload paper needs the reference data under {args.data}")
            jobs = paper_workload(args.data)
        else:
            jobs = generated_workload(args.jobs, args.rate, args.seed, args.train_fraction)
        if args.cluster_file:
            nodes = cluster_from_file(args.cluster_file)
        else:
            nodes = parse_cluster(args.cluster or (PAPER_CLUSTER if workload == "paper"
                                                   else GENERATED_CLUSTER))
    except (ReplayError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.shuffle is not None:
        jobs = shuffle_order(jobs, args.shuffle)
        workload = f"{workload} (order shuffled, seed {args.shuffle})"

    try:
        report, runs = run_replay(jobs, nodes, workload, args.policies, args.data, args.startup,
                                  env=os.environ, sensitivity=args.sensitivity,
                                  progress=not args.json)
    except SettingsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.plots:
        report["plots"] = [str(p) for p in plot(args.plots, runs)]
    print(json.dumps(report, indent=2) if args.json else render(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
