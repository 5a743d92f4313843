"""Alibaba's openb trace under FGD's own evaluation protocol, in-process (issue #52).

FGD is Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing Workloads with
Fragmentation Gradient Descent", USENIX ATC 2023. Their simulator is
github.com/hkust-adsl/kubernetes-scheduler-simulator (Go, on alibaba/open-simulator; read at
commit 8f3d641). This module re-implements its protocol in numpy; no code is copied. What it
follows, with the simulator file it was read from:

Workload: `replay.fgd_workload`.

Filter and node choice: `replay.fgd_cluster`.

Metric (``pkg/simulator/analysis.go`` ``ClusterGpuFragReport``, which logs after every pod
``[Alloc] ... Used GPU Milli ... Arrived GPU Milli``; ``scripts/analysis.py`` parses it;
``experiments/analysis/merge_alloc_discrete.py`` makes the table that
``experiments/analysis/expected_results/analysis_allo_discrete.csv`` holds): after every
arrival, *arrived* = the summed GPU request (milli) of all pods that arrived so far, placed or
not; *allocated* = GPU milli held by placed pods. With ``arrive% = round(100 * arrived /
capacity)`` and ``alloc% = round(100 * allocated / capacity, 2)``, the figure at 100 % is the
mean alloc% over every arrival whose arrive% is 100 (i.e. arrived in [99.5 %, 100.5 %] of
capacity; if none, those within +-1), rounded to 2 decimals. The published "unallocated GPU"
at 100 % is 100 minus that, median over 10 seeds: 100 - median of column ``100`` of that CSV
(default trace) gives exactly FGD 4.77, best fit 7.09, packing 8.19(5), clustering 8.42, dot
product 9.44(5), random 13.75. `figure_at` computes this quantity.

Not reproduced: Go's math/rand streams (shuffle, draws, node permutation, random policy): the
seeds here are numpy seeds, so per-seed values differ from the simulator's, not their spread.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from replay.fgd_cluster import ClusterState
from replay.fgd_workload import (
    Nodes,
    Pod,
    Pods,
    load_trace,
    sample_workload,
)  # fmt: skip
from replay.openb import POD_FILE

#: Unallocated GPU % at 100 % of capacity arrived, median of 10 seeds, default openb trace:
#: 100 - median(column "100") of the simulator's expected_results/analysis_allo_discrete.csv.
PUBLISHED_UNALLOCATED_PCT = {"fgd": 4.77, "best-fit": 7.09, "packing": 8.19,
                             "clustering": 8.42, "dot-product": 9.44, "random": 13.75}
CURVE_PCT = tuple(range(5, 131, 5))  # arrived load (% of capacity) the curve is read at


@dataclass(frozen=True)
class Curve:
    """After each arrival: GPU milli arrived so far (placed or not) and allocated."""
    arrived_milli: np.ndarray
    allocated_milli: np.ndarray
    placed: np.ndarray
    capacity_milli: int

    @property
    def arrived_share(self) -> np.ndarray:
        return self.arrived_milli / self.capacity_milli

    @property
    def unallocated_pct(self) -> np.ndarray:
        return 100.0 * (1.0 - self.allocated_milli / self.capacity_milli)


def run(policy, nodes: Nodes, arrivals: Pods, seed: int = 0) -> Curve:
    """Arrivals only, in order: each pod is placed where `policy.choose` says or fails."""
    state = ClusterState(nodes, seed)
    if hasattr(policy, "reset"):
        policy.reset(state)
    n = len(arrivals)
    arrived = np.empty(n, np.int64)
    allocated = np.empty(n, np.int64)
    placed = np.zeros(n, bool)
    total = 0
    for i in range(n):
        pod = arrivals.pod(i)
        total += pod.gpu_request
        choice = policy.choose(state, pod)
        if choice is not None:
            node, gpus = choice
            _check(state, pod, node, gpus, policy)
            state.place(node, gpus, pod)
            placed[i] = True
        arrived[i] = total
        allocated[i] = state.allocated_milli
    return Curve(arrived, allocated, placed, nodes.capacity_milli)


def _check(state: ClusterState, pod: Pod, node: int, gpus: Sequence[int], policy) -> None:
    bad = ""
    if state.cpu_left[node] < pod.cpu or state.mem_left[node] < pod.mem:
        bad = "CPU or memory"
    elif pod.gpu_request:
        if not state.spec_mask(pod.spec)[node]:
            bad = "GPU model"
        elif len(set(gpus)) != pod.num_gpu or any(
                not 0 <= g < state.n_gpu[node] or state.gpu_left[node, g] < pod.gpu_milli
                for g in gpus):
            bad = "GPUs"
    if bad:
        raise AssertionError(f"{type(policy).__name__} put {pod} on node {node} GPUs "
                             f"{list(gpus)}: not enough {bad}")


def figure_at(curve: Curve, share: float = 1.0) -> float:
    """Unallocated GPU % when `share` x capacity has arrived, as FGD's analysis computes it:
    100 - mean of round(alloc%, 2) over arrivals whose round(arrive%) equals round(100 x
    share) (falling back to those within +-1 when none), rounded to 2 decimals.

    Where no arrival lies within +-1 point (the simulator leaves that column empty; only
    in clusters so small that one pod moves the load by over a point: openb's largest pod is
    0.13 % of its GPUs), the cluster as it stood after the last arrival at or below the
    share (the first arrival if none) is used instead."""
    column = round(100 * share)
    arrive = np.rint(100.0 * curve.arrived_milli / curve.capacity_milli)
    alloc = np.round(100.0 * curve.allocated_milli / curve.capacity_milli, 2)
    hit = arrive == column
    if not hit.any():
        hit = (arrive >= column - 1) & (arrive <= column + 1)
    if not hit.any():
        below = np.flatnonzero(curve.arrived_milli <= share * curve.capacity_milli)
        hit = np.zeros(len(arrive), bool)
        hit[below[-1] if len(below) else 0] = True
    return round(100.0 - round(float(alloc[hit].mean()), 2), 2)


def run_protocol(trace_dir: Path | str, policies: Iterable[str] | None = None,
                 seeds: Iterable[int] = range(10), factor: float = 1.3,
                 pod_file: str = POD_FILE, mode: str = "simulator",
                 make: Callable[[str, Pods], Any] | None = None) -> dict:
    """Each policy on each seed's workload (the same workload and node ranks for every
    policy of a seed, as in the simulator); per policy the median over seeds of the
    unallocated GPU % at 100 % arrived, the per-seed values, failed pods and timings
    (`decisions_per_s`: arrivals decided per second of wall time, all seeds together).
    `make(name, pods)`: a fresh policy (default: `fgd_policies.make_policy`); one with a
    ``close`` method is closed after its run."""
    from replay.fgd_policies import POLICIES, make_policy

    make = make or make_policy
    nodes, pods = load_trace(trace_dir, pod_file)
    names = list(policies) if policies is not None else list(POLICIES)
    seeds = list(seeds)
    out: dict = {}
    for name in names:
        out[name] = {"per_seed": {}, "failed_pods": {}, "seconds": {}, "decided": 0,
                     "published": PUBLISHED_UNALLOCATED_PCT.get(name)}
    for seed in seeds:
        arrivals = pods.take(sample_workload(pods, nodes.capacity_milli, seed, factor, mode))
        for name in names:
            policy = make(name, pods)
            start = time.perf_counter()
            try:
                curve = run(policy, nodes, arrivals, seed)
            finally:
                if hasattr(policy, "close"):
                    policy.close()
            out[name]["seconds"][seed] = round(time.perf_counter() - start, 2)
            out[name]["decided"] += len(arrivals)
            if hasattr(policy, "decisions"):  # decided through HTTP (`fgd_extender`)
                http = out[name].setdefault("http", {"decisions": 0, "seconds": 0.0})
                http["decisions"] += policy.decisions
                http["seconds"] += policy.seconds
            out[name]["per_seed"][seed] = figure_at(curve, 1.0)
            out[name]["failed_pods"][seed] = int((~curve.placed).sum())
            out[name].setdefault("curves", {})[seed] = [figure_at(curve, pct / 100)
                                                        for pct in CURVE_PCT]
    for name in names:
        values = list(out[name]["per_seed"].values())
        out[name]["unallocated_gpu_pct_at_100"] = round(statistics.median(values), 3)
        out[name]["seconds_total"] = round(sum(out[name]["seconds"].values()), 2)
        decided = out[name].pop("decided")
        out[name]["decisions_per_s"] = round(decided / max(out[name]["seconds_total"], 1e-9), 1)
        if "http" in out[name]:
            http = out[name].pop("http")
            out[name]["http_decisions"] = http["decisions"]
            out[name]["http_decisions_per_s"] = round(
                http["decisions"] / max(http["seconds"], 1e-9), 1)
        curves = np.array(list(out[name].pop("curves").values()))
        out[name]["curve"] = {"arrived_pct": list(CURVE_PCT),
                              "unallocated_pct_median": np.median(curves, axis=0).round(3).tolist()}
    return out
