"""What a replay runs: the workload (jobs and arrival times) and the cluster (nodes).

Workloads: the paper's 360-job trace, a generated Poisson mix over the model
registry, or a CSV file (the Alibaba openb trace: `replay.openb`); cluster specs:
``TYPE:NODESxGPUS,...`` or a YAML file, each GPU type with its collocation limit
(`default_slots`, or ``--collocation``); `shuffle_order` permutes which job arrives
when. Bad user input raises `ReplayError` with a message that says what to fix (the
CLI exits 2 on it).
"""

from __future__ import annotations

import csv
import dataclasses
import random
import re
from datetime import datetime
from pathlib import Path

import yaml

from estimator.catalogue import CATALOGUE, gpu_for_product
from estimator.reference.tables import PAPER_DIR
from estimator.feature_table import FeatureTable
from extender.errors import BadRequest
from extender.wire.node_labels import MAX_GPU_MEMORY_MIB, MAX_GPUS_PER_NODE, MAX_REPLICAS
from extender.wire.objects import require_name
from replay.engine import SimNode
from replay.world import SimJob

PAPER_CLUSTER = "RTX-2070S:2x1,RTX-3070:2x1,RTX-3090:1x1"
GENERATED_CLUSTER = "T4:8x4,A10:4x4,L4:4x4,A100-80GB:2x8"
PAPER_JOB = re.compile(
    r"single-node-(?P<model>\w+)-cifar10-epochs(?P<epochs>\d+)-batchsize(?P<batch>\d+)")
PAPER_INFER = re.compile(r"inference-(?P<model>[a-z0-9_]+)-")


class ReplayError(ValueError):
    """Bad workload or cluster input: the message says what to fix."""


def has_paper_data(data_dir: Path) -> bool:
    """Whether `data_dir` holds the paper's reference data (trace, profiles)."""
    return (data_dir / PAPER_DIR).is_dir()


SMALL_CARD_MIB = 12 * 1024
MAX_NODES = 20_000  # a cluster the replay simulates (the openb trace has 1213)
SMALL_CARD_SLOTS, LARGE_CARD_SLOTS = 2, 4


def default_slots(memory_mib: int) -> int:
    """Pods one GPU may hold unless told otherwise: 2 on cards under 12 GiB (two 8 GB
    GeForce cards in the paper's cluster), 4 on larger ones."""
    return SMALL_CARD_SLOTS if memory_mib < SMALL_CARD_MIB else LARGE_CARD_SLOTS


def parse_collocation(spec: str | None) -> dict[str, int]:
    """"N" (every type) or "TYPE=N,..." -> limits by type ("*" for every other type)."""
    if not spec:
        return {}
    if spec.strip().isdigit():
        return {"*": _slots(spec.strip(), spec)}
    limits = {}
    for item in filter(None, (p.strip() for p in spec.split(","))):
        name, sep, value = item.partition("=")
        if not sep or name.strip() not in (*CATALOGUE, "*"):
            raise ReplayError(f"collocation item {item!r}: expected TYPE=N with TYPE one of "
                              f"{', '.join(CATALOGUE)} or *")
        limits[name.strip()] = _slots(value.strip(), item)
    return limits


def _slots(value: str, item: str) -> int:
    if not value.isdigit() or not 1 <= int(value) <= 64:
        raise ReplayError(f"collocation {item!r}: a limit is an integer in 1..64")
    return int(value)


def slots_for(gpu_type: str, memory_mib: int, limits: dict[str, int]) -> int:
    return limits.get(gpu_type, limits.get("*", default_slots(memory_mib)))


def parse_cluster(spec: str, limits: dict[str, int] | None = None) -> list[SimNode]:
    """"TYPE:NODESxGPUS,..." -> nodes named after their type, each GPU holding at most
    `slots_for` pods."""
    limits = limits or {}
    nodes: list[SimNode] = []
    for part in filter(None, (p.strip() for p in spec.split(","))):
        match = re.fullmatch(r"([\w.-]+):(\d+)x(\d+)", part)
        if not match or match[1] not in CATALOGUE:
            raise ReplayError(f"cluster item {part!r}: expected TYPE:NODESxGPUS with TYPE one "
                              f"of {', '.join(CATALOGUE)}")
        gpu, copies, count = CATALOGUE[match[1]], int(match[2]), int(match[3])
        if not 1 <= copies <= MAX_NODES or not 1 <= count <= MAX_GPUS_PER_NODE:
            raise ReplayError(f"cluster item {part!r}: 1..{MAX_NODES} nodes of 1.."
                              f"{MAX_GPUS_PER_NODE} GPUs each")
        first = sum(n.gpu_type == gpu.name for n in nodes)  # T4:2x4,T4:2x1: t4-0 .. t4-3
        for i in range(first, first + copies):
            nodes.append(SimNode(f"{gpu.name.lower()}-{i}", gpu.name, gpu.products[0],
                                 count, gpu.memory_mib,
                                 slots_for(gpu.name, gpu.memory_mib, limits)))
    if not nodes:
        raise ReplayError("the cluster has no nodes")
    return checked_cluster(nodes, "--cluster")


def checked_cluster(nodes: list[SimNode], source: object) -> list[SimNode]:
    """`nodes` if the extender could be told about them: distinct Kubernetes node names,
    at most `MAX_NODES`, each with 1..64 GPUs of a believable memory and slot count.
    `ReplayError` naming `source` and the first offending node otherwise (before any
    policy replays a job, so no run is lost to it)."""
    if len(nodes) > MAX_NODES:
        raise ReplayError(f"{source}: {len(nodes)} nodes, at most {MAX_NODES}")
    seen: set[str] = set()
    for node in nodes:
        try:
            require_name(node.name, "a node name")
        except BadRequest as exc:
            raise ReplayError(f"{source}: {exc}") from None
        if node.name in seen:
            raise ReplayError(f"{source}: node name {node.name!r} given twice")
        seen.add(node.name)
        if not (1 <= node.count <= MAX_GPUS_PER_NODE and 1 <= node.memory_mib <= MAX_GPU_MEMORY_MIB
                and 1 <= node.slots <= MAX_REPLICAS):
            raise ReplayError(f"{source}: node {node.name!r}: 1..{MAX_GPUS_PER_NODE} GPUs of "
                              f"1..{MAX_GPU_MEMORY_MIB} MiB and 1..{MAX_REPLICAS} slots each")
    return nodes


def cluster_from_file(path: Path, limits: dict[str, int] | None = None) -> list[SimNode]:
    """YAML: ``nodes: [{name, gpu (type or GFD product), count, memory_mib?, replicas?,
    slots?}]`` (`replicas`: that many such nodes; `slots`: pods per GPU)."""
    try:
        doc = yaml.safe_load(path.read_text()) or {}
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ReplayError(f"{path}: not YAML ({exc})") from exc
    except OSError as exc:
        raise ReplayError(f"{path}: cannot read it ({exc.strerror})") from exc
    nodes = []
    items = doc.get("nodes") if isinstance(doc, dict) else None
    for i, item in enumerate(items if isinstance(items, list) else []):
        try:
            gpu = gpu_for_product(str(item.get("gpu", "")))
            count, copies = int(item.get("count", 1)), int(item.get("replicas", 1))
            memory = int(item.get("memory_mib", gpu.memory_mib if gpu else 0))
            slots = int(item.get("slots", slots_for(gpu.name, memory, limits or {}) if gpu
                                 else 1))
        except (AttributeError, TypeError, ValueError, OverflowError) as exc:
            raise ReplayError(f"{path} nodes[{i}]: {exc}") from exc
        if copies > MAX_NODES:
            raise ReplayError(f"{path} nodes[{i}]: replicas {copies}: at most {MAX_NODES}")
        if gpu is None or count < 1 or copies < 1 or memory < 1 or slots < 1:
            raise ReplayError(f"{path} nodes[{i}]: unknown gpu {item.get('gpu')!r} or a "
                              f"count, replicas, memory_mib or slots below 1")
        for r in range(copies):
            suffix = f"-{r}" if item.get("replicas") else ""
            nodes.append(SimNode(str(item.get("name", f"{gpu.name.lower()}-{i}")) + suffix,
                                 gpu.name, gpu.products[0], count, memory, slots))
    if not nodes:
        raise ReplayError(f"{path}: no nodes")
    return checked_cluster(nodes, path)


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
    try:
        with path.open(newline="") as handle:
            for i, row in enumerate(csv.DictReader(handle)):
                try:
                    job = SimJob(i, float(row["arrival_s"]), row["model"], row["task"],
                                 int(row["batch"]), int(row["units"]))
                except (KeyError, TypeError, ValueError) as exc:
                    raise ReplayError(f"{path}:{i + 2}: expected arrival_s,model,task,batch,"
                                      f"units ({exc})") from exc
                if job.model not in known or job.task not in ("train", "inference") \
                        or job.batch < 1 or job.units < 1 or not 0 <= job.arrival_s < 1e9:
                    raise ReplayError(f"{path}:{i + 2}: bad job {row}")
                jobs.append(job)
    except (UnicodeDecodeError, csv.Error) as exc:
        raise ReplayError(f"{path}: not a CSV file ({exc})") from exc
    if not jobs:
        raise ReplayError(f"{path}: no jobs")
    return jobs


def shuffle_order(jobs: list[SimJob], seed: int) -> list[SimJob]:
    """The same arrival times with the jobs arriving at them permuted (seeded): is a
    result about the policy or about the one order a trace happened to have?"""
    order = sorted(jobs, key=lambda j: (j.arrival_s, j.id))
    permuted = order[:]
    random.Random(seed).shuffle(permuted)
    return [dataclasses.replace(job, id=slot.id, arrival_s=slot.arrival_s)
            for slot, job in zip(order, permuted, strict=True)]
