"""The six node/GPU choosers of FGD's evaluation (USENIX ATC '23), after the score plugins of
github.com/hkust-adsl/kubernetes-scheduler-simulator (commit 8f3d641; own numpy code, none
copied), and FGD held to the pods that ask a GPU (`FGDOnGpuPods`, the condition ours runs
under). Each has ``choose(state, pod) -> (node_index, gpu_indices) | None`` over a
`replay.fgd_cluster.ClusterState`; None when no node passes the filter (`feasible`).

How the simulator runs them (``experiments/run_scripts/generate_run_scripts.py``,
``scripts/generate_config_and_run.py``): one score plugin, weight 1000, every default
kube-scheduler score plugin disabled; the GPU(s) inside the chosen node come from the
Open-Gpu-Share Reserve step (``pkg/simulator/plugin/open_gpu_share.go``) with ``gpuSelMethod``
"random" for Random, the plugin's own choice for FGD, and "best" (best fit) for the others.
Scores are integers; among the feasible nodes with the highest score the scheduler fork takes
the smallest node name, and node names carry a seeded random prefix
(``pkg/simulator/simulator.go`` ``syncClusterResourceList``; mental2008/kubernetes
``pkg/scheduler/core/generic_scheduler.go`` ``selectHost``): here the lowest
``state.rank`` among the top-scored nodes. Min-max normalisation (``NormalizeScore`` in
``plugin_utils.go``, used by best fit) maps only the top raw score to 100, so it never changes
the choice and is left out. Integer truncation of the scores is kept, since it decides which
nodes tie.

GPUs inside a node: "best" takes, for a sharing pod, the GPU with the least milli left that
still fits (first index on ties); a pod asking whole GPUs takes the first fully free GPUs by
index (``AllocateExclusiveGpuId`` in ``pkg/type/resource.go``); "random" picks uniformly among
the GPUs that fit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from replay.fgd_cluster import ClusterState, feasible
from replay.fgd_workload import MILLI, Pod, Pods

MAX_SPEC_CPU = 128_000  # pkg/type/open-gpu-share/utils/const.go MaxSpecCpu
MAX_SPEC_GPU = 8_000  # ... MaxSpecGpu
MAX_SCORE = 100  # kube-scheduler framework.MaxNodeScore
_BIG = np.iinfo(np.int64).max

Choice = tuple[int, tuple[int, ...]]


def pick_node(state: ClusterState, ok: np.ndarray, score: np.ndarray) -> int | None:
    """The feasible node with the highest score; ties to the lowest rank."""
    if not ok.any():
        return None
    best = score[ok].max()
    top = ok & (score == best)
    return int(np.argmin(np.where(top, state.rank, _BIG)))


def anywhere(state: ClusterState, pod: Pod) -> Choice | None:
    """A pod asking no GPU as kube-scheduler places it under our profile when the extender
    is registered for GPU pods only (``managedResources``, as shipped) and no scorer tells
    the nodes apart: any node that fits, ties at random."""
    node = pick_node(state, feasible(state, pod), np.zeros(len(state), np.int64))
    return None if node is None else (node, ())


def exclusive_gpus(state: ClusterState, node: int, pod: Pod) -> tuple[int, ...]:
    """The first `num_gpu` fully free GPUs of the node, by index."""
    return tuple(int(g) for g in np.flatnonzero(state.gpu_left[node] == MILLI)[:pod.num_gpu])


def best_fit_gpus(state: ClusterState, node: int, pod: Pod) -> tuple[int, ...]:
    if not pod.gpu_request:
        return ()
    if pod.is_share:
        left = state.gpu_left[node]
        return (int(np.argmin(np.where(left >= pod.gpu_milli, left, _BIG))),)
    return exclusive_gpus(state, node, pod)


def random_fit_gpus(state: ClusterState, node: int, pod: Pod) -> tuple[int, ...]:
    if not pod.gpu_request:
        return ()
    if pod.is_share:
        fits = np.flatnonzero(state.gpu_left[node] >= pod.gpu_milli)
        return (int(fits[state.rng.integers(len(fits))]),)
    return exclusive_gpus(state, node, pod)


def _go_div(a: np.ndarray, b: int) -> np.ndarray:
    """Integer division truncating toward zero, as Go's."""
    return np.where(a >= 0, a // b, -((-a) // b))


class Policy:
    name = ""

    def reset(self, state: ClusterState) -> None:
        """Called by `run` before the first pod, with a fresh state."""

    def choose(self, state: ClusterState, pod: Pod) -> Choice | None:
        raise NotImplementedError


class ScoredPolicy(Policy):
    """Score every node with `score`, take the best feasible one, best-fit GPUs."""

    def score(self, state: ClusterState, pod: Pod) -> np.ndarray:
        raise NotImplementedError

    def choose(self, state: ClusterState, pod: Pod) -> Choice | None:
        node = pick_node(state, feasible(state, pod), self.score(state, pod))
        if node is None:
            return None
        return node, best_fit_gpus(state, node, pod)


class RandomFit(Policy):
    """``random_score.go``: PreScore draws one feasible node uniformly and gives it the top
    score; GPUs by "random" selection."""
    name = "random"

    def choose(self, state: ClusterState, pod: Pod) -> Choice | None:
        nodes = np.flatnonzero(feasible(state, pod))
        if not len(nodes):
            return None
        node = int(nodes[state.rng.integers(len(nodes))])
        return node, random_fit_gpus(state, node, pod)


class BestFit(ScoredPolicy):
    """``best_fit_score.go``: int((1 - (0.5 (cpu_left - cpu) / 128000 + 0.5 (gpu_left -
    gpu) / 8000)) * 100), GPU milli left summed over the node's GPUs: the node left
    tightest after placing wins."""
    name = "best-fit"

    def score(self, state: ClusterState, pod: Pod) -> np.ndarray:
        rest = (state.cpu_left - pod.cpu) / MAX_SPEC_CPU * 0.5
        rest = rest + (state.gpu_free_total - pod.gpu_request) / MAX_SPEC_GPU * 0.5
        return ((1.0 - rest) * MAX_SCORE).astype(np.int64)


class DotProduct(ScoredPolicy):
    """``dot_product_score.go`` with dimExtMethod "merge", normMethod "max": node vector
    (cpu_left/128000, gpu_left/8000), pod vector (cpu/128000, gpu/8000), score int(100 *
    (1 - dot / 2)): the smaller the dot product, the higher the score. GPUs: best fit."""
    name = "dot-product"

    def score(self, state: ClusterState, pod: Pod) -> np.ndarray:
        dot = (state.cpu_left / MAX_SPEC_CPU) * (pod.cpu / MAX_SPEC_CPU)
        dot = dot + (state.gpu_free_total / MAX_SPEC_GPU) * (pod.gpu_request / MAX_SPEC_GPU)
        return (MAX_SCORE * (1.0 - dot / 2)).astype(np.int64)


class GpuPacking(ScoredPolicy):
    """``gpu_packing_score.go``: a pod asking no GPU scores 0 everywhere (ties: lowest rank).
    Else, on a node with every GPU free: max(33 - free GPUs, free GPUs); on a used node, if
    the GPUs it would take (ascending milli left, those that fit) include fully free ones:
    max(50 - their number, 33); else (a sharing pod on a partly used GPU): max(100 -
    (milli_left * 100 // 1000) // 10, 50). GPUs: best fit."""
    name = "packing"

    def score(self, state: ClusterState, pod: Pod) -> np.ndarray:
        if not pod.gpu_request:
            return np.zeros(len(state), np.int64)
        full = (state.gpu_left == MILLI).sum(axis=1)
        all_free = np.maximum(MAX_SCORE // 3 - full, full)
        if pod.is_share:
            tightest = np.where(state.gpu_left >= pod.gpu_milli, state.gpu_left, _BIG).min(1)
            shared = np.maximum(MAX_SCORE - (tightest * 100 // MILLI) // 10, MAX_SCORE // 2)
            used = np.where(tightest == MILLI, max(MAX_SCORE // 2 - 1, MAX_SCORE // 3), shared)
        else:
            used = np.full(len(state), max(MAX_SCORE // 2 - pod.num_gpu, MAX_SCORE // 3))
        return np.where(full == state.n_gpu, all_free, used)


class GpuClustering(ScoredPolicy):
    """``gpu_clustering_score.go``: pods are tagged by GPU demand (sharing, or k whole GPUs);
    base = 25 * (8000 - gpu_left) // 8000, plus 75 if the node hosts only pods of the
    pod's tag, 50 if that tag among others, 25 if it hosts no GPU pod, 0 if only other tags.
    A pod asking no GPU scores 0 everywhere. GPUs: best fit."""
    name = "clustering"

    def score(self, state: ClusterState, pod: Pod) -> np.ndarray:
        if not pod.gpu_request:
            return np.zeros(len(state), np.int64)
        present = state.affinity > 0
        same = present[:, 0 if pod.is_share else pod.num_gpu]
        tags = present.sum(axis=1)
        base = _go_div(MAX_SCORE // 4 * (MAX_SPEC_GPU - state.gpu_free_total), MAX_SPEC_GPU)
        bonus = np.where(same, np.where(tags == 1, 75, 50), np.where(tags == 0, 25, 0))
        return base + bonus


@dataclass(frozen=True)
class TargetWorkload:
    """FGD's "typical pods" (``pkg/utils/frag.go`` ``GetTypicalPods`` with the run's
    typicalPodsConfig: CPU-only pods included, popularity threshold 95 %, step 1, no GPU
    weight): the pod list's distinct (cpu, gpu_milli, num_gpu, gpu_spec) requests, most
    frequent first (ties: larger request first), cut once they cover 95 % of the pods,
    frequencies renormalised over the kept ones. Built from the whole trace pod list, not
    the sampled workload (``core.go`` sets them before tuning)."""
    cpu: np.ndarray
    milli: np.ndarray
    num: np.ndarray
    spec: tuple[str, ...]
    freq: np.ndarray

    @classmethod
    def from_pods(cls, pods: Pods, threshold_pct: float = 95) -> TargetWorkload:
        counts: dict[tuple[int, int, int, str], int] = {}
        for i in range(len(pods)):
            key = (int(pods.cpu[i]) or 100, int(pods.gpu_milli[i]), int(pods.num_gpu[i]),
                   pods.spec[i])  # 100m: kube-scheduler's non-zero CPU request default
            counts[key] = counts.get(key, 0) + 1
        ranked = sorted(counts.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)
        total = len(pods)
        expected = threshold_pct * total / 100.0
        kept, covered = [], 0
        while covered < expected and len(kept) < len(ranked):
            kept.append(ranked[len(kept)])
            covered += kept[-1][1]
        return cls(np.array([k[0] for k, _ in kept], np.int64),
                   np.array([k[1] for k, _ in kept], np.int64),
                   np.array([k[2] for k, _ in kept], np.int64),
                   tuple(k[3] for k, _ in kept),
                   np.array([c for _, c in kept], float) / covered)


class Fragmentation:
    """FGD's expected GPU fragmentation of node states against a target workload
    (``pkg/utils/frag.go`` ``NodeGpuShareFragAmount`` summed except Q3, i.e.
    ``NodeGpuShareFragAmountScore``): sum over target pod kinds t of freq_t x F_t, where F_t
    is the node's GPU milli left in total, except when t asks GPUs, may use the node's GPU
    model, finds num_gpu GPUs with >= gpu_milli left and enough CPU left: then only the milli
    left on GPUs with less than t's gpu_milli counts. (A kind asking no GPU counts all milli
    left either way, as the simulator's sum includes its XL/XR classes.) Memory plays no
    part. Vectorised over node states and kinds."""

    def __init__(self, target: TargetWorkload, state: ClusterState):
        gpu = target.milli > 0
        self.cpu_freq = float(target.freq[~gpu].sum())
        self.cpu = target.cpu[gpu]
        self.num = target.num[gpu]
        self.freq = target.freq[gpu]
        self.levels, self.level = np.unique(target.milli[gpu], return_inverse=True)
        specs = [s for s, g in zip(target.spec, gpu) if g]
        self.access = np.array([[not s or m in s.split("|") for s in specs]
                                for m in state.model_names], bool).reshape(
                                    len(state.model_names), len(specs))

    def __call__(self, cpu_left: np.ndarray, gpu_left: np.ndarray,
                 model_id: np.ndarray) -> np.ndarray:
        free = np.maximum(gpu_left, 0)
        total = free.sum(axis=1)
        if not len(self.freq):
            return total * self.cpu_freq
        fits = gpu_left[:, :, None] >= self.levels[None, None, :]  # (B, G, levels)
        enough = fits.sum(axis=1)[:, self.level]  # GPUs that fit each kind
        stranded = (total[:, None] - (free[:, :, None] * fits).sum(axis=1))[:, self.level]
        usable = ((enough >= self.num) & (cpu_left[:, None] >= self.cpu)
                  & self.access[model_id])
        frag = np.where(usable, stranded, total[:, None]) @ self.freq
        return frag + total * self.cpu_freq


def _fgd_score(before: np.ndarray, after: np.ndarray) -> np.ndarray:
    """int(sigmoid((before - after) / 1000) * 100): fragmentation avoided, squashed."""
    return ((1.0 / (1.0 + np.exp(-(before - after) / 1000.0))) * MAX_SCORE).astype(np.int64)


class FGD(Policy):
    """``fgd_score.go`` (Fragmentation Gradient Descent): a node scores int(sigmoid((frag
    before - frag after) / 1000) * 100) for the placement, frag being `Fragmentation`
    against `TargetWorkload`. A sharing pod tries every GPU of the node that fits and keeps
    the best (first on ties), which is also the GPU it gets; other pods take the first fully
    free GPUs (for the fragmentation after, the least-left-first fit of ``NodeResource.Sub``
    picks the same multiset). Scores are cached per pod kind and node and recomputed only
    for nodes changed since (the score depends only on the node's state and the kind)."""
    name = "fgd"

    def __init__(self, target: TargetWorkload):
        self.target = target

    def reset(self, state: ClusterState) -> None:
        self.frag = Fragmentation(self.target, state)
        self.now = self.frag(state.cpu_left, state.gpu_left, state.model_id)
        self.now_version = state.version.copy()
        self.cache: dict[tuple, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    def choose(self, state: ClusterState, pod: Pod) -> Choice | None:
        ok = feasible(state, pod)
        if not ok.any():
            return None
        changed = np.flatnonzero(self.now_version != state.version)
        if len(changed):
            self.now[changed] = self.frag(state.cpu_left[changed], state.gpu_left[changed],
                                          state.model_id[changed])
            self.now_version[changed] = state.version[changed]
        n = len(state)
        version, score, gpu = self.cache.setdefault(
            pod.kind, (np.full(n, -1, np.int64), np.zeros(n, np.int64), np.zeros(n, np.int64)))
        stale = np.flatnonzero(ok & (version != state.version))
        if len(stale):
            score[stale], gpu[stale] = self._score(state, pod, stale)
            version[stale] = state.version[stale]
        node = pick_node(state, ok, score)
        if pod.is_share:
            return node, (int(gpu[node]),)
        return node, exclusive_gpus(state, node, pod)

    def _score(self, state: ClusterState, pod: Pod, nodes: np.ndarray):
        cpu = state.cpu_left[nodes] - pod.cpu
        left = state.gpu_left[nodes]
        model = state.model_id[nodes]
        before = self.now[nodes]
        if pod.is_share:
            rows, cols = np.nonzero(left >= pod.gpu_milli)
            trial = left[rows].copy()
            trial[np.arange(len(rows)), cols] -= pod.gpu_milli
            per_gpu = np.full(left.shape, -1, np.int64)
            per_gpu[rows, cols] = _fgd_score(before[rows], self.frag(cpu[rows], trial,
                                                                     model[rows]))
            return per_gpu.max(axis=1), per_gpu.argmax(axis=1)
        after = left.copy()
        if pod.num_gpu:
            free = left == MILLI
            after[free & (np.cumsum(free, axis=1) <= pod.num_gpu)] = 0
        return _fgd_score(before, self.frag(cpu, after, model)), np.zeros(len(nodes), np.int64)


class FGDOnGpuPods(FGD):
    """FGD deciding the pods that ask a GPU only, the others placed at random (`anywhere`):
    FGD behind an extender registered for GPU pods only, as shipped. (In the simulator FGD
    places every pod, and where a pod asking no GPU eats a node's CPU decides which GPUs
    stay reachable.)"""
    name = "fgd-gpu-pods"

    def choose(self, state: ClusterState, pod: Pod) -> Choice | None:
        return super().choose(state, pod) if pod.gpu_request else anywhere(state, pod)


POLICIES = {"random": RandomFit, "dot-product": DotProduct, "clustering": GpuClustering,
            "packing": GpuPacking, "best-fit": BestFit, "fgd": FGD,
            "fgd-gpu-pods": FGDOnGpuPods}
#: The policies that score against the trace's typical pods.
TARGETED = ("fgd", "fgd-gpu-pods")


def make_policy(name: str, pods: Pods | None = None) -> Policy:
    """A fresh policy by name; FGD needs the trace's pod list for its target workload."""
    if name not in POLICIES:
        raise ValueError(f"policy {name!r}: expected one of {', '.join(POLICIES)}")
    if name in TARGETED:
        if pods is None:
            raise ValueError("FGD needs the pod list for its target workload")
        return POLICIES[name](TargetWorkload.from_pods(pods))
    return POLICIES[name]()


__all__: Sequence[str] = (
    "FGD",
    "POLICIES",
    "BestFit",
    "DotProduct",
    "FGDOnGpuPods",
    "Fragmentation",
    "GpuClustering",
    "GpuPacking",
    "RandomFit",
    "TargetWorkload",
    "anywhere",
    "make_policy",
    "pick_node",
)
