"""Replay a workload on a simulated GPU cluster, every decision of our policy made by the
extender over HTTP, with baselines in the same run, world and arrivals.

    python scripts/replay.py                               # paper workload (or generated)
    python scripts/replay.py --workload paper --json
    python scripts/replay.py --workload generated --jobs 2000 --rate 20 --seed 7 \\
        --cluster "T4:8x4,A10:4x4,L4:4x4,A100-80GB:2x8" --plots out/
    python scripts/replay.py --cluster-file my-cluster.yaml --jobs-file my-jobs.csv
    python scripts/replay.py --workload paper --shuffle 5    # same arrival times, jobs reordered

Starts an embedded Redis (or uses REDIS_URL) and the extender app on 127.0.0.1 with its
clock on simulated time. Policies: default, schedtune-paper, gavel-like, ours.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import os
import random
import re
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402
from tqdm import tqdm  # noqa: E402

from estimator.catalogue import CATALOGUE, gpu_for_product  # noqa: E402
from estimator.data import DEFAULT_DATA_DIR, PAPER_DIR  # noqa: E402
from estimator.feature_table import FeatureTable  # noqa: E402
from extender.model import Limits  # noqa: E402
from extender.state.embedded_redis import EmbeddedRedis  # noqa: E402
from scripts.sim_engine import SimNode, Simulator, metrics  # noqa: E402
from scripts.sim_policies import ExtenderPolicy, WholeGpuPolicy  # noqa: E402
from scripts.sim_world import SimJob, World  # noqa: E402

POLICIES = ("default", "schedtune-paper", "gavel-like", "ours")
PAPER_CLUSTER = "RTX-2070S:2x1,RTX-3070:2x1,RTX-3090:1x1"
GENERATED_CLUSTER = "T4:8x4,A10:4x4,L4:4x4,A100-80GB:2x8"
PAPER_JOB = re.compile(r"single-node-(?P<model>\w+)-cifar10-epochs(?P<epochs>\d+)-batchsize(?P<batch>\d+)")
PAPER_INFER = re.compile(r"inference-(?P<model>[a-z0-9_]+)-")


class ReplayError(ValueError):
    """Bad workload or cluster input: the message says what to fix."""


def parse_cluster(spec: str) -> list[SimNode]:
    """"TYPE:NODESxGPUS,..." -> nodes named after their type."""
    nodes = []
    for part in filter(None, (p.strip() for p in spec.split(","))):
        match = re.fullmatch(r"([\w.-]+):(\d+)x(\d+)", part)
        if not match or match[1] not in CATALOGUE:
            raise ReplayError(f"cluster item {part!r}: expected TYPE:NODESxGPUS with TYPE one "
                              f"of {', '.join(CATALOGUE)}")
        gpu = CATALOGUE[match[1]]
        for i in range(int(match[2])):
            nodes.append(SimNode(f"{gpu.name.lower()}-{i}", gpu.name, gpu.products[0],
                                 int(match[3]), gpu.memory_mib))
    if not nodes:
        raise ReplayError("the cluster has no nodes")
    return nodes


def cluster_from_file(path: Path) -> list[SimNode]:
    """YAML: ``nodes: [{name, gpu (type or GFD product), count, memory_mib?, replicas?}]``."""
    doc = yaml.safe_load(path.read_text()) or {}
    nodes = []
    for i, item in enumerate(doc.get("nodes") or []):
        gpu = gpu_for_product(str(item.get("gpu", "")))
        if gpu is None or int(item.get("count", 1)) < 1:
            raise ReplayError(f"{path} nodes[{i}]: unknown gpu {item.get('gpu')!r} or bad count")
        for r in range(int(item.get("replicas", 1))):
            name = item.get("name", f"{gpu.name.lower()}-{i}") + (f"-{r}" if item.get("replicas") else "")
            nodes.append(SimNode(name, gpu.name, gpu.products[0], int(item.get("count", 1)),
                                 int(item.get("memory_mib", gpu.memory_mib))))
    if not nodes:
        raise ReplayError(f"{path}: no nodes")
    return nodes


def paper_workload(data_dir: Path) -> list[SimJob]:
    """The paper's 360-job trace: submission order and gaps from its wall-clock times."""
    path = data_dir / PAPER_DIR / "baseline_arrival_times.csv"
    jobs, first = [], None
    with path.open() as handle:
        for i, row in enumerate(csv.reader(handle)):
            stamp = datetime.strptime(re.sub(r"\s+", " ", row[0].replace(" EST ", " ")),
                                      "%a %b %d %H:%M:%S %Y").timestamp()
            first = stamp if first is None else first
            if match := PAPER_JOB.match(row[1]):
                jobs.append(SimJob(i, stamp - first, match["model"], "train", int(match["batch"]),
                                   int(match["epochs"])))
            elif match := PAPER_INFER.match(row[1]):
                jobs.append(SimJob(i, stamp - first, match["model"], "inference", 1, 1))
            else:
                raise ReplayError(f"{path}:{i + 1}: unrecognised job name {row[1]!r}")
    return jobs


def generated_workload(count: int, rate_per_min: float, seed: int,
                       train_fraction: float) -> list[SimJob]:
    """Poisson arrivals over the model registry, train and inference mixed."""
    rng = random.Random(seed)
    table = FeatureTable.load()
    train = [m for m in table.models if "train" in table.tasks_for(m)]
    infer = [m for m in table.models if "inference" in table.tasks_for(m)]
    jobs, t = [], 0.0
    for i in range(count):
        t += rng.expovariate(rate_per_min / 60.0)
        if rng.random() < train_fraction:
            jobs.append(SimJob(i, t, rng.choice(train), "train", rng.choice([8, 16, 32, 64]),
                               rng.choice([1, 1, 2, 3])))
        else:
            jobs.append(SimJob(i, t, rng.choice(infer), "inference", rng.choice([1, 1, 4, 8]),
                               rng.choice([200, 1000, 5000])))
    return jobs


def jobs_from_file(path: Path) -> list[SimJob]:
    """CSV with header arrival_s,model,task,batch,units."""
    jobs = []
    known = set(FeatureTable.load().models)
    with path.open() as handle:
        for i, row in enumerate(csv.DictReader(handle)):
            try:
                job = SimJob(i, float(row["arrival_s"]), row["model"], row["task"],
                             int(row["batch"]), int(row["units"]))
            except (KeyError, TypeError, ValueError) as exc:
                raise ReplayError(f"{path}:{i + 2}: expected arrival_s,model,task,batch,units "
                                  f"({exc})") from exc
            if job.model not in known or job.task not in ("train", "inference") or job.batch < 1 \
                    or job.units < 1 or job.arrival_s < 0:
                raise ReplayError(f"{path}:{i + 2}: bad job {row}")
            jobs.append(job)
    return jobs


def shuffle_order(jobs: list[SimJob], seed: int) -> list[SimJob]:
    """The same arrival times with the jobs arriving at them permuted (seeded): is a
    result about the policy or about the one order a trace happened to have?"""
    order = sorted(jobs, key=lambda j: (j.arrival_s, j.id))
    permuted = order[:]
    random.Random(seed).shuffle(permuted)
    return [dataclasses.replace(job, id=slot.id, arrival_s=slot.arrival_s)
            for slot, job in zip(order, permuted, strict=True)]


def make_policy(name: str, nodes: list[SimNode], redis_url: str):  # noqa: ANN201
    if name == "default":
        return WholeGpuPolicy(name, heterogeneity_aware=False)
    if name == "gavel-like":
        return WholeGpuPolicy(name, heterogeneity_aware=True)
    if name == "schedtune-paper":
        return ExtenderPolicy(name, nodes, redis_url, estimator_design="paper-rfr",
                              scoring="paper", collocation=Limits(4, {}), hold_for=0)
    return ExtenderPolicy(name, nodes, redis_url)


def run_policy(name: str, world: World, nodes: list[SimNode], jobs: list[SimJob],
               redis_url: str, progress: bool) -> tuple[dict, Simulator, list]:
    policy = make_policy(name, nodes, redis_url)
    sim = Simulator(world, nodes, policy)
    started = time.perf_counter()
    with tqdm(total=len(jobs), desc=f"{name:>16}", disable=not progress, leave=False) as bar:
        sim.on_end = lambda: bar.update(1)
        outcomes = sim.run(jobs)
    wall = time.perf_counter() - started
    if isinstance(policy, ExtenderPolicy):
        policy.close()
    result = metrics(sim, outcomes)
    deciding = getattr(policy, "seconds", wall)
    result["decisions"] = sim.decisions
    result["decisions_per_s"] = round(sim.decisions / deciding, 1) if deciding else None
    result["wall_s"] = round(wall, 2)
    return result, sim, outcomes


def plot(directory: Path, runs: dict) -> list[Path]:
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

    has_data = (args.data / PAPER_DIR).is_dir()
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

    with tempfile.TemporaryDirectory(prefix="schedtune-replay-") as tmp:
        embedded = None if os.environ.get("REDIS_URL") else EmbeddedRedis(Path(tmp) / "redis")
        redis_url = os.environ.get("REDIS_URL") or embedded.start()
        try:
            world = World.load(args.data if has_data else None, startup_s=args.startup)
            runs = {p: run_policy(p, world, nodes, jobs, redis_url, not args.json)
                    for p in args.policies}
            report = {"workload": workload, "jobs": len(jobs),
                      "cluster": {"nodes": len(nodes), "gpus": sum(n.count for n in nodes),
                                  "types": sorted({n.gpu_type for n in nodes})},
                      **world.describe(), "policies": {p: r[0] for p, r in runs.items()}}
            if args.sensitivity:
                report["startup_sensitivity"] = {}
                for startup in (2.0, 30.0):
                    other = World.load(args.data if has_data else None, startup_s=startup)
                    report["startup_sensitivity"][f"{startup:g}s"] = {
                        p: {k: v for k, v in run_policy(p, other, nodes, jobs, redis_url,
                                                        False)[0].items()
                            if k in ("makespan_s", "avg_jct_s", "oom_count")}
                        for p in args.policies}
        finally:
            if embedded:
                embedded.stop()
    if args.plots:
        report["plots"] = [str(p) for p in plot(args.plots, runs)]
    print(json.dumps(report, indent=2) if args.json else render(report))
    return 0


def render(report: dict) -> str:
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
                lines.append(f"{name} vs default: makespan {100 * (r['makespan_s'] / base['makespan_s'] - 1):+.1f} %, "
                             f"avg JCT {base['avg_jct_s'] / r['avg_jct_s']:.2f}x lower, "
                             f"memory utilisation {r['mem_util'] / base['mem_util']:.2f}x")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
