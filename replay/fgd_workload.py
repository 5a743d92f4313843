"""The workload of FGD's protocol on the openb trace: its nodes and pods, read from the
trace's CSV files, and the arrivals of one seed (`replay.fgd_protocol` replays them).

Workload (``pkg/simulator/core.go`` ``Simulate``; ``pkg/simulator/simulator.go``
``SortClusterPods``, ``TunePodsByNodeTotalResource``, ``tuneUpPods``, ``tuneDownPods``;
``experiments/run_scripts/generate_run_scripts.py``: ``-tune 1.3 --shuffle-pod=true``, seeds
42..51; ``data/pod_csv_to_yaml.py``: creation/deletion times are *not* written, so pods only
arrive and never leave):

* every pod of the trace is kept, CPU-only pods included (they arrive, take CPU and memory,
  and add nothing to the arrived GPU count), in a seeded random order (a shuffle);
* if the trace's total GPU request (``num_gpu * gpu_milli``, in thousandths of a GPU) is below
  ``factor`` x the cluster's GPU capacity (1,000 per GPU), pods drawn uniformly *with
  replacement* from the whole trace (CPU-only pods too) are appended after the shuffled trace
  until the next draw would pass the target (the check uses the draw's per-GPU milli, the sum
  its total, as ``tuneUpPods`` does); if it is above, random pods are removed until it is not.
  openb's default trace asks 6,086,800 milli of 6,212,000 (98 %), so the first 98 % of the
  arrivals are the whole trace shuffled and the last third are draws.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from replay.openb import NODE_FILE, POD_FILE, _number, _rows
from replay.workloads import ReplayError

MILLI = 1000
NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec")
#: gpu_spec may be left out (any GPU model), as FGD's own multigpu* pod lists leave it out.
POD_REQUIRED = POD_COLUMNS[:-1]


@dataclass(frozen=True)
class Nodes:
    names: tuple[str, ...]
    cpu: np.ndarray  # milli CPU
    mem: np.ndarray  # MiB
    gpus: np.ndarray  # GPUs on the node
    models: tuple[str, ...]  # GPU model per node ("" when it has none)

    def __len__(self) -> int:
        return len(self.names)

    @property
    def capacity_milli(self) -> int:
        """The cluster's GPU capacity in thousandths of a GPU."""
        return int(self.gpus.sum()) * MILLI


@dataclass(frozen=True)
class Pod:
    name: str
    cpu: int
    mem: int
    num_gpu: int  # 0 for a pod asking no GPU
    gpu_milli: int  # per GPU, 1..1000; 0 for a pod asking no GPU
    spec: str  # allowed GPU models, "|"-separated, canonical; "" = any

    @property
    def gpu_request(self) -> int:
        return self.num_gpu * self.gpu_milli

    @property
    def is_share(self) -> bool:
        return self.num_gpu == 1 and 0 < self.gpu_milli < MILLI

    @property
    def kind(self) -> tuple[int, int, int, str]:
        """What the policies' scores depend on (memory only matters to the filter)."""
        return (self.cpu, self.gpu_milli, self.num_gpu, self.spec)


@dataclass(frozen=True)
class Pods:
    names: tuple[str, ...]
    cpu: np.ndarray
    mem: np.ndarray
    num_gpu: np.ndarray
    gpu_milli: np.ndarray
    spec: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.names)

    @property
    def gpu_request(self) -> np.ndarray:
        return self.num_gpu * self.gpu_milli

    def take(self, index: Sequence[int] | np.ndarray) -> Pods:
        index = np.asarray(index, dtype=np.int64)
        return Pods(tuple(self.names[i] for i in index), self.cpu[index], self.mem[index],
                    self.num_gpu[index], self.gpu_milli[index],
                    tuple(self.spec[i] for i in index))

    def pod(self, i: int) -> Pod:
        return Pod(self.names[i], int(self.cpu[i]), int(self.mem[i]), int(self.num_gpu[i]),
                   int(self.gpu_milli[i]), self.spec[i])

    @staticmethod
    def of(rows: Iterable[tuple]) -> Pods:
        """Pods from (name, cpu_milli, memory_mib, num_gpu, gpu_milli[, gpu_spec]) tuples."""
        rows = [tuple(r) + ("",) * (6 - len(r)) for r in rows]
        return _pods([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows],
                     [r[3] for r in rows], [r[4] for r in rows], [r[5] for r in rows])


def canonical_spec(spec: str | None) -> str:
    """``gpu_spec`` as the simulator keeps it: its non-empty ``|`` parts; "nan"/"" = any."""
    spec = (spec or "").strip()
    if spec.lower() == "nan":
        return ""
    return "|".join(part for part in spec.split("|") if part)


def make_nodes(rows: Iterable[tuple]) -> Nodes:
    """Nodes from (name, cpu_milli, memory_mib, gpus, model) tuples."""
    rows = list(rows)
    return Nodes(tuple(str(r[0]) for r in rows), np.array([r[1] for r in rows], np.int64),
                 np.array([r[2] for r in rows], np.int64), np.array([r[3] for r in rows],
                                                                    np.int64),
                 tuple((str(r[4] or "") if r[3] else "") for r in rows))


def _pods(names, cpu, mem, num, milli, spec) -> Pods:
    num = np.array(num, np.int64)
    milli = np.array(milli, np.int64)
    if (milli < 0).any() or (milli > MILLI).any() or (num < 0).any():
        raise ReplayError("gpu_milli must be 0..1000 and num_gpu >= 0")
    gpu = (num > 0) & (milli > 0)  # the simulator's TotalMilliGpu: no milli, no GPU
    if ((num > 1) & gpu & (milli < MILLI)).any():
        raise ReplayError("a pod asking several GPUs must ask each whole (gpu_milli 1000)")
    return Pods(tuple(names), np.array(cpu, np.int64), np.array(mem, np.int64),
                np.where(gpu, num, 0), np.where(gpu, milli, 0),
                tuple(canonical_spec(s) for s in spec))


def load_trace(trace_dir: Path | str, pod_file: str = POD_FILE) -> tuple[Nodes, Pods]:
    """The node list and a pod list of an openb trace directory (read with replay.openb's
    CSV reader). Nodes without GPUs are kept (pods asking no GPU may run there)."""
    directory = Path(trace_dir)
    for name in (NODE_FILE, pod_file):
        if not (directory / name).is_file():
            raise ReplayError(f"{directory / name} is missing: the trace directory holds the "
                              "csv/ files of alibaba/clusterdata cluster-trace-gpu-v2023")
    path = directory / NODE_FILE
    node_rows = []
    for line, row in _rows(path, NODE_COLUMNS):
        values = [_number(path, line, row, c) for c in ("cpu_milli", "memory_mib", "gpu")]
        if any(v is None or v != int(v) for v in values):
            raise ReplayError(f"{path}:{line}: cpu_milli, memory_mib and gpu must be integers")
        node_rows.append(((row.get("sn") or "").strip(), *(int(v) for v in values),
                          canonical_spec(row.get("model"))))
    if not node_rows:
        raise ReplayError(f"{path}: no node")
    path = directory / pod_file
    cols: dict[str, list] = {c: [] for c in POD_COLUMNS}
    for line, row in _rows(path, POD_REQUIRED):
        cols["name"].append((row.get("name") or "").strip())
        for c in ("cpu_milli", "memory_mib", "num_gpu", "gpu_milli"):
            value = _number(path, line, row, c) or 0
            if value != int(value) or (c == "gpu_milli" and value > MILLI):
                raise ReplayError(f"{path}:{line}: {c} {value!r}: expected an integer"
                                  + (" <= 1000" if c == "gpu_milli" else ""))
            cols[c].append(int(value))
        cols["gpu_spec"].append(row.get("gpu_spec"))
    if not cols["name"]:
        raise ReplayError(f"{path}: no pod")
    try:
        pods = _pods(cols["name"], cols["cpu_milli"], cols["memory_mib"], cols["num_gpu"],
                     cols["gpu_milli"], cols["gpu_spec"])
    except ReplayError as exc:
        raise ReplayError(f"{path}: {exc}") from None
    return make_nodes(node_rows), pods


def sample_workload(pods: Pods, capacity: int, seed: int, factor: float = 1.3,
                    mode: str = "simulator") -> np.ndarray:
    """Indices into `pods`, in arrival order, whose GPU requests add up to about
    `factor` x `capacity` (GPU milli), seeded.

    mode "simulator" (FGD's protocol, see the module docstring): the whole pod list
    shuffled, then with-replacement draws appended (or random pods removed) to reach the
    target. mode "draw": only with-replacement draws from the pod list, same stopping rule."""
    rng = np.random.default_rng([seed, 0])
    request = pods.gpu_request
    per_gpu = pods.gpu_milli
    target = factor * capacity
    if mode == "simulator":
        order = list(rng.permutation(len(pods)))
    elif mode == "draw":
        order = []
    else:
        raise ValueError(f"mode {mode!r}: expected 'simulator' or 'draw'")
    total = int(request[order].sum()) if order else 0
    if total > target:  # tuneDownPods: remove random pods until at or below the target
        while total > target:
            victim = order.pop(int(rng.integers(len(order))))
            total -= int(request[victim])
        return np.array(order, np.int64)
    if total == target:
        return np.array(order, np.int64)
    draws = rng.integers(len(pods), size=4096)
    k = 0
    while True:  # tuneUpPods: stop at the first draw whose per-GPU milli would pass it
        if k == len(draws):
            draws, k = rng.integers(len(pods), size=4096), 0
        pick = int(draws[k])
        k += 1
        if total + int(per_gpu[pick]) > target:
            break
        total += int(request[pick])
        order.append(pick)
    return np.array(order, np.int64)
