"""A cluster under FGD's protocol (`replay.fgd_protocol`): what is left on each node, and
FGD's filter. No code is copied from FGD's simulator (read at commit 8f3d641).

Filter (default kube-scheduler filters + ``pkg/simulator/plugin/open_gpu_share.go``
``Filter``; ``pkg/type/open-gpu-share/cache/gpunodeinfo.go`` ``AllocateGpuId``;
``pkg/utils/utils.go`` ``IsNodeAccessibleToPodByType``): NodeResourcesFit (CPU milli and
memory MiB requested <= the node's capacity minus what its pods requested); a pod asking a GPU
must find a node with GPUs whose model is in its ``gpu_spec`` (``|``-separated, empty: any),
and ``num_gpu`` GPUs there each with at least ``gpu_milli`` free: one GPU for a sharing pod,
whole free GPUs for a pod asking 1,000 per GPU.

Node choice (``pkg/simulator/simulator.go`` ``syncClusterResourceList``; the simulator's
kubernetes fork mental2008/kubernetes v1.20.5-minor, ``pkg/scheduler/core/
generic_scheduler.go`` ``selectHost``): each node's name gets a seeded random 4-digit prefix
(a permutation), and among the nodes with the highest (integer) score the scheduler takes
the smallest name. Here: `ClusterState.rank` is that permutation; ties go to the lowest rank.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from replay.fgd_workload import MILLI, Nodes, Pod


class ClusterState:
    """Per node: CPU milli and memory MiB left, each GPU's milli left (-1 where the node has
    no such GPU), GPU model, counts of the GPU pods on it by kind (for GPU clustering), and a
    version bumped on each placement (for caches). `rank` breaks score ties (lowest wins);
    `rng` is the random stream of policies that draw."""

    def __init__(self, nodes: Nodes, seed: int = 0):
        self.nodes = nodes
        n = len(nodes)
        width = max(1, int(nodes.gpus.max(initial=0)))
        self.cpu_left = nodes.cpu.astype(np.int64).copy()
        self.mem_left = nodes.mem.astype(np.int64).copy()
        self.gpu_left = np.where(np.arange(width)[None, :] < nodes.gpus[:, None], MILLI, -1
                                 ).astype(np.int64)
        self.gpu_free_total = nodes.gpus.astype(np.int64) * MILLI
        self.n_gpu = nodes.gpus.astype(np.int64)
        self.model_names = tuple(sorted(set(nodes.models)))
        self.model_id = np.array([self.model_names.index(m) for m in nodes.models], np.int64)
        self.affinity = np.zeros((n, width + 1), np.int64)  # col 0: sharing, k: k whole GPUs
        self.version = np.zeros(n, np.int64)
        rng = np.random.default_rng([seed, 1])
        self.rank = rng.permutation(n)
        self.rng = rng
        self.allocated_milli = 0
        self._spec_masks: dict[str, np.ndarray] = {}

    def __len__(self) -> int:
        return len(self.cpu_left)

    def spec_mask(self, spec: str) -> np.ndarray:
        """Nodes whose GPU model a pod with this gpu_spec may use."""
        mask = self._spec_masks.get(spec)
        if mask is None:
            if spec:
                allowed = set(spec.split("|"))
                mask = np.array([m in allowed for m in self.nodes.models])
            else:
                mask = np.ones(len(self), bool)
            self._spec_masks[spec] = mask
        return mask

    def place(self, node: int, gpus: Sequence[int], pod: Pod) -> None:
        self.cpu_left[node] -= pod.cpu
        self.mem_left[node] -= pod.mem
        if pod.gpu_request:
            idx = np.asarray(gpus, np.int64)
            self.gpu_left[node, idx] -= pod.gpu_milli
            self.gpu_free_total[node] -= pod.gpu_request
            self.affinity[node, 0 if pod.is_share else pod.num_gpu] += 1
            self.allocated_milli += pod.gpu_request
        self.version[node] += 1


def feasible(state: ClusterState, pod: Pod) -> np.ndarray:
    """FGD's filter, per node: NodeResourcesFit on CPU and memory; for a GPU pod, a GPU model
    its gpu_spec allows and num_gpu GPUs each with gpu_milli free (a sharing pod: one GPU
    with enough left; whole-GPU pods: fully free GPUs)."""
    ok = (state.cpu_left >= pod.cpu) & (state.mem_left >= pod.mem)
    if pod.gpu_request:
        ok &= state.spec_mask(pod.spec)
        ok &= (state.gpu_left >= pod.gpu_milli).sum(axis=1) >= pod.num_gpu
    return ok
