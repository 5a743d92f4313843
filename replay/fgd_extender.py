"""Ours on FGD's protocol (`replay.fgd_protocol`): every pod decided by the extender over
HTTP, as kube-scheduler would call it under our profile with the extender registered for
every pod (no ``managedResources``), as FGD's scheduler sees every pod.

What kube-scheduler does before it calls the extender is done here, from its defaults:
NodeResourcesFit (CPU and memory requests within what the node has left) and the pod's
``gpu_spec`` as a node affinity on the GPU product label. The extender is then asked, in
names mode as shipped (``nodeCacheCapable: true``), filter over those nodes, prioritize over
the ones that passed, and bind to the first of the highest score. Its node layouts are the
ones the node watcher would write: each GPU node's product (`replay.openb.GPU_CODES`),
count and memory, shared by memory up to `SLOTS_PER_GPU` pods a GPU, and its allocatable
CPU; each pod asks its CPU as a container request.

A trace pod asking a share of one GPU (``gpu_milli`` < 1000) declares that share of the GPU's
memory, ``schedtune.io/gpu-memory: N%`` (N = gpu_milli / 10, rounded up: openb's shares
are whole percents); a pod asking k whole GPUs declares ``100%`` with ``nvidia.com/gpu: k``. It
declares no run time: every placement costs the same time, and the extender's scoring
policy and its tie-break decide. A pod the extender places nowhere fails, as in FGD's
protocol, and is deleted (the monitor drops it from the waiting pods, so it holds nothing).

kube-scheduler then picks the node with the highest total score: its own score plugins
plus the extender's score times the extender's weight times 10 (MaxNodeScore 100 over
MaxExtenderPriority 10: kube-scheduler v1.36 ``pkg/scheduler/schedule_one.go``,
``prioritizeNodes``). Of its default score plugins
(``pkg/scheduler/apis/config/v1/default_plugins.go``) only NodeResourcesFit
(LeastAllocated) and NodeResourcesBalancedAllocation tell these nodes apart, and our
profile disables both as scorers (`PROFILE_SCORES_OFF`, ``k8s/scheduler-config.yaml``):
the rest score every node alike. So the extender's highest score decides. A pod asking no
GPU is not ours: filter passes every node that fits, bind binds it with nothing reserved, and
prioritize keeps it off the nodes whose free GPUs its CPU would leave short
(`extender.core.prioritizing.spare_gpu_scores`). Among equal totals kube-scheduler picks at
random (``selectHost``): here the lowest node rank, a seeded permutation, as every policy's
ties here.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from extender.model import GPU_MEMORY
from extender.settings import Settings
from extender.wire.builders import pod_object
from replay.engine import SimNode
from replay.fgd_cluster import ClusterState
from replay.fgd_policies import Choice, Policy, pick_node
from replay.fgd_workload import Pod
from replay.openb import GPU_CODES
from replay.policies import ExtenderPolicy
from replay.workloads import ReplayError

SLOTS_PER_GPU = 20  # openb's smallest share is 50 milli: 20 of them fill a GPU
#: Score plugins our kube-scheduler profile disables (k8s/scheduler-config.yaml; a test keeps
#: them equal): with them off, no in-tree scorer tells openb's nodes apart.
PROFILE_SCORES_OFF = ("NodeResourcesFit", "NodeResourcesBalancedAllocation")


def sim_nodes(state: ClusterState) -> list[SimNode]:
    """The cluster's GPU nodes as the extender's node watcher would describe them."""
    nodes = state.nodes
    out = []
    for name, count, model, cpu in zip(nodes.names, nodes.gpus.tolist(), nodes.models,
                                       nodes.cpu.tolist(), strict=True):
        if count:
            if model not in GPU_CODES:
                raise ReplayError(f"node {name}: GPU model {model!r} is none of "
                                  f"{', '.join(GPU_CODES)}")
            gpu_type, memory, product = GPU_CODES[model]
            out.append(SimNode(name, gpu_type, product, int(count), memory, SLOTS_PER_GPU,
                               f"{int(cpu)}m"))
    return out


def share_annotation(pod: Pod) -> str:
    """What a trace pod declares per GPU: its share of the GPU's memory in whole percent,
    rounded up (openb's shares are whole percents already)."""
    return f"{-(-pod.gpu_milli // 10)}%"


class ExtenderOnFgd(Policy):
    """`choose` through the extender over HTTP (module docstring). `settings`: the
    extender's, amended (the collocation limit to `SLOTS_PER_GPU`, state on `redis_url`)."""

    name = "ours"

    def __init__(self, redis_url: str, settings: Settings | None = None) -> None:
        self.redis_url = redis_url
        base = settings or Settings()
        self.settings = dataclasses.replace(
            base, collocation=dataclasses.replace(base.collocation, default=SLOTS_PER_GPU))
        self.extender: ExtenderPolicy | None = None
        self.decisions = 0  # pods the extender was asked to place, all runs together
        self.spent_s = 0.0  # wall seconds in its verbs, runs closed so far
        self.count = 0

    def reset(self, state: ClusterState) -> None:
        self.close()
        self.extender = ExtenderPolicy("ours", sim_nodes(state), self.redis_url,
                                       base=self.settings)
        self.position = {name: i for i, name in enumerate(state.nodes.names)}

    def close(self) -> None:
        if self.extender is not None:
            self.spent_s += self.extender.seconds
            self.extender.close()
            self.extender = None

    @property
    def seconds(self) -> float:
        """Wall seconds spent in the extender's verbs, HTTP included, all runs together."""
        return self.spent_s + (self.extender.seconds if self.extender is not None else 0.0)

    def choose(self, state: ClusterState, pod: Pod) -> Choice | None:
        ok = (state.cpu_left >= pod.cpu) & (state.mem_left >= pod.mem)
        assert self.extender is not None, "reset first"
        if pod.gpu_request:
            ok &= state.spec_mask(pod.spec) & (state.nodes.gpus > 0)
        allowed = [state.nodes.names[i] for i in np.flatnonzero(ok)]
        self.count += 1
        obj = pod_object(f"{pod.name}-{self.count}", "openb", f"fgd-{self.count:08d}",
                         annotations={GPU_MEMORY: share_annotation(pod)} if pod.gpu_request
                         else {}, gpus=pod.num_gpu if pod.gpu_request else None,
                         scheduler_name="schedtune-scheduler", phase="Pending",
                         cpu=f"{pod.cpu}m" if pod.cpu > 0 else None)
        self.decisions += 1

        def pick(scores: list[dict]) -> str:
            """kube-scheduler's choice: the extender's highest score, ties at random."""
            total = np.full(len(state), -1, np.int64)
            for entry in scores:
                total[self.position[entry["Host"]]] = int(entry["Score"])
            node = pick_node(state, total >= 0, total)
            assert node is not None
            return state.nodes.names[node]

        choice = self.extender.decide(obj, allowed, pick=pick) if allowed else None
        if choice is None:
            self.extender.monitor.on_event("DELETED", obj)  # failed: it leaves, as in FGD's
            return None
        node, gpus = choice
        return self.position[node], tuple(gpus)


def decisions_per_s(policy: ExtenderOnFgd) -> float:
    """Decisions (filter, prioritize, bind) per second of wall time spent in the verbs."""
    return policy.decisions / policy.seconds if policy.seconds else 0.0
