"""The Alibaba GPU cluster trace (cluster-trace-gpu-v2023, "openb") as a replay workload.

The public trace (https://github.com/alibaba/clusterdata, folder
``cluster-trace-gpu-v2023/csv``; FGD, USENIX ATC '23) has two files used here:

* the node list (``openb_node_list_gpu_node.csv``): ``sn, cpu_milli, memory_mib, gpu,
  model``: one row per node, its GPU count and GPU model code;
* a pod list (``openb_pod_list_default.csv`` and sampled variants): ``name, cpu_milli,
  memory_mib, num_gpu, gpu_milli, gpu_spec, qos, pod_phase, creation_time,
  deletion_time, scheduled_time`` (times in seconds).

Mapped as follows. Nodes without GPUs are left out. GPU model codes map to catalogue
types where they are public (`GPU_CODES`); P100 and the undisclosed G1/G2/G3 keep their
code as type, with an assumed memory, and are unknown products to the extender. Each
GPU holds at most `TRACE_SLOTS` pods unless ``--collocation`` says otherwise (HAMi's
default device split). A pod asking one GPU with ``gpu_milli`` < 1000 is a sharing pod
that declares ``gpu_milli`` / 1000 of the smallest card it may run on (``gpu_spec``, else
any), in MiB; a pod asking k >= 1 whole GPUs declares each card whole (the smallest it
may run on) on k distinct GPUs of one node. It arrives at ``creation_time`` and runs
``deletion_time - scheduled_time`` seconds; pods without a GPU, or never scheduled or
never deleted in the trace (no duration), are counted and left out. The world of a trace
is its own: the declared memory is the true memory, durations are the trace's, no
start-up, no slowdown from sharing (``gpu_milli`` shares were sized for that).
Malformed files raise `ReplayError` naming the file and line.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from pathlib import Path

from estimator.catalogue import CATALOGUE
from replay.engine import SimNode
from replay.interference import Uniform
from replay.workloads import ReplayError, checked_cluster
from replay.world import SimJob, World

NODE_FILE = "openb_node_list_gpu_node.csv"
POD_FILE = "openb_pod_list_default.csv"
NODE_COLUMNS = ("sn", "gpu", "model")
POD_COLUMNS = ("name", "num_gpu", "gpu_milli", "gpu_spec", "creation_time", "deletion_time",
               "scheduled_time")
TRACE_SLOTS = 10
MAX_TRACE_S = 10 * 365 * 86400  # ten years of seconds: later is no trace time
#: Trace GPU code -> (type name, memory MiB, nvidia.com/gpu.product label).
GPU_CODES = {
    "V100M16": ("V100-16GB", CATALOGUE["V100-16GB"].memory_mib, "Tesla-V100-SXM2-16GB"),
    "V100M32": ("V100-32GB", CATALOGUE["V100-32GB"].memory_mib, "Tesla-V100-SXM2-32GB"),
    "T4": ("T4", CATALOGUE["T4"].memory_mib, "Tesla-T4"),
    "A10": ("A10", CATALOGUE["A10"].memory_mib, "NVIDIA-A10"),
    "P100": ("P100", 16384, "Tesla-P100-PCIE-16GB"),
    # Undisclosed internal codes: memory assumed, products unknown to the catalogue.
    "G1": ("G1", 32768, "Alibaba-G1"),
    "G2": ("G2", 32768, "Alibaba-G2"),
    "G3": ("G3", 32768, "Alibaba-G3"),
}


@dataclass
class Trace:
    nodes: list[SimNode]
    jobs: list[SimJob]
    skipped: dict[str, int] = field(default_factory=dict)

    def world(self) -> World:
        return World("trace (openb): declared memory is the truth, durations from the trace, "
                     f"no start-up, no slowdown from sharing; left out: {self.skipped}",
                     startup_s=0.0, interference=Uniform(0.0), startup_shares=False)


def _rows(path: Path, columns: tuple[str, ...]) -> list[tuple[int, dict[str, str]]]:
    try:
        with path.open(newline="") as handle:
            reader = csv.DictReader(handle)
            missing = [c for c in columns if c not in (reader.fieldnames or [])]
            if missing:
                raise ReplayError(f"{path}: not an openb file: no column {', '.join(missing)} "
                                  f"(has {', '.join(reader.fieldnames or [])})")
            return [(i + 2, row) for i, row in enumerate(reader)]
    except (UnicodeDecodeError, csv.Error) as exc:
        raise ReplayError(f"{path}: not a CSV file ({exc})") from exc


def _number(path: Path, line: int, row: dict[str, str], column: str) -> float | None:
    """The column as a number; None when empty (or "nan", as pandas writes it)."""
    raw = (row.get(column) or "").strip()
    if raw.lower() in ("", "nan"):
        return None
    try:
        value = float(raw)
    except ValueError:
        raise ReplayError(f"{path}:{line}: {column} {raw!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise ReplayError(f"{path}:{line}: {column} {raw!r} is not a number >= 0")
    return value


def load_nodes(path: Path, limits: dict[str, int] | None = None) -> list[SimNode]:
    nodes = []
    for line, row in _rows(path, NODE_COLUMNS):
        count = _number(path, line, row, "gpu")
        if not count:
            continue
        code = (row.get("model") or "").strip()
        if code not in GPU_CODES or count != int(count) or count > 64:
            raise ReplayError(f"{path}:{line}: GPU model {code!r} x {count:g}: expected a "
                              f"count 1..64 of one of {', '.join(GPU_CODES)}")
        name, memory, product = GPU_CODES[code]
        slots = (limits or {}).get(name, (limits or {}).get("*", TRACE_SLOTS))
        nodes.append(SimNode((row.get("sn") or "").strip(), name, product, int(count), memory,
                             slots))
    if not nodes:
        raise ReplayError(f"{path}: no node with GPUs")
    return checked_cluster(nodes, path)


def load_pods(path: Path, nodes: list[SimNode]) -> tuple[list[SimJob], dict[str, int]]:
    memory = {n.gpu_type: n.memory_mib for n in nodes}
    by_code = {code: name for code, (name, _, _) in GPU_CODES.items()}
    skipped = {"no_gpu": 0, "no_duration": 0}
    pods = []
    for line, row in _rows(path, POD_COLUMNS):
        gpus, milli = (_number(path, line, row, c) for c in ("num_gpu", "gpu_milli"))
        created, scheduled, deleted = (_number(path, line, row, c) for c in
                                       ("creation_time", "scheduled_time", "deletion_time"))
        if not gpus:
            skipped["no_gpu"] += 1
            continue
        if created is None or scheduled is None or deleted is None or deleted <= scheduled:
            skipped["no_duration"] += 1
            continue
        spec = (row.get("gpu_spec") or "").strip()
        codes = [c for c in spec.split("|") if c] if spec.lower() not in ("", "nan") else []
        unknown = [c for c in codes if c not in by_code]
        if gpus != int(gpus) or gpus > 64 or unknown or (gpus == 1 and not 0 < (milli or 0) <= 1000) \
                or (milli is not None and milli > 1000):
            raise ReplayError(f"{path}:{line}: expected num_gpu 1..64, gpu_milli 1..1000 (one "
                              f"GPU's share; required for one GPU), gpu_spec of "
                              f"{', '.join(GPU_CODES)} (got {row})")
        if deleted > MAX_TRACE_S:
            raise ReplayError(f"{path}:{line}: deletion_time {deleted:g} s: a trace spans at most "
                              f"{MAX_TRACE_S:g} s")
        types = tuple(by_code[c] for c in codes)
        smallest = min((memory[t] for t in (types or memory) if t in memory), default=0)
        share = (milli or 1000) / 1000 if gpus == 1 else 1.0
        pods.append((created, line, int(gpus), math.ceil(share * smallest) if smallest else 1,
                     deleted - scheduled, types))
    if not pods:
        raise ReplayError(f"{path}: no GPU pod with a duration")
    start = min(p[0] for p in pods)
    jobs = [SimJob(i, created - start, "", "", 0, 1, gpus=gpus, declared_mib=float(mib),
                   duration_s=max(1.0, seconds), gpu_types=types)
            for i, (created, _, gpus, mib, seconds, types) in enumerate(sorted(pods))]
    return jobs, skipped


def load(directory: Path, pod_file: str = POD_FILE,
         limits: dict[str, int] | None = None) -> Trace:
    """The trace in `directory` (`NODE_FILE` and `pod_file`)."""
    for name in (NODE_FILE, pod_file):
        if not (directory / name).is_file():
            raise ReplayError(f"{directory / name} is missing: --trace-dir names the csv/ folder "
                              "of alibaba/clusterdata cluster-trace-gpu-v2023")
    nodes = load_nodes(directory / NODE_FILE, limits)
    jobs, skipped = load_pods(directory / pod_file, nodes)
    return Trace(nodes, jobs, skipped)
