"""Keyword builders for the pure layers' inputs: queued jobs, node states, snapshots."""

from __future__ import annotations

from extender.model import GpuState, Limits, NodeGpus, NodeState, QueuedJob

LIMITS = Limits(default=4, per_type={"RTX-3090": 2})


def queued(uid: str, mib: float, predicted_s: float, started: float = 0) -> QueuedJob:
    return QueuedJob(uid, mib, predicted_s, started)


def node_state(name: str, jobs_per_gpu: list[list[QueuedJob]], gpu_type: str = "RTX-3090",
               memory: int = 24576, slots: int = 0) -> NodeState:
    """A node with one GPU per entry of `jobs_per_gpu`, holding those jobs."""
    gpus = NodeGpus("p", gpu_type, len(jobs_per_gpu), memory, share_slots=slots)
    return NodeState(name, gpus, tuple(GpuState(name, i, memory, tuple(j))
                                       for i, j in enumerate(jobs_per_gpu)))
