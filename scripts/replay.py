"""Replay a workload on a simulated GPU cluster, every decision of our policy made by the
extender over HTTP, with baselines in the same run, world and arrivals.

    schedtune replay                               # paper workload, held-out world (lomo)
    schedtune replay --workload paper --world lofo --orders 16 --parallel 2 --json
    schedtune replay --workload paper --world perturbed --world-seed 3 --orders 16
    schedtune replay --workload generated --jobs 2000 --rate 20 --seed 7 \\
        --cluster "T4:8x4,A10:4x4,L4:4x4,A100-80GB:2x8" --plots out/
    schedtune replay --workload openb --trace-dir clusterdata/cluster-trace-gpu-v2023/csv
    schedtune replay --cluster-file my-cluster.yaml --jobs-file my-jobs.csv
    schedtune replay --world perturbed --world-seed 2 --shuffle 5 --jobs-out jobs.csv
    schedtune replay --combine base.json variant.json --reference ours@variant
    schedtune replay --combine startup10.json startup10.1.json --pool
    schedtune replay --workload gangs --orders 5 --json      # gangs beside single pods

Starts an embedded Redis (or uses REDIS_URL) and the extender app on 127.0.0.1 with its
clock on simulated time. Ours is the extender as the environment's ``EXTENDER_*`` variables
configure it (``EXTENDER_SCORING=shared schedtune replay`` evaluates that setting). The simulator, worlds, workloads, policies and report live in
the `replay` package; this is its CLI.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from pathlib import Path

# Run as `python scripts/replay.py`, Python puts scripts/ first on the path, where this
# file would shadow the `replay` package: the checkout goes before it.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from estimator.reference.tables import DATA_HELP, find_data_dir  # noqa: E402
from estimator.errors import EstimatorError  # noqa: E402
from extender.settings import SettingsError  # noqa: E402
from replay import gang_workload, openb  # noqa: E402
from scripts import replay_fgd, replay_gangs  # noqa: E402
from replay.combine import combine  # noqa: E402
from replay.folds import default_cache, train_folds  # noqa: E402
from replay.orders import run_orders, summarise  # noqa: E402
from replay.report import as_text, plot, plot_orders, write_jobs  # noqa: E402
from replay.runner import ORACLES, POLICIES, describe_cluster, replay_redis, run_replay  # noqa: E402
from replay.scenario import INTERFERENCE, WORLDS, Scenario, extender_env  # noqa: E402
from replay.workloads import (  # noqa: E402
    GENERATED_CLUSTER, PAPER_CLUSTER, ReplayError, cluster_from_file, generated_workload,
    has_paper_data, jobs_from_file, paper_workload, parse_cluster, parse_collocation,
    shuffle_order,
)  # fmt: skip

MIN_RATE, MAX_RATE = 1e-4, 1e4  # generated arrivals per second: hours apart .. 10k at once
COMBINE_OPTIONS = ("combine", "reference", "pool", "json", "plots")  # the rest are a replay's
NO_DATA_HINT = "`schedtune data fetch` downloads the paper's; `schedtune data where` lists where"
QUICK_JOBS = 400  # the main command's generated world without the reference data
DEFAULT_POLICIES = ("default", "schedtune-paper", "gavel-like", "declared", "oracle", "ours")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", choices=("paper", "generated", "openb", "gangs", "auto"),
                        default="auto", help="auto: paper when the reference data is present")
    parser.add_argument("--data", type=Path, help=DATA_HELP)
    parser.add_argument("--world", choices=("auto", *WORLDS), default="auto",
                        help="auto: lomo for the paper workload, perturbed for generated or "
                        "file workloads, the trace's own for openb")
    parser.add_argument("--world-seed", type=int, default=1,
                        help="perturbed world: which fixed errors and collocation law")
    parser.add_argument("--interference", choices=INTERFERENCE, default="auto",
                        help="collocation law (auto: gavel pairs in perturbed worlds)")
    parser.add_argument("--policies", nargs="+", choices=POLICIES, default=list(DEFAULT_POLICIES))
    parser.add_argument("--cluster", help=f"TYPE:NODESxGPUS,... (generated default "
                        f"{GENERATED_CLUSTER}; paper: {PAPER_CLUSTER})")
    parser.add_argument("--cluster-file", type=Path)
    parser.add_argument("--collocation", help="pods per GPU: N, or TYPE=N,... (*=N for the "
                        "rest); default 2 on cards under 12 GiB, 4 on larger ones")
    parser.add_argument("--jobs-file", type=Path)
    parser.add_argument("--trace-dir", type=Path, help="openb: the directory holding "
                        f"{openb.NODE_FILE} and {openb.POD_FILE}")
    parser.add_argument("--protocol", choices=("fgd",), help="openb: FGD's evaluation "
                        "(arrivals to 1.3x capacity, none leaving; FGD's baselines)")
    parser.add_argument("--pod-file", default=openb.POD_FILE,
                        help="openb: which pod list of the trace directory")
    parser.add_argument("--jobs", type=int, default=None,
                        help="generated workload size (default 1000; gangs 240; 400 when "
                        "the workload is left to auto and the reference data is absent)")
    parser.add_argument("--rate", type=float, default=None,
                        help="generated: jobs per minute (default 10; gangs 2)")
    parser.add_argument("--gang-fraction", type=float, default=0.25,
                        help="gangs: share of the arrivals that are gangs")
    parser.add_argument("--network-gbps", type=float, default=gang_workload.NETWORK_GBPS,
                        help="gangs: each node's network link, Gb/s")
    parser.add_argument("--max-gang-gpus", type=int, default=gang_workload.MAX_GANG_GPUS,
                        help="gangs: GPUs of the largest gang")
    parser.add_argument("--train-fraction", type=float, default=0.3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--shuffle", type=int, metavar="SEED",
                        help="keep the arrival times, permute which job arrives at each")
    parser.add_argument("--orders", type=int, default=0, metavar="N",
                        help="replay N orders (shuffles, or generated seeds) and summarise")
    parser.add_argument("--parallel", type=int, metavar="N",
                        help="processes replaying at once: orders with --orders (default 1), "
                        "else the extender policies (default: every usable core)")
    parser.add_argument("--startup", type=float, default=10.0, help="per-job start-up seconds")
    parser.add_argument("--startup-alone", action="store_true",
                        help="start-up takes wall-clock time and shares nothing (laxer)")
    parser.add_argument("--retry-limit", type=int, default=3,
                        help="pods an OOM-killed job may create again")
    parser.add_argument("--fold-cache", type=Path, default=default_cache(Path.home()),
                        help="where held-out artefacts are trained (never profiles/)")
    parser.add_argument("--sensitivity", action="store_true",
                        help="also report makespan and JCT at 2 s and 30 s start-up")
    parser.add_argument("--combine", type=Path, nargs="+", metavar="JSON",
                        help="replay nothing: read the --json reports of --orders runs of one "
                        "workload and summarise their shared orders together")
    parser.add_argument("--reference", help="--combine: the policy the others are compared "
                        "with (default ours; a policy several reports ran is POLICY@FILE-STEM)")
    parser.add_argument("--pool", action="store_true",
                        help="--combine: the reports are runs of the same orders under a "
                        "negligible change (e.g. --startup 10 and 10.1); each policy's "
                        "figures per order are the mean over its runs")
    parser.add_argument("--plots", type=Path, help="write PNG figures here")
    parser.add_argument("--jobs-out", type=Path, metavar="CSV",
                        help="one replay: write every job's placement per policy here (when "
                        "and where it ran, and its true seconds alone on each GPU type)")
    parser.add_argument("--json", action="store_true")
    return parser


def _validate(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if not 1 <= args.jobs <= 200_000 or not MIN_RATE <= args.rate <= MAX_RATE \
            or not 0 <= args.train_fraction <= 1:
        parser.error(f"--jobs 1..200000, --rate {MIN_RATE:g}..{MAX_RATE:g} jobs/s, "
                     "--train-fraction 0..1")
    if not 0 <= args.startup <= 3600:
        parser.error("--startup must be 0..3600 seconds")
    parallel = 1 if args.parallel is None else args.parallel
    if not 0 <= args.orders <= 1000 or not 1 <= parallel <= 15:
        parser.error("--orders 0..1000, --parallel 1..15")
    if not 0 <= args.retry_limit <= 20:
        parser.error("--retry-limit must be 0..20")
    if args.reference or args.pool:
        parser.error("--reference and --pool are for --combine (a replay compares with ours)")
    if args.orders and args.shuffle is not None:
        parser.error("--orders replays its own shuffles; leave out --shuffle")
    if args.workload == "openb" and not args.trace_dir:
        parser.error("--workload openb needs --trace-dir DIR (see README: Replay)")
    if args.workload == "openb" and (args.cluster or args.cluster_file or args.jobs_file
                                     or args.world != "auto"):
        parser.error("--workload openb replays the trace's own nodes, pods and world: leave "
                     "out --cluster, --cluster-file, --jobs-file and --world")
    if args.plots and args.plots.exists() and not args.plots.is_dir():
        parser.error(f"--plots {args.plots}: a file is there; name a directory")
    if args.jobs_out and args.orders:
        parser.error("--jobs-out writes the jobs of one replay: leave out --orders (pick one "
                     "order with --shuffle N)")
    if args.jobs_out and args.jobs_out.is_dir():
        parser.error(f"--jobs-out {args.jobs_out}: a directory is there; name a CSV file")
    if args.jobs_out and not _writable_dir(args.jobs_out.parent):
        parser.error(f"--jobs-out {args.jobs_out}: cannot write in {args.jobs_out.parent}")


def _writable_dir(path: Path) -> bool:
    """`path` is (or can be made) a directory this process may write in: checked before a
    replay runs, so a bad output path loses no replay."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return os.access(path, os.W_OK | os.X_OK)


def _default_size(args: argparse.Namespace) -> None:
    """The generated workload's size and rate where the arguments leave them out."""
    if args.jobs is None:
        args.jobs = 240 if args.workload == "gangs" else QUICK_JOBS if _quick(args) else 1000
    if args.rate is None:
        args.rate = 2.0 if args.workload == "gangs" else 10.0


def _quick(args: argparse.Namespace) -> bool:
    """Whether this is the main command without the reference data, whose generated world
    (when no size is named) is small enough to replay in about a minute (`QUICK_JOBS`)."""
    return args.workload == "auto" and not args.jobs_file and not has_paper_data(args.data)


def _workload(parser: argparse.ArgumentParser, args: argparse.Namespace):  # type: ignore[no-untyped-def]
    """(name, jobs, nodes, world or None) as the arguments ask; `ReplayError` on bad files."""
    has_data = has_paper_data(args.data)
    workload = args.workload if args.workload != "auto" else ("paper" if has_data else "generated")
    if args.workload == "auto" and not has_data and not args.jobs_file:
        print(f"no reference data under {args.data} ({NO_DATA_HINT}): replaying {args.jobs} "
              f"generated jobs on {args.cluster or GENERATED_CLUSTER}"
              + (" (`--workload generated` replays the 1000-job world)"
                 if args.jobs == QUICK_JOBS else ""), file=sys.stderr)
    limits = parse_collocation(args.collocation)
    if workload == "openb":
        trace = openb.load(args.trace_dir, args.pod_file, limits)
        return "openb", trace.jobs, trace.nodes, trace.world()
    if args.jobs_file:
        jobs, workload = jobs_from_file(args.jobs_file), f"file:{args.jobs_file.name}"
    elif workload == "paper":
        if not has_data:
            parser.error(f"--workload paper needs the reference data, not under {args.data} "
                         f"({NO_DATA_HINT})")
        jobs = paper_workload(args.data)
    else:
        jobs = generated_workload(args.jobs, args.rate, args.seed, args.train_fraction)
    if args.cluster_file:
        nodes = cluster_from_file(args.cluster_file, limits)
    else:
        nodes = parse_cluster(args.cluster or (PAPER_CLUSTER if workload == "paper"
                                               else GENERATED_CLUSTER), limits)
    return workload, jobs, nodes, None


def _scenario(args: argparse.Namespace, workload: str) -> Scenario:
    world = args.world
    if world == "auto":
        world = "lomo" if workload == "paper" else "perturbed"
    if world in ("lomo", "lofo") and not has_paper_data(args.data):
        raise ReplayError(f"--world {world} trains held-out artefacts from the reference data, "
                          f"not found under {args.data} ({NO_DATA_HINT})")
    folds: tuple[tuple[str, str], ...] = ()
    if world in ("lomo", "lofo"):
        # Before any replay starts: every core the process may use trains a fold.
        workers = max(args.parallel or 1, usable_cores())
        dirs = train_folds(world, args.data, args.fold_cache, workers=workers,
                           log=lambda m: print(m, file=sys.stderr))
        folds = tuple((fold, str(path)) for fold, path in sorted(dirs.items()))
    return Scenario(world=world, data_dir=args.data, world_seed=args.world_seed,
                    startup_s=args.startup, startup_shares=not args.startup_alone,
                    interference=args.interference, retry_limit=args.retry_limit, folds=folds,
                    extender_env=extender_env(os.environ))


def _orders(args: argparse.Namespace, workload: str, jobs):  # type: ignore[no-untyped-def]
    """order number -> its jobs: shuffles of the trace, or generated seeds."""
    if workload == "generated" and not args.jobs_file:
        return {i: generated_workload(args.jobs, args.rate, args.seed + i - 1,
                                      args.train_fraction) for i in range(1, args.orders + 1)}
    return {i: shuffle_order(jobs, i) for i in range(1, args.orders + 1)}


def usable_cores() -> int:
    """The cores this process may run on (its affinity, not the machine's count)."""
    return len(os.sched_getaffinity(0))


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # `schedtune` says "interrupted", as for Ctrl-C


def main(argv: list[str] | None = None) -> int:
    """The replay, stopped by SIGTERM (`timeout`, `kill`, a job's end) as by Ctrl-C: its
    embedded Redis and temporary directory go with it (with SIGTERM's default action a
    redis-server outlived each replay)."""
    if threading.current_thread() is not threading.main_thread():
        return _main(argv)
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        return _main(argv)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _main(argv: list[str] | None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.combine:
        given = [f"--{dest.replace('_', '-')}" for dest, value in vars(args).items()
                 if dest not in COMBINE_OPTIONS and value != parser.get_default(dest)]
        if given:
            parser.error(f"--combine replays nothing: leave out {', '.join(given)}")
        return _combine(args)
    args.data = find_data_dir(args.data)
    _default_size(args)
    if args.protocol == "fgd":
        return replay_fgd.run(parser, args, list(DEFAULT_POLICIES))
    _validate(parser, args)
    if args.workload == "gangs":
        return replay_gangs.run(parser, args, list(DEFAULT_POLICIES))
    try:
        workload, jobs, nodes, world = _workload(parser, args)
        scenario = _scenario(args, workload) if world is None else Scenario(
            world="trace", data_dir=args.data, startup_s=0.0, startup_shares=False,
            retry_limit=args.retry_limit, extender_env=extender_env(os.environ))
        if args.shuffle is not None:
            jobs = shuffle_order(jobs, args.shuffle)
            workload = f"{workload} (order shuffled, seed {args.shuffle})"
        if args.orders:
            report = _many(args, workload, jobs, nodes, scenario, world)
        else:
            report, runs = run_replay(jobs, nodes, workload, args.policies, scenario,
                                      env=os.environ, sensitivity=args.sensitivity,
                                      progress=not args.json, world=world,
                                      parallel=args.parallel or usable_cores())
            if args.plots:
                report["plots"] = [str(p) for p in plot(args.plots, runs)]
            if args.jobs_out:
                report["jobs_out"] = str(write_jobs(args.jobs_out, runs))
    except (ReplayError, SettingsError, EstimatorError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(report, indent=2) if args.json else as_text(report))
    return 0


def _combine(args: argparse.Namespace) -> int:
    """Print the reports `--combine` names side by side (`replay.combine`)."""
    try:
        reports = [(path.stem, _read_report(path)) for path in args.combine]
        labels = [label for label, _ in reports]
        reports = [(label if labels.count(label) == 1 else f"{label}#{i + 1}", report)
                   for i, (label, report) in enumerate(reports)]
        report = combine(reports, args.reference, pool=args.pool)
        if args.plots:
            report["plots"] = [str(p) for p in plot_orders(args.plots, report["per_order"])]
    except (ReplayError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(report, indent=2) if args.json else as_text(report))
    return 0


def _read_report(path: Path) -> dict:
    try:
        return json.loads(path.read_bytes())
    except ValueError as exc:  # not JSON, or not UTF-8
        raise ReplayError(f"{path}: not a JSON report ({exc})") from exc
    except RecursionError:
        raise ReplayError(f"{path}: not a replay's JSON report (nests too deep)") from None


def _many(args: argparse.Namespace, workload: str, jobs, nodes, scenario: Scenario,  # type: ignore[no-untyped-def]
          world) -> dict:
    orders = _orders(args, workload, jobs)

    def progress(done: dict) -> None:  # a log line on stderr, --json or not
        figures = ", ".join(f"{p} {r['makespan_s']:.0f}/{r['avg_jct_s'] or 0:.0f}"
                            for p, r in done["policies"].items())
        print(f"order {done['order']}: makespan/avg JCT {figures}", file=sys.stderr, flush=True)

    with replay_redis(os.environ) as redis_url:
        per_order = run_orders(orders, nodes, args.policies, scenario, redis_url,
                               args.parallel or 1, world, progress)
    world = world or scenario.build_world({n.gpu_type for n in nodes})
    report = {"workload": f"{workload}, {args.orders} orders", "jobs": len(jobs),
              "cluster": describe_cluster(nodes), **world.describe(), **scenario.describe(),
              "oracles": [p for p in args.policies if p in ORACLES],
              **summarise(per_order), "per_order": per_order}
    if args.plots:
        report["plots"] = [str(p) for p in plot_orders(args.plots, per_order)]
    return report


if __name__ == "__main__":
    sys.exit(main())
